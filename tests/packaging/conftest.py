"""Fixtures of the packaging tests: the real tools, built from testenv/ (cached)."""

from __future__ import annotations

import pytest

from testenv import build, peers


def _tool(name: str) -> str:
    try:
        return str(peers.build(name))
    except build.BuildError as e:
        pytest.fail(f"{name} could not be built: {e}", pytrace=False)


@pytest.fixture(scope="session")
def kubectl() -> str:
    try:
        return str(build.build() / "kubectl")
    except build.BuildError as e:
        pytest.fail(f"kubectl could not be built: {e}", pytrace=False)


@pytest.fixture(scope="session")
def helm() -> str:
    return _tool("helm")


@pytest.fixture(scope="session")
def actionlint() -> str:
    return _tool("actionlint")


@pytest.fixture(scope="session")
def bundlecheck() -> str:
    return _tool("bundlecheck")
