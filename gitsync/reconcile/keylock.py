"""One lock per key, held by at most one thread, kept only while someone uses it.

The work queue already gives a key to one worker at a time, but the sync pass
reconciles from its own threads too; both go through ``hold(key)``. An entry
lives while a thread holds or waits for it and goes with the last one, so the
table does not grow with every MyApp ever seen. Removing an entry from outside
(as a "forget" once did) would let a newcomer create a second lock for a key
whose first lock is still held: entries are only ever removed here.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager


class _Entry:
    __slots__ = ("lock", "users")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.users = 0  # threads holding or waiting for ``lock``


class KeyLocks:
    def __init__(self) -> None:
        self._entries: dict[str, _Entry] = {}
        self._guard = threading.Lock()

    @contextmanager
    def hold(self, key: str) -> Iterator[None]:
        with self._guard:
            entry = self._entries.get(key)
            if entry is None:
                entry = self._entries[key] = _Entry()
            entry.users += 1
        try:
            with entry.lock:
                yield
        finally:
            with self._guard:
                entry.users -= 1
                if entry.users == 0:
                    del self._entries[key]

    def __len__(self) -> int:
        """Keys currently held or waited for."""
        with self._guard:
            return len(self._entries)
