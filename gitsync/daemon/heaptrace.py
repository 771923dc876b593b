"""Where the daemon's memory goes, on request: Python's allocation tracer, opt-in.

With ``GITSYNC_TRACEMALLOC_DIR`` set, the daemon starts :mod:`tracemalloc` (one frame a
block: about 30 % more memory and a slower start, so never by default) and writes a
snapshot to that directory on each SIGUSR2, named ``heap-<pid>-<n>.snapshot``. Two
snapshots of one process, compared (``tracemalloc.Snapshot.load`` and ``compare_to``),
show which lines of code hold what grew between them: how ``make soak`` looks for leaks,
and how an operator can.
"""

from __future__ import annotations

import logging
import os
import threading
import tracemalloc
from pathlib import Path

log = logging.getLogger(__name__)

ENV = "GITSYNC_TRACEMALLOC_DIR"


class HeapTrace:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._taken = 0
        self._lock = threading.Lock()

    @classmethod
    def from_env(cls) -> HeapTrace | None:
        """Tracing started when the environment asks for it, else None."""
        where = os.environ.get(ENV, "")
        if not where:
            return None
        directory = Path(where)
        directory.mkdir(parents=True, exist_ok=True)
        if not tracemalloc.is_tracing():
            tracemalloc.start(1)
        log.info("tracing allocations; SIGUSR2 writes a snapshot to %s", directory)
        return cls(directory)

    def dump(self) -> Path:
        """Write a snapshot of what is allocated now; return its file."""
        with self._lock:
            self._taken += 1
            path = self.directory / f"heap-{os.getpid()}-{self._taken}.snapshot"
            snapshot = tracemalloc.take_snapshot()
            # the tracer's own bookkeeping is not the daemon's memory
            snapshot = snapshot.filter_traces((tracemalloc.Filter(False, tracemalloc.__file__),))
            snapshot.dump(str(path))
        log.info("heap snapshot written to %s", path)
        return path
