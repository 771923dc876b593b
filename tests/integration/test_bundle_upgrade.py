"""OLM upgrades the previous release's bundle to this one: olm-operator replaces the old
CSV with the new one, whose ``spec.replaces`` names it.

The previous release's bundle is read from its commit (release/RELEASES). As in
test_bundle_install there is no catalog, so this test does what the catalog-operator's
InstallPlan would do for each version, in its order: the CSV, then the RBAC OLM's
resolver makes of it (olmsteps), then the bundle's other manifests, created or updated
and owned by the CSV of their version. The CRD is the working tree's (installed by the
suite; the new CRD over the old with MyApps stored is the fault test of upgrades).

olm-operator then does the upgrade itself: the new CSV succeeds, the old one goes through
Replacing and Deleting and is deleted, the Deployment becomes the new version's, owned by
the new CSV, and the bundle's ConfigMap, Service and PodDisruptionBudget survive the old
CSV's deletion.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from gitsync.errors import APIConflictError
from gitsync.kube.client import Kube, resource_path
from release import bundle, versions
from tests.integration import olm
from tests.integration.test_bundle_install import (
    CLUSTER_SCOPED,
    CSVS,
    PLURALS,
    manifests,
    phase,
)
from tests.support import get, wait_until

ROOT = Path(__file__).resolve().parents[2]
Doc = dict[str, Any]


def previous_manifests() -> list[Doc]:
    """The bundle manifests of the previous release, from its commit."""
    release = versions.previous()
    listed = subprocess.run(
        ["git", "ls-tree", "--name-only", release.commit, "bundle/manifests/"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    if listed.returncode != 0 or not listed.stdout.strip():
        pytest.fail(
            f"release {release.version}'s commit {release.commit} is not in this clone "
            "(a shallow clone? git fetch --unshallow)",
            pytrace=False,
        )
    docs = []
    for path in sorted(listed.stdout.split()):
        text = subprocess.run(
            ["git", "show", f"{release.commit}:{path}"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        docs.append(yaml.safe_load(text))
    return docs


def csv_of(docs: list[Doc]) -> Doc:
    [csv] = [d for d in docs if d["kind"] == "ClusterServiceVersion"]
    return csv


def path_of_doc(doc: Doc, namespace: str) -> str:
    scoped = None if doc["kind"] in CLUSTER_SCOPED else namespace
    return resource_path(doc["apiVersion"], PLURALS[doc["kind"]], scoped)


def create_or_update(kube: Kube, namespace: str, doc: Doc) -> None:
    """An InstallPlan step: created, or, when an earlier version's is there, updated to
    this version's (its owners replaced; a ServiceAccount's merged, as OLM's step ensurer
    merges them: the old CSV, until it is replaced, still requires its ServiceAccount to
    be its own, and one owned by the new CSV alone fails it, at random under load)."""
    try:
        kube.create(path_of_doc(doc, namespace), doc)
    except APIConflictError:
        path = f"{path_of_doc(doc, namespace)}/{doc['metadata']['name']}"
        live = kube.get(path)
        body = dict(doc)
        body["metadata"] = {
            **doc["metadata"],
            "resourceVersion": live["metadata"]["resourceVersion"],
        }
        if doc["kind"] == "ServiceAccount":
            owners = list(live["metadata"].get("ownerReferences") or [])
            new = doc["metadata"].get("ownerReferences") or []
            body["metadata"]["ownerReferences"] = owners + [o for o in new if o not in owners]
        kube.request("PUT", path, body=body)


def install(kube: Kube, namespace: str, docs: list[Doc]) -> Doc:
    """What an InstallPlan for this bundle creates; returns the live CSV."""
    csvs = resource_path(CSVS, "clusterserviceversions", namespace)
    created = kube.create(csvs, olm.managed(csv_of(docs)))
    for doc in olm.install_plan_objects(created):
        create_or_update(kube, namespace, doc)
    for doc in docs:
        if doc["kind"] in ("ConfigMap", "Service", "PodDisruptionBudget"):
            create_or_update(kube, namespace, olm.bundle_object(doc, created))
    return created


@dataclass
class Upgraded:
    namespace: str
    old: Doc
    new: Doc
    deployment_before: Doc
    seconds: float
    phases_of_old: list[str]


@pytest.fixture(scope="module")
def upgraded(
    kube: Kube, kubeconfig: str, crd: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Upgraded]:
    tmp = tmp_path_factory.mktemp("olm-upgrade")
    old_docs, new_docs = previous_manifests(), manifests()
    old, new = csv_of(old_docs), csv_of(new_docs)
    with olm.session(kube, kubeconfig, "gitsync-olm-upgrade", tmp) as session:
        namespace = session.namespace
        old_path = session.csv_path(old["metadata"]["name"])
        new_path = session.csv_path(new["metadata"]["name"])
        install(kube, namespace, old_docs)

        session.wait_until(
            kube,
            lambda: phase(kube, old_path) == "Succeeded",
            timeout=180,
            interval=0.5,
            what="old CSV",
        )
        [dep] = old["spec"]["install"]["spec"]["deployments"]
        before = get(kube, "Deployment", namespace, dep["name"])
        assert before is not None

        start = time.monotonic()
        install(kube, namespace, new_docs)
        seen: list[str] = []

        def replaced() -> bool:
            now = phase(kube, old_path) or "(deleted)"
            if not seen or seen[-1] != now:
                seen.append(now)
            return now == "(deleted)" and phase(kube, new_path) == "Succeeded"

        session.wait_until(
            kube,
            replaced,
            timeout=240,
            interval=0.2,
            what="OLM to replace the old CSV",
            seen=lambda: f"the old CSV went {' -> '.join(seen)}",
        )
        seconds = time.monotonic() - start
        yield Upgraded(namespace, old, kube.get(new_path), before, seconds, seen)


def test_the_new_csv_replaces_the_previous_release(upgraded: Upgraded) -> None:
    spec = upgraded.new["spec"]
    assert spec["replaces"] == upgraded.old["metadata"]["name"]
    assert spec["version"] == bundle.package_version() != upgraded.old["spec"]["version"]
    status = upgraded.new["status"]
    assert (status["phase"], status["reason"]) == ("Succeeded", "InstallSucceeded"), status
    # the old CSV was taken through OLM's own replacement, not deleted by hand
    assert "Replacing" in upgraded.phases_of_old or "Deleting" in upgraded.phases_of_old, (
        upgraded.phases_of_old
    )
    print(
        f"\nOLM upgrade {upgraded.old['metadata']['name']} -> "
        f"{upgraded.new['metadata']['name']}: {upgraded.seconds:.1f}s; the old CSV went "
        f"{' -> '.join(upgraded.phases_of_old)}"
    )


def test_the_deployment_is_the_new_versions(upgraded: Upgraded, kube: Kube) -> None:
    [dep] = upgraded.new["spec"]["install"]["spec"]["deployments"]
    live = get(kube, "Deployment", upgraded.namespace, dep["name"])
    assert live is not None
    owners = [(o["kind"], o["name"]) for o in live["metadata"].get("ownerReferences") or []]
    assert owners == [("ClusterServiceVersion", upgraded.new["metadata"]["name"])]
    image = live["spec"]["template"]["spec"]["containers"][0]["image"]
    assert image == upgraded.new["metadata"]["annotations"]["containerImage"]
    assert image != upgraded.old["metadata"]["annotations"]["containerImage"]

    def available() -> bool:
        now = get(kube, "Deployment", upgraded.namespace, dep["name"]) or {}
        conds = {c["type"]: c["status"] for c in now.get("status", {}).get("conditions") or []}
        return conds.get("Available") == "True"

    wait_until(available, timeout=60, what="the upgraded Deployment available")


def test_the_bundle_objects_survive_the_old_csvs_deletion(upgraded: Upgraded, kube: Kube) -> None:
    for doc in manifests():
        if doc["kind"] not in ("ConfigMap", "Service", "PodDisruptionBudget"):
            continue
        path = path_of_doc(doc, upgraded.namespace) + "/" + doc["metadata"]["name"]
        live = kube.get(path)
        owners = [o["name"] for o in live["metadata"].get("ownerReferences") or []]
        assert owners == [upgraded.new["metadata"]["name"]], (doc["kind"], owners)
