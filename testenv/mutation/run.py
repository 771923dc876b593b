"""Run a module's mutants against its tests, and the score report.

Every mutant runs in a private copy of the tree (one per worker, made once), never in the
working tree: the mutated module is written into the copy, pytest runs there in a child
process of its own session (so a timeout kills the whole group), and the copy's module is
put back before the next mutant. Bytecode is never written, so a mutant is never served
from a cache of another.
"""

from __future__ import annotations

import hashlib
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from testenv.mutation.mutants import Mutant

Outcome = Literal["killed", "survived", "timeout"]

#: not copied: VCS data, environments, caches, the control plane's state, results
_NOT_COPIED = shutil.ignore_patterns(
    ".git",
    ".venv",
    ".testenv",
    ".mutation",
    "__pycache__",
    ".hypothesis",
    ".mypy_cache",
    ".ruff_cache",
    ".pytest_cache",
    ".import_linter_cache",
)


#: the pytest children running now, so that Ctrl-C can end them
_RUNNING: set[subprocess.Popen[bytes]] = set()
_LOCK = threading.Lock()


class MutationError(Exception):
    """The run cannot give a meaningful score (a module the tests fail on unmutated, a
    module the copy does not import); the message says which."""


@dataclass(frozen=True)
class Result:
    mutant: Mutant
    outcome: Outcome
    #: the reason from the allow-list when this survivor is judged equivalent
    equivalent: str | None = None


@dataclass
class ModuleReport:
    path: str
    tests: tuple[str, ...]
    results: list[Result] = field(default_factory=list)
    seconds: float = 0.0

    def count(self, outcome: Outcome) -> int:
        return sum(1 for r in self.results if r.outcome == outcome and r.equivalent is None)

    @property
    def equivalent(self) -> int:
        return sum(1 for r in self.results if r.equivalent is not None)

    @property
    def score(self) -> float:
        """Killed or timed out, of the mutants not judged equivalent (a timeout is a
        detection: the tests did not pass)."""
        considered = len(self.results) - self.equivalent
        if considered == 0:
            return 100.0
        return 100.0 * (self.count("killed") + self.count("timeout")) / considered


def load_allowed(path: Path) -> dict[str, str]:
    """The allow-list: ``path :: scope :: before → after :: why it is harmless`` a line;
    ``#`` starts a comment. Raises MutationError naming the file and line of a bad entry."""
    allowed: dict[str, str] = {}
    if not path.exists():
        return allowed
    for number, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.rsplit(" :: ", 1)
        if len(parts) != 2 or " → " not in parts[0] or parts[0].count(" :: ") != 2:
            raise MutationError(
                f"{path}:{number}: expected 'path :: scope :: before → after :: reason'"
            )
        key, reason = parts
        allowed[key] = reason
    return allowed


def _python_env(root: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root), env.get("PYTHONPATH")]))
    # the property tests' short, derandomized profile: the same examples for every mutant
    env["GITSYNC_FUZZ"] = "short"
    return env


def _pytest(root: Path, tests: Sequence[str], timeout: float) -> Outcome:
    cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider"]
    cmd += ["-m", "not integration", *tests]
    proc = subprocess.Popen(
        cmd,
        cwd=root,
        env=_python_env(root),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    with _LOCK:
        _RUNNING.add(proc)
    try:
        code = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill(proc)
        return "timeout"
    finally:
        with _LOCK:
            _RUNNING.discard(proc)
    return "survived" if code == 0 else "killed"


def _kill(proc: subprocess.Popen[bytes]) -> None:
    with suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def _kill_running() -> None:
    """On Ctrl-C: the children run in sessions of their own and do not see it."""
    with _LOCK:
        running = list(_RUNNING)
    for proc in running:
        _kill(proc)


def _dotted(path: str) -> str:
    return path.removesuffix(".py").replace("/", ".").removesuffix(".__init__")


def _check_import(root: Path, path: str) -> None:
    """The copy's module is the one its tests import (and not, say, an editable install's)."""
    probe = "import importlib.util, sys; print(importlib.util.find_spec(sys.argv[1]).origin)"
    out = subprocess.run(
        [sys.executable, "-c", probe, _dotted(path)],
        cwd=root,
        env=_python_env(root),
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    origin = out.stdout.strip()
    if out.returncode != 0 or Path(origin).resolve() != (root / path).resolve():
        raise MutationError(f"{path}: a copy of the tree imports it from {origin or '?'}")


def tree_hash(root: Path, path: str) -> str:
    return hashlib.sha256((root / path).read_bytes()).hexdigest()


@contextmanager
def copies(root: Path, jobs: int) -> Iterator[list[Path]]:
    """``jobs`` private copies of the tree, removed afterwards whatever happens."""
    base = Path(tempfile.mkdtemp(prefix="gitsync-mutation-"))
    try:
        trees = []
        for i in range(jobs):
            tree = base / f"tree{i}"
            shutil.copytree(root, tree, ignore=_NOT_COPIED, symlinks=True)
            trees.append(tree)
        yield trees
    finally:
        shutil.rmtree(base, ignore_errors=True)


def run_module(
    trees: list[Path],
    path: str,
    tests: Sequence[str],
    mutants: Sequence[Mutant],
    allowed: dict[str, str],
    *,
    timeout: float | None = None,
    progress: Callable[[Result], None] = lambda r: None,
) -> ModuleReport:
    """Each mutant of ``path`` against ``tests``, on as many workers as there are trees.
    The tests must pass on the module as it is first; the time they take sets the timeout
    (three times that, plus 30 s for a loaded machine) unless one is given."""
    report = ModuleReport(path, tuple(tests))
    start = time.monotonic()
    _check_import(trees[0], path)
    if _pytest(trees[0], tests, timeout=1800) != "survived":
        raise MutationError(f"{path}: its tests ({' '.join(tests)}) fail on the module as it is")
    limit = timeout or 3 * (time.monotonic() - start) + 30
    original = (trees[0] / path).read_text()
    free: queue.Queue[Path] = queue.Queue()
    for tree in trees:
        free.put(tree)

    def one(mutant: Mutant) -> Result:
        tree = free.get()
        try:
            (tree / path).write_text(mutant.source)
            outcome = _pytest(tree, tests, limit)
        finally:
            (tree / path).write_text(original)
            free.put(tree)
        equivalent = allowed.get(mutant.key) if outcome == "survived" else None
        result = Result(mutant, outcome, equivalent)
        progress(result)
        return result

    pool = ThreadPoolExecutor(max_workers=len(trees))
    try:
        report.results = list(pool.map(one, mutants))
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        _kill_running()
        raise
    pool.shutdown()
    report.seconds = time.monotonic() - start
    return report


def format_report(reports: Sequence[ModuleReport], allowed: dict[str, str]) -> str:
    lines = [
        f"{'module':<40} {'mutants':>7} {'killed':>6} {'survived':>8} {'timeout':>7}"
        f" {'equiv.':>6} {'score':>6} {'time':>6}"
    ]
    for r in reports:
        lines.append(
            f"{r.path:<40} {len(r.results):>7} {r.count('killed'):>6} {r.count('survived'):>8}"
            f" {r.count('timeout'):>7} {r.equivalent:>6} {r.score:>5.1f}% {r.seconds:>5.0f}s"
        )
    for title, equivalent in (("Survivors", False), ("Equivalent (allow-listed)", True)):
        rows = [
            res
            for r in reports
            for res in r.results
            if res.outcome == "survived" and (res.equivalent is not None) == equivalent
        ]
        if rows:
            lines += ["", f"{title}:"]
        for res in rows:
            m = res.mutant
            lines.append(f"  {m.path}:{m.line} [{m.operator}] in {m.scope}: {m.change}")
            if res.equivalent:
                lines.append(f"      {res.equivalent}")
    done = {r.path for r in reports}
    matched = {res.mutant.key for r in reports for res in r.results if res.equivalent}
    stale = [k for k in allowed if k.split(" :: ", 1)[0] in done and k not in matched]
    if stale:
        lines += ["", "Allow-list entries that matched no survivor (killed now, or gone):"]
        lines += [f"  {k}" for k in stale]
    return "\n".join(lines) + "\n"
