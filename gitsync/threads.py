"""The owner of the process's long-lived threads.

Every thread that lives as long as a component (an informer's watch, the workers, the
Events sender, the notification senders, the HTTP loop, the leader and member loops) is
started here, so one place knows them all: which are running, which crashed, which did
not stop in time.

A thread ends normally when its component tells it to (a stop flag, a ``None`` on its
queue). One that ends with an exception crashed: it is logged, counted and started
again after a backoff, unless the process is stopping; one that keeps crashing
(:data:`MAX_CRASHES` within :data:`CRASH_WINDOW`) is left ended and reported as failed,
which fails ``/readyz`` and ``/healthz`` (the kubelet restarts the container). Nothing
stops silently.

Not here: the HTTP server's thread per connection (bounded by ``--http-max-connections``,
each ending with its request), a notification's deadline watchdog (joined by the attempt
that started it), the deferred sync timers (cancelled and joined by the daemon) and
APScheduler's threads (joined by its ``shutdown(wait=True)``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

log = logging.getLogger(__name__)

#: crashes of one thread within :data:`CRASH_WINDOW` seconds after which it stays ended
MAX_CRASHES: Final = 5
CRASH_WINDOW: Final = 600.0
#: seconds before a crashed thread runs again: doubled each crash, up to the cap
BACKOFF_FIRST: Final = 1.0
BACKOFF_CAP: Final = 30.0


@dataclass
class _Entry:
    name: str
    thread: threading.Thread = field(init=False)
    crashes: list[float] = field(default_factory=list)
    failed: bool = False


class Threads:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._entries: list[_Entry] = []
        #: set when the process is stopping: a crash then ends its thread for good
        self.stopping = threading.Event()
        #: crashes by thread name (the metric)
        self.crashed: dict[str, int] = {}

    def start(self, name: str, target: Callable[[], object]) -> threading.Thread:
        """Run ``target`` in a daemon thread named ``name``; run it again if it crashes."""
        entry = _Entry(name)
        entry.thread = thread = threading.Thread(
            target=self._body, args=(entry, target), name=name, daemon=True
        )
        with self._lock:
            # ended threads are forgotten (components come and go in tests and commands);
            # failed ones are kept: they are what readiness reports
            self._entries = [e for e in self._entries if e.thread.is_alive() or e.failed]
            self._entries.append(entry)
        thread.start()
        return thread

    def _body(self, entry: _Entry, target: Callable[[], object]) -> None:
        backoff = BACKOFF_FIRST
        while True:
            try:
                target()
                return  # its component told it to end
            except Exception:
                log.exception("thread %s crashed", entry.name)
            now = self._clock()
            with self._lock:
                self.crashed[entry.name] = self.crashed.get(entry.name, 0) + 1
                entry.crashes = [t for t in entry.crashes if now - t < CRASH_WINDOW] + [now]
                if len(entry.crashes) >= MAX_CRASHES:
                    entry.failed = True
            if entry.failed:
                log.error(
                    "thread %s crashed %d times in %.0fs: left ended, the process is not "
                    "ready or live any more",
                    entry.name,
                    len(entry.crashes),
                    CRASH_WINDOW,
                )
                return
            if self.stopping.wait(backoff):
                return
            log.warning("thread %s started again", entry.name)
            backoff = min(backoff * 2, BACKOFF_CAP)

    def failed(self) -> list[str]:
        """Threads that crashed too often and stay ended."""
        with self._lock:
            return [e.name for e in self._entries if e.failed]

    def running(self) -> list[str]:
        with self._lock:
            return [e.name for e in self._entries if e.thread.is_alive()]

    def join(self, timeout: float) -> list[str]:
        """Wait, within ``timeout`` in all, for every thread still running; return the
        names of those that did not end (said in the log)."""
        self.stopping.set()
        deadline = self._clock() + timeout
        with self._lock:
            entries = list(self._entries)
        for e in entries:
            if e.thread is not threading.current_thread():
                e.thread.join(max(0.0, deadline - self._clock()))
        left = [e.name for e in entries if e.thread.is_alive()]
        if left:
            log.warning("threads still running at exit: %s", ", ".join(left))
        return left


#: the process's threads: every component starts its own through this one owner
THREADS: Final = Threads()


def start(name: str, target: Callable[[], object]) -> threading.Thread:
    return THREADS.start(name, target)
