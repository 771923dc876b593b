"""``gitsync uninstall`` against the real control plane: gitsync stopped, every Deployment
released from its MyApp without a rollout, the MyApps deleted while their Deployments and
Pods stay (the garbage collector, which deletes an owned Deployment with its MyApp, leaves
them), and gitsync installed again adopting them back, again without a rollout.

gitsync's own Deployment is a stand-in here (kwok runs its Pod; nothing in it runs):
what uninstall does to it is what the server holds, a Deployment scaled to 0 and no Pod.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import signal
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from gitsync.kube.client import Kube, path_of, resource_path
from gitsync.model.api import KIND
from tests.integration.test_cli import common, gitsync
from tests.integration.test_ha import Replica, holder
from tests.support import app_yaml, create_namespace, get, wait_until

NAMES = ("web", "api", "db")


@dataclass(frozen=True)
class Serving:
    """What shows a Deployment was not rolled out, re-created or stopped."""

    uid: str
    generation: int
    template: str
    replica_sets: frozenset[str]
    pods: frozenset[str]

    def rolled_out(self, before: Serving) -> bool:
        """Whether this is a new rollout of ``before`` (or another object): the
        generation alone may move without one (an annotation's change moves it)."""
        return dataclasses.replace(self, generation=before.generation) != before


def serving(kube: Kube, ns: str) -> dict[str, Serving]:
    deployments = kube.list(path_of("Deployment", ns))["items"]
    rs = kube.list(resource_path("apps/v1", "replicasets", ns))["items"]
    pods = kube.list(resource_path("v1", "pods", ns))["items"]

    def owned(objs: list[dict[str, Any]], owner: str) -> frozenset[str]:
        return frozenset(
            o["metadata"]["uid"]
            for o in objs
            if any(r["name"].startswith(owner) for r in o["metadata"].get("ownerReferences", []))
        )

    out: dict[str, Serving] = {}
    for d in deployments:
        meta = d["metadata"]
        sets = owned(rs, meta["name"])
        names = {o["metadata"]["name"] for o in rs if o["metadata"]["uid"] in sets}
        out[meta["name"]] = Serving(
            meta["uid"],
            meta["generation"],
            json.dumps(d["spec"]["template"], sort_keys=True),
            sets,
            frozenset(
                p["metadata"]["uid"]
                for p in pods
                if any(r["name"] in names for r in p["metadata"].get("ownerReferences", []))
            ),
        )
    return out


def ready(kube: Kube, ns: str) -> bool:
    deployments = kube.list(path_of("Deployment", ns))["items"]
    return len(deployments) == len(NAMES) and all(
        d.get("status", {}).get("readyReplicas") == d["spec"]["replicas"] for d in deployments
    )


def deployment(kube: Kube, ns: str, name: str) -> dict[str, Any]:
    d = get(kube, "Deployment", ns, name)
    assert d is not None, f"Deployment/{ns}/{name} is gone"
    return d


def owners(kube: Kube, ns: str, name: str) -> list[dict[str, Any]]:
    refs: list[dict[str, Any]] = deployment(kube, ns, name)["metadata"].get("ownerReferences")
    return refs or []


def versions(kube: Kube, ns: str) -> dict[str, str]:
    return {n: deployment(kube, ns, n)["metadata"]["resourceVersion"] for n in NAMES}


@pytest.fixture
def gitsync_ns(kube: Kube, request: pytest.FixtureRequest) -> Iterator[str]:
    """Where gitsync's own Deployment (a stand-in) runs."""
    ns = create_namespace(kube, "gitsync-system")
    kube.create(
        path_of("Deployment", ns),
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "gitsync", "labels": {"app.kubernetes.io/name": "gitsync"}},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {"app.kubernetes.io/name": "gitsync"}},
                "template": {
                    "metadata": {"labels": {"app.kubernetes.io/name": "gitsync"}},
                    "spec": {"containers": [{"name": "gitsync", "image": "gitsync:test"}]},
                },
            },
        },
    )
    yield ns
    with contextlib.suppress(Exception):
        kube.delete(resource_path("v1", "namespaces", name=ns))


def synced(kubeconfig: str, kube: Kube, tmp_path: Path, ns: str) -> Path:
    apps = tmp_path / ns / "apps"
    apps.mkdir(parents=True)
    for name in NAMES:
        (apps / f"{name}.yaml").write_text(app_yaml(ns, name, replicas=2))
    repo = apps.parent
    proc = gitsync(kubeconfig, "sync", *common(repo, ns), "--status-namespace", ns)
    assert proc.returncode == 0, proc.stderr
    wait_until(lambda: ready(kube, ns), 120, what=f"the Deployments of {ns} to be ready")
    return repo


def test_uninstall_keeps_the_deployments_serving_and_gitsync_adopts_them_back(
    kubeconfig: str, kube: Kube, crd: str, namespace: str, gitsync_ns: str, tmp_path: Path
) -> None:
    repo = synced(kubeconfig, kube, tmp_path, namespace)
    # outside --watch-namespace: not released, so its MyApp's deletion takes it along
    # (the garbage collector at work: the control that it had its chance at ours too)
    control = create_namespace(kube, "uninstall-control")
    try:
        synced(kubeconfig, kube, tmp_path, control)
        wait_until(
            lambda: any(
                p.get("status", {}).get("phase") == "Running"
                for p in kube.list(resource_path("v1", "pods", gitsync_ns))["items"]
            ),
            60,
            what="gitsync's stand-in Pod",
        )
        # a second owner of web's is no MyApp: it stays
        team = kube.create(
            resource_path("v1", "configmaps", namespace),
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "team"}},
        )
        other = {"apiVersion": "v1", "kind": "ConfigMap", "name": "team"}
        other["uid"] = team["metadata"]["uid"]
        web = deployment(kube, namespace, "web")
        kube.merge_patch(
            path_of("Deployment", namespace, "web"),
            {"metadata": {"ownerReferences": [*web["metadata"]["ownerReferences"], other]}},
            field_manager="team-controller",
        )
        before = serving(kube, namespace)
        written = versions(kube, namespace)

        args = ["uninstall", "-n", gitsync_ns, "--watch-namespace", namespace]
        # the CRD's deletion would take every MyApp in the cluster: not with one namespace
        refused = gitsync(kubeconfig, *args, "--delete-crd")
        assert refused.returncode == 2 and "--delete-crd deletes every MyApp" in refused.stderr
        dry = gitsync(kubeconfig, *args, "--delete-myapps", "--dry-run")
        assert dry.returncode == 0, dry.stderr
        assert dry.stdout.splitlines() == [
            f"(dry run) would scale {gitsync_ns}/gitsync from 1 replica to 0",
            "(dry run) would release 3 Deployments from their MyApps (no rollout: their Pod "
            "templates are unchanged)",
            "(dry run) would delete 3 MyApps (their Deployments stay)",
        ]
        assert versions(kube, namespace) == written  # a dry run writes nothing
        assert deployment(kube, gitsync_ns, "gitsync")["spec"]["replicas"] == 1

        done = gitsync(kubeconfig, *args, "--delete-myapps")
        assert done.returncode == 0, done.stderr
        lines = done.stdout.splitlines()
        assert lines[1].startswith("no other gitsync runs: none renewed a Lease in ")
        assert lines[:1] + lines[2:] == [
            f"stopped {gitsync_ns}/gitsync (1 replica, now 0; its Pods are gone)",
            "released 3 Deployments from their MyApps (no rollout: their Pod templates are "
            "unchanged)",
            "the release held: no Deployment taken back in 10s",
            "deleted 3 MyApps (their Deployments stay)",
        ]
        # gitsync is stopped: no Pod of it left
        assert deployment(kube, gitsync_ns, "gitsync")["spec"]["replicas"] == 0
        assert kube.list(resource_path("v1", "pods", gitsync_ns))["items"] == []
        assert kube.list(path_of(KIND, namespace))["items"] == []

        # the control's MyApps deleted as `kubectl delete` does: their Deployments go
        for name in NAMES:
            kube.delete(path_of(KIND, control, name))
        wait_until(
            lambda: not kube.list(path_of("Deployment", control))["items"],
            120,
            what="the garbage collector to delete the control's Deployments",
        )
        # ours are as they were: same objects, no new ReplicaSet, the same Pods
        assert serving(kube, namespace) == before
        for name in NAMES:
            assert deployment(kube, namespace, name)["status"]["readyReplicas"] == 2
        assert [{k: r.get(k) for k in other} for r in owners(kube, namespace, "web")] == [other]
        assert owners(kube, namespace, "api") == owners(kube, namespace, "db") == []

        # gitsync again: the MyApps re-created from Git adopt their Deployments
        status = ("--status-namespace", namespace)
        proc = gitsync(kubeconfig, "sync", *common(repo, namespace), *status)
        assert proc.returncode == 0, proc.stderr
        myapps = {
            a["metadata"]["name"]: a["metadata"]["uid"]
            for a in kube.list(path_of(KIND, namespace))["items"]
        }
        assert set(myapps) == set(NAMES)
        for name in NAMES:
            refs = [r for r in owners(kube, namespace, name) if r["kind"] == KIND]
            assert [(r["uid"], r.get("controller")) for r in refs] == [(myapps[name], True)]
        # adopted without a rollout: the same ReplicaSet, Pods and template (gitsync's
        # stamp annotation names the new owner, which moves the generation alone)
        adopted = serving(kube, namespace)
        assert adopted.keys() == before.keys()
        assert [n for n in NAMES if adopted[n].rolled_out(before[n])] == []
        drift = gitsync(kubeconfig, "drift", "-n", namespace)
        assert drift.returncode == 0, drift.stdout + drift.stderr
    finally:
        with contextlib.suppress(Exception):
            kube.delete(resource_path("v1", "namespaces", name=control))


def myapp_owners(kube: Kube, ns: str) -> dict[str, list[tuple[str, str]]]:
    """Each Deployment's MyApp owners, as (name, uid)."""
    return {
        n: [(r["name"], r["uid"]) for r in owners(kube, ns, n) if r["kind"] == KIND] for n in NAMES
    }


def test_uninstall_refuses_while_a_daemon_outside_its_deployment_renews_a_lease(
    kubeconfig: str, kube: Kube, crd: str, namespace: str, gitsync_ns: str, tmp_path: Path
) -> None:
    synced(kubeconfig, kube, tmp_path, namespace)
    # `gitsync run` as a process outside any Deployment: uninstall's -n and --selector
    # do not find it
    daemon = Replica(kubeconfig, namespace, tmp_path / "daemon.log")
    try:
        pid = str(daemon.proc.pid)
        wait_until(lambda: holder(kube, namespace).endswith(f"_{pid}"), 60, what="it to lead")
        before = myapp_owners(kube, namespace)
        assert all(len(refs) == 1 for refs in before.values())

        args = ["uninstall", "-n", gitsync_ns, "--watch-namespace", namespace]
        refused = gitsync(kubeconfig, *args)
        assert refused.returncode == 1, refused.stdout + refused.stderr
        [line] = refused.stderr.splitlines()
        assert line.startswith("error: gitsync still runs, renewing "), line
        ours = f"Lease/{namespace}/gitsync-leader-operator by '{holder(kube, namespace)}'"
        assert f"{ours} (process {pid} on host " in line
        assert "; nothing was released: stop each (in a cluster the host is its Pod" in line
        assert "Traceback" not in refused.stderr
        # its own Deployment was stopped as ever; nothing else was written
        assert refused.stdout.splitlines() == [
            f"stopped {gitsync_ns}/gitsync (1 replica, now 0; its Pods are gone)"
        ]
        assert myapp_owners(kube, namespace) == before

        daemon.stop(signal.SIGTERM)  # a graceful stop gives the Lease up
        assert daemon.proc.returncode == 0
        assert holder(kube, namespace) == ""
    finally:
        daemon.stop(signal.SIGKILL)

    done = gitsync(kubeconfig, *args)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "released 3 Deployments" in done.stdout
    assert done.stdout.splitlines()[-2:] == [
        "the release held: no Deployment taken back in 10s",
        "kept 3 MyApps and the CustomResourceDefinition myapps.apps.example.com",
    ]
    assert myapp_owners(kube, namespace) == {n: [] for n in NAMES}
    assert all(owners(kube, namespace, n) == [] for n in NAMES)
