"""The heap policy: what survives a pass is frozen; a cycle frozen while alive is
collected by the next full collection, not before."""

from __future__ import annotations

import ctypes
import gc
import subprocess
import sys
import weakref
from collections.abc import Iterator

import pytest

from gitsync.daemon.heap import M_ARENA_MAX, Heap, _libc, _libc_trim, malloc_bytes, one_arena


class Node:
    def __init__(self) -> None:
        self.other: Node | None = None


@pytest.fixture(autouse=True)
def _unfrozen() -> Iterator[None]:
    yield
    gc.unfreeze()
    gc.collect()


def _cycle() -> weakref.ref[Node]:
    a, b = Node(), Node()
    a.other, b.other = b, a
    return weakref.ref(a)


def test_what_survives_a_settle_is_frozen_and_new_garbage_is_collected() -> None:
    now = [0.0]
    heap = Heap(full_every=600, clock=lambda: now[0])
    kept = [Node() for _ in range(100)]
    heap.settle()
    frozen = gc.get_freeze_count()
    assert frozen >= len(kept)
    # a cycle made and dropped after the freeze is found by the next settle
    ref = _cycle()
    assert ref() is not None
    now[0] = 10.0
    heap.settle()
    assert ref() is None


def test_a_cycle_frozen_alive_is_collected_by_the_next_full_collection() -> None:
    now = [1000.0]
    heap = Heap(full_every=600, clock=lambda: now[0])
    holder = [_cycle()]
    target = holder[0]()
    heap.settle()  # the first settle is a full one; the cycle is alive: frozen
    del target
    now[0] = 1599.0
    heap.settle()
    assert holder[0]() is not None  # frozen garbage: out of the collector's sight
    now[0] = 1600.0
    heap.settle()
    assert holder[0]() is None
    assert gc.get_freeze_count() > 0


def test_the_shared_table_is_swept_after_each_full_collection_and_tidied_after_the_others() -> None:
    now = [1000.0]
    calls: list[tuple[str, bool]] = []

    def sweep() -> None:
        # after the collection: the cycle made below is gone by then
        calls.append(("sweep", ref() is None))

    def tidy() -> None:
        calls.append(("tidy", ref() is None))

    heap = Heap(full_every=600, clock=lambda: now[0], sweep=sweep, tidy=tidy)
    ref = _cycle()
    heap.settle()  # the first settle is a full one
    assert calls == [("sweep", True)]
    for t in (1100.0, 1599.0):
        now[0] = t
        ref = _cycle()  # new since the last settle: collected by a settle that is not full
        heap.settle()
    assert calls == [("sweep", True), ("tidy", True), ("tidy", True)]
    now[0] = 1600.0
    heap.settle()
    assert calls[-1] == ("sweep", True) and len(calls) == 4


def test_a_full_settle_sweeps_the_shared_table_and_another_tidies_it() -> None:
    from gitsync.model.compact import SHARED

    before = SHARED.sweeps
    now = [0.0]
    heap = Heap(trim=None, clock=lambda: now[0])
    heap.settle()
    assert SHARED.sweeps == before + 1
    SHARED.compact({"metadata": {"name": "a"}, "spec": {"x": {"y": object.__name__}}})
    now[0] = 1.0  # not a full one: swept, as a node was added since
    heap.settle()
    assert SHARED.sweeps == before + 2


def test_the_heap_is_trimmed_after_the_freeze() -> None:
    trims: list[bool] = []
    Heap(trim=lambda: trims.append(gc.get_freeze_count() > 0)).settle()
    assert trims == [True]


def test_glibcs_trim_is_found_and_runs() -> None:
    trim = _libc_trim()
    assert trim is not None  # the image and this machine run glibc
    assert trim() in (0, 1)  # 1: memory was given back


def test_one_arena_asks_the_c_library_for_one_unless_the_environment_says() -> None:
    asked: list[tuple[int, int]] = []

    def mallopt(param: int, value: int) -> int:
        asked.append((param, value))
        return 1

    assert one_arena({}, mallopt) and asked == [(M_ARENA_MAX, 1)]
    assert not one_arena({"MALLOC_ARENA_MAX": "4"}, mallopt) and len(asked) == 1
    assert not one_arena({}, lambda param, value: 0)  # refused


#: counts glibc's thread arenas in a process whose six threads, alive at once, each
#: allocated something larger than Python's own allocator serves: each arena is a 64 MiB
#: aligned mapping, the part in use readable and writable, the rest reserved
_ARENAS = """
import sys, threading
from gitsync.daemon.heap import one_arena
if sys.argv[1] == "one":
    assert one_arena({})
kept = []
alive = threading.Barrier(6)  # a thread that ended gives its arena to the next one
def allocate():
    kept.append(bytearray(100_000))
    alive.wait()
threads = [threading.Thread(target=allocate) for _ in range(6)]
for t in threads: t.start()
for t in threads: t.join()
size = 64 << 20
regions = []
for line in open("/proc/self/maps"):
    span, perms = line.split()[:2]
    start, end = (int(x, 16) for x in span.split("-"))
    regions.append((start, end, perms))
print(sum(
    1
    for (s, e, p), (s2, e2, p2) in zip(regions, regions[1:])
    if s % size == 0 and p.startswith("rw") and p2.startswith("---") and e == s2 and e2 - s == size
))
"""


def test_with_one_arena_threads_allocate_from_the_main_arena() -> None:
    def arenas(mode: str) -> int:
        out = subprocess.run(
            [sys.executable, "-c", _ARENAS, mode], capture_output=True, text=True, check=True
        )
        return int(out.stdout)

    assert arenas("many") >= 2  # glibc's default: an arena per new thread, up to 8 a core
    assert arenas("one") == 0


def test_the_c_allocators_bytes_in_use_and_free_are_read_from_mallinfo2() -> None:
    before = malloc_bytes()
    assert set(before) == {"in_use", "free"} and before["in_use"] > 0
    held = bytearray(32 * 1024 * 1024)  # from the C library, not Python's small-object arenas
    during = malloc_bytes()
    assert during["in_use"] - before["in_use"] >= 32 * 1024 * 1024
    del held
    assert malloc_bytes()["in_use"] < during["in_use"] - 16 * 1024 * 1024


def test_without_mallinfo2_there_is_nothing_to_read(monkeypatch: pytest.MonkeyPatch) -> None:
    class NoGlibc:
        def __init__(self, name: None) -> None:
            raise OSError("no such library")

    monkeypatch.setattr(ctypes, "CDLL", NoGlibc)
    assert malloc_bytes() == {}


def test_a_function_the_c_library_lacks_is_none() -> None:
    assert _libc("gitsync_no_such_function") is None
    assert _libc("malloc_trim") is not None  # glibc, as here
