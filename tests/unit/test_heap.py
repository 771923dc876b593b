"""The heap policy: what survives a pass is frozen; a cycle frozen while alive is
collected by the next full collection, not before."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from gitsync.daemon.heap import Heap, _libc_trim


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


def test_the_shared_table_is_swept_after_each_full_collection_only() -> None:
    now = [1000.0]
    sweeps: list[bool] = []

    def sweep() -> None:
        # after the collection: the cycle made below is gone by then
        sweeps.append(ref() is None)

    heap = Heap(full_every=600, clock=lambda: now[0], sweep=sweep)
    ref = _cycle()
    heap.settle()  # the first settle is a full one
    assert sweeps == [True]
    for t in (1100.0, 1599.0):
        now[0] = t
        heap.settle()
    assert sweeps == [True]
    now[0] = 1600.0
    heap.settle()
    assert sweeps == [True, True]


def test_a_full_settle_sweeps_the_shared_table() -> None:
    from gitsync.model.compact import SHARED

    before = SHARED.sweeps
    Heap(trim=None).settle()
    assert SHARED.sweeps == before + 1


def test_the_heap_is_trimmed_after_the_freeze() -> None:
    trims: list[bool] = []
    Heap(trim=lambda: trims.append(gc.get_freeze_count() > 0)).settle()
    assert trims == [True]


def test_glibcs_trim_is_found_and_runs() -> None:
    trim = _libc_trim()
    assert trim is not None  # the image and this machine run glibc
    assert trim() in (0, 1)  # 1: memory was given back
