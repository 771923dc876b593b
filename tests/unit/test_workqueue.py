from __future__ import annotations

import threading

from gitsync.reconcile.workqueue import WorkQueue


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_deduplicates_waiting_keys() -> None:
    q = WorkQueue()
    for key in ("a", "b", "a", "a"):
        q.add(key)
    assert len(q) == 2
    assert [q.get(0), q.get(0), q.get(0)] == ["a", "b", None]


def test_key_added_while_processing_runs_again_after_done() -> None:
    q = WorkQueue()
    q.add("a")
    assert q.get(0) == "a"
    q.add("a")
    # never handed to a second worker while in flight
    assert q.get(0) is None
    q.done("a")
    assert q.get(0) == "a"
    q.done("a")
    assert q.get(0) is None
    assert q.idle()


def test_rate_limited_backoff_doubles_and_forget_resets() -> None:
    clock = FakeClock()
    q = WorkQueue(base_delay=1.0, max_delay=5.0, clock=clock)
    assert [q.add_rate_limited("k") for _ in range(5)] == [1.0, 2.0, 4.0, 5.0, 5.0]
    assert q.failures("k") == 5
    q.forget("k")
    assert q.failures("k") == 0
    assert q.add_rate_limited("k") == 1.0


def test_delayed_key_becomes_available_at_its_time() -> None:
    clock = FakeClock()
    q = WorkQueue(clock=clock)
    q.add_after("k", 10)
    assert q.get(0) is None
    clock.now += 10
    assert q.get(0) == "k"


def test_shutdown_wakes_blocked_workers() -> None:
    q = WorkQueue()
    got: list[str | None] = []
    t = threading.Thread(target=lambda: got.append(q.get()))
    t.start()
    q.shutdown()
    t.join(5)
    assert not t.is_alive()
    assert got == [None]


def test_shutdown_hands_out_no_more_keys() -> None:
    q = WorkQueue()
    q.add("a")
    q.shutdown()
    assert q.get(0) is None
