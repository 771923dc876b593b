"""Fixtures of the integration tests (the real control plane)."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gitsync.daemon import daemon as daemonlib
from gitsync.kube.client import Kube, resource_path
from gitsync.reconcile.controller import Controller, ControllerConfig
from tests.support import SHARDED


@pytest.fixture(autouse=True)
def sharded_daemons(monkeypatch: pytest.MonkeyPatch) -> None:
    """With :data:`~tests.support.SHARDED`, every daemon a test starts is sharded."""
    if not SHARDED:
        return
    monkeypatch.setenv("GITSYNC_SHARDING", "true")
    real = daemonlib.Daemon.__init__

    def sharded(
        self: daemonlib.Daemon,
        controller: Controller,
        syncer: object,
        options: daemonlib.DaemonOptions,
        *args: object,
        **kwargs: object,
    ) -> None:
        namespace = options.lease_namespace
        if not options.leader_elect:  # the test's namespace, not a Lease shared by all
            namespace = controller.config.namespace or namespace
        options = dataclasses.replace(
            options, leader_elect=True, sharding=True, lease_namespace=namespace
        )
        real(self, controller, syncer, options, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(daemonlib.Daemon, "__init__", sharded)
    once = daemonlib.Daemon.sync_once

    def sync_once(self: daemonlib.Daemon) -> None:
        if not self._threads:
            # a pass asked of a daemon that does not run: first be what a running one
            # is by then, the leader and a member whose buckets have settled
            _lead_and_settle(self)
        once(self)

    monkeypatch.setattr(daemonlib.Daemon, "sync_once", sync_once)


def _lead_and_settle(d: daemonlib.Daemon) -> None:
    assert d.leader is not None and d.membership is not None
    d.leader.step()
    for _ in range(50):
        d.membership.step()
        if d.membership.settled.is_set():
            return
        time.sleep(0.05)
    raise AssertionError("the one member did not settle its buckets")


@pytest.fixture
def controller(kube: Kube, crd: str, namespace: str) -> Iterator[Controller]:
    """The operator in this process, watching this test's namespace only."""
    c = Controller(kube, ControllerConfig(namespace=namespace, workers=2))
    c.start()
    assert c.wait_synced(30)
    yield c
    c.stop()


@pytest.fixture
def reader_kubeconfig(kube: Kube, kubeconfig: str, namespace: str, tmp_path: Path) -> Iterator[str]:
    """A kubeconfig whose user may only get, list and watch MyApps and Deployments, and
    get namespaces: any write, dry-runs included, is refused by the API server. A proof of "writes
    nothing" that no other client of a shared control plane can disturb."""
    from tests.integration.test_deploy import sa_kubeconfig

    name = f"{namespace}-reader"
    rbac = "rbac.authorization.k8s.io/v1"
    kube.create(
        resource_path("v1", "serviceaccounts", namespace),
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "gitsync"}},
    )
    role = {
        "apiVersion": rbac,
        "kind": "ClusterRole",
        "metadata": {"name": name},
        "rules": [
            {
                "apiGroups": ["apps.example.com"],
                "resources": ["myapps"],
                "verbs": ["get", "list", "watch"],
            },
            {
                "apiGroups": ["apps"],
                "resources": ["deployments"],
                "verbs": ["get", "list", "watch"],
            },
            # diff, as sync, looks up the namespaces of MyApps not created yet
            {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get"]},
        ],
    }
    binding = {
        "apiVersion": rbac,
        "kind": "ClusterRoleBinding",
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": "gitsync", "namespace": namespace}],
    }
    kube.create(resource_path(rbac, "clusterroles"), role)
    kube.create(resource_path(rbac, "clusterrolebindings"), binding)
    try:
        yield str(sa_kubeconfig(kube, kubeconfig, namespace, tmp_path / "reader.kubeconfig"))
    finally:
        kube.delete(resource_path(rbac, "clusterrolebindings", name=name))
        kube.delete(resource_path(rbac, "clusterroles", name=name))
