"""Events off the critical path: the correlator (repeats counted, floods folded) and the
recorder's queue and sender, on a fake client and an injected clock."""

from __future__ import annotations

import threading
from typing import Any, cast

from gitsync.errors import APIError
from gitsync.kube.client import Kube
from gitsync.kube.event_correlator import (
    AGGREGATE_PREFIX,
    PATCH_EVERY,
    SIMILAR_MAX,
    SIMILAR_WINDOW,
    Correlator,
    Create,
)
from gitsync.kube.events import EventRecorder
from gitsync.model.api import Obj
from tests.support import wait_until


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def myapp(name: str, ns: str = "shop", kind: str = "MyApp") -> Obj:
    return {
        "apiVersion": "apps.example.com/v1",
        "kind": kind,
        "metadata": {"name": name, "namespace": ns, "uid": f"uid-{name}"},
    }


def event(name: str, reason: str = "Created", message: str = "", **kw: Any) -> Obj:
    obj = myapp(name, **kw)
    return {
        "metadata": {"namespace": obj["metadata"]["namespace"], "generateName": f"{name}."},
        "involvedObject": {
            "apiVersion": obj["apiVersion"],
            "kind": obj["kind"],
            "name": name,
            "namespace": obj["metadata"]["namespace"],
            "uid": obj["metadata"]["uid"],
        },
        "type": "Normal",
        "reason": reason,
        "message": message or f"Deployment {name} created",
        "reportingComponent": "gitsync",
        "count": 1,
        "lastTimestamp": "t0",
    }


def written(c: Correlator, body: Obj, name: str = "") -> Create | None:
    """observe, and when it is to be written, pretend the server took it."""
    create = c.observe(body)
    if create is not None:
        c.created(create, name or f"ev-{len(c._written)}")
    return create


# --- the correlator ------------------------------------------------------------------


def test_an_identical_repeat_is_a_count_on_the_event_written() -> None:
    clock = Clock()
    c = Correlator(clock, wall=lambda: f"t{clock.now}")
    assert written(c, event("web"), "web.1") is not None
    clock.now += 1
    assert c.observe(event("web")) is None
    assert c.observe(event("web")) is None
    assert c.due() == [], "updates wait for PATCH_EVERY"
    clock.now += PATCH_EVERY
    [patch] = c.due()
    assert (patch.name, patch.namespace, patch.count) == ("web.1", "shop", 3)
    assert patch.last_timestamp == f"t{clock.now - PATCH_EVERY}"
    assert c.due() == [], "nothing new since"


def test_a_different_message_or_object_is_a_new_event() -> None:
    c = Correlator(Clock())
    assert written(c, event("web")) is not None
    assert written(c, event("web", message="Deployment web updated")) is not None
    assert written(c, event("api")) is not None
    assert written(c, event("web", reason="Updated")) is not None
    assert written(c, event("web", ns="other")) is not None


def test_similar_events_beyond_the_limit_fold_into_one_aggregate() -> None:
    clock = Clock()
    c = Correlator(clock)
    creates = [written(c, event(f"app-{i}")) for i in range(SIMILAR_MAX)]
    assert all(creates)
    aggregate = written(c, event(f"app-{SIMILAR_MAX}"), "agg")
    assert aggregate is not None
    assert aggregate.body["message"] == AGGREGATE_PREFIX + f"Deployment app-{SIMILAR_MAX} created"
    assert aggregate.body["reason"] == "Created"
    for i in range(SIMILAR_MAX + 1, 50):
        assert c.observe(event(f"app-{i}")) is None
    [patch] = c.due(flush=True)
    assert (patch.name, patch.count) == ("agg", 50 - SIMILAR_MAX)
    assert patch.message == AGGREGATE_PREFIX + "Deployment app-49 created"
    # one of the first ten, repeated: still its own Event's count, not the aggregate's
    assert c.observe(event("app-3")) is None
    [patch] = c.due(flush=True)
    assert patch.name != "agg" and patch.count == 2


def test_similarity_is_by_kind_namespace_type_and_reason() -> None:
    c = Correlator(Clock())
    for i in range(SIMILAR_MAX):
        assert written(c, event(f"app-{i}")) is not None
    # a different namespace, reason or kind is a group of its own: written as is
    for other in (
        event("x", ns="other"),
        event("x", reason="Updated"),
        event("x", kind="ConfigMap"),
    ):
        create = written(c, other)
        assert create is not None and not create.body["message"].startswith(AGGREGATE_PREFIX)


def test_the_window_starts_again_after_ten_quiet_minutes() -> None:
    clock = Clock()
    c = Correlator(clock)
    for i in range(SIMILAR_MAX):
        written(c, event(f"app-{i}"))
    clock.now += SIMILAR_WINDOW + 1
    create = written(c, event("late"))
    assert create is not None and create.body["message"] == "Deployment late created"


def test_a_forgotten_event_is_written_anew() -> None:
    c = Correlator(Clock())
    first = written(c, event("web"))
    assert first is not None
    c.forget(first.key)
    assert c.observe(event("web")) is not None


def test_next_due_says_when_to_wake() -> None:
    clock = Clock()
    c = Correlator(clock)
    assert c.next_due() is None
    written(c, event("web"))
    clock.now += 1
    c.observe(event("web"))
    assert c.next_due() == PATCH_EVERY - 1


# --- the recorder --------------------------------------------------------------------


class FakeKube:
    """Records what the recorder sends; ``gate`` holds the sender inside a request."""

    def __init__(self) -> None:
        self.created: list[Obj] = []
        self.patched: list[tuple[str, Obj]] = []
        self.gate = threading.Event()
        self.gate.set()
        self.fail_patch = 0
        #: raised by the next create: what no request should raise (a bug)
        self.crash: Exception | None = None

    def create(self, path: str, body: Obj, *, subject: str = "") -> Obj:
        self.gate.wait(10)
        if self.crash is not None:
            crash, self.crash = self.crash, None
            raise crash
        self.created.append(body)
        return {"metadata": {"name": f"ev-{len(self.created)}"}}

    def request(self, method: str, path: str, **kw: Any) -> Obj:
        assert method == "PATCH" and kw["content_type"] == "application/merge-patch+json"
        if self.fail_patch:
            raise APIError("Event", "not found", status=self.fail_patch)
        self.patched.append((path, kw["body"]))
        return {}


def recorder(fake: FakeKube, clock: Clock | None = None, **kw: Any) -> EventRecorder:
    correlator = Correlator(clock) if clock else None
    return EventRecorder(cast(Kube, fake), correlator=correlator, **kw)


def test_emit_does_not_wait_for_the_server_and_listeners_hear_at_once() -> None:
    fake = FakeKube()
    fake.gate.clear()  # the server does not answer
    rec = recorder(fake)
    heard: list[str] = []
    rec.listeners.append(lambda _o, _t, reason, _m, _d: heard.append(reason))
    rec.emit(myapp("web"), "Normal", "Created", "Deployment web created")
    rec.emit(myapp("api"), "Normal", "Created", "Deployment api created")
    assert heard == ["Created", "Created"]
    assert fake.created == []
    fake.gate.set()
    assert rec.flush(5)
    assert [e["involvedObject"]["name"] for e in fake.created] == ["web", "api"]


def test_a_full_queue_drops_and_counts() -> None:
    fake = FakeKube()
    fake.gate.clear()
    rec = recorder(fake, queue_size=2)
    rec.emit(myapp("a"), "Normal", "Created", "a")
    # the sender holds "a" inside the request: two more fill the queue
    wait_until(lambda: rec._queue.qsize() == 0, what="the sender to take the first")
    for name in "bcde":
        rec.emit(myapp(name), "Normal", "Created", name)
    assert rec.dropped == 2
    fake.gate.set()
    assert rec.flush(5)
    assert [e["message"] for e in fake.created] == ["a", "b", "c"]


def test_repeats_are_patched_on_flush_and_close_stops_the_sender() -> None:
    fake = FakeKube()
    rec = recorder(fake, Clock())
    for _ in range(3):
        rec.emit(myapp("web"), "Warning", "ApplyFailed", "denied")
    assert rec.flush(5)
    assert len(fake.created) == 1
    assert fake.patched == [
        ("/api/v1/namespaces/shop/events/ev-1", {**fake.patched[0][1], "count": 3})
    ]
    assert fake.patched[0][1]["message"] == "denied"
    assert rec.close(5)
    sender = rec._sender
    assert sender is not None
    sender.join(5)
    assert not sender.is_alive()


def test_an_unexpected_error_loses_one_event_not_the_sender() -> None:
    fake = FakeKube()
    rec = recorder(fake)
    fake.crash = KeyError("metadata")
    rec.emit(myapp("web"), "Normal", "Created", "lost")
    assert rec.flush(5)
    assert fake.created == [] and rec.dropped == 1
    rec.emit(myapp("web"), "Normal", "Created", "recorded")
    assert rec.flush(5)
    assert [e["message"] for e in fake.created] == ["recorded"]
    sender = rec._sender
    assert sender is not None and sender.is_alive()


def test_a_gone_event_is_created_again() -> None:
    fake = FakeKube()
    rec = recorder(fake, Clock())
    rec.emit(myapp("web"), "Warning", "ApplyFailed", "denied")
    rec.emit(myapp("web"), "Warning", "ApplyFailed", "denied")
    fake.fail_patch = 404
    assert rec.flush(5)
    fake.fail_patch = 0
    rec.emit(myapp("web"), "Warning", "ApplyFailed", "denied")
    assert rec.flush(5)
    assert len(fake.created) == 2 and fake.patched == []


def test_flush_without_anything_sent_is_immediate() -> None:
    rec = recorder(FakeKube())
    assert rec.flush(0.1)
    assert rec._sender is None
