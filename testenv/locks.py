"""One builder or starter at a time: an exclusive lock on a file.

Test runs, ``make`` targets and benchmarks may start together on one machine; each
checks whether a binary is built or a control plane is up, and without a lock each
would find nothing and build or start its own, over the others' files. The lock goes
with the open file: a holder that crashes releases it, and a child started with
``close_fds`` (subprocess's default) never holds it."""

from __future__ import annotations

import contextlib
import fcntl
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def exclusive(path: Path) -> Iterator[None]:
    """Hold the lock on ``path`` (made, with its directory, if missing) for the block."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        yield
