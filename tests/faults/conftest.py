"""Fixtures of the fault tests: a private control plane, its client, a namespace per test.

Never the shared control plane: these tests SIGKILL kube-apiserver and etcd.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from gitsync.kube.client import Kube, resource_path
from tests.faults.harness import PrivateControlPlane
from tests.support import create_namespace


@pytest.fixture(scope="session")
def private_cp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrivateControlPlane]:
    # API Priority and Fairness on: the throttling scenario needs it, and the others
    # are indifferent to it
    cp = PrivateControlPlane(tmp_path_factory.mktemp("controlplane"), apf=True)
    try:
        cp.up()
    except Exception as e:  # any failure to start is this fixture's failure
        pytest.fail(f"the private control plane did not start: {e}", pytrace=False)
    try:
        yield cp
    finally:
        cp.down()


@pytest.fixture(scope="session")
def pkube(private_cp: PrivateControlPlane) -> Iterator[Kube]:
    k = Kube.from_kubeconfig(str(private_cp.kubeconfig))
    yield k
    k.close()


@pytest.fixture
def pns(pkube: Kube, request: pytest.FixtureRequest) -> Iterator[str]:
    ns = create_namespace(pkube, request.node.name)
    yield ns
    # a test that broke the control plane must not hide its own failure behind this one
    with contextlib.suppress(Exception):
        pkube.delete(resource_path("v1", "namespaces", name=ns))


@pytest.fixture
def work(tmp_path: Path) -> Path:
    return tmp_path
