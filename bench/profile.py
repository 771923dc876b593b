"""A profile of every thread of this process while one step runs (py-spy, sampling),
and a count of the Python calls it makes (:func:`counted`).

The cold sync is a main thread waiting on 32 workers, so a profiler that samples only
the calling thread (pyinstrument) shows one line: "waiting". py-spy reads every
thread's stack from outside the process; threads blocked in a system call (sockets:
waiting for the API server) are left out, so what remains is where gitsync spends CPU.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any, TypeVar

T = TypeVar("T")
PY_SPY = str(Path(sys.executable).parent / "py-spy")


def profiled(fn: Callable[[], T], out: Path, rate: int = 250) -> T:
    """``fn()`` with py-spy sampling the process; a summary goes to ``out``."""
    raw = out.with_suffix(".raw")
    spy = subprocess.Popen(
        [PY_SPY, "record", "--pid", str(os.getpid()), "--rate", str(rate),
         "--format", "raw", "--output", str(raw), "--nonblocking"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    time.sleep(0.5)  # attached before the step starts
    try:
        return fn()
    finally:
        spy.send_signal(signal.SIGINT)
        spy.wait(60)
        if raw.exists():
            out.write_text(summary(raw.read_text()))
            raw.unlink()


def counted(fn: Callable[[], T]) -> tuple[T, Counter[str]]:
    """``fn()`` and the Python function calls made while it ran, by function, in the
    calling thread and in every thread started meanwhile (a pass's pool). A count,
    unlike a time, does not move with the machine's load: the same calls per MyApp at
    two sizes say that the work per MyApp does not grow with N. Threads that were
    running before (the workers) are not counted."""
    # one Counter per thread (a ``+=`` on a shared one can lose a count to a thread
    # switch), summed at the end
    counters: list[Counter[tuple[str, int, str]]] = []
    mine = threading.local()
    lock = threading.Lock()

    def hook(frame: FrameType, event: str, _arg: Any) -> None:
        if event != "call":
            return
        counter = getattr(mine, "calls", None)
        if counter is None:
            counter = mine.calls = Counter()
            with lock:
                counters.append(counter)
        code = frame.f_code
        counter[(code.co_filename, code.co_firstlineno, code.co_name)] += 1

    sys.setprofile(hook)
    threading.setprofile(hook)
    try:
        result = fn()
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
    named: Counter[str] = Counter()
    with lock:
        for counter in counters:
            for (path, line, name), n in list(counter.items()):
                named[_short(f"{name} ({path}:{line})")] += n
    return result, named


def summary(collapsed: str, top: int = 30) -> str:
    """Self and inclusive samples per function from py-spy's collapsed stacks
    (``frame;frame;frame count`` per line, outermost first)."""
    own: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    total = 0
    for line in collapsed.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        total += n
        frames = [f for f in stack.split(";") if f and not f.startswith("process ")]
        if not frames:
            continue
        own[_short(frames[-1])] += n
        for name in {_short(f) for f in frames}:
            inclusive[name] += n
    lines = [f"{total} samples of busy threads", "", "self  (% of samples)"]
    lines += [f"{n * 100 / total:6.1f}  {name}" for name, n in own.most_common(top)]
    lines += ["", "inclusive, gitsync's own functions"]
    ours = [(name, n) for name, n in inclusive.most_common() if "gitsync/" in name]
    lines += [f"{n * 100 / total:6.1f}  {name}" for name, n in ours[:top]]
    return "\n".join(lines) + "\n"


def _short(frame: str) -> str:
    # "function (path/to/module.py:123)" → "function (module path from the package)"
    name, _, where = frame.partition(" (")
    path = where.rstrip(")").rsplit(":", 1)[0]
    for marker in ("/gitsync/", "/site-packages/", "/lib/python3"):
        if marker in path:
            path = path[path.index(marker) + 1 :]
            break
    return f"{name} ({path})"
