from __future__ import annotations

import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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


def test_urgent_keys_are_handed_out_before_news() -> None:
    q = WorkQueue()
    for key in ("news-1", "news-2"):
        q.add(key)
    q.add("edit-1", urgent=True)
    q.add("news-3")
    q.add("edit-2", urgent=True)
    assert [q.get(0) for _ in range(6)] == ["edit-1", "edit-2", "news-1", "news-2", "news-3", None]


def test_a_waiting_key_made_urgent_moves_up_and_runs_once() -> None:
    q = WorkQueue()
    for key in ("a", "b", "c"):
        q.add(key)
    q.add("c", urgent=True)
    q.add("c")  # news about it again: still the one urgent entry
    assert len(q) == 3
    assert [q.get(0) for _ in range(4)] == ["c", "a", "b", None]
    assert not q.idle()
    for key in "cab":
        q.done(key)
    assert q.idle()


def test_a_key_made_urgent_while_in_flight_runs_again_first() -> None:
    q = WorkQueue()
    q.add("a")
    q.add("b")
    assert q.get(0) == "a"
    q.add("a")
    q.add("a", urgent=True)  # news, then an edit, while a worker has it
    assert q.get(0) == "b"  # never two workers on one key
    q.add("c")
    q.done("a")
    assert [q.get(0), q.get(0), q.get(0)] == ["a", "c", None]


@settings(max_examples=400, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["add", "urgent", "get", "done"]), st.sampled_from(["a", "b", "c", "d"])
        ),
        max_size=60,
    )
)
def test_lanes_keep_the_queue_rules(ops: list[tuple[str, str]]) -> None:
    """Against a model: a key is handed out at most once at a time, every key added
    is handed out after it was added, and an urgent one before any that is not."""
    q = WorkQueue()
    waiting: dict[str, bool] = {}  # key -> urgent, for keys added and not handed out since
    in_flight: set[str] = set()
    for op, key in ops:
        if op in ("add", "urgent"):
            q.add(key, urgent=op == "urgent")
            waiting[key] = waiting.get(key, False) or op == "urgent"
        elif op == "done" and key in in_flight:
            q.done(key)
            in_flight.discard(key)
        elif op == "get":
            got = q.get(0)
            ready = {k: u for k, u in waiting.items() if k not in in_flight}
            if not ready:
                assert got is None
                continue
            assert got in ready, (got, ready)
            if any(ready.values()):
                assert ready[got], f"{got} handed out before an urgent key: {ready}"
            del waiting[got]
            in_flight.add(got)
        assert len(q) == len([k for k in waiting if k not in in_flight])
    for key in list(in_flight):
        q.done(key)
    rest = []
    while (got := q.get(0)) is not None:
        rest.append(got)
        q.done(got)
    assert sorted(rest) == sorted(waiting)
    assert q.idle()


def test_retries_of_all_keys_together_are_spaced_by_the_overall_bucket() -> None:
    # client-go's defaults: 10 per second, bursts of 100, on top of per-key backoff
    clock = FakeClock()
    q = WorkQueue(base_delay=0.05, clock=clock)
    assert {q.add_rate_limited(f"k{i}") for i in range(100)} == {0.05}
    # the bucket is empty: each next retry waits for a token of its own
    assert [q.add_rate_limited("k100"), q.add_rate_limited("k101")] == [
        pytest.approx(0.1),
        pytest.approx(0.2),
    ]
    clock.now += 1.0  # ten tokens back, two of them already promised
    assert q.add_rate_limited("k102") == pytest.approx(0.05)  # the key's backoff is longer
    # the longer of the two: a key's own backoff still grows past the bucket's wait
    assert [q.add_rate_limited("k0") for _ in range(3)] == [0.1, 0.2, 0.4]


def test_a_retry_waiting_for_the_bucket_is_handed_out_when_its_token_is_there() -> None:
    clock = FakeClock()
    q = WorkQueue(base_delay=0.0, qps=1.0, burst=1, clock=clock)
    assert q.add_rate_limited("a") == 0.0
    assert q.get(0) == "a"
    assert q.add_rate_limited("b") == pytest.approx(1.0)
    assert q.get(0) is None
    clock.now += 1.0
    assert q.get(0) == "b"


@pytest.mark.parametrize("delays", [(10.0, 5.0), (5.0, 10.0), (5.0, 5.0)])
def test_a_key_delayed_twice_waits_for_the_earlier_time_only(delays: tuple[float, float]) -> None:
    clock = FakeClock()
    q = WorkQueue(clock=clock)
    for delay in delays:
        q.add_after("k", delay)
    clock.now += 5
    assert q.get(0) == "k"
    q.done("k")
    clock.now += 5
    # the later entry is gone: it would run the key once more for nothing
    assert q.get(0) is None
    assert q.idle()


def test_after_shutdown_nothing_is_queued() -> None:
    q = WorkQueue()
    q.shutdown()
    q.add("a")
    q.add("b", urgent=True)
    assert q.idle() and len(q) == 0


def test_a_retry_due_at_once_waits_in_the_plain_lane() -> None:
    """A failed key is news to report again, not an edit to take back: it queues
    behind the keys already waiting."""
    q = WorkQueue(base_delay=0.0)
    q.add("waiting")
    assert q.add_rate_limited("retry") == 0.0
    assert [q.get(0), q.get(0)] == ["waiting", "retry"]


def test_a_key_added_again_and_again_while_waiting_holds_one_entry() -> None:
    """The lanes do not grow with the adds of a busy key (a watch storm on one object)."""
    q = WorkQueue()
    for _ in range(1000):
        q.add("a")
        q.add("b", urgent=True)
    assert (len(q._queue), len(q._urgent_queue)) == (1, 1)
    assert [q.get(0), q.get(0), q.get(0)] == ["b", "a", None]


def test_add_after_no_delay_is_an_add_and_runs_once() -> None:
    clock = FakeClock()
    q = WorkQueue(clock=clock)
    for delay in (0.0, -1.0):
        q.add_after("k", delay)
        assert q.get(0) == "k"
        q.done("k")
        assert q.get(0) is None  # no second entry left behind in the delayed heap
    q.add_after("k", 0.5)  # any positive delay waits
    assert q.get(0) is None
    clock.now += 0.5
    assert q.get(0) == "k"


def test_a_worker_blocked_on_an_empty_queue_wakes_for_a_delayed_key() -> None:
    q = WorkQueue()
    got: list[str | None] = []
    t = threading.Thread(target=lambda: got.append(q.get()))
    t.start()
    q.add_after("k", 0.05)
    t.join(5)
    q.shutdown()
    assert got == ["k"]


def test_a_get_with_a_timeout_waits_for_a_key_up_to_it() -> None:
    q = WorkQueue()
    got: list[str | None] = []
    t = threading.Thread(target=lambda: got.append(q.get(timeout=30)))
    t.start()
    threading.Event().wait(0.2)
    assert t.is_alive()  # still waiting: the timeout is not over
    q.add("k")
    t.join(5)
    assert got == ["k"]
    assert q.get(timeout=0.05) is None  # and then it is over


def test_the_overall_bucket_refills_from_its_last_take_only() -> None:
    clock = FakeClock()
    q = WorkQueue(base_delay=0.0, qps=1.0, burst=1, clock=clock)
    assert q.add_rate_limited("a") == 0.0  # the one token
    clock.now += 0.5
    assert q.add_rate_limited("b") == pytest.approx(0.5)  # half a token back
    clock.now += 0.5
    # half a token more since b's take, and b was promised it: a whole second to wait
    assert q.add_rate_limited("c") == pytest.approx(1.0)


def test_a_key_handed_out_urgent_comes_back_as_news_when_news_is_all() -> None:
    q = WorkQueue()
    q.add("a", urgent=True)
    assert q.get(0) == "a"
    q.add("b")
    q.add("a")  # news while in flight: no longer an edit to take back
    q.done("a")
    assert [q.get(0), q.get(0)] == ["b", "a"]


def test_done_wakes_a_worker_for_the_key_added_while_in_flight() -> None:
    q = WorkQueue()
    q.add("a")
    assert q.get(0) == "a"
    q.add("a")
    got: list[str | None] = []
    t = threading.Thread(target=lambda: got.append(q.get()))
    t.start()
    threading.Event().wait(0.1)  # the second worker waits: "a" is in flight
    q.done("a")
    t.join(5)
    q.shutdown()
    assert got == ["a"]


def test_a_worker_with_a_timeout_wakes_for_the_soonest_delayed_key() -> None:
    q = WorkQueue()
    q.add_after("late", 60)
    got: list[str | None] = []
    t = threading.Thread(target=lambda: got.append(q.get(timeout=30)))
    t.start()
    threading.Event().wait(0.1)
    q.add_after("soon", 0.1)
    t.join(5)
    q.shutdown()
    assert got == ["soon"]
