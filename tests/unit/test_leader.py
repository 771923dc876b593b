"""Leader election's timing against a scripted Lease API and a fake clock.

The same guarantees are checked against the real API server in
tests/integration/test_leader.py; here every step is deterministic.
"""

from __future__ import annotations

import copy
import threading
from typing import Any

import pytest

from gitsync.errors import (
    APIConflictError,
    APINotFoundError,
    APIServerError,
    APITimeoutError,
)
from gitsync.kube.leader import LeaderElector
from gitsync.model.api import Obj
from tests.support import wait_until

KUBE_DEFAULT_TIMEOUT = 30.0  # what Kube.request waits when given no timeout
RENEW_DEADLINE = 10.0


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class FakeLeaseAPI:
    """One Lease with optimistic concurrency. ``stalled``: every request hangs until
    its timeout (the clock moves on by that much). ``failing``: every request fails."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.lease: Obj | None = None
        self.rv = 0
        self.calls: list[tuple[str, float]] = []
        self.stalled = False
        self.failing = False

    def request(
        self,
        method: str,
        path: str,
        *,
        body: Obj | None = None,
        subject: str = "",
        timeout: float | None = None,
        **_: Any,
    ) -> Obj:
        waited = KUBE_DEFAULT_TIMEOUT if timeout is None else timeout
        self.calls.append((method, waited))
        if self.stalled:
            self.clock.now += waited
            raise APITimeoutError(subject, f"{method} failed: read timed out")
        if self.failing:
            raise APIServerError(subject, "etcdserver: request timed out")
        if method == "GET":
            if self.lease is None:
                raise APINotFoundError(subject, "not found")
            return copy.deepcopy(self.lease)
        assert body is not None
        if method == "POST" and self.lease is not None:
            raise APIConflictError(subject, "already exists", [])
        if method == "PUT":
            assert self.lease is not None
            if body["metadata"].get("resourceVersion") != self.lease["metadata"]["resourceVersion"]:
                raise APIConflictError(subject, "the object has been modified", [])
        self.store(body)
        return copy.deepcopy(self.lease) if self.lease else {}

    # the verbs the elector may use besides request()
    def get(self, path: str, *, subject: str = "", params: Any = None) -> Obj:
        return self.request("GET", path, subject=subject)

    def create(self, path: str, body: Obj, *, subject: str = "") -> Obj:
        return self.request("POST", path, body=body, subject=subject)

    def store(self, body: Obj) -> None:
        self.rv += 1
        self.lease = copy.deepcopy(body)
        self.lease["metadata"]["resourceVersion"] = str(self.rv)

    def take_over(self, holder: str) -> None:
        """Another replica writes itself into the Lease."""
        assert self.lease is not None
        body = copy.deepcopy(self.lease)
        body["spec"]["holderIdentity"] = holder
        body["spec"]["renewTime"] = f"2026-01-01T00:00:{self.rv:02d}.000000Z"
        self.store(body)

    def holder(self) -> str:
        assert self.lease is not None
        return str(self.lease["spec"]["holderIdentity"])


class Calls:
    def __init__(self) -> None:
        self.log: list[str] = []

    def started(self) -> None:
        self.log.append("started")

    def stopped(self) -> None:
        self.log.append("stopped")


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def api(clock: FakeClock) -> FakeLeaseAPI:
    return FakeLeaseAPI(clock)


def elector(api: FakeLeaseAPI, clock: FakeClock, calls: Calls) -> LeaderElector:
    e = LeaderElector(api, "ns", "lease", "me", renew_deadline=RENEW_DEADLINE, clock=clock)
    # what run() would pass; step() is run() without the waiting
    e._on_started, e._on_stopped = calls.started, calls.stopped
    return e


def leading(api: FakeLeaseAPI, clock: FakeClock) -> tuple[LeaderElector, Calls]:
    calls = Calls()
    e = elector(api, clock, calls)
    e.step()
    assert e.is_leader() and calls.log == ["started"] and api.holder() == "me"
    return e, calls


def test_another_holder_in_the_lease_ends_leadership_at_once(
    api: FakeLeaseAPI, clock: FakeClock
) -> None:
    e, calls = leading(api, clock)
    clock.now += 2.0
    api.take_over("other")
    e.step()
    # well within our renew deadline (8 s of it are left), yet we no longer lead
    assert not e.is_leader()
    assert calls.log == ["started", "stopped"]
    assert api.holder() == "other"  # and we did not write over the live holder
    assert [m for m, _ in api.calls].count("PUT") == 0


def test_leadership_lapses_at_the_renew_deadline_without_a_renewal(
    api: FakeLeaseAPI, clock: FakeClock
) -> None:
    e, _ = leading(api, clock)
    clock.now += RENEW_DEADLINE - 0.01
    assert e.is_leader()
    clock.now += 0.01
    assert not e.is_leader()


def test_every_lease_request_is_bounded_by_the_renew_deadline(
    api: FakeLeaseAPI, clock: FakeClock
) -> None:
    calls = Calls()
    candidate = elector(api, clock, calls)
    api.stalled = True
    candidate.step()  # the Lease read hangs
    assert api.calls == [("GET", RENEW_DEADLINE)]
    api.calls.clear()
    assert candidate.request_sync() is False  # a standby forwarding a webhook
    assert api.calls == [("GET", RENEW_DEADLINE)]  # and no retry past the deadline

    api.stalled = False
    leader, _ = leading(api, clock)
    api.stalled = True
    api.calls.clear()
    leader.release()  # on shutdown
    assert api.calls == [("GET", RENEW_DEADLINE)]


def test_a_stalled_renewal_ends_when_leadership_does(api: FakeLeaseAPI, clock: FakeClock) -> None:
    e, calls = leading(api, clock)
    renewed = clock.now
    clock.now += 2.0
    api.stalled = True
    api.calls.clear()
    e.step()
    # the read was given what was left of our leadership, not a fixed 30 s (or 10 s)
    assert api.calls == [("GET", RENEW_DEADLINE - 2.0)]
    assert clock.now == renewed + RENEW_DEADLINE
    assert not e.is_leader()
    assert calls.log == ["started", "stopped"]  # announced when it happened


def test_a_lapse_between_renewals_is_announced_and_leadership_is_started_again(
    api: FakeLeaseAPI, clock: FakeClock
) -> None:
    e, calls = leading(api, clock)
    api.failing = True
    for _ in range(5):  # renewals fail for a while...
        clock.now += 1.9
        e.step()
    assert e.is_leader()
    clock.now += 2.0  # ...past the renew deadline
    assert not e.is_leader()
    api.failing = False
    e.step()  # and the next one succeeds (nobody else took the Lease)
    assert e.is_leader()
    # the workers refused keys while we did not lead: on_started (a resync) redoes them
    assert calls.log == ["started", "stopped", "started"]


def test_the_lease_is_taken_when_it_expired(api: FakeLeaseAPI, clock: FakeClock) -> None:
    e, calls = leading(api, clock)
    api.take_over("other")
    e.step()
    assert calls.log == ["started", "stopped"]
    clock.now += 15.0  # the other holder did not renew for a lease duration
    e.step()
    assert e.is_leader() and api.holder() == "me"
    assert calls.log == ["started", "stopped", "started"]


def test_a_released_lease_is_not_taken_again_by_a_later_renewal(
    api: FakeLeaseAPI, clock: FakeClock
) -> None:
    e, calls = leading(api, clock)
    e.release()
    assert api.holder() == ""
    clock.now += 2.0
    e.step()  # the leader thread's last period, after the daemon released on shutdown
    assert api.holder() == ""
    assert not e.is_leader()
    assert calls.log == ["started"]


def test_renewals_keep_leadership_past_many_renew_deadlines(
    api: FakeLeaseAPI, clock: FakeClock
) -> None:
    e, calls = leading(api, clock)
    for _ in range(10):
        clock.now += 2.0  # the retry period
        e.step()
        assert e.is_leader()
    # 20 s: twice the renew deadline, held by renewing (PUTs of our own Lease)
    assert calls.log == ["started"] and api.holder() == "me"
    assert [m for m, _ in api.calls].count("PUT") == 10


def test_a_live_lease_of_another_holder_is_waited_out_not_taken(
    api: FakeLeaseAPI, clock: FakeClock
) -> None:
    e, calls = leading(api, clock)
    api.take_over("other")
    e.step()
    for _ in range(3):
        clock.now += 2.0
        api.take_over("other")  # the other holder renews
        e.step()
        assert not e.is_leader() and api.holder() == "other"
    assert calls.log == ["started", "stopped"]


def test_a_crashed_step_does_not_end_the_campaign(
    api: FakeLeaseAPI, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = Calls()
    e = LeaderElector(api, "ns", "lease", "me", renew_deadline=RENEW_DEADLINE, clock=clock)
    e.retry_period = 0.01
    real = e._try_acquire_or_renew
    crashes = [KeyError("spec")]

    def once() -> bool:
        if crashes:
            raise crashes.pop()
        return real()

    monkeypatch.setattr(e, "_try_acquire_or_renew", once)
    stop = threading.Event()
    runner = threading.Thread(target=e.run, args=(stop, calls.started, calls.stopped))
    runner.start()
    try:
        wait_until(e.is_leader, 5, what="leadership after the crashed step")
    finally:
        stop.set()
        runner.join(5)
    assert not crashes and calls.log == ["started"] and api.holder() == "me"


def test_the_lease_carries_the_electors_annotations_and_keeps_the_others(
    api: FakeLeaseAPI, clock: FakeClock
) -> None:
    about = {"gitsync.apps.example.com/watch-namespace": "apps"}
    e = LeaderElector(api, "ns", "lease", "me", clock=clock, annotations=about)
    e.step()  # created
    assert api.lease is not None and api.lease["metadata"]["annotations"] == about
    api.lease["metadata"]["annotations"]["someone/else"] = "x"
    api.lease["metadata"]["annotations"]["gitsync.apps.example.com/watch-namespace"] = ""
    clock.now += 2
    e.step()  # renewed: ours written again, the others' kept
    assert api.lease["metadata"]["annotations"] == about | {"someone/else": "x"}
