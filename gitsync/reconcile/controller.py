"""The MyApp operator's loop: informers on MyApps and their Deployments, one work
queue, N workers, and per-key locks (in :class:`~gitsync.reconcile.reconciler.Reconciler`).

What one reconcile does is in :mod:`gitsync.reconcile.reconciler`; this module wires the real
client to it and schedules keys: a watch event enqueues the key, a worker takes it
and turns the reconcile's :class:`~gitsync.reconcile.result.Result` into the queue's
requeue-after, backoff or forget.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Protocol

from gitsync import threads
from gitsync.engine.planner import Settings, forget_stamps
from gitsync.kube.apply import Applier
from gitsync.kube.client import Kube, path_of, resource_path
from gitsync.kube.events import EventRecorder
from gitsync.kube.informer import Informer
from gitsync.kube.interfaces import RecordStore
from gitsync.model.api import (
    BUCKET_LABEL,
    DEFAULT_FORCE_MANAGERS,
    FIELD_MANAGER,
    KIND,
    MANAGED_BY,
    MANAGED_BY_LABEL,
    DriftPolicy,
    Obj,
    key_of,
)
from gitsync.model.compact import cached
from gitsync.model.myapp_status import SyncInfo
from gitsync.model.rollout import RollbackPolicy
from gitsync.reconcile.gate import Gate
from gitsync.reconcile.ledger import Declared, Ledger
from gitsync.reconcile.reconciler import Reconciler
from gitsync.reconcile.result import Result, foreign_deployment
from gitsync.reconcile.workqueue import WorkQueue

__all__ = ["Controller", "ControllerConfig", "Result", "foreign_deployment"]

log = logging.getLogger(__name__)


class Shard(Protocol):
    """The buckets this replica serves (a :class:`~gitsync.kube.members.Membership`)."""

    def serving(self) -> frozenset[int]: ...

    def bucket(self, key: str) -> int: ...

    def working(self, key: str) -> AbstractContextManager[bool]: ...


def deployment_selector(buckets: Iterable[int] | None) -> str:
    """The Deployments this replica caches: gitsync's, and with sharding only those of
    the buckets it serves (none: a bucket no Deployment carries)."""
    ours = f"{MANAGED_BY_LABEL}={MANAGED_BY}"
    if buckets is None:
        return ours
    values = ",".join(str(b) for b in sorted(buckets)) or "none"
    return f"{ours},{BUCKET_LABEL} in ({values})"


@dataclass(frozen=True)
class ControllerConfig:
    workers: int = 4
    default_policy: DriftPolicy = "correct"
    force_managers: tuple[str, ...] = DEFAULT_FORCE_MANAGERS
    field_manager: str = FIELD_MANAGER
    #: for MyApps without spec.rollback
    rollback: RollbackPolicy = "off"
    namespace: str | None = None  # None: all namespaces


def changed(obj: Obj) -> bool:
    """Whether what ``obj`` should be changed after its status last said it was seen
    (``metadata.generation`` ahead of ``status.observedGeneration``, or no status yet):
    an edit of a MyApp or a Deployment, to take back or to render, and not news."""
    generation = obj.get("metadata", {}).get("generation")
    observed = (obj.get("status") or {}).get("observedGeneration")
    return not isinstance(observed, int) or not isinstance(generation, int) or observed < generation


class Controller:
    def __init__(
        self,
        kube: Kube,
        config: ControllerConfig = ControllerConfig(),
        *,
        events: EventRecorder | None = None,
        is_leader: Callable[[], bool] = lambda: True,
    ) -> None:
        self.kube = kube
        self.config = config
        self.applier = Applier(kube, config.field_manager)
        self.settings = Settings(
            config.default_policy, config.force_managers, config.field_manager, config.rollback
        )
        self.events = events or EventRecorder(kube)
        self.is_leader = is_leader
        self.queue = WorkQueue()
        ns = config.namespace
        self.myapps = Informer(kube, path_of(KIND, ns or ""), name="myapps", transform=cached)
        #: with sharding, the buckets of MyApps this replica serves (None: every MyApp)
        self.shard: Shard | None = None
        self.deployments = Informer(
            kube,
            resource_path("apps/v1", "deployments", ns),
            label_selector=deployment_selector(None),
            name="deployments",
            transform=cached,
        )
        #: what is remembered of each MyApp between reconciles (the reconciler writes it)
        self.ledger = Ledger()
        self.reconciler = Reconciler(
            self.myapps,
            self.deployments,
            kube,
            self.applier,
            self.events,
            self.settings,
            self.ledger,
        )
        self._threads: list[threading.Thread] = []
        #: MyApps taken from the queue while the Deployments were being listed (at start,
        #: or for new buckets): put back the moment that list is in. Retried on a timer
        #: instead, every key went round the queue again and again for as long as the
        #: list took, and both grow with N
        self._parked: set[str] = set()
        self._parked_lock = threading.Lock()
        self.myapps.add_handler(self._on_myapp)
        self.deployments.add_handler(self._on_deployment)
        self.deployments.add_synced_handler(self._unpark)

    @property
    def gate(self) -> Gate:
        """Whether a change may be applied now (sync windows, dependencies)."""
        return self.reconciler.gate

    def keep_records(self, records: RecordStore) -> None:
        """Keep gitsync's own records (what a rollback needs) in ``records``, before the
        first reconcile."""
        self.reconciler.records = records

    @property
    def reconciles(self) -> int:
        return self.reconciler.reconciles

    def reconcile(
        self, key: str, declared: Declared | None = None, *, deployment_absent: bool = False
    ) -> Result:
        """One reconcile outside the queue (the sync pass's), under the key's lock."""
        return self.reconciler.reconcile(key, declared, deployment_absent=deployment_absent)

    def load_failed(self, key: str, sync: SyncInfo) -> Result:
        """The sync pass's word that ``key``'s file no longer loads (under the key's lock)."""
        return self.reconciler.load_failed(key, sync)

    def shard_by(self, shard: Shard) -> None:
        """Serve only the MyApps of the buckets ``shard`` serves (before :meth:`start`);
        :meth:`rebucket` follows each change of them."""
        self.shard = shard
        self.deployments.reselect(deployment_selector(shard.serving()))

    def rebucket(self, buckets: frozenset[int]) -> None:
        """The buckets served changed: cache their Deployments alone (listed anew), and
        look at every MyApp now served (level-based: one that stayed costs no write)."""
        assert self.shard is not None
        self.deployments.reselect(deployment_selector(buckets))
        for obj in self.myapps.items():
            key = key_of(obj)
            if self.shard.bucket(key) in buckets:
                self.queue.add(key)

    @property
    def sharded(self) -> bool:
        """Whether this replica serves some buckets only (``--sharding``)."""
        return self.shard is not None

    def serves(self, key: str) -> bool:
        """Whether ``key`` is this replica's to serve (its bucket's, with sharding; without,
        every MyApp is); whether it may write now is :meth:`working`'s to say."""
        if self.shard is None:
            return True
        return self.shard.bucket(key) in self.shard.serving()

    def working(self, key: str) -> AbstractContextManager[bool]:
        """Whether this replica may write for ``key`` now; with sharding, its bucket is not
        given up while the block runs."""
        if self.shard is None:
            return contextlib.nullcontext(self.is_leader())
        return self.shard.working(key)

    def requeue(self, key: str, after: float) -> None:
        """Have a worker take ``key`` again in ``after`` seconds (or sooner, on an event)."""
        self.queue.add_after(key, after)

    @property
    def workers_started(self) -> bool:
        """Whether workers take keys from the queue (a sync pass's failures are handed to
        them); not in ``gitsync sync``."""
        return bool(self._threads)

    def retry(self, key: str, result: Result) -> None:
        """Have a worker try ``key`` again after ``result``'s failure (a sync pass's):
        after the server's hint when throttled, else after the key's backoff (which
        grows with each failure in a row, until a success forgets it). Nothing when no
        worker runs (``gitsync sync``: the pass's failure is its result)."""
        if self.workers_started:
            self._backoff(key, result)

    def _backoff(self, key: str, result: Result) -> None:
        if result.requeue_after is not None:
            self.queue.add_after(key, result.requeue_after)
            return
        delay = self.queue.add_rate_limited(key)
        log.warning("reconcile failed: %s; retry in %.1fs", result.error, delay, extra={"key": key})

    # --- lifecycle -----------------------------------------------------------

    def start(self) -> None:
        self.myapps.start()
        self.deployments.start()
        self.start_workers()

    def start_workers(self) -> None:
        # while workers run, a status held back is theirs to write (Result.requeue_after)
        self.reconciler.defer_status = True
        for i in range(self.config.workers):
            self._threads.append(threads.start(f"worker-{i}", self._worker))

    def stop(self, timeout: float = 10.0) -> None:
        self.queue.shutdown()
        self.myapps.stop()
        self.deployments.stop()
        deadline = time.monotonic() + timeout
        for t in self._threads:
            t.join(max(0.0, deadline - time.monotonic()))
        # the workers' last Events, written before the process may end (bounded)
        self.events.close()

    def wait_synced(self, timeout: float = 60.0) -> bool:
        return self.myapps.wait_synced(timeout) and self.deployments.wait_synced(timeout)

    def caches_behind(self) -> list[str]:
        """The informers whose cache may miss changes: synced once, and silent since for
        longer than a live watch ever is (see :data:`~gitsync.kube.informer.BEHIND_SECONDS`)."""
        return [i.name for i in (self.myapps, self.deployments) if i.behind()]

    def silences(self) -> dict[str, float]:
        """Seconds since the server last spoke to each informer (the metric)."""
        return {i.name: i.silent_for() for i in (self.myapps, self.deployments)}

    def cache_sizes(self) -> dict[str, float]:
        """Objects in each informer's cache (the metric; a leak check compares it with
        the server's count)."""
        return {i.name: float(len(i)) for i in (self.myapps, self.deployments)}

    def wait_idle(self, timeout: float = 60.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            # idle: nothing queued, and no new MyApp's first status held back
            if self.queue.idle() and not self.ledger.awaiting_status():
                return True
            time.sleep(0.05)
        return False

    def resync(self) -> None:
        """Enqueue every MyApp (on becoming leader, or after a sync)."""
        for obj in self.myapps.items():
            self.queue.add(key_of(obj))

    # --- queue ---------------------------------------------------------------

    def _on_myapp(self, _type: str, obj: Obj) -> None:
        key = key_of(obj)
        self.queue.add(key, urgent=changed(obj))
        # the MyApps whose change waits on this one are looked at again at once: its
        # status saying Available is what they wait for (not the next poll)
        for waiter in self.ledger.waiters(key):
            self.queue.add(waiter, urgent=True)

    def _on_deployment(self, type_: str, obj: Obj) -> None:
        # a Deployment edited (scaled, its template changed) or deleted goes first; its
        # rollout's progress is news for status, after every correction waiting
        urgent = type_ == "DELETED" or changed(obj)
        for ref in obj.get("metadata", {}).get("ownerReferences") or []:
            if ref.get("kind") == KIND and ref.get("controller"):
                key = f"{obj['metadata'].get('namespace', '')}/{ref['name']}"
                self.queue.add(key, urgent=urgent)
                # its rollout done is what the MyApps waiting on it wait for
                for waiter in self.ledger.waiters(key):
                    self.queue.add(waiter, urgent=True)

    def _worker(self) -> None:
        while True:
            key = self.queue.get()
            if key is None:
                return
            try:
                self._process(key)
            finally:
                self.queue.done(key)

    def _process(self, key: str) -> None:
        with self.working(key) as mine:
            if not mine:
                # a standby keeps its caches warm and writes nothing; another replica's
                # MyApp is that replica's (this one looks again when its buckets change)
                if self.myapps.get(key) is None:
                    # gone: no reconcile here will find it so, and what this replica
                    # remembers of it from when it last served it would stay for good
                    # (Git declares it again to whichever replica serves it next)
                    self.ledger.forget(key)
                    forget_stamps(*key.split("/", 1))
                return
            if not self._park(key):
                self._reconcile(key)

    def _park(self, key: str) -> bool:
        """Set ``key`` aside while the Deployments are being listed: its Deployment may be
        on its way into the cache. Whether it was."""
        with self._parked_lock:
            # under the lock that _unpark empties the set with: a key parked after the
            # list set ``synced`` is not parked at all, one parked before it is put back
            if self.deployments.synced.is_set():
                return False
            self._parked.add(key)
            return True

    def _unpark(self) -> None:
        with self._parked_lock:
            parked, self._parked = self._parked, set()
        for key in parked:
            self.queue.add(key)

    def _reconcile(self, key: str) -> None:
        try:
            result = self.reconciler.reconcile(key)
        except Exception:
            # a bug must not end the worker (the operator would stop without a word)
            delay = self.queue.add_rate_limited(key)
            log.exception("reconcile crashed; retry in %.1fs", delay, extra={"key": key})
            return
        if result.requeue_after is not None:
            self.queue.add_after(key, result.requeue_after)
        elif result.retry:
            self._backoff(key, result)
        else:
            # done, or failed for good (recorded in status): a change brings it back
            self.queue.forget(key)
