"""Fixtures of the integration tests (the real control plane)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from gitsync.controller import Controller, ControllerConfig
from gitsync.kube import Kube


@pytest.fixture
def controller(kube: Kube, crd: str, namespace: str) -> Iterator[Controller]:
    """The operator in this process, watching this test's namespace only."""
    c = Controller(kube, ControllerConfig(namespace=namespace, workers=2))
    c.start()
    assert c.wait_synced(30)
    yield c
    c.stop()
