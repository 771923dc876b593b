"""The cyclic garbage collector kept off what the daemon holds for its whole life.

CPython's full collection walks every object it tracks, with the GIL held. The daemon
holds the informer caches (about 50 tracked objects per MyApp with its Deployment) for
its whole life, and a sync pass allocates enough to start a full collection every pass
or two: 0.4 s at 10,000 MyApps with every thread stopped, twice that at 20,000 (a no-op
pass at 10,000 costs 2.5 s of CPU: a fifth of it was these collections). Reference counting, not
the collector, frees what the caches let go: their objects hold no cycles.

So after each pass, :meth:`Heap.settle` collects what is new since the last settle (the
frozen objects are not walked) and freezes what survives (``gc.freeze``: out of the
collector's sight; reference counting still frees it as before). An object frozen while
alive that later ends up in a reference cycle is found only by a full collection: one
runs, everything unfrozen first, every ``full_every`` seconds. (While the caches first
fill, the collector still runs: off, it made a start at 20,000 MyApps 6 s shorter, but
the cycles it left until the first settle held 36 MiB for good.)

After each settle that added nodes to it, and after each full collection, the table of
shared nodes (:mod:`gitsync.model.compact`) forgets what only it still holds. Left to
itself it does so when it has doubled: a fleet whose images and statuses change all day
kept up to as many dead nodes as live ones (1 MiB more and its table's dict doubled within
an hour of the soak, at 1000 MyApps). Swept only with each full collection it kept up to
ten minutes of churn; swept after each pass, one pass's. A sweep of a table of 140,000
nodes (20,000 Deployments) takes 0.05 s when every node is held, 0.25 s when half go; a
pass over them costs seconds.

Then the C library is asked to give its free pages back (``malloc_trim``, glibc): those
the initial LISTs' replies and a pass's garbage left, 1.1 KiB per MyApp at 20,000.

``one_arena``, called before the daemon starts a thread, has the C library serve every
thread from one arena. glibc gives each new thread an arena of its own, up to eight per
core, and each keeps the most its thread ever held: in the hour-long soak a replica's 15
thread arenas held 14.8 MiB beside its main arena's 11.8, and its RSS rose at the events
that woke threads which had been idle (a relist, taking the lead). Python allocates with
the GIL held, so the threads rarely contend for the one arena. ``MALLOC_ARENA_MAX`` in
the environment, if set, is left to decide.
"""

from __future__ import annotations

import ctypes
import gc
import os
import time
from collections.abc import Callable, Mapping

from gitsync.model.compact import SHARED

#: seconds between full collections (0.8 s of CPU at 20,000 MyApps, once in ten minutes)
FULL_EVERY = 600.0


#: glibc's ``mallopt`` parameter: how many arenas the threads may use
M_ARENA_MAX = -8


def one_arena(
    environ: Mapping[str, str] = os.environ,
    mallopt: Callable[[int, int], int] | None = None,
) -> bool:
    """Limits the C library to one arena for every thread (see the module's text), unless
    ``MALLOC_ARENA_MAX`` is set or the C library has no ``mallopt`` (musl, macOS);
    whether it did."""
    if "MALLOC_ARENA_MAX" in environ:
        return False
    mallopt = mallopt or _libc("mallopt")
    return mallopt is not None and bool(mallopt(M_ARENA_MAX, 1))


def _libc(name: str) -> Callable[..., int] | None:
    """The C library's function ``name``; None where it has none (glibc's own functions
    on musl or macOS)."""
    try:
        function: Callable[..., int] = getattr(ctypes.CDLL(None), name)
    except (OSError, AttributeError):
        return None
    return function


class _MallInfo2(ctypes.Structure):
    """glibc's ``struct mallinfo2`` (2.33 and later): byte counts, one ``size_t`` each."""

    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena",  # taken from the system with brk, every arena's heap
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",  # blocks of their own, mmapped: in use
            "usmblks",
            "fsmblks",
            "uordblks",  # in use in the arenas
            "fordblks",  # free in the arenas: kept, not given back
            "keepcost",
        )
    ]


def malloc_bytes() -> dict[str, float]:
    """What the C library's allocator holds, in bytes: ``in_use`` (by Python's objects of
    over 512 bytes, its arenas of small ones excepted, and by C code) and ``free`` (freed,
    but kept in its arenas: what ``malloc_trim`` gives back a part of, and what
    fragmentation leaves). Empty where the C library has no ``mallinfo2`` (musl, macOS,
    glibc before 2.33)."""
    try:
        mallinfo2 = ctypes.CDLL(None).mallinfo2
    except (OSError, AttributeError):
        return {}
    mallinfo2.restype = _MallInfo2
    info = mallinfo2()
    return {"in_use": float(info.uordblks + info.hblkhd), "free": float(info.fordblks)}


def _libc_trim() -> Callable[[], object] | None:
    """glibc's ``malloc_trim(0)``; None where the C library has none (musl, macOS)."""
    trim = _libc("malloc_trim")
    return None if trim is None else lambda: trim(0)


class Heap:
    def __init__(
        self,
        full_every: float = FULL_EVERY,
        clock: Callable[[], float] = time.monotonic,
        trim: Callable[[], object] | None = _libc_trim(),  # noqa: B008 (one lookup)
        sweep: Callable[[], object] = SHARED.sweep,
        tidy: Callable[[], object] = SHARED.tidy,
    ) -> None:
        self.full_every = full_every
        self._clock = clock
        self._trim = trim
        self._sweep = sweep
        self._tidy = tidy
        self._last_full: float | None = None

    def settle(self) -> None:
        """Collect what is new (everything, when a full collection is due), forget the
        shared nodes nothing holds any more (after a full collection; else if nodes were
        added since the last time), freeze what survives, then give the C library's free
        pages back. Called by one thread at a time (the sync job)."""
        now = self._clock()
        full = self._last_full is None or now - self._last_full >= self.full_every
        if full:
            gc.unfreeze()
            self._last_full = now
        gc.collect()
        # after the collection: a cycle it freed no longer holds its nodes
        if full:
            self._sweep()
        else:
            self._tidy()
        gc.freeze()
        if self._trim is not None:
            self._trim()
