"""Removing the MyApp CRD, as `kubectl delete -k deploy/` or `gitsync uninstall
--delete-crd` does, on a control plane of its own (the CRD is cluster-wide): without a
release first it takes every application down (the garbage collector deletes each
MyApp's Deployment with it); after `gitsync uninstall` every Deployment stays, serving,
and gitsync installed again adopts them with no rollout."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest
import yaml

from gitsync.errors import APINotFoundError
from gitsync.kube.client import Kube, path_of, resource_path
from gitsync.model.api import KIND
from tests.faults.harness import PrivateControlPlane
from tests.integration.test_cli import common, gitsync
from tests.integration.test_uninstall import NAMES, deployment, ready, serving
from tests.support import app_yaml, create_namespace, wait_until

pytestmark = [pytest.mark.faults, pytest.mark.integration]

ROOT = Path(__file__).resolve().parents[2]
CRD = yaml.safe_load((ROOT / "crds" / "myapps.apps.example.com.yaml").read_text())
CRD_PATH = resource_path(
    "apiextensions.k8s.io/v1", "customresourcedefinitions", name=CRD["metadata"]["name"]
)


def install_crd(kube: Kube) -> None:
    with contextlib.suppress(Exception):
        kube.create(resource_path("apiextensions.k8s.io/v1", "customresourcedefinitions"), CRD)

    def established() -> bool:
        conds = kube.get(CRD_PATH).get("status", {}).get("conditions") or []
        return any(c["type"] == "Established" and c["status"] == "True" for c in conds)

    wait_until(established, 60, what="the MyApp CRD to be established")


def gone(kube: Kube, path: str) -> bool:
    try:
        kube.get(path)
    except APINotFoundError:
        return True
    return False


def crd_gone(kube: Kube) -> bool:
    return gone(kube, CRD_PATH)


def sync(kubeconfig: Path, repo: Path, ns: str) -> None:
    proc = gitsync(str(kubeconfig), "sync", *common(repo, ns), "--status-namespace", ns)
    assert proc.returncode == 0, proc.stderr


def test_the_crd_removed_after_uninstall_leaves_every_deployment_serving(
    private_cp: PrivateControlPlane, pkube: Kube, work: Path
) -> None:
    kubeconfig = private_cp.kubeconfig
    released, trap = create_namespace(pkube, "released"), create_namespace(pkube, "trap")
    repos: dict[str, Path] = {}
    try:
        for ns in (released, trap):
            apps = work / ns / "apps"
            apps.mkdir(parents=True)
            for name in NAMES:
                (apps / f"{name}.yaml").write_text(app_yaml(ns, name, replicas=2))
            repos[ns] = apps.parent
            sync(kubeconfig, repos[ns], ns)
            wait_until(lambda: ready(pkube, ns), 120, what=f"{ns} ready")  # noqa: B023
        before = serving(pkube, released)

        # one namespace released, then the CRD deleted as `kubectl delete -k deploy/` does
        proc = gitsync(str(kubeconfig), "uninstall", "--watch-namespace", released)
        assert proc.returncode == 0, proc.stderr
        assert "nothing to stop" in proc.stdout and "released 3 Deployments" in proc.stdout
        pkube.delete(CRD_PATH)
        wait_until(lambda: crd_gone(pkube), 120, what="the CRD to be deleted")
        # the trap: what was not released goes with its MyApps
        wait_until(
            lambda: not pkube.list(path_of("Deployment", trap))["items"],
            120,
            what="the garbage collector to delete the unreleased Deployments",
        )
        assert serving(pkube, released) == before

        # gitsync installed again: the CRD, then a sync adopts what was released
        install_crd(pkube)
        for ns in (released, trap):
            sync(kubeconfig, repos[ns], ns)
        wait_until(lambda: ready(pkube, trap), 120, what="the trap's Deployments re-created")
        adopted = serving(pkube, released)
        for name in NAMES:
            refs = deployment(pkube, released, name)["metadata"].get("ownerReferences") or []
            assert [r["kind"] for r in refs if r.get("controller")] == [KIND]
            assert not adopted[name].rolled_out(before[name]), name

        # and the whole removal: every namespace released, then the CRD deleted
        both = {ns: serving(pkube, ns) for ns in (released, trap)}
        proc = gitsync(str(kubeconfig), "uninstall", "--delete-crd")
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.splitlines()[-1] == (
            "deleted the CustomResourceDefinition myapps.apps.example.com"
        )
        assert crd_gone(pkube)
        # released everywhere (what the first part showed the collector spares), and
        # still serving: the same Deployments, ReplicaSets and Pods
        for ns in (released, trap):
            for name in NAMES:
                refs = deployment(pkube, ns, name)["metadata"].get("ownerReferences") or []
                assert [r for r in refs if r["kind"] == KIND] == [], (ns, name)
        assert {ns: serving(pkube, ns) for ns in (released, trap)} == both
    finally:
        install_crd(pkube)  # as the other tests of this control plane expect it
        for ns in (released, trap):
            with contextlib.suppress(Exception):
                pkube.delete(resource_path("v1", "namespaces", name=ns))
