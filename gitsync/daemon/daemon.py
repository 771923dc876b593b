"""``gitsync run``: the operator, the scheduled sync, leader election and HTTP.

One process: informers and workers (the operator) always; the Git sync job
when a repository is configured; both write only while this replica leads.
HTTP on one port (:mod:`gitsync.daemon.httpserver`), routed by :mod:`gitsync.daemon.routes`:
/healthz, /readyz, /metrics, /hooks/git, and the drift page (:mod:`gitsync.daemon.ui`).
"""

from __future__ import annotations

import datetime as dt
import functools
import logging
import os
import signal
import socket
import sys
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import FrameType
from typing import Final

from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.schedulers.background import BackgroundScheduler

from gitsync import __version__
from gitsync.daemon import metrics as metricslib
from gitsync.daemon import page as pagelib
from gitsync.daemon import webhook
from gitsync.daemon.heap import Heap, malloc_bytes
from gitsync.daemon.heaptrace import HeapTrace
from gitsync.daemon.hosts import AllowedHosts
from gitsync.daemon.httpserver import Limits, Server
from gitsync.daemon.notification import Trigger
from gitsync.daemon.routes import Routes, SyncRequest
from gitsync.daemon.ui import DriftPage
from gitsync.engine.changeset import ChangeSet
from gitsync.errors import ConfigError, GitsyncError
from gitsync.gitops.sync import Syncer
from gitsync.kube.events import EventType
from gitsync.kube.holders import WATCH_ANNOTATION
from gitsync.kube.informer import BEHIND_SECONDS
from gitsync.kube.leader import LeaderElector
from gitsync.kube.members import Membership
from gitsync.model import fleet
from gitsync.model import window as windowlib
from gitsync.model.api import Obj, key_of
from gitsync.model.compact import SHARED
from gitsync.model.myapp_status import now
from gitsync.model.order import Wait
from gitsync.model.rollout import ROLLED_BACK, ROLLOUT_FAILED
from gitsync.reconcile.controller import Controller
from gitsync.threads import THREADS

log = logging.getLogger(__name__)
JOB_ID = "sync"
#: the executor of the sync job: one thread, so that passes run one after another
SYNC_EXECUTOR = "sync"
#: the one-off job that runs a pass when a sync window opens or closes
WINDOW_JOB_ID = "window"
#: how long after a window's edge that pass runs: it then finds the window as it now is
WINDOW_SLACK = dt.timedelta(seconds=1)
#: how long stop() waits for a deferred sync request already firing (one Lease update)
LATER_JOIN_TIMEOUT = 10.0
#: how long shutdown waits for each thread run() started: the leader's last step (its
#: calls have the renew deadline, 10 s by default), the HTTP loop's last answers
THREAD_JOIN_TIMEOUT = 15.0
#: how long a pass waits for the caches' first list before it is postponed (and asked
#: for again at once: the wait goes on, a shutdown can come between)
SYNCED_WAIT = 60.0


@dataclass(frozen=True)
class DaemonOptions:
    listen: str = "0.0.0.0:8080"
    interval: float = 60.0
    jitter: float = 5.0
    leader_elect: bool = True
    lease_namespace: str = "default"
    lease_name: str = "gitsync-leader"
    #: the one namespace the controller watches ("" all), said on the Leases: uninstall,
    #: scoped to a namespace, then knows whether this daemon may take its Deployments back
    watch_namespace: str = ""
    webhook_secret: bytes = b""
    #: webhook-triggered syncs: ``webhook_burst`` at once, then ``webhook_rate`` per second
    webhook_rate: float = 1.0
    webhook_burst: int = 3
    #: seconds a client has to send a whole request (headers and body)
    http_request_timeout: float = 10.0
    http_max_connections: int = 256
    #: the read-only drift page at / and /api/v1/apps
    ui: bool = True
    #: Host names the page answers besides loopback and the address it was reached at
    ui_allowed_hosts: tuple[str, ...] = ()
    #: share the MyApps among the replicas by buckets, each a member Lease
    sharding: bool = False


#: what holds a MyApp's changes from Git back (the gitsync_held series)
HOLDS: Final = ("suspend", "rollback", "dependency", "window")
#: what a MyApp's change waits for (the gitsync_waiting series, read at each scrape)
WAITS: Final = ("dependency", "window")
#: the Events of a failed rollout, and what gitsync did about it
ROLLOUT_RESULTS: Final = {ROLLED_BACK: "rolled_back", ROLLOUT_FAILED: "left"}


def waiting(waits: Mapping[str, Wait]) -> dict[str, float]:
    """How many MyApps' changes wait, by what for (each reason, 0 included)."""
    counts = dict.fromkeys(WAITS, 0.0)
    for w in waits.values():
        counts[w.hold] += 1
    return counts


class Daemon:
    def __init__(
        self,
        controller: Controller,
        syncer: Syncer | None,
        options: DaemonOptions,
        metrics: metricslib.Metrics | None = None,
    ) -> None:
        self.controller = controller
        self.syncer = syncer
        self.options = options
        self.metrics = metrics or metricslib.standard()
        self.metrics.set("gitsync_leader", 0)
        self.metrics.read_from("gitsync_api_requests_total", lambda: controller.kube.requests)
        self.metrics.read_from(
            "gitsync_events_dropped_total", lambda: {"": controller.events.dropped}
        )
        self.metrics.read_from("gitsync_waiting", lambda: waiting(controller.ledger.waits()))
        self.metrics.read_from("gitsync_myapps", lambda: fleet.states(self._served()))
        self.metrics.read_from(
            "gitsync_drift_since_timestamp_seconds", lambda: fleet.drifted_since(self._served())
        )
        self.metrics.read_from("gitsync_cache_silence_seconds", controller.silences)
        self.metrics.read_from("gitsync_cache_objects", controller.cache_sizes)
        self.metrics.read_from("gitsync_thread_crashes_total", lambda: dict(THREADS.crashed))
        self.metrics.read_from("gitsync_malloc_bytes", malloc_bytes)
        self.metrics.read_from("gitsync_python_blocks", lambda: {"": sys.getallocatedblocks()})
        self.metrics.read_from("gitsync_shared_nodes", lambda: {"": len(SHARED)})
        self.metrics.read_from(
            "gitsync_workqueue_depth", lambda: {"": float(len(controller.queue))}
        )
        controller.events.listeners.append(self._count_rollouts)
        self.stop_event = threading.Event()
        self.first_sync = threading.Event()
        #: why the next pass runs, when something asked for it (else the interval's poll)
        self._why: Trigger | None = None
        #: called after each pass with its change set and why it ran (notifications)
        self.pass_listeners: list[Callable[[ChangeSet, Trigger], None]] = []
        self._sync_lock = threading.Lock()
        self.heap = Heap()
        about = {WATCH_ANNOTATION: options.watch_namespace}
        self.leader: LeaderElector | None = None
        if options.leader_elect:
            identity = f"{socket.gethostname()}_{os.getpid()}"
            controller.kube.user_agent = f"gitsync/{__version__} ({identity})"
            self.leader = LeaderElector(
                controller.kube,
                options.lease_namespace,
                options.lease_name,
                identity,
                annotations=about,
            )
            controller.is_leader = self.leader.is_leader
            self.leader.on_sync_request = functools.partial(self.trigger, "webhook")
        self.membership: Membership | None = None
        if options.sharding:
            if self.leader is None:
                raise ConfigError("--sharding needs --leader-elect: one replica prunes")
            self.membership = Membership(
                controller.kube,
                options.lease_namespace,
                options.lease_name,
                identity,
                annotations=about,
            )
            controller.shard_by(self.membership)
            self.membership.on_change = self._on_buckets
            self.membership.on_sync_request = functools.partial(self.trigger, "member")
            self.membership.on_passes = self._on_passes
            if syncer is not None:
                syncer.shares = self.membership
            self._shard_metrics(self.membership)
        self.scheduler = BackgroundScheduler(
            timezone=dt.UTC, executors={SYNC_EXECUTOR: ThreadPoolExecutor(max_workers=1)}
        )
        try:
            receiver = webhook.Receiver(
                options.webhook_secret, options.webhook_rate, options.webhook_burst
            )
        except ValueError as e:
            raise ConfigError(f"--webhook-rate/--webhook-burst: {e}") from e
        #: the caches behind at the last readiness probe (what the log last said)
        self._behind: list[str] = []
        #: the threads run() starts (HTTP, leader), joined when it returns
        self._threads: list[threading.Thread] = []
        #: the deferred sync requests still waiting: stop() cancels every one
        self._later: set[threading.Timer] = set()
        self._later_lock = threading.Lock()
        replica_of = self.membership.replica_of if self.membership is not None else None
        page = None
        if options.ui:
            membership = self.membership
            page = DriftPage(
                controller,
                syncer,
                replica_of,
                # who serves each bucket: the page's JSON changes with it
                replicas=lambda: (
                    None if membership is None else frozenset(membership.holders.items())
                ),
            )
            self.pass_listeners.append(self._to_history(page))
        self.routes = Routes(self, receiver, page, AllowedHosts(options.ui_allowed_hosts))
        limits = Limits(
            request_timeout=options.http_request_timeout,
            max_connections=options.http_max_connections,
            max_body=webhook.MAX_BODY,
        )
        try:
            self.http = Server(
                _address(options.listen),
                self.routes.handle,
                limits,
                self.metrics,
                inline=Routes.inline,
                urgent=Routes.urgent,
            )
        except (OSError, ValueError) as e:
            raise ConfigError(f"cannot listen on {options.listen!r}: {e}") from e

    # --- lifecycle ---------------------------------------------------------------

    def run(self) -> int:
        """Serve until :meth:`stop`; every thread started here, and APScheduler's, is
        stopped and joined before it returns."""
        self._signals()
        THREADS.stopping.clear()
        self._start("http", self.http.serve_forever)
        log.info("listening on %s:%d", *self.http.server_address[:2])
        self.controller.start()
        if self.leader is None:
            # no election: this replica leads from the start, and the schedule's first
            # run (now) is its first pass; a trigger would queue a second one behind it
            self._lead()
            self._why = Trigger("leading")
        self.schedule()
        serving: threading.Thread | None = None
        if self.membership is not None:
            serving = self._start("member", functools.partial(self.membership.run, self.stop_event))
        leading: threading.Thread | None = None
        if self.leader is not None:
            leader = self.leader
            leading = self._start(
                "leader",
                functools.partial(
                    leader.run, self.stop_event, self._on_leading, self._on_stopped_leading
                ),
            )
        # wake up now and then: a signal delivered to another thread only runs its
        # Python handler when the main thread next runs, and a bare wait() never does
        while not self.stop_event.wait(0.5):
            pass
        log.info("shutting down")
        # from now on a thread that crashes stays ended: its component is being stopped
        THREADS.stopping.set()
        # wait=True: the sync in progress finishes its current object, and the
        # scheduler's thread and the sync executor's are joined
        self.scheduler.shutdown(wait=True)
        self.controller.stop()
        if self.leader is not None:
            if leading is not None:
                # its last renewal done, release is the last word on the Lease
                leading.join(THREAD_JOIN_TIMEOUT)
            # only now: the last write is done, so a standby cannot write alongside us
            self.leader.release()
        if self.membership is not None:
            if serving is not None:
                serving.join(THREAD_JOIN_TIMEOUT)
            # the workers are stopped: the buckets go to the others at their next step
            self.membership.release()
        self.http.shutdown()
        for t in self._threads:
            t.join(THREAD_JOIN_TIMEOUT)
            if t.is_alive():
                log.warning("thread %s did not stop", t.name)
        return 0

    def _start(self, name: str, target: Callable[[], object]) -> threading.Thread:
        thread = THREADS.start(name, target)
        self._threads.append(thread)
        return thread

    def stop(self) -> None:
        self.stop_event.set()
        self._cancel_later()
        if self.syncer is not None:
            self.syncer.cancel.set()

    def schedule(self) -> None:
        """Start the scheduler, with the sync job (first run now) when there is a source.

        "Sync now" (:meth:`trigger`) moves the job's next run to now. A pass that runs
        may have fetched before the push that asks, so the request must give one more
        pass after it, never one alongside it.
        """
        if self.syncer is not None:
            # APScheduler, kept for what these arguments give without timer code of ours
            # (a loop of our own would be an Event and a wait: short, but ours to test):
            # - an executor of one thread and max_instances=2: one pass runs, one more
            #   waits, none alongside; a request while one waits is that one's
            #   (APScheduler logs "maximum number of running instances reached (2)")
            # - coalesce: run times that came due while a pass ran are one run, not a burst
            # - jitter: replicas and instances polling one repository drift apart
            # - misfire_grace_time=None: the waiting pass runs however long the one
            #   before it took. A bound (the default is 1 s) drops it as "missed" once
            #   that pass outlasts the bound, and must be whole seconds over 0, which
            #   int(--interval) under 1 is not
            self.scheduler.add_job(
                self.sync_once,
                "interval",
                seconds=self.options.interval,
                jitter=self.options.jitter,
                id=JOB_ID,
                executor=SYNC_EXECUTOR,
                max_instances=2,
                coalesce=True,
                misfire_grace_time=None,
                next_run_time=dt.datetime.now(dt.UTC),
            )
            self._at_next_window_edge()
        self.scheduler.start()

    def _at_next_window_edge(self) -> None:
        """Have a pass run when the next sync window opens or closes (catch-up): a change
        a window held back is applied the moment it opens, not at the next poll."""
        gate = self.controller.gate
        edge = windowlib.next_change(gate.windows.windows, gate.now())
        if edge is None:
            return
        self.scheduler.add_job(
            self.trigger,
            "date",
            args=("window",),
            run_date=edge + WINDOW_SLACK,
            id=WINDOW_JOB_ID,
            replace_existing=True,
            misfire_grace_time=None,
        )
        log.debug("next sync window edge at %s", edge.isoformat())

    def trigger(self, why: str = "manual", delivery: str = "") -> None:
        """Run the sync job now, and say why (see :class:`Trigger`)."""
        if self.syncer is None:
            return
        self._why = Trigger(why, delivery)
        self._run_now()

    def _run_now(self) -> None:
        """The sync job's next run moved to now: after the pass that runs, if one does."""
        try:
            self.scheduler.modify_job(JOB_ID, next_run_time=dt.datetime.now(dt.UTC))
        except LookupError:
            log.warning("sync job not scheduled yet")

    def _signals(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return

        def on_term(_sig: int, _frame: FrameType | None) -> None:
            self.stop()

        def on_hup(_sig: int, _frame: FrameType | None) -> None:
            log.info("SIGHUP: syncing now")
            self.trigger("signal")

        signal.signal(signal.SIGTERM, on_term)
        signal.signal(signal.SIGINT, on_term)
        signal.signal(signal.SIGHUP, on_hup)
        trace = HeapTrace.from_env()
        if trace is not None:

            def on_usr2(_sig: int, _frame: FrameType | None) -> None:
                try:
                    trace.dump()
                except OSError as e:
                    log.warning("cannot write a heap snapshot: %s", e)

            signal.signal(signal.SIGUSR2, on_usr2)

    def _on_leading(self) -> None:
        self._lead()
        self.trigger("leading")

    def _lead(self) -> None:
        self.metrics.set("gitsync_leader", 1)
        self.controller.resync()

    def _count_rollouts(
        self, _obj: Obj, _type: EventType, reason: str, _message: str, _details: Obj | None
    ) -> None:
        """An :class:`~gitsync.kube.events.EventRecorder` listener: a failed rollout is
        recorded once, as its Event (RolledBack or RolloutFailed)."""
        if (result := ROLLOUT_RESULTS.get(reason)) is not None:
            self.metrics.inc("gitsync_rollouts_failed_total", result=result)

    def _on_buckets(self, buckets: frozenset[int]) -> None:
        """The buckets served changed: cache their Deployments, look at their MyApps,
        and run a pass, which applies what Git declares for the MyApps taken over."""
        self.controller.rebucket(buckets)
        self.trigger("buckets")

    def _on_passes(self) -> None:
        """Another member's pass changed: the leader records the instance's sum again (on
        the scheduler's threads: the member's stepping thread sends no request)."""
        if self.syncer is not None and self.is_leader():
            self.scheduler.add_job(self.syncer.record_parts)

    def _shard_metrics(self, membership: Membership) -> None:
        me = membership.identity
        self.metrics.read_from(
            "gitsync_shard_buckets", lambda: {me: float(len(membership.serving()))}
        )
        self.metrics.read_from(
            "gitsync_shard_myapps",
            lambda: {
                me: float(
                    sum(
                        1
                        for o in self.controller.myapps.items()
                        if self.controller.serves(key_of(o))
                    )
                )
            },
        )
        self.metrics.read_from(
            "gitsync_shard_handovers_total", lambda: {me: float(membership.handovers)}
        )

    def _served(self) -> list[Obj]:
        """The MyApps this replica answers for in its metrics: its buckets' when sharded,
        all on the leader, none on a standby (so a sum over replicas counts each once)."""
        if self.controller.sharded:
            return [o for o in self.controller.myapps.items() if self.controller.serves(key_of(o))]
        return self.controller.myapps.items() if self.is_leader() else []

    def _to_history(self, page: DriftPage) -> Callable[[ChangeSet, Trigger], None]:
        def record(changes: ChangeSet, why: Trigger) -> None:
            drifted = int(fleet.states(self._served())["drifted"])
            entry = pagelib.pass_entry(changes, why.reason, now(), drifted, why.delivery)
            page.record(entry)

        return record

    def _on_stopped_leading(self) -> None:
        self.metrics.set("gitsync_leader", 0)

    def is_leader(self) -> bool:
        return self.leader is None or self.leader.is_leader()

    # --- the sync job ------------------------------------------------------------

    def sync_once(self) -> None:
        try:
            self._sync_pass()
        finally:
            # leader or not, what the caches hold now is kept off the collector
            self.heap.settle()

    def _sync_pass(self) -> None:
        if self.syncer is None or self.stop_event.is_set():
            return
        if not self.is_leader() and self.membership is None:
            return  # with sharding, every member runs passes: each applies its buckets'
        if self.membership is not None and not self.membership.settled.is_set():
            # its buckets are not known yet: a pass now would apply nothing and count as
            # the first sync (ready); taking its buckets brings the pass (_on_buckets)
            log.debug("sync postponed: this member's buckets are not settled yet")
            return
        if not self.controller.wait_synced(SYNCED_WAIT):
            # looked at again at once, not at the next poll: what asked for the pass
            # (the start, a push) is still waiting, its reason kept for the pass
            log.warning("caches not synced yet; sync postponed")
            self._run_now()
            return
        # scheduled before the pass: a pass that fails still leaves the next edge's pass
        self._at_next_window_edge()
        why, self._why = self._why or Trigger("poll"), None
        with self._sync_lock:
            try:
                result = self.syncer.run()
            except GitsyncError as e:
                log.error("sync failed: %s", e)
                self.metrics.inc("gitsync_sync_total", result="failure")
                return
            except Exception:
                # a bug in one pass must not stop the schedule
                log.exception("sync crashed")
                self.metrics.inc("gitsync_sync_total", result="failure")
                return
        m = self.metrics
        m.inc("gitsync_sync_total", result="success" if result.ok else "failure")
        if self.syncer.incremental:
            m.inc("gitsync_sync_incremental_total")
        m.observe("gitsync_sync_duration_seconds", result.seconds)
        m.observe("gitsync_git_fetch_duration_seconds", result.fetch_seconds)
        counts = result.counts()
        for action in ("created", "configured", "unchanged", "pruned", "failed"):
            m.set("gitsync_objects", counts[action], action=action)
        held = result.held()
        for hold in HOLDS:
            m.set("gitsync_held", sum(1 for c in held if c.hold == hold), reason=hold)
        if result.prune_skipped:
            m.inc("gitsync_prune_skipped_total")
        if self.syncer.pins is not None:  # (None: they could not be read; as before)
            m.set("gitsync_pinned", int(self.syncer.pins.instance is not None), scope="instance")
            m.set("gitsync_pinned", len(self.syncer.pins.apps), scope="myapp")
        if result.rejection is not None:
            m.inc("gitsync_verification_failures_total", reason=result.rejection.reason)
        if result.ok:
            m.set("gitsync_last_success_timestamp_seconds", dt.datetime.now(dt.UTC).timestamp())
        log.info(
            "sync %s at %s%s: %s",
            "succeeded" if result.ok else "failed",
            result.revision or "no revision",
            " (what the commit changed)" if self.syncer.incremental else "",
            result.summary(),
        )
        self.first_sync.set()
        for listener in self.pass_listeners:
            try:
                listener(result, why)
            except Exception:
                log.exception("a pass listener crashed")  # never the schedule's end

    # --- asked by the HTTP routes ---------------------------------------------------

    def alive(self) -> bool:
        """False once a thread crashed too often to be started again (/healthz; the
        thread's end was logged when it came, not at every probe)."""
        return not THREADS.failed()

    def ready(self) -> bool:
        if not self.controller.myapps.synced.is_set():
            return False
        if not self.alive():
            return False
        behind = self.controller.caches_behind()
        if behind != self._behind:
            # said once as each episode begins and ends, not at every probe
            if behind:
                log.warning(
                    "not ready: the %s cache has heard nothing from the API server for over %.0fs",
                    " and ".join(behind),
                    BEHIND_SECONDS,
                )
            else:
                log.info("the caches hear from the API server again")
            self._behind = behind
        if behind:
            return False
        return self.syncer is None or self.first_sync.is_set() or not self.is_leader()

    def request_sync_later(self, delay: float, delivery: str = "") -> None:
        def deferred() -> None:
            try:
                if not self.stop_event.is_set() and self.request_sync(delivery) == "failed":
                    log.warning(
                        "a push delivered to this standby could not be passed to the leader"
                    )
            finally:
                with self._later_lock:
                    self._later.discard(timer)

        # the rate limit answers "pending" while one waits, but a request may still come
        # while an earlier timer is firing: each is kept until it has run or is cancelled
        with self._later_lock:
            if self.stop_event.is_set():
                return
            timer = threading.Timer(delay, deferred)
            timer.daemon = True
            self._later.add(timer)
            timer.start()

    def _cancel_later(self) -> None:
        with self._later_lock:
            timers = list(self._later)
            self._later.clear()
        for timer in timers:
            timer.cancel()
        for timer in timers:
            if timer is not threading.current_thread():
                timer.join(LATER_JOIN_TIMEOUT)

    def request_sync(self, delivery: str = "") -> SyncRequest:
        if self.membership is not None:
            # every member runs a pass for its buckets: this one now, the others when
            # they read the request in its Lease (within a retry period)
            self.membership.request_sync()
            self.trigger("webhook", delivery)
            return "accepted"
        if self.leader is None or self.is_leader():
            self.trigger("webhook", delivery)
            return "accepted"
        # a standby got it (the Service spreads deliveries): pass it on through the Lease
        return "forwarded" if self.leader.request_sync() else "failed"


def _address(listen: str) -> tuple[str, int]:
    host, _, port = listen.rpartition(":")
    return (host or "0.0.0.0", int(port))  # noqa: S104
