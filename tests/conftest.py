"""Fixtures shared by every test.

Unit tests need nothing. Tests under tests/integration/ are marked
``integration`` and get the real local control plane: brought up once per
session (or reused when ``make cluster`` already started it), one namespace
per test.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from gitsync.kube.client import Kube, resource_path
from tests.support import create_namespace

ROOT = Path(__file__).resolve().parent.parent

# git servers on loopback (git daemon, git http-backend) for the source and sync tests
pytest_plugins = ["tests.gitserver", "tests.signing"]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "integration" in Path(str(item.fspath)).parts:
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="session")
def kubeconfig() -> str:
    from testenv import cluster

    try:
        cluster.up()
    except Exception as e:  # any failure to start is this fixture's failure
        pytest.fail(f"the local control plane did not start: {e}", pytrace=False)
    os.environ["KUBECONFIG"] = str(cluster.KUBECONFIG)
    return str(cluster.KUBECONFIG)


@pytest.fixture(scope="session")
def kube(kubeconfig: str) -> Iterator[Kube]:
    k = Kube.from_kubeconfig(kubeconfig)
    yield k
    k.close()


@pytest.fixture(scope="session")
def kubectl_bin() -> str:
    from testenv import cluster

    return str(cluster.STATE / "bin" / "kubectl")


@pytest.fixture
def namespace(kube: Kube, request: pytest.FixtureRequest) -> Iterator[str]:
    ns = create_namespace(kube, request.node.name)
    yield ns
    kube.delete(resource_path("v1", "namespaces", name=ns))


@pytest.fixture(scope="session")
def crd(kube: Kube) -> str:
    """The MyApp CRD from crds/, applied and established."""
    import yaml

    from tests.support import wait_until

    body = yaml.safe_load((ROOT / "crds" / "myapps.apps.example.com.yaml").read_text())
    path = resource_path("apiextensions.k8s.io/v1", "customresourcedefinitions")
    kube.apply(
        f"{path}/{body['metadata']['name']}", body, field_manager="gitsync-tests", force=True
    )

    def established() -> bool:
        live = kube.get(f"{path}/{body['metadata']['name']}")
        conds = live.get("status", {}).get("conditions") or []
        return any(c["type"] == "Established" and c["status"] == "True" for c in conds)

    wait_until(established, timeout=30, what="the MyApp CRD to be established")
    return str(body["metadata"]["name"])


@pytest.fixture(autouse=True)
def _shared_nodes_unchanged() -> Iterator[None]:
    """No test may leave a node the caches share changed in place: it would be changed
    in every object sharing it (gitsync/model/compact.py)."""
    from gitsync.model.compact import SHARED

    yield
    changed = SHARED.changed()
    SHARED.sweep()  # what the test's caches held is gone with them
    assert not changed, f"a shared node was changed in place: {changed[:3]}"
