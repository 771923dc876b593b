"""The controller's guarantees that need no API server: one reconcile of a key at a time,
and what the loop does with each reconcile Result (requeue after, backoff, permanent)."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from typing import cast

import pytest
from kubernetes import client as k8s_client

from gitsync.engine import planner
from gitsync.errors import APITooManyRequestsError
from gitsync.kube.client import Kube
from gitsync.model.api import Obj, subject
from gitsync.model.instance import resolve
from gitsync.model.myapp_status import SyncInfo
from gitsync.model.shards import bucket_of
from gitsync.reconcile.controller import Controller, changed
from gitsync.reconcile.ledger import Claim, Declared
from gitsync.reconcile.reconciler import Reconciler
from gitsync.reconcile.result import Result, Served
from gitsync.reconcile.workqueue import WorkQueue

KEY = "ns/web"


def offline_controller() -> Controller:
    # nothing is started and nothing below reaches the (unroutable) server
    return Controller(Kube(k8s_client.Configuration(host="http://127.0.0.1:9")))


def test_reconciles_of_one_key_never_overlap_even_when_the_key_is_forgotten() -> None:
    """The sync pass calls reconcile from its own threads, beside the workers; a MyApp
    that is gone is forgotten inside the lock, which must not hand out a second one."""
    c = offline_controller()
    inside = 0
    overlaps = 0
    entries = 0
    count_lock = threading.Lock()

    def slow_get(key: str) -> Obj | None:
        # runs inside reconcile's critical section; None sends reconcile to _forget
        nonlocal inside, overlaps, entries
        with count_lock:
            inside += 1
            entries += 1
            overlaps += inside > 1
        time.sleep(0.002)
        with count_lock:
            inside -= 1
        return None

    c.myapps.get = slow_get  # type: ignore[method-assign]

    def hammer() -> None:
        for _ in range(40):
            assert c.reconcile(KEY) == Result()

    threads = [threading.Thread(target=hammer) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert entries == 6 * 40
    assert overlaps == 0
    # forgotten keys leave nothing behind: the lock table does not grow with churn
    assert len(c.reconciler._key_locks) == 0


# --- the loop: what a worker does with each Result ------------------------------------


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class ScriptedReconciler:
    """Answers each reconcile with the next scripted Result (or raises it)."""

    def __init__(self, *results: Result | Exception) -> None:
        self.results = list(results)
        self.keys: list[str] = []

    def awaiting_status(self) -> bool:
        return False

    def reconcile(self, key: str) -> Result:
        self.keys.append(key)
        nxt = self.results.pop(0)
        if isinstance(nxt, Exception):
            raise nxt
        return nxt


def looping(*results: Result | Exception) -> tuple[Controller, ScriptedReconciler, FakeClock]:
    c = offline_controller()
    clock = FakeClock()
    c.queue = WorkQueue(base_delay=1.0, clock=clock)
    fake = ScriptedReconciler(*results)
    c.reconciler = cast(Reconciler, fake)
    c.deployments.synced.set()  # as once the first list is in
    return c, fake, clock


def due(c: Controller) -> str | None:
    """The key the queue hands out now, if any."""
    key = c.queue.get(timeout=0)
    if key is not None:
        c.queue.done(key)
    return key


def test_requeue_after_puts_the_key_back_at_the_servers_hint_without_backoff() -> None:
    c, _, clock = looping(Result(requeue_after=3.0, error="throttled"))
    c._process(KEY)
    assert c.queue.failures(KEY) == 0
    clock.now += 2.9
    assert due(c) is None
    clock.now += 0.2
    assert due(c) == KEY


def test_a_failure_for_now_backs_off_longer_each_time_until_it_succeeds() -> None:
    c, fake, clock = looping(Result(error="a"), Result(error="b"), Result())
    c._process(KEY)
    assert c.queue.failures(KEY) == 1
    clock.now += 1.0  # base delay
    assert due(c) == KEY
    c._process(KEY)
    clock.now += 1.0
    assert due(c) is None  # twice the base now
    clock.now += 1.0
    assert due(c) == KEY
    c._process(KEY)
    assert c.queue.failures(KEY) == 0  # success forgets the backoff
    assert fake.keys == [KEY] * 3


def test_a_pass_s_failure_handed_to_the_workers_waits_the_hint_or_the_backoff() -> None:
    """``retry``, which a sync pass calls for an apply that failed for now: a throttled
    one comes back at the server's hint (no backoff counted), any other after the
    key's backoff."""
    c, _, clock = looping()
    c.retry(KEY, Result(error="timed out", temporary=True))
    # no worker would take it (``gitsync sync``): nothing is queued, nothing said
    assert c.queue.failures(KEY) == 0 and c.queue.idle()
    clock.now += 60
    assert due(c) is None
    c._threads.append(threading.Thread(target=lambda: None))  # as start_workers() leaves it
    assert c.workers_started
    c.retry(KEY, Result(requeue_after=3.0, error="throttled", temporary=True))
    assert c.queue.failures(KEY) == 0
    clock.now += 2.9
    assert due(c) is None
    clock.now += 0.2
    assert due(c) == KEY
    c.retry(KEY, Result(error="timed out", temporary=True))
    c.retry(KEY, Result(error="timed out", temporary=True))
    assert c.queue.failures(KEY) == 2
    clock.now += 1.9  # the earlier of the two delays: the base, 1 s
    assert due(c) == KEY and due(c) is None


def test_a_permanent_failure_is_not_retried() -> None:
    c, _, clock = looping(Result(permanent=True, error="invalid"))
    c._process(KEY)
    clock.now += 3600
    assert due(c) is None and c.queue.failures(KEY) == 0


def test_a_crash_in_reconcile_is_retried_and_does_not_end_the_worker() -> None:
    c, _, clock = looping(RuntimeError("bug"))
    c._process(KEY)
    clock.now += 1.0
    assert due(c) == KEY


def test_a_standby_reconciles_nothing() -> None:
    c, fake, _ = looping(Result())
    c.is_leader = lambda: False
    c._process(KEY)
    assert fake.keys == [] and due(c) is None


def test_a_standby_forgets_what_it_remembered_of_a_myapp_that_is_gone() -> None:
    """A replica that served a MyApp and stood by when it was deleted never reconciles
    it again: its record and its stamps must go when the deletion reaches it."""
    c, fake, _ = looping(Result(), Result())
    c.is_leader = lambda: False
    body = DECLARED.body
    for key in (KEY, "ns/db"):
        c.ledger.declare({key: DECLARED})
        for kind in ("MyApp", "Deployment"):
            planner.stamp_of(subject(kind, *key.split("/")), body)
    held = {"metadata": {"namespace": "ns", "name": "db", "uid": "u", "resourceVersion": "1"}}
    c.myapps.cache["ns/db"] = held
    c._process(KEY)
    c._process("ns/db")
    assert c.ledger.get(KEY) is None
    assert subject("MyApp", "ns", "web") not in planner._STAMPS
    assert subject("Deployment", "ns", "web") not in planner._STAMPS
    # one still in the cache is kept: the replica serves it again when it leads
    assert c.ledger.git("ns/db") == body
    assert subject("Deployment", "ns", "db") in planner._STAMPS
    assert fake.keys == []


def test_workers_take_keys_from_the_queue_one_at_a_time_per_key() -> None:
    c, fake, _ = looping(*[Result() for _ in range(3)])
    c.queue = WorkQueue()
    c.start_workers()
    try:
        for key in ("ns/a", "ns/b", "ns/c"):
            c.queue.add(key)
        assert c.wait_idle(5)
    finally:
        c.stop(timeout=5)
    assert sorted(fake.keys) == ["ns/a", "ns/b", "ns/c"]


@pytest.mark.parametrize(
    ("generation", "status", "urgent"),
    [
        (3, {"observedGeneration": 3, "phase": "Ready"}, False),  # news: status moved on
        (4, {"observedGeneration": 3}, True),  # an edit not seen yet
        (1, None, True),  # new: nothing seen yet
        (1, {}, True),
        (2, {"observedGeneration": "2"}, True),  # not a number: not known to be seen
        (None, {"observedGeneration": 1}, True),
    ],
)
def test_an_edit_is_urgent_and_news_is_not(
    generation: int | None, status: dict[str, object] | None, urgent: bool
) -> None:
    obj: dict[str, object] = {"metadata": {"name": "a", "namespace": "n"}}
    if generation is not None:
        obj["metadata"] = {"name": "a", "namespace": "n", "generation": generation}
    if status is not None:
        obj["status"] = status
    assert changed(obj) is urgent


def test_an_edited_deployment_is_reconciled_before_rollout_news() -> None:
    c = offline_controller()

    def deployment(name: str, generation: int, observed: int) -> Obj:
        refs = [{"kind": "MyApp", "name": name, "controller": True}]
        meta = {"name": name, "namespace": "n", "generation": generation, "ownerReferences": refs}
        return {"metadata": meta, "status": {"observedGeneration": observed}}

    c._on_deployment("MODIFIED", deployment("rolling", 2, 2))  # a rollout moving on
    c._on_deployment("MODIFIED", deployment("scaled", 3, 2))  # kubectl scale deployment
    c._on_deployment("DELETED", deployment("deleted", 1, 1))
    c.myapps._notify(
        "MODIFIED",
        {
            "metadata": {"name": "edited", "namespace": "n", "generation": 5},
            "status": {"observedGeneration": 4},
        },
    )
    assert [c.queue.get(0) for _ in range(5)] == [
        "n/scaled",
        "n/deleted",
        "n/edited",
        "n/rolling",
        None,
    ]


class _YieldingCount(int):
    """A count whose addition lets another thread run between the read and the write
    of ``+=``, as a free-threaded interpreter (or a GIL switch there) would."""

    def __add__(self, other: int) -> _YieldingCount:
        value = int(self) + other
        time.sleep(0.0005)
        return _YieldingCount(value)


#: a sync pass's input, for reconciles of keys no cache holds
DECLARED = Declared(
    {"metadata": {"name": "app"}},
    SyncInfo("main@sha1:" + "0" * 40, "apps/app.yaml", "t"),
    Claim(resolve("", "https://git.example.com/apps.git", "apps", "main")),
)


def test_reconciles_counted_from_many_threads_lose_none() -> None:
    """Workers and the sync pass reconcile different keys at once, each counting."""
    c = offline_controller()
    r = c.reconciler

    def throttled(key: str, myapp: Obj | None, rec: object) -> Served | None:
        # the first thing reconcile does after counting: a 429, so nothing else runs
        raise APITooManyRequestsError(key, "throttled", retry_after=1.0)

    r._converge_myapp = throttled  # type: ignore[method-assign]
    r.reconciles = _YieldingCount(0)

    def hammer(n: int) -> None:
        for _ in range(25):
            assert r.reconcile(f"ns/app-{n}", DECLARED).throttled

    threads = [threading.Thread(target=hammer, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert c.reconciles == 6 * 25


def test_a_key_waits_while_the_deployment_cache_is_listed_anew_and_comes_back_once() -> None:
    c, fake, clock = looping(Result())
    c.deployments.synced.clear()  # buckets taken: their Deployments are being listed
    for key in (KEY, "ns/other", KEY):
        c._process(key)
    assert fake.keys == []  # not reconciled against a cache that lacks its Deployment
    # set aside, not back in the queue on a timer: however long the list takes, no key
    # goes round again meanwhile
    clock.now += 60.0
    assert due(c) is None and c.queue.idle()
    c.deployments._replace({}, "7")  # the list is in
    assert sorted(filter(None, (due(c), due(c), due(c)))) == ["ns/other", KEY]
    c._process(KEY)
    assert fake.keys == [KEY]
    # the next relist finds nothing set aside: nothing comes back
    c.deployments._replace({}, "8")
    assert due(c) is None


def test_a_key_set_aside_as_the_list_comes_in_is_put_back_all_the_same() -> None:
    """The list may come in between a worker's look at ``synced`` and its setting the key
    aside: the look is made under the lock the list's handler takes the keys with."""
    c, fake, _ = looping(Result())
    looked, release = threading.Event(), threading.Event()

    class Synced(threading.Event):
        def is_set(self) -> bool:
            seen = super().is_set()
            if threading.current_thread().name == "worker":
                looked.set()
                release.wait(5)  # the list comes in now
            return seen

    c.deployments.synced = Synced()
    worker = threading.Thread(target=c._process, args=(KEY,), name="worker")
    worker.start()
    assert looked.wait(5)
    lister = threading.Thread(target=c.deployments._replace, args=({}, "7"))
    lister.start()  # sets synced, then takes the keys set aside
    time.sleep(0.05)
    release.set()
    worker.join(5)
    lister.join(5)
    assert fake.keys == []  # synced was clear when it looked
    assert due(c) == KEY  # and the key is not lost


class FakeShard:
    def __init__(self, serving: set[int]) -> None:
        self.buckets = frozenset(serving)
        self.entered: list[str] = []

    def serving(self) -> frozenset[int]:
        return self.buckets

    def bucket(self, key: str) -> int:
        namespace, name = key.split("/", 1)
        return bucket_of(namespace, name)

    @contextlib.contextmanager
    def working(self, key: str) -> Iterator[bool]:
        self.entered.append(key)
        yield self.bucket(key) in self.buckets


def test_with_sharding_a_replica_reconciles_the_myapps_of_its_buckets_only() -> None:
    other = next(
        f"ns/app-{i}" for i in range(100) if bucket_of("ns", f"app-{i}") != bucket_of("ns", "web")
    )
    c, fake, _ = looping(Result(), Result())
    c.is_leader = lambda: False  # leading is not what decides here
    shard = FakeShard({bucket_of("ns", "web")})
    c.shard_by(shard)
    web = bucket_of("ns", "web")
    assert c.deployments.label_selector == (
        f"app.kubernetes.io/managed-by=gitsync,gitsync.apps.example.com/bucket in ({web})"
    )
    c.deployments.synced.set()
    c._process(KEY)
    c._process(other)
    assert fake.keys == [KEY]  # the other's bucket is another replica's
    assert shard.entered == [KEY, other]
    assert c.serves(KEY) and not c.serves(other)


def test_new_buckets_reselect_the_deployments_and_queue_the_myapps_now_served() -> None:
    c = offline_controller()
    shard = FakeShard(set())
    c.shard_by(shard)
    assert str(c.deployments.label_selector).endswith("gitsync.apps.example.com/bucket in (none)")
    names = [f"app-{i}" for i in range(40)]
    for n in names:
        c.myapps.observe(
            {"metadata": {"namespace": "ns", "name": n, "uid": n, "resourceVersion": "1"}}
        )
    mine = frozenset({bucket_of("ns", "app-0"), bucket_of("ns", "app-1")})
    shard.buckets = mine
    c.rebucket(mine)
    assert str(c.deployments.label_selector).endswith(
        f"bucket in ({','.join(str(b) for b in sorted(mine))})"
    )
    assert not c.deployments.synced.is_set()  # until the new selection is listed
    queued = set()
    while (key := c.queue.get(timeout=0)) is not None:
        queued.add(key)
        c.queue.done(key)
    assert queued == {f"ns/{n}" for n in names if bucket_of("ns", n) in mine}
    assert {"ns/app-0", "ns/app-1"} <= queued


def test_without_sharding_a_replica_serves_every_myapp_and_writes_while_it_leads() -> None:
    c = offline_controller()
    assert c.deployments.label_selector == "app.kubernetes.io/managed-by=gitsync"
    assert c.serves(KEY)
    with c.working(KEY) as mine:
        assert mine
    c.is_leader = lambda: False
    assert c.serves(KEY)  # every MyApp is this instance's ...
    with c.working(KEY) as mine:
        assert not mine  # ... but a standby writes none
