"""``helm install`` of charts/gitsync on the real control plane, and the release's
ServiceAccount syncing a repository with the RBAC the chart gave it.

The release goes into a namespace of its own with cluster-wide names of its own
(``fullnameOverride``), so that it cannot disturb other tests nor a real install;
the chart's CRD is skipped (the shared MyApp CRD is the ``crd`` fixture's, never
replaced nor deleted). The chart's Pods cannot run here (kwok runs no code), so
gitsync runs as a local process with a token of the release's ServiceAccount.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from gitsync.errors import APINotFoundError
from gitsync.kube.client import Kube, resource_path
from testenv import build, peers
from tests.integration.installed import assert_account_syncs
from tests.integration.test_deploy import sa_kubeconfig
from tests.packaging.chart import CHART, run_helm
from tests.support import get


@dataclass
class Release:
    name: str
    namespace: str
    kubeconfig: Path  # the release ServiceAccount's token


@pytest.fixture(scope="module")
def helm() -> str:
    try:
        return str(peers.build("helm"))
    except build.BuildError as e:
        pytest.fail(f"helm could not be built: {e}", pytrace=False)


@pytest.fixture(scope="module")
def release(
    helm: str, kube: Kube, kubeconfig: str, crd: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Release]:
    suffix = uuid.uuid4().hex[:6]
    name, namespace = f"gitsync-{suffix}", f"gitsync-helm-{suffix}"
    home = tmp_path_factory.mktemp("helm")
    common = ("--kubeconfig", kubeconfig, "--namespace", namespace)
    try:
        run_helm(
            helm,
            *("install", name, str(CHART), *common, "--create-namespace", "--skip-crds"),
            *("--set", f"fullnameOverride={name}", "--set", "serviceAccount.name=gitsync"),
            home=home,
        )
        config = sa_kubeconfig(kube, kubeconfig, namespace, home / "gitsync.kubeconfig")
        yield Release(name, namespace, config)
    finally:
        run_helm(helm, "uninstall", name, *common, "--wait", home=home, check=False)
        with contextlib.suppress(APINotFoundError):
            kube.delete(resource_path("v1", "namespaces", None, namespace))


def test_helm_install_creates_the_release(release: Release, kube: Kube, helm: str) -> None:
    rbac = "rbac.authorization.k8s.io/v1"
    assert kube.get(resource_path(rbac, "clusterroles", None, release.name))
    assert kube.get(resource_path(rbac, "clusterrolebindings", None, release.name))
    assert kube.get(resource_path(rbac, "roles", release.namespace, release.name))
    assert kube.get(resource_path("v1", "serviceaccounts", release.namespace, "gitsync"))
    config = kube.get(
        resource_path("v1", "configmaps", release.namespace, f"{release.name}-config")
    )
    assert config["data"]["GITSYNC_DRIFT_POLICY"] == "correct"
    deployment = get(kube, "Deployment", release.namespace, release.name)
    assert deployment is not None
    assert deployment["spec"]["template"]["spec"]["serviceAccountName"] == "gitsync"


def test_the_release_service_account_syncs(
    release: Release, kube: Kube, namespace: str, tmp_path: Path
) -> None:
    path = resource_path("v1", "configmaps", release.namespace, f"{release.name}-config")
    config = kube.get(path)["data"]
    assert_account_syncs(kube, release.kubeconfig, config, release.namespace, namespace, tmp_path)
