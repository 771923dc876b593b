"""A de-duplicating, rate-limited work queue with per-key exponential backoff.

The semantics of client-go's workqueue, which every controller relies on: a
key is never processed by two workers at once; a key added while it is being
processed is processed once more afterwards; a key added many times while
waiting is processed once. Failed keys come back after an exponential,
per-key delay; a success forgets the key's failures. On top of that, an overall
token bucket (client-go's defaults: 10 per second, bursts of 100) spaces out the
retries of all keys together: a retry waits the longer of the two, so that many
keys failing at once (the API server down) do not come back as one storm. A key
delayed twice waits for the earlier time only.

Two lanes, as in controller-runtime's priority queue: a key added ``urgent`` (someone
changed what an object should be: drift to take back) is handed out before the
keys that only have news to report (a Deployment's rollout moving on), so a burst
of status news does not hold a correction back. A waiting key added urgent moves
to the urgent lane; it is still processed once.

Why not a library: the ``kubernetes`` package has none (client-go's is Go, and the
Python client ships informers without a queue); a ``queue.Queue`` gives none of the
three rules above, and APScheduler (which runs the sync job) has no per-key
de-duplication or backoff.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections import deque
from collections.abc import Callable


class WorkQueue:
    def __init__(
        self,
        *,
        base_delay: float = 0.05,
        max_delay: float = 60.0,
        qps: float = 10.0,
        burst: int = 100,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.base_delay = base_delay
        self.max_delay = max_delay
        self.qps = qps
        self.burst = burst
        #: the overall bucket: tokens left (negative: retries already promised a later
        #: token) as of ``_bucket_at``
        self._tokens = float(burst)
        self._bucket_at = clock()
        self._clock = clock
        self._queue: deque[str] = deque()
        self._urgent_queue: deque[str] = deque()
        #: waiting (or waiting to run again) keys; a lane may hold a key that has
        #: since been handed out from the other lane: such an entry is skipped
        self._dirty: set[str] = set()
        self._urgent: set[str] = set()
        self._processing: set[str] = set()
        self._failures: dict[str, int] = {}
        self._delayed: list[tuple[float, int, str]] = []
        #: when each delayed key is due: the heap may hold later entries of the key,
        #: which are skipped (a key waits for its earliest time only)
        self._due: dict[str, float] = {}
        self._seq = itertools.count()
        self._cond = threading.Condition()
        self._shutdown = False

    def __len__(self) -> int:
        """Keys waiting to be handed out."""
        with self._cond:
            return len(self._dirty - self._processing)

    def add(self, key: str, *, urgent: bool = False) -> None:
        with self._cond:
            if self._shutdown:
                return
            self._add_locked(key, urgent=urgent)

    def _add_locked(self, key: str, *, urgent: bool = False) -> None:
        if key in self._dirty:
            if urgent and key not in self._urgent:
                self._urgent.add(key)
                if key not in self._processing:
                    self._urgent_queue.append(key)  # its plain entry is skipped
                    self._cond.notify()
            return
        self._dirty.add(key)
        if urgent:
            self._urgent.add(key)
        if key not in self._processing:
            self._enqueue(key)
            self._cond.notify()

    def _enqueue(self, key: str) -> None:
        (self._urgent_queue if key in self._urgent else self._queue).append(key)

    def add_after(self, key: str, delay: float) -> None:
        if delay <= 0:
            self.add(key)
            return
        with self._cond:
            if self._shutdown:
                return
            self._push(key, self._clock() + delay)

    def _push(self, key: str, at: float) -> None:
        due = self._due.get(key)
        if due is not None and due <= at:
            return  # already due earlier: one entry per key, the earliest
        self._due[key] = at
        heapq.heappush(self._delayed, (at, next(self._seq), key))
        self._cond.notify()

    def add_rate_limited(self, key: str) -> float:
        """Requeue after the longer of this key's backoff (base * 2^failures, capped)
        and the overall bucket's wait; returns the delay."""
        with self._cond:
            n = self._failures.get(key, 0)
            self._failures[key] = n + 1
            backoff: float = min(self.base_delay * 2.0**n, self.max_delay)
            delay = max(backoff, self._reserve())
            if self._shutdown:
                return delay
            if delay <= 0:
                self._add_locked(key)
            else:
                self._push(key, self._clock() + delay)
        return delay

    def _reserve(self) -> float:
        """Take a token from the overall bucket; how long until it is there."""
        now = self._clock()
        self._tokens = min(float(self.burst), self._tokens + (now - self._bucket_at) * self.qps)
        self._bucket_at = now
        self._tokens -= 1.0
        return 0.0 if self._tokens >= 0 else -self._tokens / self.qps

    def forget(self, key: str) -> None:
        with self._cond:
            self._failures.pop(key, None)

    def failures(self, key: str) -> int:
        with self._cond:
            return self._failures.get(key, 0)

    def get(self, timeout: float | None = None) -> str | None:
        """The next key, or None on shutdown or timeout. Call ``done(key)`` after."""
        deadline = None if timeout is None else self._clock() + timeout
        with self._cond:
            while True:
                if self._shutdown:
                    return None  # stop now: what is queued is level-based, it will come back
                self._promote_delayed()
                key = self._next()
                if key is not None:
                    self._dirty.discard(key)
                    self._urgent.discard(key)
                    self._processing.add(key)
                    return key
                if deadline is not None and self._clock() >= deadline:
                    return None
                self._cond.wait(self._next_wait(deadline))

    def _next(self) -> str | None:
        """The first waiting key, urgent lane first; entries of keys already handed
        out from the other lane are dropped on the way."""
        while self._urgent_queue:
            key = self._urgent_queue.popleft()
            if key in self._urgent and key not in self._processing:
                return key
        while self._queue:
            key = self._queue.popleft()
            if key in self._dirty and key not in self._urgent and key not in self._processing:
                return key
        return None

    def done(self, key: str) -> None:
        with self._cond:
            self._processing.discard(key)
            if key in self._dirty:
                self._enqueue(key)
                self._cond.notify()

    def shutdown(self) -> None:
        with self._cond:
            self._shutdown = True
            self._cond.notify_all()

    def idle(self) -> bool:
        """Nothing queued, nothing in flight (delayed retries may still be pending)."""
        with self._cond:
            return not self._dirty and not self._processing

    def _promote_delayed(self) -> None:
        now = self._clock()
        while self._delayed and self._delayed[0][0] <= now:
            at, _, key = heapq.heappop(self._delayed)
            if self._due.get(key) != at:
                continue  # a later entry of a key due earlier: already promoted
            del self._due[key]
            if key not in self._dirty:
                self._dirty.add(key)
                if key not in self._processing:
                    self._enqueue(key)

    def _next_wait(self, deadline: float | None) -> float | None:
        now = self._clock()
        waits = []
        if self._delayed:
            waits.append(self._delayed[0][0] - now)
        if deadline is not None:
            waits.append(deadline - now)
        return max(min(waits), 0.0) if waits else None
