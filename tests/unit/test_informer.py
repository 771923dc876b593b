"""The informer against a scripted list/watch API: what a watch deleted stays deleted."""

from __future__ import annotations

import copy
import functools
import json
import queue
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from gitsync.errors import APIServerError, APITimeoutError
from gitsync.kube.client import Hangup
from gitsync.kube.informer import (
    BEHIND_SECONDS,
    SILENCE_SECONDS,
    TOMBSTONE_SECONDS,
    WATCH_SECONDS,
    Informer,
    Transform,
)
from gitsync.kube.listreply import read_list
from gitsync.model.api import Obj
from gitsync.model.compact import cached

KEY = "ns/web"


def cm(name: str, rv: int | str, uid: str = "uid-1") -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"namespace": "ns", "name": name, "uid": uid, "resourceVersion": str(rv)},
    }


def _selects(selector: str | None, obj: Obj) -> bool:
    """``key=value`` selectors only, enough for these tests."""
    if not selector:
        return True
    key, _, value = selector.partition("=")
    return bool((obj["metadata"].get("labels") or {}).get(key) == value)


class FakeAPI:
    """``list`` answers with ``items`` at ``list_rv``; each watch yields what is ``push``ed
    until an ERROR (410 Gone) event ends it, after which the informer lists again."""

    def __init__(self, items: list[Obj], list_rv: int) -> None:
        self.items = items
        self.list_rv = list_rv
        self.lists = 0
        #: runs while a list is in flight (after its snapshot, before its reply)
        self.during_list: Callable[[], None] = lambda: None
        self.events: queue.Queue[Obj] = queue.Queue()
        #: the resourceVersion each watch started from
        self.watches: list[str] = []
        #: the label selector of each watch
        self.selectors: list[str | None] = []
        #: the read timeout each watch was given
        self.read_timeouts: list[float] = []
        self.timeouts: list[Any] = []
        #: the list reply's members, in the order a built-in list has them
        self.order: tuple[str, ...] = ("kind", "apiVersion", "metadata", "items")

    def list_each(
        self, path: str, each: Callable[[Obj, Obj], None], *, params: Any = None, subject: str = ""
    ) -> Obj:
        self.lists += 1
        self.during_list()
        selector = (params or {}).get("labelSelector")
        members = {
            "apiVersion": "v1",
            "kind": "ConfigMapList",
            "metadata": {"resourceVersion": str(self.list_rv)},
            "items": [i for i in self.items if _selects(selector, i)],
        }
        reply = {name: members[name] for name in self.order}
        # through the real reader: what the server's JSON reply would give
        return read_list(json.dumps(reply), each)

    def stream(
        self,
        path: str,
        *,
        params: Any = None,
        subject: str = "",
        read_timeout: float = 60.0,
        hangup: Hangup | None = None,
    ) -> Iterator[Obj]:
        self.watches.append(str((params or {}).get("resourceVersion")))
        self.selectors.append((params or {}).get("labelSelector"))
        self.read_timeouts.append(read_timeout)
        self.timeouts.append((params or {}).get("timeoutSeconds"))
        while True:
            if hangup is not None and hangup.hung:
                return  # as the real stream ends when shut down
            try:
                event = self.events.get(timeout=0.1)
            except queue.Empty:
                continue
            if event["type"] == "END":
                return  # the server's timeoutSeconds: the stream ends cleanly
            if event["type"] == "BROKEN":
                raise APIServerError(subject, "connection reset", status=500)
            if event["type"] == "SILENT":
                # what the client raises when no byte came within the read timeout
                raise APITimeoutError(subject, "watch interrupted: Read timed out")
            yield event
            if event["type"] == "ERROR":
                return

    def push(self, kind: str, obj: Obj) -> None:
        self.events.put({"type": kind, "object": obj})

    def end_watch(self) -> None:
        self.events.put({"type": "END", "object": {}})

    def break_watch(self) -> None:
        self.events.put({"type": "BROKEN", "object": {}})

    def fall_silent(self) -> None:
        self.events.put({"type": "SILENT", "object": {}})

    def bookmark(self, rv: int) -> None:
        self.events.put({"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": str(rv)}}})

    def expire_watch(self) -> None:
        self.events.put({"type": "ERROR", "object": {"code": 410, "message": "too old"}})


class Recorder:
    def __init__(self) -> None:
        self.seen: list[tuple[str, str, str]] = []
        self._cond = threading.Condition()

    def __call__(self, kind: str, obj: Obj) -> None:
        with self._cond:
            self.seen.append((kind, obj["metadata"]["name"], obj["metadata"]["resourceVersion"]))
            self._cond.notify_all()

    def wait_for(self, event: tuple[str, str, str]) -> None:
        with self._cond:
            assert self._cond.wait_for(lambda: event in self.seen, 5), self.seen


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def started() -> Iterator[Callable[..., tuple[Informer, FakeAPI, Recorder]]]:
    informers: list[Informer] = []

    def start(
        items: list[Obj],
        list_rv: int,
        clock: Callable[[], float] = time.monotonic,
        transform: Transform | None = None,
    ) -> tuple[Informer, FakeAPI, Recorder]:
        api = FakeAPI(items, list_rv)
        inf = Informer(api, "/api/v1/configmaps", name="test", clock=clock, transform=transform)
        rec = Recorder()
        inf.add_handler(rec)
        inf.start()
        assert inf.wait_synced(5)
        informers.append(inf)
        return inf, api, rec

    yield start
    for inf in informers:
        inf.stop()


def test_observe_after_the_watch_deleted_the_object_does_not_bring_it_back(
    started: Callable[..., tuple[Informer, FakeAPI, Recorder]],
) -> None:
    inf, api, rec = started([cm("web", 5)], 10)
    written = cm("web", 11)  # the reply to our write, still on its way back to the caller
    api.push("MODIFIED", written)
    api.push("DELETED", cm("web", 12))
    rec.wait_for(("DELETED", "web", "12"))
    inf.observe(written)
    assert inf.get(KEY) is None
    assert inf.items() == []


def test_a_deleted_object_stays_deleted_even_with_opaque_resource_versions(
    started: Callable[..., tuple[Informer, FakeAPI, Recorder]],
) -> None:
    # resourceVersions are opaque: the uid alone proves the reply is of the deleted object
    inf, api, rec = started([cm("web", "a")], 10)
    api.push("DELETED", cm("web", "b"))
    rec.wait_for(("DELETED", "web", "b"))
    inf.observe(cm("web", "c"))
    assert inf.get(KEY) is None


def test_a_recreated_object_is_cached_again(
    started: Callable[..., tuple[Informer, FakeAPI, Recorder]],
) -> None:
    inf, api, rec = started([cm("web", 5)], 10)
    api.push("DELETED", cm("web", 12))
    rec.wait_for(("DELETED", "web", "12"))
    # a write that created the object again is seen before its watch event...
    inf.observe(cm("web", 13, uid="uid-2"))
    assert inf.get(KEY) == cm("web", 13, uid="uid-2")
    # ...and its later versions from the watch replace it
    api.push("ADDED", cm("web", 13, uid="uid-2"))
    api.push("MODIFIED", cm("web", 14, uid="uid-2"))
    rec.wait_for(("MODIFIED", "web", "14"))
    assert inf.get(KEY) == cm("web", 14, uid="uid-2")


def test_observe_still_puts_a_fresh_write_ahead_of_its_watch_event(
    started: Callable[..., tuple[Informer, FakeAPI, Recorder]],
) -> None:
    inf, _api, _rec = started([], 10)
    inf.observe(cm("new", 11))
    assert inf.get("ns/new") == cm("new", 11)
    inf.observe(cm("new", 12))
    assert inf.get("ns/new") == cm("new", 12)
    inf.observe(cm("new", 11))  # an older reply does not replace a newer one
    assert inf.get("ns/new") == cm("new", 12)


def test_an_object_deleted_while_the_watch_was_down_is_not_brought_back(
    started: Callable[..., tuple[Informer, FakeAPI, Recorder]],
) -> None:
    inf, api, rec = started([cm("web", 5), cm("db", 6, uid="uid-db")], 10)
    api.items, api.list_rv = [cm("db", 6, uid="uid-db")], 20  # web went during the gap
    api.expire_watch()
    rec.wait_for(("DELETED", "web", "5"))
    assert api.lists == 2
    inf.observe(cm("web", 11))
    assert inf.get(KEY) is None
    assert inf.get("ns/db") == cm("db", 6, uid="uid-db")


def test_tombstones_do_not_outlive_a_relist_or_their_time(
    started: Callable[..., tuple[Informer, FakeAPI, Recorder]],
) -> None:
    clock = FakeClock()
    names = [f"app-{i}" for i in range(50)]
    inf, api, rec = started([cm(n, 5, uid=n) for n in names], 10, clock)
    for i, n in enumerate(names):
        api.push("DELETED", cm(n, 11 + i, uid=n))
    rec.wait_for(("DELETED", names[-1], str(11 + len(names) - 1)))
    assert inf.tombstones() == len(names)

    # a relist proves the cache complete at its resourceVersion: no tombstone is needed
    api.items, api.list_rv = [cm("z", 99, uid="z")], 100
    api.expire_watch()
    rec.wait_for(("ADDED", "z", "99"))
    assert inf.tombstones() == 0

    # ...and those made since go once they are older than any reply still in flight
    api.push("ADDED", cm("x", 101, uid="x"))
    api.push("DELETED", cm("x", 102, uid="x"))
    rec.wait_for(("DELETED", "x", "102"))
    assert inf.tombstones() == 1
    clock.now += TOMBSTONE_SECONDS + 1
    api.push("ADDED", cm("y", 103, uid="y"))
    api.push("DELETED", cm("y", 104, uid="y"))
    rec.wait_for(("DELETED", "y", "104"))
    assert inf.tombstones() == 1


def test_a_write_observed_while_a_relist_was_in_flight_is_kept(
    started: Callable[..., tuple[Informer, FakeAPI, Recorder]],
) -> None:
    inf, api, rec = started([cm("web", 5)], 10)
    # the list's snapshot is taken at 20; our create lands at 25, its reply is observed
    # before the list reply is: the list cannot hold it, and it is not gone
    api.items, api.list_rv = [cm("web", 5), cm("z", 19, uid="z")], 20
    api.during_list = lambda: inf.observe(cm("new", 25, uid="new"))
    api.expire_watch()
    rec.wait_for(("ADDED", "z", "19"))
    assert inf.get("ns/new") == cm("new", 25, uid="new")
    assert not [e for e in rec.seen if e[1] == "new"]  # no DELETED for it either
    # and when the watch then says it went, it goes
    api.push("DELETED", cm("new", 26, uid="new"))
    rec.wait_for(("DELETED", "new", "26"))
    assert inf.get("ns/new") is None


def test_a_write_observed_while_a_relist_notifies_does_not_break_the_relist() -> None:
    # workers observe() their writes while the informer thread hands a relist's
    # objects to the handlers; here a handler does it, so the timing is certain
    api = FakeAPI([cm("a", 5, uid="a"), cm("b", 6, uid="b")], 10)
    inf = Informer(api, "/api/v1/configmaps", name="test")
    inf.add_handler(lambda kind, obj: inf.observe(cm(f"new-{obj['metadata']['name']}", 11)))
    inf.start()
    try:
        assert inf.wait_synced(5)
        assert api.lists == 1  # the first list was not abandoned half way
        assert {o["metadata"]["name"] for o in inf.items()} == {"a", "b", "new-a", "new-b"}
    finally:
        inf.stop()


def eventually(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 5
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


def test_a_watch_that_ends_resumes_from_the_last_bookmark_without_a_relist(
    started: Callable[..., tuple[Informer, FakeAPI, Recorder]],
) -> None:
    inf, api, rec = started([cm("web", 5)], 10)
    eventually(lambda: api.watches == ["10"], "the first watch")
    api.events.put({"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "42"}}})
    api.end_watch()
    eventually(lambda: len(api.watches) == 2, "the watch to reconnect")
    assert api.watches == ["10", "42"] and api.lists == 1
    assert rec.seen == [("ADDED", "web", "5")]  # a bookmark is no object event
    assert inf.get(KEY) is not None and len(inf.items()) == 1  # nor an object cached


def test_410_gone_relists_and_tells_the_handlers_what_changed_meanwhile(
    started: Callable[..., tuple[Informer, FakeAPI, Recorder]],
) -> None:
    inf, api, rec = started([cm("web", 5), cm("old", 6, uid="uid-2")], 10)
    eventually(lambda: api.watches == ["10"], "the first watch")
    # while the watch was too far behind: web changed, old was deleted, new was created
    api.items, api.list_rv = [cm("web", 15), cm("new", 16, uid="uid-3")], 30
    api.expire_watch()
    eventually(lambda: api.watches == ["10", "30"], "the watch from the new list")
    assert api.lists == 2
    assert sorted(rec.seen[2:]) == [
        ("ADDED", "new", "16"),
        ("DELETED", "old", "6"),
        ("MODIFIED", "web", "15"),
    ]
    assert sorted(o["metadata"]["name"] for o in inf.items()) == ["new", "web"]


def test_a_deleted_event_removes_the_object_and_tells_the_handlers(
    started: Callable[..., tuple[Informer, FakeAPI, Recorder]],
) -> None:
    inf, api, rec = started([cm("web", 5)], 10)
    api.push("DELETED", cm("web", 11))
    rec.wait_for(("DELETED", "web", "11"))
    assert inf.get(KEY) is None and inf.tombstones() == 1


def test_a_broken_stream_relists_after_a_backoff(
    started: Callable[..., tuple[Informer, FakeAPI, Recorder]],
) -> None:
    inf, api, rec = started([cm("web", 5)], 10)
    eventually(lambda: api.watches == ["10"], "the first watch")
    api.items, api.list_rv = [cm("web", 12)], 20
    api.break_watch()
    eventually(lambda: api.watches == ["10", "20"], "the relist and a new watch")
    rec.wait_for(("MODIFIED", "web", "12"))
    assert api.lists == 2 and inf.relists == 2


def test_a_compacting_cache_takes_an_events_unchanged_parts_from_the_version_it_replaces(
    started: Callable[..., tuple[Informer, FakeAPI, Recorder]],
) -> None:
    first = cm("web", 5) | {"data": {"a": "1"}, "spec": {"x": {"y": [1, 2]}}}
    second = copy.deepcopy(first) | {"data": {"a": "2"}}
    second["metadata"]["resourceVersion"] = "6"
    inf, api, rec = started([first], 10, transform=cached)
    cached_first = inf.get(KEY)
    assert cached_first == first
    api.push("MODIFIED", copy.deepcopy(second))
    rec.wait_for(("MODIFIED", "web", "6"))
    cached_second = inf.get(KEY)
    assert cached_first is not None and cached_second == second
    assert cached_second["spec"] is cached_first["spec"]
    # a new object is compacted like the last one kept: its equal parts are shared
    api.push("ADDED", cm("db", 7, uid="uid-db") | {"spec": {"x": {"y": [1, 2]}}})
    rec.wait_for(("ADDED", "db", "7"))
    db = inf.get("ns/db")
    assert db is not None and db["spec"] is cached_second["spec"]


def test_a_relist_keeps_the_objects_it_holds_at_the_same_version_and_their_keys(
    started: Callable[..., tuple[Informer, FakeAPI, Recorder]],
) -> None:
    calls: list[str] = []

    def transform(obj: Obj, like: Obj | None) -> Obj:
        calls.append(obj["metadata"]["name"])
        return cached(obj, like)

    same, changed, reborn = cm("same", 5), cm("changed", 6, uid="u-c"), cm("reborn", 7, uid="u-r")
    inf, api, rec = started([same, changed, reborn], 10, transform=transform)
    held = {k: inf.get(f"ns/{k}") for k in ("same", "changed", "reborn")}
    keys = {k: next(key for key in inf.cache if key == f"ns/{k}") for k in held}
    eventually(lambda: api.watches == ["10"], "the first watch")
    calls.clear()
    # the same resourceVersion under another uid: deleted and created anew (only a
    # server whose versions are not etcd's could do it; a uid is never reused)
    api.items = [same, cm("changed", 12, uid="u-c"), cm("reborn", 7, uid="u-r2")]
    api.list_rv = 20
    api.break_watch()
    eventually(lambda: api.watches == ["10", "20"], "the relist and a new watch")
    rec.wait_for(("MODIFIED", "changed", "12"))
    assert inf.get("ns/same") is held["same"]  # the very object: nothing new kept
    # and under the very key string, for every key listed again
    assert all(next(key for key in inf.cache if key == f"ns/{k}") is keys[k] for k in keys)
    assert sorted(calls) == ["changed", "reborn"]
    now_changed, now_reborn = inf.get("ns/changed"), inf.get("ns/reborn")
    assert now_changed is not None and now_changed["metadata"]["resourceVersion"] == "12"
    assert now_reborn is not None and now_reborn["metadata"]["uid"] == "u-r2"


@pytest.mark.parametrize(
    "order",
    [
        ("kind", "apiVersion", "metadata", "items"),  # a built-in list, as Go writes it
        ("apiVersion", "items", "kind", "metadata"),  # sorted, the kind after the items
        ("items", "metadata", "apiVersion", "kind"),
    ],
)
def test_listed_items_are_kept_with_their_lists_kind_and_apiversion(
    order: tuple[str, ...],
) -> None:
    bare = [cm("a", 5), cm("b", 6, uid="uid-2")]
    for obj in bare:
        del obj["apiVersion"], obj["kind"]
    api = FakeAPI(bare, 10)
    api.order = order
    given: list[Obj] = []

    def transform(obj: Obj, like: Obj | None) -> Obj:
        given.append(obj)
        return obj

    inf = Informer(api, "/api/v1/configmaps", name="test", transform=transform)
    inf.start()
    try:
        assert inf.wait_synced(5)
        assert [(o["apiVersion"], o["kind"]) for o in given] == [("v1", "ConfigMap")] * 2
        assert inf.get("ns/a") == cm("a", 5) and inf.get("ns/b") == cm("b", 6, uid="uid-2")
    finally:
        inf.stop()


def _two_shards() -> tuple[Obj, Obj, FakeAPI, Informer, Recorder]:
    """ConfigMaps a (shard 1) and b (shard 2), and an informer of shard 1, not started."""
    a, b = cm("a", 10), cm("b", 11, uid="uid-2")
    a["metadata"]["labels"] = {"shard": "1"}
    b["metadata"]["labels"] = {"shard": "2"}
    api = FakeAPI([a, b], 12)
    inf = Informer(api, "/api/v1/configmaps", label_selector="shard=1", name="test")
    rec = Recorder()
    inf.add_handler(rec)
    return a, b, api, inf, rec


def test_a_new_label_selector_ends_the_watch_and_relists_what_it_selects() -> None:
    _, b, api, inf, rec = _two_shards()
    inf.start()
    try:
        assert inf.wait_synced(5)
        eventually(lambda: api.selectors == ["shard=1"], "the first watch")
        assert [o["metadata"]["name"] for o in inf.items()] == ["a"]
        inf.reselect("shard=1")  # the same selector: nothing to do
        assert inf.synced.is_set() and api.lists == 1
        api.list_rv = 13
        inf.reselect("shard=2")
        # the open watch is ended (not left to run out its four minutes) and the new
        # selection listed: what left it is deleted, what entered it added
        rec.wait_for(("ADDED", "b", "11"))
        rec.wait_for(("DELETED", "a", "10"))
        assert inf.wait_synced(5)
        assert [o["metadata"]["name"] for o in inf.items()] == ["b"]
        eventually(lambda: api.selectors == ["shard=1", "shard=2"], "a watch with the new selector")
        assert api.lists == 2
        assert api.watches[-1] == "13"
        # and it goes on watching with the new selector
        api.push("MODIFIED", {**b, "metadata": {**b["metadata"], "resourceVersion": "14"}})
        rec.wait_for(("MODIFIED", "b", "14"))
    finally:
        inf.stop()
        api.end_watch()


def test_the_synced_handlers_run_after_each_lists_events_and_one_failing_stops_none() -> None:
    _, _, api, inf, rec = _two_shards()
    calls: list[tuple[bool, int]] = []

    def broken() -> None:
        raise RuntimeError("a bug in a handler")

    inf.add_synced_handler(broken)
    inf.add_synced_handler(lambda: calls.append((inf.synced.is_set(), len(rec.seen))))
    inf.start()
    try:
        assert inf.wait_synced(5)
        eventually(lambda: calls == [(True, 1)], "a call after the first list's one event")
        inf.reselect("shard=2")  # listed anew: b added, a deleted
        eventually(lambda: len(calls) == 2, "a call after the second list")
        assert calls[1] == (True, 3)
    finally:
        inf.stop()
        api.end_watch()


def test_a_hangup_before_the_stream_opens_keeps_it_from_opening() -> None:
    hangup = Hangup()
    hangup()  # no stream open: nothing to shut, but the next may not open

    class Response:
        shut = False

        def shutdown(self) -> None:
            self.shut = True

    r = Response()
    assert hangup.attach(r) is False
    hangup.reset()
    assert hangup.attach(r) is True
    hangup()
    assert r.shut and hangup.hung
    hangup.detach()
    hangup()  # detached: not shut again (it is closed by then)


@pytest.mark.parametrize(
    "error",
    [
        OSError(9, "Bad file descriptor"),  # its socket closed under it
        ValueError("Cannot shutdown socket as self._sock_shutdown is not set"),  # closed
        RuntimeError("Cannot shutdown as connection has already been released to the pool"),
    ],
)
def test_a_hangup_of_a_stream_that_just_ended_by_itself_is_not_an_error(error: Exception) -> None:
    hangup = Hangup()

    class Ended:
        def shutdown(self) -> None:
            raise error

    assert hangup.attach(Ended()) is True
    hangup()  # the stopping process goes on
    assert hangup.hung and hangup.attach(Ended()) is False


def test_a_stream_being_shut_down_is_not_detached_and_closed_under_the_hangup() -> None:
    hangup = Hangup()
    shutting, go_on = threading.Event(), threading.Event()
    order: list[str] = []

    class Slow:
        def shutdown(self) -> None:
            shutting.set()
            go_on.wait(5)
            order.append("shut")

    hangup.attach(Slow())
    t = threading.Thread(target=hangup)
    t.start()
    assert shutting.wait(5)

    def detach_then_close() -> None:
        hangup.detach()
        order.append("detached")

    reader = threading.Thread(target=detach_then_close)
    reader.start()
    reader.join(0.2)
    assert reader.is_alive()  # the reading thread waits to detach (and then close) ...
    go_on.set()
    t.join(5)
    reader.join(5)
    assert order == ["shut", "detached"]  # ... until the shutdown is over


def test_a_watch_is_given_up_after_a_watch_period_of_silence_and_relisted_at_once(
    started: Callable[..., tuple[Informer, FakeAPI, Recorder]], caplog: pytest.LogCaptureFixture
) -> None:
    clock = FakeClock()
    inf, api, rec = started([cm("web", 5)], 10, clock=clock)
    eventually(lambda: api.watches == ["10"], "the first watch")
    # the read timeout is the watch's length and a margin: a live watch (ended by the
    # server at its timeoutSeconds, bookmarks or not) is never given up, a dead one
    # within 75 s; a cache is behind only once giving its watch up did not bring it back
    assert api.read_timeouts == [SILENCE_SECONDS]
    assert api.timeouts == [WATCH_SECONDS]
    assert WATCH_SECONDS < SILENCE_SECONDS < 75 and SILENCE_SECONDS < BEHIND_SECONDS
    api.items, api.list_rv = [cm("web", 12)], 20
    clock.now += SILENCE_SECONDS
    api.fall_silent()
    # relisted with no backoff (a broken stream waits 0.5 s or more: the test below)
    eventually(lambda: api.watches == ["10", "20"], "the relist and a new watch")
    rec.wait_for(("MODIFIED", "web", "12"))
    assert inf.silences == 1 and api.lists == 2
    assert "the watch was silent for 70s" in caplog.text


def test_a_read_timeout_before_a_watch_period_of_silence_is_a_broken_stream(
    started: Callable[..., tuple[Informer, FakeAPI, Recorder]],
) -> None:
    clock = FakeClock()
    inf, api, _ = started([cm("web", 5)], 10, clock=clock)
    eventually(lambda: api.watches == ["10"], "the first watch")
    clock.now += SILENCE_SECONDS - 1
    api.bookmark(11)  # the server spoke: the silence starts over
    clock.now += 2
    api.fall_silent()
    eventually(lambda: len(api.watches) == 2, "the relist after a backoff")
    assert inf.silences == 0 and api.lists == 2


def test_a_cache_is_behind_when_the_server_is_silent_past_the_bound(
    started: Callable[..., tuple[Informer, FakeAPI, Recorder]],
) -> None:
    clock = FakeClock()
    inf, api, _ = started([cm("web", 5)], 10, clock=clock)
    eventually(lambda: api.watches == ["10"], "the first watch")
    clock.now += BEHIND_SECONDS
    assert not inf.behind() and inf.silent_for() == BEHIND_SECONDS
    clock.now += 1
    assert inf.behind()
    api.bookmark(11)  # a bookmark is word from the server
    eventually(lambda: not inf.behind(), "a bookmark to bring it back")
    assert inf.silent_for() == 0
    clock.now += BEHIND_SECONDS + 1
    assert inf.behind()
    api.break_watch()  # a list is word too (the broken stream itself says nothing)
    eventually(lambda: not inf.behind(), "a relist to bring it back")
    assert api.lists == 2


def test_a_watch_the_server_ended_is_word_from_it_even_without_an_event(
    started: Callable[..., tuple[Informer, FakeAPI, Recorder]],
) -> None:
    clock = FakeClock()
    inf, api, _ = started([cm("web", 5)], 10, clock=clock)
    eventually(lambda: api.watches == ["10"], "the first watch")
    # a quiet kind: no event, no bookmark; the server ends each watch at its timeout
    for watched in range(2, 5):
        clock.now += WATCH_SECONDS
        api.end_watch()
        opened = functools.partial(lambda n: len(api.watches) == n, watched)
        eventually(opened, "the watch opened again")
        assert inf.silent_for() == 0 and not inf.behind()
    # opened again from the resourceVersion it had: never listed, never given up
    assert api.watches == ["10", "10", "10", "10"] and api.lists == 1 and inf.silences == 0


def test_a_cache_never_synced_is_not_behind_but_unsynced() -> None:
    clock = FakeClock()
    inf = Informer(FakeAPI([], 1), "/api/v1/configmaps", clock=clock)
    clock.now += BEHIND_SECONDS * 10
    assert not inf.behind() and not inf.synced.is_set()
    assert inf.silent_for() == BEHIND_SECONDS * 10  # silent since it was made


def test_stop_ends_the_open_watch_at_once(caplog: pytest.LogCaptureFixture) -> None:
    api = FakeAPI([cm("a", 10)], 11)
    inf = Informer(api, "/api/v1/configmaps", name="test")
    inf.start()
    assert inf.wait_synced(5)
    eventually(lambda: api.watches == ["11"], "the watch open")
    inf.stop()  # no event comes: only the hangup can end the stream
    assert inf._thread is not None
    inf._thread.join(3)
    assert not inf._thread.is_alive()
    assert api.lists == 1 and "relisting" not in caplog.text
