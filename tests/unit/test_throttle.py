"""Waiting out the API server's 429s within a pass."""

from __future__ import annotations

import threading

import pytest

from gitsync.errors import APIServerError, APITooManyRequestsError
from gitsync.kube.throttle import Throttle


class Clock:
    """A fake monotonic clock whose waits advance it; ``stop_after`` waits, it asks the
    caller to stop."""

    def __init__(self, stop_after: int = 1000) -> None:
        self.now = 100.0
        self.waits: list[float] = []
        self.stop_after = stop_after

    def time(self) -> float:
        return self.now

    def wait(self, seconds: float) -> bool:
        self.waits.append(seconds)
        self.now += seconds
        return len(self.waits) >= self.stop_after


class Server:
    """Rejects the first ``rejections`` calls with 429 and the given Retry-After."""

    def __init__(self, rejections: int, retry_after: float = 1.0) -> None:
        self.rejections = rejections
        self.retry_after = retry_after
        self.calls: list[float] = []
        self.clock: Clock | None = None

    def __call__(self) -> str:
        self.calls.append(self.clock.now if self.clock else 0.0)
        if len(self.calls) <= self.rejections:
            raise APITooManyRequestsError("MyApp/ns/a", "too many requests", self.retry_after)
        return "applied"


def throttle(clock: Clock, **kw: float) -> Throttle:
    return Throttle(clock.wait, clock=clock.time, jitter=lambda: 0.5, **kw)  # type: ignore[arg-type]


def test_waits_out_each_retry_after_then_succeeds() -> None:
    clock, server = Clock(), Server(rejections=3, retry_after=2.0)
    server.clock = clock
    assert throttle(clock).call(server) == "applied"
    # the hint plus a quarter of it (jitter 0.5 of a half) between calls
    assert server.calls == [100.0, 102.5, 105.0, 107.5]


def test_gives_up_after_the_attempts() -> None:
    clock, server = Clock(), Server(rejections=10)
    with pytest.raises(APITooManyRequestsError):
        throttle(clock, attempts=4).call(server)
    assert len(server.calls) == 4


def test_a_hint_beyond_the_cap_fails_the_call_at_once() -> None:
    clock, server = Clock(), Server(rejections=1, retry_after=60.0)
    with pytest.raises(APITooManyRequestsError):
        throttle(clock, max_wait=10.0).call(server)
    assert len(server.calls) == 1 and clock.waits == []


def test_stopping_ends_the_wait_with_one_last_try() -> None:
    clock, server = Clock(stop_after=1), Server(rejections=5)
    with pytest.raises(APITooManyRequestsError):
        throttle(clock).call(server)
    assert len(server.calls) == 2


def test_one_rejection_holds_every_caller_of_the_pass() -> None:
    clock = Clock()
    shared = throttle(clock)
    first, second = Server(rejections=1, retry_after=4.0), Server(rejections=0)
    first.clock = second.clock = clock
    assert shared.call(first) == "applied"
    # the hint was about the client: the next object's call waits it out too
    clock.now = 101.0
    shared.not_before = clock.now + 4.0
    assert shared.call(second) == "applied"
    assert second.calls == [105.0]
    assert shared.rejections == 1


def test_other_errors_are_not_retried() -> None:
    calls = []

    def broken() -> str:
        calls.append(1)
        raise APIServerError("MyApp/ns/a", "internal error")

    with pytest.raises(APIServerError):
        Throttle(threading.Event().wait).call(broken)
    assert len(calls) == 1
