"""Fixtures of the integration tests (the real control plane)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from gitsync.kube.client import Kube, resource_path
from gitsync.reconcile.controller import Controller, ControllerConfig


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
