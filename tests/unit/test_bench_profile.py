"""The benchmark's call count: every call of a step, in its thread and in the threads it
starts, and none from before or after it."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

from bench import profile


def _leaf(x: int) -> int:
    return x + 1


def _step(n: int) -> int:
    with ThreadPoolExecutor(4) as pool:
        return sum(pool.map(_leaf, range(n))) + _leaf(0)


def _named(calls: dict[str, int], name: str) -> int:
    return sum(n for f, n in calls.items() if f.startswith(f"{name} ("))


def test_every_call_of_the_step_is_counted_in_its_pool_s_threads_too() -> None:
    result, calls = profile.counted(lambda: _step(100))
    assert result == sum(range(1, 101)) + 1
    assert _named(calls, "_leaf") == 101  # 100 in the pool's threads, 1 in the caller's
    assert _named(calls, "_step") == 1


def test_nothing_is_counted_after_the_step_nor_in_threads_it_did_not_start() -> None:
    stop = threading.Event()

    def busy() -> None:  # started before: a worker, not the step's
        while not stop.is_set():
            _leaf(0)
            stop.wait(0.001)

    worker = threading.Thread(target=busy)
    worker.start()
    try:
        _, calls = profile.counted(lambda: _step(10))
    finally:
        stop.set()
        worker.join()
    assert _named(calls, "_leaf") == 11
    _leaf(0)  # after: the hooks are gone
    _, again = profile.counted(lambda: None)
    assert _named(again, "_leaf") == 0
