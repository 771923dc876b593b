"""OLM installs the bundle's CSV, and the installed gitsync does its work.

OLM's own olm-operator (v0.33.0, built from its Go module) runs against the local control
plane with its own CRDs. The test creates an AllNamespaces OperatorGroup and applies the
CSV of bundle/manifests directly: there is no catalog (kwok Pods run no registry server),
so what the catalog-operator's InstallPlan would add is added here, from OLM's own code
where OLM has it: the ServiceAccount and RBAC from its resolver, the bundle's other
manifests as they are. olm-operator checks that this RBAC grants what the CSV asks, makes
the Deployment (kwok runs its Pods "Ready") and takes the CSV to Succeeded. gitsync, run
as a local process with that ServiceAccount's token (kwok Pods run no code), must then
sync a repository with no 403.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from gitsync.kube.client import Kube, resource_path
from release import bundle
from tests.integration import olm
from tests.integration.installed import assert_account_syncs
from tests.integration.test_deploy import sa_kubeconfig
from tests.support import get, wait_until

RBAC = "rbac.authorization.k8s.io/v1"
CSVS = olm.CSVS
PLURALS = {
    "ConfigMap": "configmaps",
    "Service": "services",
    "PodDisruptionBudget": "poddisruptionbudgets",
    "ServiceAccount": "serviceaccounts",
    "Role": "roles",
    "RoleBinding": "rolebindings",
    "ClusterRole": "clusterroles",
    "ClusterRoleBinding": "clusterrolebindings",
}
CLUSTER_SCOPED = {"ClusterRole", "ClusterRoleBinding"}
Doc = dict[str, Any]


@dataclass
class Installed:
    namespace: str
    csv: Doc  # as bundle/manifests has it
    live: Doc  # as the API server holds it once Succeeded
    planned: list[Doc]  # what the InstallPlan would have created (OLM's resolver)
    seconds_to_succeeded: float
    kubeconfig: Path


def manifests() -> list[Doc]:
    return [yaml.safe_load(p.read_text()) for p in sorted((bundle.BUNDLE / "manifests").glob("*"))]


def create(kube: Kube, namespace: str, doc: Doc) -> None:
    scoped = None if doc["kind"] in CLUSTER_SCOPED else namespace
    kube.create(resource_path(doc["apiVersion"], PLURALS[doc["kind"]], scoped), doc)


def phase(kube: Kube, path: str) -> str:
    live = olm.get_or_none(kube, path) or {}
    return str(live.get("status", {}).get("phase", ""))


@pytest.fixture(scope="module")
def installed(
    kube: Kube, kubeconfig: str, crd: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Installed]:
    tmp = tmp_path_factory.mktemp("olm")
    docs = manifests()
    [csv] = [d for d in docs if d["kind"] == "ClusterServiceVersion"]
    with olm.session(kube, kubeconfig, "gitsync-olm", tmp) as session:
        namespace = session.namespace
        csv_path = session.csv_path(csv["metadata"]["name"])
        # the InstallPlan's order: the CSV, then the objects that name it as their owner
        start = time.monotonic()
        csvs = resource_path(CSVS, "clusterserviceversions", namespace)
        created = kube.create(csvs, olm.managed(csv))
        planned = olm.install_plan_objects(created)
        for doc in planned:
            create(kube, namespace, doc)
        for doc in docs:
            if doc["kind"] in ("ConfigMap", "Service", "PodDisruptionBudget"):
                create(kube, namespace, olm.bundle_object(doc, created))

        session.wait_until(
            kube,
            lambda: phase(kube, csv_path) == "Succeeded",
            timeout=180,
            interval=0.5,
            what="the CSV to reach Succeeded",
        )
        seconds = time.monotonic() - start
        config = sa_kubeconfig(kube, kubeconfig, namespace, tmp / "gitsync.kubeconfig")
        yield Installed(namespace, csv, kube.get(csv_path), planned, seconds, config)


def test_olm_takes_the_csv_to_succeeded(installed: Installed) -> None:
    status = installed.live["status"]
    assert status["phase"] == "Succeeded", status
    assert status["reason"] == "InstallSucceeded", status
    # OLM found every requirement met: the CRD the CSV owns, the ServiceAccount, and RBAC
    # granting each of its rules (RBAC carrying the content hash its resolver puts on what
    # it makes is trusted as such; other RBAC is checked rule by rule)
    requirements = status["requirementStatus"]
    kinds = {r["kind"] for r in requirements}
    assert {"CustomResourceDefinition", "ServiceAccount"} <= kinds, requirements
    assert all(r["status"] == "Present" for r in requirements), requirements
    print(f"\nCSV Succeeded {installed.seconds_to_succeeded:.1f}s after it was created")


def dropped(sent: Any, stored: Any, path: str = "") -> list[str]:
    """Paths of ``sent`` that ``stored`` lacks or holds differently (defaults may add)."""
    if isinstance(sent, dict) and isinstance(stored, dict):
        return [p for k, v in sent.items() for p in dropped(v, stored.get(k), f"{path}.{k}")]
    if isinstance(sent, list) and isinstance(stored, list) and len(sent) == len(stored):
        pairs = enumerate(zip(sent, stored, strict=True))
        return [p for i, (a, b) in pairs for p in dropped(a, b, f"{path}[{i}]")]
    return [] if sent == stored else [path or "."]


def test_olms_schema_stores_the_csv_whole(installed: Installed) -> None:
    # the API server prunes any field OLM's structural schema does not know
    assert dropped(installed.csv["spec"], installed.live["spec"]) == []
    annotations = installed.live["metadata"]["annotations"]
    assert dropped(installed.csv["metadata"]["annotations"], annotations) == []


def test_olm_makes_the_csv_deployment(installed: Installed, kube: Kube) -> None:
    [dep] = installed.csv["spec"]["install"]["spec"]["deployments"]
    live = get(kube, "Deployment", installed.namespace, dep["name"])
    assert live is not None
    owners = live["metadata"].get("ownerReferences") or []
    assert [(o["kind"], o["name"]) for o in owners] == [
        ("ClusterServiceVersion", installed.csv["metadata"]["name"])
    ]
    assert live["metadata"]["labels"]["olm.owner"] == installed.csv["metadata"]["name"]
    container = live["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == installed.csv["metadata"]["annotations"]["containerImage"]
    assert live["spec"]["template"]["spec"]["serviceAccountName"] == "gitsync"
    conds = {c["type"]: c["status"] for c in live.get("status", {}).get("conditions") or []}
    assert conds.get("Available") == "True", live.get("status")


def test_the_rbac_is_olms_and_olm_lifts_the_role_cluster_wide(
    installed: Installed, kube: Kube
) -> None:
    ns = installed.namespace
    strategy = installed.csv["spec"]["install"]["spec"]
    account = olm.get_or_none(kube, resource_path("v1", "serviceaccounts", ns, "gitsync"))
    assert account is not None and account["metadata"]["labels"]["olm.managed"] == "true"
    kinds = [d["kind"] for d in installed.planned]
    assert kinds.count("ClusterRole") == len(strategy["clusterPermissions"])
    assert kinds.count("Role") == len(strategy["permissions"])
    for doc in installed.planned:
        if doc["kind"] in ("ClusterRole", "Role"):
            scoped = None if doc["kind"] == "ClusterRole" else ns
            path = resource_path(RBAC, PLURALS[doc["kind"]], scoped, doc["metadata"]["name"])
            assert kube.get(path)["rules"] == doc["rules"]
    # an AllNamespaces install: olm-operator itself lifts each Role to a ClusterRole of the
    # same name, adding the read of namespaces, and binds it to the ServiceAccount, so that
    # the operator may act in every namespace (it may do so just after the Succeeded)
    selector = f"{olm.OWNER_NAMESPACE}={ns},olm.owner.kind=ClusterServiceVersion"
    planned = {d["metadata"]["name"] for d in installed.planned if d["kind"] == "ClusterRole"}

    def lifted() -> list[Doc]:
        roles = listed(kube, "clusterroles", selector)
        return [r for r in roles if r["metadata"]["name"] not in planned]

    [cluster_role] = wait_until(lifted, timeout=30, what="OLM's ClusterRole for the Role")
    [role] = [d for d in installed.planned if d["kind"] == "Role"]
    read_namespaces = {
        "apiGroups": [""],
        "resources": ["namespaces"],
        "verbs": ["get", "list", "watch"],
    }
    assert cluster_role["rules"] == [*role["rules"], read_namespaces]

    def subjects() -> list[Doc]:
        name = cluster_role["metadata"]["name"]
        bindings = listed(kube, "clusterrolebindings", selector)
        return [s for b in bindings if b["roleRef"]["name"] == name for s in b["subjects"]]

    found = wait_until(subjects, timeout=30, what="OLM's ClusterRoleBinding for the Role")
    assert found == [{"kind": "ServiceAccount", "name": "gitsync", "namespace": ns}]


def listed(kube: Kube, plural: str, selector: str) -> list[Doc]:
    reply = kube.list(resource_path(RBAC, plural), params={"labelSelector": selector})
    items: list[Doc] = reply["items"]
    return items


def test_the_csv_service_account_syncs(
    installed: Installed, kube: Kube, namespace: str, tmp_path: Path
) -> None:
    # the settings the Pod would get: the bundle's ConfigMap, as installed
    [config] = [d for d in manifests() if d["kind"] == "ConfigMap"]
    name = config["metadata"]["name"]
    live = kube.get(resource_path("v1", "configmaps", installed.namespace, name))
    assert live["data"] == config["data"]
    assert_account_syncs(
        kube, installed.kubeconfig, live["data"], installed.namespace, namespace, tmp_path
    )
