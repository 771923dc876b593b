"""The sync job's schedule: "sync now" while a pass runs gives one more pass after it.

No cluster: the daemon gets a stand-in controller and a syncer whose passes wait until
the test lets each one finish; the real APScheduler runs them.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import threading
import time
from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import cast

import pytest

from gitsync.daemon.daemon import WINDOW_JOB_ID, Daemon, DaemonOptions
from gitsync.engine.changeset import Change, ChangeSet
from gitsync.gitops.sync import Syncer
from gitsync.model.window import Windows, parse_all
from gitsync.reconcile.controller import Controller
from gitsync.reconcile.ledger import Ledger


class GatedSyncer:
    """Each pass blocks until :meth:`finish_one`; counts passes and overlaps."""

    def __init__(self) -> None:
        self.cancel = threading.Event()
        self.pins = None  # (not known: as when they cannot be read)
        self.incremental = False
        self.started = 0
        self.running = 0
        self.most_at_once = 0
        self._lock = threading.Lock()
        self._gate = threading.Semaphore(0)

    def run(self) -> ChangeSet:
        with self._lock:
            self.started += 1
            self.running += 1
            self.most_at_once = max(self.most_at_once, self.running)
        self._gate.acquire()
        with self._lock:
            self.running -= 1
        return ChangeSet(revision="abc")

    def finish_one(self) -> None:
        self._gate.release()


def wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 10
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


def _controller(
    windows: Windows | None = None,
    now: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
    **more: object,
) -> SimpleNamespace:
    """A stand-in for the controller: caches that hold nothing, no sync windows (or
    ``windows``), caches synced at once; ``more`` adds to it or replaces."""
    return SimpleNamespace(
        **{
            "myapps": SimpleNamespace(synced=threading.Event(), items=list),
            "kube": SimpleNamespace(requests={}),
            "queue": [],
            "sharded": False,
            "ledger": Ledger(),
            "gate": SimpleNamespace(windows=windows or Windows(), now=now),
            "events": SimpleNamespace(dropped=0, listeners=[]),
            "silences": dict,
            "cache_sizes": dict,
            "caches_behind": list,
            "wait_synced": lambda _timeout: True,
            **more,
        }
    )


@pytest.fixture
def scheduled() -> Iterator[tuple[Daemon, GatedSyncer]]:
    fake = _controller()
    syncer = GatedSyncer()
    options = DaemonOptions(listen="127.0.0.1:0", leader_elect=False, interval=3600, jitter=0)
    daemon = Daemon(cast(Controller, fake), cast(Syncer, syncer), options)
    daemon.schedule()  # the first pass starts now
    yield daemon, syncer
    daemon.stop()
    for _ in range(5):  # let any pass still waiting through, so that shutdown returns
        syncer.finish_one()
    daemon.scheduler.shutdown(wait=True)
    daemon.http.server_close()


def test_requests_during_a_pass_give_one_pass_after_it_never_one_alongside(
    scheduled: tuple[Daemon, GatedSyncer],
) -> None:
    daemon, syncer = scheduled
    wait_for(lambda: syncer.started == 1, "the first pass")
    for _ in range(3):  # three pushes during the pass
        daemon.trigger()
        time.sleep(0.1)
    assert syncer.started == 1  # nothing alongside the running pass
    syncer.finish_one()
    wait_for(lambda: syncer.started == 2, "the pass the pushes asked for")
    # a push during that pass: it may have fetched before the push, so one more
    daemon.trigger()
    syncer.finish_one()
    wait_for(lambda: syncer.started == 3, "the pass after the second")
    syncer.finish_one()
    wait_for(lambda: syncer.running == 0, "the third pass to end")
    time.sleep(0.5)  # (room for a pass that should not come)
    assert (syncer.started, syncer.most_at_once) == (3, 1)
    # idle: a request runs at once
    daemon.trigger()
    wait_for(lambda: syncer.started == 4, "a pass when idle")
    syncer.finish_one()


def test_stop_cancels_every_deferred_sync_request(scheduled: tuple[Daemon, GatedSyncer]) -> None:
    """A standby defers pushes it got while rate-limited; each waits in a timer, and
    stop() must leave none behind to fire into a daemon that is gone."""
    daemon, _syncer = scheduled
    asked: list[str] = []

    def request_sync() -> str:
        asked.append("sync")
        return "accepted"

    daemon.request_sync = request_sync  # type: ignore[assignment,method-assign]
    before = set(threading.enumerate())
    for _ in range(3):
        daemon.request_sync_later(3600)
    timers = [
        t for t in threading.enumerate() if t not in before and isinstance(t, threading.Timer)
    ]
    assert len(timers) == 3
    daemon.stop()
    # cancelled and joined, not only the last one
    assert [t for t in timers if t.is_alive()] == []
    daemon.request_sync_later(0)  # a request after stop starts nothing
    started = [t for t in threading.enumerate() if t not in before and t not in timers]
    assert [t for t in started if isinstance(t, threading.Timer)] == []
    assert asked == []


class FakeLeader:
    """Leads at once; counts releases, and what ran after one."""

    def __init__(self) -> None:
        self.released = 0
        self.steps_after_release = 0

    def run(
        self, stop: threading.Event, on_started: Callable[[], None], _on_stopped: object
    ) -> None:
        on_started()
        while not stop.wait(0.05):
            pass
        time.sleep(0.2)  # a last step that outlasts stop: release must wait for it
        self.steps_after_release += self.released

    def is_leader(self) -> bool:
        return not self.released

    def release(self) -> None:
        self.released += 1

    def request_sync(self) -> bool:
        return True


def test_run_stops_and_joins_every_thread_it_starts() -> None:
    """HTTP and its workers, the leader, APScheduler's scheduler and sync executor, the
    controller's: each has an owner that stops and joins it, so none is left running
    after run() returns."""
    stopped: list[str] = []
    fake = _controller(
        start=lambda: None, resync=lambda: None, stop=lambda: stopped.append("controller")
    )
    syncer = GatedSyncer()
    options = DaemonOptions(listen="127.0.0.1:0", leader_elect=False, interval=3600, jitter=0)
    daemon = Daemon(cast(Controller, fake), cast(Syncer, syncer), options)
    leader = FakeLeader()
    daemon.leader = leader  # type: ignore[assignment]
    before = set(threading.enumerate())
    codes: list[int] = []
    runner = threading.Thread(target=lambda: codes.append(daemon.run()), name="test-run")
    runner.start()
    wait_for(lambda: syncer.started == 1, "the first pass")

    def started_names() -> set[str]:
        return {t.name for t in threading.enumerate() if t not in before and t is not runner}

    # (the scheduler may start the first pass before run() has started the leader)
    wait_for(lambda: {"http", "leader"} <= started_names(), "the HTTP and leader threads")
    started = started_names()
    assert any(n.startswith("http-") for n in started)
    assert len(started) >= 5, started  # and APScheduler's two
    daemon.stop()
    syncer.finish_one()
    runner.join(30)
    assert not runner.is_alive() and codes == [0]
    left = [t for t in threading.enumerate() if t not in before and t is not runner]
    assert left == []
    assert stopped == ["controller"]
    assert (leader.released, leader.steps_after_release) == (1, 0)


def _started(syncer: GatedSyncer, synced: list[bool]) -> tuple[Daemon, list[str]]:
    """A daemon without leader election, its caches synced as ``synced`` says at each
    wait for them (then always), its passes' reasons in the list."""
    fake = _controller(
        wait_synced=lambda _timeout: synced.pop(0) if synced else True,
        start=lambda: None,
        resync=lambda: None,
        stop=lambda: None,
    )
    options = DaemonOptions(listen="127.0.0.1:0", leader_elect=False, interval=3600, jitter=0)
    daemon = Daemon(cast(Controller, fake), cast(Syncer, syncer), options)
    whys: list[str] = []
    daemon.pass_listeners.append(lambda _result, why: whys.append(why.reason))
    return daemon, whys


@contextlib.contextmanager
def _running(daemon: Daemon, syncer: GatedSyncer) -> Iterator[None]:
    runner = threading.Thread(target=daemon.run, name="test-run")
    runner.start()
    try:
        yield
    finally:
        daemon.stop()
        for _ in range(5):
            syncer.finish_one()
        runner.join(30)
        assert not runner.is_alive()


def test_a_replica_without_election_starts_with_one_pass_for_leading() -> None:
    """It leads from the start: the schedule's first run is its first pass, with no
    second one queued behind it (a full pass over every MyApp, for nothing)."""
    syncer = GatedSyncer()
    daemon, whys = _started(syncer, [])
    with _running(daemon, syncer):
        wait_for(lambda: syncer.started == 1, "the first pass")
        syncer.finish_one()
        wait_for(lambda: whys == ["leading"], "the first pass to end")
        time.sleep(0.5)  # (room for a pass that should not come)
        assert (syncer.started, whys) == (1, ["leading"])
        assert daemon.metrics.get("gitsync_leader") == 1


def test_a_pass_the_caches_were_not_ready_for_is_asked_for_again_at_once() -> None:
    """Not at the next poll (an hour here): the start still waits for its pass."""
    syncer = GatedSyncer()
    synced = [False, False]
    daemon, whys = _started(syncer, synced)
    with _running(daemon, syncer):
        wait_for(lambda: syncer.started == 1, "the pass, once the caches are synced")
        assert synced == []  # not before: each "not synced" postponed it
        syncer.finish_one()
        wait_for(lambda: whys == ["leading"], "the pass to end, for the start")


class LaterLeader(FakeLeader):
    """Leads when the test says so (the schedule's first run finds it a standby)."""

    def __init__(self) -> None:
        super().__init__()
        self.go = threading.Event()
        self.leading = False

    def run(
        self, stop: threading.Event, on_started: Callable[[], None], _on_stopped: object
    ) -> None:
        while not self.go.wait(0.02):
            if stop.is_set():
                return
        self.leading = True
        on_started()
        stop.wait()

    def is_leader(self) -> bool:
        return self.leading and not self.released


def test_a_replica_that_becomes_leader_looks_at_every_myapp_and_runs_a_pass() -> None:
    syncer = GatedSyncer()
    resyncs: list[bool] = []
    daemon, whys = _started(syncer, [])
    daemon.controller.resync = lambda: resyncs.append(True)  # type: ignore[method-assign]
    leader = LaterLeader()
    daemon.leader = leader  # type: ignore[assignment]
    with _running(daemon, syncer):
        time.sleep(0.5)  # (the schedule's first run: a standby's, no pass)
        assert (syncer.started, resyncs) == (0, [])
        leader.go.set()
        wait_for(lambda: syncer.started == 1, "the pass for leading")
        assert resyncs == [True]
        assert daemon.metrics.get("gitsync_leader") == 1
        syncer.finish_one()
        wait_for(lambda: whys == ["leading"], "the pass to end")


def _daemon(syncer: GatedSyncer, interval: float) -> Daemon:
    fake = _controller()
    options = DaemonOptions(listen="127.0.0.1:0", leader_elect=False, interval=interval, jitter=0)
    return Daemon(cast(Controller, fake), cast(Syncer, syncer), options)


def _shut(daemon: Daemon, syncer: GatedSyncer) -> None:
    daemon.stop()
    for _ in range(5):
        syncer.finish_one()
    daemon.scheduler.shutdown(wait=True)
    daemon.http.server_close()


def test_a_request_waiting_behind_a_pass_longer_than_the_interval_runs_right_after_it() -> None:
    """Dropped as "missed" when it starts late, the push it stands for would wait for
    the next interval (here 1.5 s more) instead."""
    syncer = GatedSyncer()
    daemon = _daemon(syncer, interval=2)
    daemon.schedule()
    try:
        wait_for(lambda: syncer.started == 1, "the first pass")
        daemon.trigger()
        time.sleep(2.5)  # the pass outlasts the interval
        assert syncer.started == 1
        syncer.finish_one()
        deadline = time.monotonic() + 1.0
        while syncer.started < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert syncer.started == 2
    finally:
        _shut(daemon, syncer)


def test_an_interval_under_a_second_is_scheduled() -> None:
    syncer = GatedSyncer()
    daemon = _daemon(syncer, interval=0.5)
    daemon.schedule()
    try:
        wait_for(lambda: syncer.started == 1, "the first pass")
    finally:
        _shut(daemon, syncer)


def test_a_pass_sets_how_many_myapps_each_hold_keeps_from_git() -> None:
    held = [
        Change("MyApp/shop/a", "unchanged", reason="rolled back from main@sha1:1", hold="rollback"),
        Change("MyApp/shop/b", "unchanged", reason="rolled back from main@sha1:1", hold="rollback"),
        Change("MyApp/shop/c", "unchanged", reason="suspended", hold="suspend"),
        Change("MyApp/shop/d", "unchanged"),
        Change("MyApp/shop/e", "configured", reason="drift corrected"),
    ]
    fake = _controller()
    syncer = SimpleNamespace(run=lambda: ChangeSet(changes=held), pins=None, incremental=False)
    options = DaemonOptions(listen="127.0.0.1:0", leader_elect=False)
    daemon = Daemon(cast(Controller, fake), cast(Syncer, syncer), options)
    try:
        daemon.sync_once()
        m = daemon.metrics
        assert m.get("gitsync_held", reason="rollback") == 2
        assert m.get("gitsync_held", reason="suspend") == 1
        syncer.run = lambda: ChangeSet(changes=held[3:])
        daemon.sync_once()
        assert m.get("gitsync_held", reason="rollback") == 0
        assert 'gitsync_held{reason="rollback"} 0.0' in m.render()
    finally:
        daemon.http.server_close()


def test_a_pass_is_scheduled_a_second_after_each_window_edge() -> None:
    """Catch-up: what a window held is applied when it opens, not at the next poll."""
    night = parse_all(["deny 0 22 * * * 8h Europe/Berlin name=night"])
    clock = [dt.datetime(2027, 1, 4, 3, 0, tzinfo=dt.UTC)]  # 04:00 Berlin: closed
    fake = _controller(windows=Windows(night), now=lambda: clock[0])
    options = DaemonOptions(listen="127.0.0.1:0", leader_elect=False, interval=3600, jitter=0)
    daemon = Daemon(cast(Controller, fake), cast(Syncer, GatedSyncer()), options)
    daemon.scheduler.start(paused=True)  # as after schedule(), with nothing run
    daemon._at_next_window_edge()
    job = daemon.scheduler.get_job(WINDOW_JOB_ID)
    # the window closes at 06:00 Berlin (05:00 UTC): a pass one second later
    assert job is not None and job.trigger.run_date == dt.datetime(
        2027, 1, 4, 5, 0, 1, tzinfo=dt.UTC
    )
    assert job.func == daemon.trigger
    # after that, the next edge is when it closes again, 22:00 Berlin (21:00 UTC)
    clock[0] = dt.datetime(2027, 1, 4, 5, 0, 1, tzinfo=dt.UTC)
    daemon._at_next_window_edge()
    (job,) = [j for j in daemon.scheduler.get_jobs() if j.id == WINDOW_JOB_ID]
    assert job.trigger.run_date == dt.datetime(2027, 1, 4, 21, 0, 1, tzinfo=dt.UTC)
    daemon.scheduler.shutdown(wait=False)
    # no windows: no such job
    fake.gate = SimpleNamespace(windows=Windows(), now=lambda: clock[0])
    quiet = Daemon(cast(Controller, fake), cast(Syncer, GatedSyncer()), options)
    quiet._at_next_window_edge()
    assert quiet.scheduler.get_job(WINDOW_JOB_ID) is None
