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
"""

from __future__ import annotations

import contextlib
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
from tests.integration.installed import assert_account_syncs
from tests.integration.test_deploy import sa_kubeconfig
from tests.support import get

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
