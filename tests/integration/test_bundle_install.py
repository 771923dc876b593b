"""The OLM bundle's CSV, installed the way OLM's install strategy does it, lets gitsync
do its work.

OLM itself cannot be built here (the Go module proxy refuses
github.com/operator-framework/operator-lifecycle-manager), so this test does what its
``deployment`` install strategy does with a CSV, and no more: a ServiceAccount per
``serviceAccountName``, a ClusterRole + binding per ``clusterPermissions`` entry, a Role +
binding per ``permissions`` entry, the Deployments of ``install.spec.deployments``, and
the bundle's other manifests, all in one namespace (cluster-wide names get a suffix of
their own). The API server must accept every object as written, and gitsync, run with
the ServiceAccount's token, must sync with no 403.

The CSV itself and an OperatorGroup are also stored under OLM's own CRDs (from the
operator-framework/api module, printed by bundlecheck; installed only when absent, and
removed afterwards only by whoever installed them): the API server's structural schema
would prune any field OLM does not know, so nothing may be missing from what it stores.
No olm-operator runs, so the CSV gets no phase.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from gitsync.errors import APINotFoundError
from gitsync.kube import Kube, resource_path
from release import bundle
from testenv import build, peers
from tests.integration.installed import assert_account_syncs
from tests.integration.test_deploy import sa_kubeconfig
from tests.support import get, wait_until

RBAC = "rbac.authorization.k8s.io/v1"
PLURALS = {
    "ConfigMap": "configmaps",
    "Service": "services",
    "PodDisruptionBudget": "poddisruptionbudgets",
}
Doc = dict[str, Any]


@dataclass
class Installed:
    namespace: str
    csv: Doc
    kubeconfig: Path


def binding(kind: str, name: str, account: str, namespace: str) -> Doc:
    role_kind = "ClusterRole" if kind == "ClusterRoleBinding" else "Role"
    return {
        "apiVersion": RBAC,
        "kind": kind,
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": namespace}],
    }


@pytest.fixture(scope="module")
def installed(
    kube: Kube, kubeconfig: str, crd: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Installed]:
    manifests = bundle.BUNDLE / "manifests"
    csv = yaml.safe_load((manifests / "gitsync.clusterserviceversion.yaml").read_text())
    strategy = csv["spec"]["install"]["spec"]
    suffix = uuid.uuid4().hex[:6]
    namespace = f"gitsync-bundle-{suffix}"
    cluster_names: list[str] = []
    ns_path = resource_path("v1", "namespaces", None, namespace)
    kube.create(
        resource_path("v1", "namespaces"),
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
    )
    try:
        accounts = {p["serviceAccountName"] for p in strategy["clusterPermissions"]}
        accounts |= {p["serviceAccountName"] for p in strategy["permissions"]}
        for account in sorted(accounts):
            body = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": account}}
            kube.create(resource_path("v1", "serviceaccounts", namespace), body)
        for i, perm in enumerate(strategy["clusterPermissions"]):
            name = f"{csv['metadata']['name']}-{i}-{suffix}"
            cluster_names.append(name)
            role = {"apiVersion": RBAC, "kind": "ClusterRole", "metadata": {"name": name}}
            kube.create(resource_path(RBAC, "clusterroles"), role | {"rules": perm["rules"]})
            body = binding("ClusterRoleBinding", name, perm["serviceAccountName"], namespace)
            kube.create(resource_path(RBAC, "clusterrolebindings"), body)
        for i, perm in enumerate(strategy["permissions"]):
            name = f"{csv['metadata']['name']}-{i}"
            role = {"apiVersion": RBAC, "kind": "Role", "metadata": {"name": name}}
            kube.create(resource_path(RBAC, "roles", namespace), role | {"rules": perm["rules"]})
            body = binding("RoleBinding", name, perm["serviceAccountName"], namespace)
            kube.create(resource_path(RBAC, "rolebindings", namespace), body)
        for path in sorted(manifests.glob("*.yaml")):
            doc = yaml.safe_load(path.read_text())
            if doc["kind"] in PLURALS:
                plural = PLURALS[doc["kind"]]
                kube.create(resource_path(doc["apiVersion"], plural, namespace), doc)
        for dep in strategy["deployments"]:
            body = {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": dep["name"], "labels": dep.get("label") or {}},
                "spec": dep["spec"],
            }
            kube.create(resource_path("apps/v1", "deployments", namespace), body)
        tmp = tmp_path_factory.mktemp("bundle")
        config = sa_kubeconfig(kube, kubeconfig, namespace, tmp / "gitsync.kubeconfig")
        yield Installed(namespace, csv, config)
    finally:
        for name in cluster_names:
            for plural in ("clusterrolebindings", "clusterroles"):
                with contextlib.suppress(APINotFoundError):
                    kube.delete(resource_path(RBAC, plural, None, name))
        with contextlib.suppress(APINotFoundError):
            kube.delete(ns_path)


def test_the_api_server_accepts_the_csv_deployment(installed: Installed, kube: Kube) -> None:
    [dep] = installed.csv["spec"]["install"]["spec"]["deployments"]
    live = get(kube, "Deployment", installed.namespace, dep["name"])
    assert live is not None
    container = live["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == installed.csv["metadata"]["annotations"]["containerImage"]


def test_the_csv_service_account_syncs(
    installed: Installed, kube: Kube, namespace: str, tmp_path: Path
) -> None:
    config = yaml.safe_load(
        (bundle.BUNDLE / "manifests" / "gitsync-config.configmap.yaml").read_text()
    )
    assert_account_syncs(
        kube, installed.kubeconfig, config["data"], installed.namespace, namespace, tmp_path
    )


# --- the CSV under OLM's own schema --------------------------------------------------------

CRDS = "apiextensions.k8s.io/v1"
OPERATORS = "operators.coreos.com"


@pytest.fixture(scope="module")
def olm_crds(kube: Kube) -> Iterator[list[str]]:
    try:
        checker = str(peers.build("bundlecheck"))
    except build.BuildError as e:
        pytest.fail(f"bundlecheck could not be built: {e}", pytrace=False)
    proc = subprocess.run(
        [checker, "-olm-crds"], capture_output=True, text=True, check=True, timeout=60
    )
    created: list[str] = []
    names: list[str] = []
    try:
        for crd in json.loads(proc.stdout)["items"]:
            name = crd["metadata"]["name"]
            names.append(name)
            path = resource_path(CRDS, "customresourcedefinitions", None, name)
            live = get_or_none(kube, path)
            if live is not None and "deletionTimestamp" in live["metadata"]:
                # an earlier run's, still being removed: creating it again must wait
                def gone(path: str = path) -> bool:
                    return get_or_none(kube, path) is None

                wait_until(gone, timeout=60, what=f"{name} of an earlier run to be removed")
            elif live is not None:
                continue  # someone's OLM: use it, leave it
            crd.pop("status", None)
            crd["metadata"] = {"name": name}
            kube.create(resource_path(CRDS, "customresourcedefinitions"), crd)
            created.append(path)

            def established(path: str = path) -> bool:
                conds = (get_or_none(kube, path) or {}).get("status", {}).get("conditions") or []
                return any(c["type"] == "Established" and c["status"] == "True" for c in conds)

            wait_until(established, timeout=30, what=f"OLM's CRD {name} established")
        yield names
    finally:
        for path in created:
            with contextlib.suppress(APINotFoundError):
                kube.delete(path)


def get_or_none(kube: Kube, path: str) -> Doc | None:
    with contextlib.suppress(APINotFoundError):
        return kube.get(path)
    return None


def dropped(sent: Any, stored: Any, path: str = "") -> list[str]:
    """Paths of ``sent`` that ``stored`` lacks or holds differently (defaults may add)."""
    if isinstance(sent, dict) and isinstance(stored, dict):
        return [p for k, v in sent.items() for p in dropped(v, stored.get(k), f"{path}.{k}")]
    if isinstance(sent, list) and isinstance(stored, list) and len(sent) == len(stored):
        pairs = enumerate(zip(sent, stored, strict=True))
        return [p for i, (a, b) in pairs for p in dropped(a, b, f"{path}[{i}]")]
    return [] if sent == stored else [path or "."]


def test_olms_schema_stores_the_csv_whole(olm_crds: list[str], kube: Kube, namespace: str) -> None:
    assert f"clusterserviceversions.{OPERATORS}" in olm_crds
    group = {
        "apiVersion": f"{OPERATORS}/v1",
        "kind": "OperatorGroup",
        "metadata": {"name": "gitsync"},
        "spec": {},  # no targetNamespaces: AllNamespaces, the CSV's one install mode
    }
    kube.create(resource_path(f"{OPERATORS}/v1", "operatorgroups", namespace), group)
    csv = yaml.safe_load(
        (bundle.BUNDLE / "manifests" / "gitsync.clusterserviceversion.yaml").read_text()
    )
    path = resource_path(f"{OPERATORS}/v1alpha1", "clusterserviceversions", namespace)
    kube.create(path, csv)
    stored = kube.get(f"{path}/{csv['metadata']['name']}")
    assert dropped(csv["spec"], stored["spec"]) == []
    assert dropped(csv["metadata"]["annotations"], stored["metadata"]["annotations"]) == []
