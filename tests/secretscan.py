"""Searching everything gitsync left behind for a credential, in every spelling it could
take: as is, URL-encoded, base64 (an HTTP Basic ``Authorization`` header), and for an SSH
private key each line of its base64 body, the body in one line and a short piece of it.

A haystack is a list of named items (a log, an API object, a file, a command line); each
item counts its lines, so that a figure can say how much was searched.
"""

from __future__ import annotations

import base64
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote


@dataclass(frozen=True)
class Needle:
    what: str
    value: bytes


def token_needles(token: str, username: str = "git") -> list[Needle]:
    raw = token.encode()
    return [
        Needle("token", raw),
        Needle("token URL-encoded", quote(token, safe="").encode()),
        Needle("Basic header", base64.b64encode(f"{username}:{token}".encode())),
        Needle("token in base64", base64.b64encode(raw)),
    ]


def key_needles(private_key: Path) -> list[Needle]:
    """An OpenSSH private key's secret spellings. The body's first line is the same for
    every key of a type (the format's magic and cipher names), so it is not one of them."""
    lines = private_key.read_text().splitlines()
    body = [ln for ln in lines if ln and not ln.startswith("-----")]
    joined = "".join(body)
    needles = [Needle(f"key body line {i}", ln.encode()) for i, ln in enumerate(body) if i]
    middle = len(joined) // 2
    needles += [
        Needle("key body in one line", joined.encode()),
        Needle("key piece", joined[middle : middle + 24].encode()),
        Needle("key file", private_key.read_bytes()),
    ]
    return needles


@dataclass
class Haystack:
    items: list[tuple[str, bytes]] = field(default_factory=list)
    files: int = 0

    def add(self, name: str, data: bytes | str) -> None:
        self.items.append((name, data.encode() if isinstance(data, str) else data))

    def add_tree(self, root: Path) -> None:
        """Every regular file under ``root`` (git's objects too: loose ones are zlib, so a
        credential inside would be missed; none is ever written into a commit here)."""
        for path in sorted(walk(root)):
            self.files += 1
            self.add(f"file {path}", path.read_bytes())
            self.add(f"name {path}", str(path))

    @property
    def lines(self) -> int:
        return sum(data.count(b"\n") + 1 for _, data in self.items)

    def search(self, needles: list[Needle]) -> list[str]:
        return [
            f"{needle.what} in {name}"
            for name, data in self.items
            for needle in needles
            if needle.value in data
        ]


def walk(root: Path) -> Iterator[Path]:
    for dirpath, _, filenames in os.walk(root):
        for name in filenames:
            path = Path(dirpath) / name
            if path.is_file() and not path.is_symlink():
                yield path


class ProcessTreeSampler:
    """Samples the command line and environment of a process and all its descendants
    (``/proc/PID/task/*/children``) every few milliseconds while it runs, so that the
    short-lived git, git-remote-https, askpass and ssh processes are seen too."""

    def __init__(self, pid: int, every: float = 0.005, *, children_only: bool = False) -> None:
        self.pid = pid
        self.children_only = children_only  # the root's own arguments are its caller's
        self.every = every
        self.samples = 0
        self.seen: dict[int, set[tuple[bytes, bytes]]] = {}  # pid -> {(cmdline, environ)}
        self.names: set[str] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="proc-sampler", daemon=True)

    def __enter__(self) -> ProcessTreeSampler:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        while not self._stop.is_set():
            tree = self._tree()
            root = self._read(tree[0]) if self.children_only else None
            for pid in tree[1 if self.children_only else 0 :]:
                read = self._read(pid)
                if read is None:
                    continue  # gone meanwhile
                cmdline, environ, comm = read
                # a child between fork and exec still shows its parent's arguments
                if root is not None and cmdline == root[0]:
                    continue
                if cmdline:
                    self.names.add(comm)
                    # a pid that exec'd (git -> git-remote-https) is kept as both
                    self.seen.setdefault(pid, set()).add((cmdline, environ))
            self.samples += 1
            self._stop.wait(self.every)

    @staticmethod
    def _read(pid: int) -> tuple[bytes, bytes, str] | None:
        try:
            return (
                Path(f"/proc/{pid}/cmdline").read_bytes(),
                Path(f"/proc/{pid}/environ").read_bytes(),
                Path(f"/proc/{pid}/comm").read_text().strip(),
            )
        except OSError:
            return None

    def _tree(self) -> list[int]:
        found, todo = [], [self.pid]
        while todo:
            pid = todo.pop()
            found.append(pid)
            try:
                tasks = os.listdir(f"/proc/{pid}/task")
            except OSError:
                continue
            for task in tasks:
                try:
                    children = Path(f"/proc/{pid}/task/{task}/children").read_text().split()
                except OSError:
                    continue
                todo += [int(c) for c in children]
        return found

    def add_to(self, haystack: Haystack) -> None:
        for pid, seen in sorted(self.seen.items()):
            for cmdline, environ in sorted(seen):
                haystack.add(f"cmdline of {pid}: {cmdline[:80]!r}", cmdline)
                haystack.add(f"environ of {pid}", environ)

    @property
    def commands(self) -> int:
        """Distinct (process, command line) pairs seen."""
        return sum(len({c for c, _ in seen}) for seen in self.seen.values())
