"""The owner of the long-lived threads: a crash is started again, too many crashes fail
the process's probes, a normal end is not a crash, and stopping ends restarts."""

from __future__ import annotations

import threading

import pytest

from gitsync import threads
from gitsync.threads import Threads


@pytest.fixture(autouse=True)
def quick(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(threads, "BACKOFF_FIRST", 0.001)
    monkeypatch.setattr(threads, "BACKOFF_CAP", 0.002)


def test_a_crashed_thread_runs_again_and_is_counted() -> None:
    owner = Threads()
    runs: list[int] = []
    done = threading.Event()

    def target() -> None:
        runs.append(1)
        if len(runs) < 3:
            raise RuntimeError("boom")
        done.set()

    t = owner.start("worker-0", target)
    assert done.wait(5)
    t.join(5)
    assert len(runs) == 3
    assert owner.crashed == {"worker-0": 2}
    assert owner.failed() == []
    assert not t.is_alive() and t.name == "worker-0" and t.daemon


def test_crashing_too_often_leaves_it_ended_and_failed(caplog: pytest.LogCaptureFixture) -> None:
    owner = Threads()
    runs: list[int] = []

    def target() -> None:
        runs.append(1)
        raise RuntimeError("boom")

    owner.start("events", target).join(5)
    assert len(runs) == threads.MAX_CRASHES
    assert owner.failed() == ["events"]
    assert owner.crashed == {"events": threads.MAX_CRASHES}
    assert "thread events crashed 5 times" in caplog.text
    # a failed thread is kept when others start: readiness still reports it
    owner.start("other", lambda: None).join(5)
    assert owner.failed() == ["events"]


def test_crashes_spread_wider_than_the_window_never_fail_it() -> None:
    now = [0.0]
    owner = Threads(clock=lambda: now[0])
    runs: list[int] = []

    def target() -> None:
        runs.append(1)
        now[0] += threads.CRASH_WINDOW  # each crash a window after the one before
        if len(runs) < threads.MAX_CRASHES * 2:
            raise RuntimeError("boom")

    owner.start("informer-myapps", target).join(5)
    assert len(runs) == threads.MAX_CRASHES * 2
    assert owner.failed() == []


def test_a_normal_end_is_not_a_crash_and_is_forgotten() -> None:
    owner = Threads()
    owner.start("http", lambda: None).join(5)
    assert owner.crashed == {} and owner.failed() == [] and owner.running() == []


def test_while_stopping_a_crash_ends_the_thread_without_restart() -> None:
    owner = Threads()
    owner.stopping.set()
    runs: list[int] = []

    def target() -> None:
        runs.append(1)
        raise RuntimeError("boom")

    owner.start("leader", target).join(5)
    assert runs == [1] and owner.failed() == []


def test_join_waits_for_each_and_names_the_ones_left(caplog: pytest.LogCaptureFixture) -> None:
    owner = Threads()
    release = threading.Event()
    owner.start("stuck", lambda: release.wait(10))
    owner.start("quick", lambda: None)
    assert owner.join(0.2) == ["stuck"]
    assert owner.stopping.is_set()
    assert "threads still running at exit: stuck" in caplog.text
    release.set()
    assert owner.join(5) == []


class Waits:
    """Stands in for ``Threads.stopping``: records each backoff, never stops."""

    def __init__(self) -> None:
        self.waited: list[float] = []

    def wait(self, seconds: float) -> bool:
        self.waited.append(seconds)
        return False

    def is_set(self) -> bool:
        return False

    def set(self) -> None:
        pass


@pytest.mark.parametrize(
    ("cap", "waits"), [(30.0, [1.0, 2.0, 4.0, 8.0]), (3.0, [1.0, 2.0, 3.0, 3.0])]
)
def test_the_backoff_doubles_up_to_its_cap(
    monkeypatch: pytest.MonkeyPatch, cap: float, waits: list[float]
) -> None:
    monkeypatch.setattr(threads, "BACKOFF_FIRST", 1.0)
    monkeypatch.setattr(threads, "BACKOFF_CAP", cap)
    owner = Threads()
    recorder = Waits()
    owner.stopping = recorder  # type: ignore[assignment]

    def crash() -> None:
        raise RuntimeError("boom")

    owner.start("notify-0", crash).join(5)
    assert recorder.waited == waits and owner.failed() == ["notify-0"]


def test_a_crash_as_old_as_the_window_no_longer_counts() -> None:
    times = iter([0.0, 1.0, 2.0, 3.0, threads.CRASH_WINDOW])
    owner = Threads(clock=lambda: next(times))
    runs: list[int] = []

    def target() -> None:
        runs.append(1)
        if len(runs) <= threads.MAX_CRASHES:
            raise RuntimeError("boom")

    owner.start("worker-1", target).join(5)
    # the fifth crash came when the first was a window old: four in the window
    assert len(runs) == threads.MAX_CRASHES + 1 and owner.failed() == []


def test_each_crash_and_restart_is_in_the_log(caplog: pytest.LogCaptureFixture) -> None:
    owner = Threads()
    runs: list[int] = []

    def target() -> None:
        runs.append(1)
        if len(runs) == 1:
            raise RuntimeError("the first run breaks")

    owner.start("informer-deployments", target).join(5)
    assert "thread informer-deployments crashed" in caplog.text
    assert "RuntimeError: the first run breaks" in caplog.text  # with its traceback
    assert "thread informer-deployments started again" in caplog.text


def test_threads_that_ended_are_forgotten() -> None:
    owner = Threads()
    for i in range(50):
        owner.start(f"short-{i}", lambda: None).join(5)
    owner.start("last", lambda: None).join(5)
    assert len(owner._entries) == 1


def test_the_process_owner_starts_threads() -> None:
    done = threading.Event()
    t = threads.start("probe", done.set)
    t.join(5)
    assert done.is_set() and t.name == "probe"
