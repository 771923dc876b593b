"""Honouring the API server's 429s in a pass over many objects.

API Priority and Fairness rejects what a client's priority level cannot serve at once
and says when to come back (``Retry-After``). A pass that counted each rejected object
as failed would end failed and try all of them again at the next interval: many passes,
each a burst of requests that mostly bounce. Waiting the hint out lets the pass finish
at the pace the server asked for; and since the hint is about the client, not the one
object, every thread of the pass waits it out before its next call, not only the one
that was rejected.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from typing import TypeVar

from gitsync.errors import APITooManyRequestsError

T = TypeVar("T")

#: rejections of one call waited out before the 429 is the call's failure
ATTEMPTS = 6
#: a longer hint is still obeyed by giving up on the object for this pass
MAX_WAIT = 10.0


def _never(_result: object) -> float | None:
    return None


class Throttle:
    """Shared by the threads of one pass: after a 429, nobody calls before its hint
    (plus up to half of it again, so that callers do not all come back at once)."""

    def __init__(
        self,
        wait: Callable[[float], bool],
        *,
        attempts: int = ATTEMPTS,
        max_wait: float = MAX_WAIT,
        clock: Callable[[], float] = time.monotonic,
        jitter: Callable[[], float] = random.random,
    ) -> None:
        #: sleeps, and returns True when the caller is stopping
        self.wait = wait
        self.attempts = attempts
        self.max_wait = max_wait
        self.clock = clock
        self.jitter = jitter
        self.not_before = 0.0
        self.rejections = 0
        self._lock = threading.Lock()

    def call(self, fn: Callable[[], T], *, refused: Callable[[T], float | None] = _never) -> T:
        """``fn`` until it is not refused: a 429 raised, or a result that ``refused``
        reads as one (returning the hint). The last refusal is raised or returned."""
        for attempt in range(1, self.attempts + 1):
            # a caller that is stopping waits no more: one last try, and its answer
            stopping = self._hold()
            try:
                result = fn()
            except APITooManyRequestsError as e:
                if stopping or attempt == self.attempts or e.retry_after > self.max_wait:
                    raise
                self._rejected(e.retry_after)
                continue
            hint = refused(result)
            if hint is None or stopping or attempt == self.attempts or hint > self.max_wait:
                return result
            self._rejected(hint)
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _rejected(self, retry_after: float) -> None:
        delay = max(retry_after, 0.1) * (1 + self.jitter() / 2)
        with self._lock:
            self.rejections += 1
            self.not_before = max(self.not_before, self.clock() + delay)

    def _hold(self) -> bool:
        """Wait until the last hint has passed; True when the caller is stopping."""
        while True:
            with self._lock:
                left = self.not_before - self.clock()
            if left <= 0:
                return False
            if self.wait(left):
                return True
