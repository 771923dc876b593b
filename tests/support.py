"""Helpers for tests."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

import pytest

T = TypeVar("T")


def wait_until(
    fn: Callable[[], T | None], timeout: float = 30.0, interval: float = 0.2, what: str = ""
) -> T:
    """Poll until ``fn()`` returns something truthy; fail the test otherwise."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while time.monotonic() < deadline:
        last = fn()
        if last:
            return last
        time.sleep(interval)
    pytest.fail(f"timed out after {timeout}s waiting for {what or fn}; last value {last!r}")
