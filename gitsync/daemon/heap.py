"""The cyclic garbage collector kept off what the daemon holds for its whole life.

CPython's full collection walks every object it tracks, with the GIL held. The daemon
holds the informer caches (about 50 tracked objects per MyApp with its Deployment) for
its whole life, and a sync pass allocates enough to start a full collection every pass
or two: 0.4 s at 10,000 MyApps with every thread stopped, twice that at 20,000 — most
of what made a no-op pass cost more per MyApp as the fleet grew. Reference counting, not
the collector, frees what the caches let go: their objects hold no cycles.

So after each pass, :meth:`Heap.settle` collects what is new since the last settle (the
frozen objects are not walked) and freezes what survives (``gc.freeze``: out of the
collector's sight; reference counting still frees it as before). An object frozen while
alive that later ends up in a reference cycle is found only by a full collection: one
runs, everything unfrozen first, every ``full_every`` seconds.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable

#: seconds between full collections (0.8 s of CPU at 20,000 MyApps, once in ten minutes)
FULL_EVERY = 600.0


class Heap:
    def __init__(
        self, full_every: float = FULL_EVERY, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.full_every = full_every
        self._clock = clock
        self._last_full: float | None = None

    def settle(self) -> None:
        """Collect what is new (everything, when a full collection is due), then freeze
        what survives. Called by one thread at a time (the sync job)."""
        now = self._clock()
        if self._last_full is None or now - self._last_full >= self.full_every:
            gc.unfreeze()
            self._last_full = now
        gc.collect()
        gc.freeze()
