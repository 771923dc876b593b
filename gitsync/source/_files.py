"""Finding and reading the manifest files of a checkout; private to :mod:`gitsync.source.manifests`.

The checkout is written by whoever can push, so walking it must not leave it (a symlink to
``/etc/passwd``, or to a directory outside), must not hang (a FIFO named ``x.yaml``), must
not loop (a link to a parent, a link to itself), and must not read more than the size
limit. Whatever cannot be read is a :class:`ManifestError` of that one entry; the walk goes
on. The text handed on is valid UTF-8 made of the characters YAML allows, so that every
later error has a line and a column.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path

from gitsync.errors import ManifestError

EXTENSIONS = (".yaml", ".yml")


def within(root: Path, target: Path) -> bool:
    return target == root or root in target.parents


#: directories below the manifest path a walk goes into; deeper ones are an error of their
#: own. A commit may nest thousands (git checks them out): walked unbounded, the walk
#: costs CPU for nothing, and no repository lays out MyApps that deep
MAX_DEPTH = 64


def manifest_files(
    root: Path, start: Path, errors: list[ManifestError], max_depth: int = MAX_DEPTH
) -> Iterator[tuple[str, Path]]:
    """(path relative to the root, posix; path to open), sorted, hidden entries skipped."""
    if start.is_file():
        yield start.relative_to(root).as_posix(), start
    else:
        yield from _walk(root, start, errors, max_depth)


def _walk(
    root: Path, start: Path, errors: list[ManifestError], max_depth: int
) -> Iterator[tuple[str, Path]]:
    """Depth first, in sorted order, with a stack of its own: the depth of a checkout is
    the pusher's to choose, and recursion would end in a RecursionError past ~1000."""
    seen: set[str] = set()
    # one iterator of sorted entries per directory being walked, the deepest last
    stack: list[Iterator[os.DirEntry[str]]] = []
    entries = _entries(root, start, seen, errors)
    if entries is not None:
        stack.append(entries)
    while stack:
        entry = next(stack[-1], None)
        if entry is None:
            stack.pop()
            continue
        if entry.name.startswith("."):
            continue  # .git, .github, .gitlab-ci.yml, editor files: never MyApps
        here = Path(entry.path)
        rel = here.relative_to(root).as_posix()
        is_manifest = entry.name.endswith(EXTENSIONS)
        try:
            is_dir = _is_dir(root, entry, here, is_manifest, rel, errors)
        except OSError as e:
            # a symlink loop, or an entry that went away: that file fails, the rest loads
            # (a loop not named like a manifest holds none, as a dangling link holds none)
            if is_manifest:
                errors.append(ManifestError(rel, f"cannot read: {reason(e)}"))
            continue
        if is_dir is None:
            continue
        if is_dir:
            if len(stack) > max_depth:  # the start is on the stack too
                msg = f"directory nested more than {max_depth} levels below the path; not read"
                errors.append(ManifestError(rel, msg))
                continue
            entries = _entries(root, here, seen, errors)
            if entries is not None:
                stack.append(entries)
        elif is_manifest:
            real_file = os.path.realpath(here)
            if real_file not in seen:  # linked twice is still one file
                seen.add(real_file)
                yield rel, here


def _entries(
    root: Path, directory: Path, seen: set[str], errors: list[ManifestError]
) -> Iterator[os.DirEntry[str]] | None:
    """The entries of a directory not walked yet, sorted by name; None to skip it."""
    real_dir = os.path.realpath(directory)
    if real_dir in seen:  # a symlinked directory inside the repository may point back up
        return None
    seen.add(real_dir)
    try:
        with os.scandir(directory) as it:
            return iter(sorted(it, key=lambda e: e.name))
    except OSError as e:
        rel = directory.relative_to(root).as_posix()
        errors.append(ManifestError(rel, f"cannot read: {reason(e)}"))
        return None


def reason(e: OSError) -> str:
    # strerror alone: str(e) repeats the path, which the message already names (quoted)
    return e.strerror or type(e).__name__


def _is_dir(
    root: Path,
    entry: os.DirEntry[str],
    here: Path,
    is_manifest: bool,
    rel: str,
    errors: list[ManifestError],
) -> bool | None:
    """Whether to walk into the entry; None to skip it. Raises OSError (ELOOP…)."""
    if entry.is_symlink():
        real = Path(os.path.realpath(here))
        if not within(root, real):
            # a checkout must never make us read the host's files (a link to /etc/passwd)
            if is_manifest or real.is_dir():
                errors.append(ManifestError(rel, "symlink resolves outside the repository"))
            return None
        if any(part.startswith(".") for part in real.relative_to(root).parts):
            # hidden entries are never read (the walk skips them), and a link must not
            # read them either: .git holds the fetch's state, not manifests
            if is_manifest or real.is_dir():
                msg = "symlink resolves to a hidden entry of the repository (such as .git)"
                errors.append(ManifestError(rel, msg))
            return None
    return entry.is_dir()


def position(text: str, index: int) -> tuple[int, int]:
    """1-based line and column of the character at ``index``, breaking lines where
    libyaml does (LF, CR, CRLF, NEL, LS, PS), so the two agree on line numbers."""
    lines = text[:index].splitlines(keepends=True)
    if not lines or lines[-1] != lines[-1].rstrip("\r\n\x85\u2028\u2029"):
        return len(lines) + 1, 1
    return len(lines), len(lines[-1]) + 1


# YAML allows tab, line breaks and printable Unicode only; libyaml reports any other
# character by its offset alone, and takes a byte order mark after the start of the
# file for part of a key, so both are found here, with the line and column they are at
_FORBIDDEN = re.compile(
    "[^\t\n\r\x20-\x7e\x85\xa0-\ud7ff\ue000-\ufefe\uff00-\ufffd\U00010000-\U0010ffff]"
)


def read_bytes(rel: str, file: str | Path, max_bytes: int) -> bytes:
    """The bytes of one manifest file (a regular file of at most ``max_bytes``)."""
    try:
        # O_NONBLOCK: opening a FIFO named x.yaml must not hang the sync
        fd = os.open(file, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as e:
        raise ManifestError(rel, f"cannot open: {reason(e)}") from None
    try:
        data = _read(rel, fd, max_bytes)
    except OSError as e:  # EIO, a file that went away under us: this file fails alone
        raise ManifestError(rel, f"cannot read: {reason(e)}") from None
    return data


def _read(rel: str, fd: int, max_bytes: int) -> bytes:
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise ManifestError(rel, "not a regular file")
        if st.st_size > max_bytes:  # refused before reading any of it
            raise ManifestError(rel, f"file is {st.st_size} bytes, more than {max_bytes}")
        data = f.read(max_bytes + 1)  # it may have grown since fstat
    if len(data) > max_bytes:
        raise ManifestError(rel, f"file is more than {max_bytes} bytes")
    return data


# UTF-32 first: its little-endian mark starts with UTF-16's
_OTHER_ENCODINGS = (
    (b"\xff\xfe\x00\x00", "UTF-32"),
    (b"\x00\x00\xfe\xff", "UTF-32"),
    (b"\xff\xfe", "UTF-16"),
    (b"\xfe\xff", "UTF-16"),
)


def decode(rel: str, data: bytes) -> str:
    """The text of a manifest file's bytes: UTF-8 (a BOM only at the start) with no
    character YAML refuses; a :class:`ManifestError` placing the first that is not."""
    for mark, encoding in _OTHER_ENCODINGS:
        if data.startswith(mark):
            msg = f"the file is {encoding} (it starts with its byte order mark); write it as UTF-8"
            raise ManifestError(rel, msg, line=1, column=1)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        good = data[: e.start].decode("utf-8-sig")
        line, column = position(good, len(good))
        msg = f"not valid UTF-8 (byte {e.start})"
        raise ManifestError(rel, msg, line=line, column=column) from None
    bad = _FORBIDDEN.search(text)
    if bad is not None:
        line, column = position(text, bad.start())
        char = bad.group()
        if char == "\ufeff":
            msg = "a byte order mark (U+FEFF) is allowed only at the start of the file"
        else:
            msg = f"character U+{ord(char):04X} is not allowed in YAML"
        raise ManifestError(rel, msg, line=line, column=column)
    return text
