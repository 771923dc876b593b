"""What of a fetched commit is written to the cache's work tree: the manifest path, minus
any file larger than a manifest may be, and no more than a bound in all.

A push is compressed: 1.2 GB of repetitive text travels as ~10 MB. Checked out whole, it
fills the cache (in a Pod an emptyDir with a size limit, whose kubelet then evicts the
Pod) before the loader could refuse the file. So the fetch asks the server to leave out
blobs over the limit (``--filter=blob:limit=``, where the server allows it), and the
checkout is sparse: the files under the path that fit, each named here, and those that
do not are reported as the loader reports a file too large. Pure: the git calls are
:mod:`gitsync.source.checkout`'s.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from dataclasses import dataclass

from gitsync.errors import SourceError, quote

#: what the files checked out under the manifest path may take in all
MAX_CHECKOUT_BYTES = 256 << 20

# wildmatch treats a backslash as "the next character, literally"
_SPECIAL = frozenset("\\*?[]!# ")


@dataclass(frozen=True)
class Entry:
    """One file of a commit's tree (``git ls-tree -r -z``)."""

    mode: str
    type: str
    sha: str
    path: str


@dataclass(frozen=True)
class Listing:
    """The files a checkout writes under the manifest path, by path in the repository,
    each with its blob id, which names its bytes: a load takes the files from here
    instead of walking the tree, and knows a file it has parsed before by its id without
    reading it (with 20,000 files, the walk and the reads are most of a load).

    Given only for a tree git checks out as plain files (see :func:`plan`)."""

    #: the manifest path in the repository ("" for all of it): the files are those under it
    root: str
    blobs: Mapping[str, str]


#: modes of the files a listing may hold: plain files, executable or not
_PLAIN_MODES = frozenset(("100644", "100755"))
#: the file whose rules make a checkout's bytes differ from its blob's (eol, encoding)
_ATTRIBUTES = ".gitattributes"


@dataclass(frozen=True)
class Plan:
    #: the sparse-checkout patterns (non-cone)
    patterns: str
    #: (path in the repository, its size, or None when the server left it out unsent)
    omitted: tuple[tuple[str, int | None], ...]
    #: what the checkout writes; None when a walk must find it out
    listing: Listing | None = None


def parse_tree(out: str) -> list[Entry]:
    """``git ls-tree -r -z --full-tree`` output."""
    entries = []
    for record in out.split("\0"):
        if not record:
            continue
        meta, _, path = record.partition("\t")
        mode, type_, sha = meta.split(" ")
        entries.append(Entry(mode, type_, sha, path))
    return entries


def parse_sizes(out: str) -> dict[str, int]:
    """``git cat-file --batch-all-objects --batch-check='%(objectname) %(objectsize)'``:
    the objects the cache holds (it never asks the server for one it lacks)."""
    sizes = {}
    for line in out.splitlines():
        sha, _, size = line.partition(" ")
        if size.isdigit():
            sizes[sha] = int(size)
    return sizes


def root_of(path: str) -> str | None:
    """The manifest path as the repository's own ("" for all of it); None when it
    leaves the repository (the loader says so)."""
    norm = posixpath.normpath(path.replace("\\", "/")) if path else "."
    if norm.startswith("/") or norm == ".." or norm.startswith("../"):
        return None
    return "" if norm == "." else norm


def plan(
    entries: list[Entry],
    sizes: dict[str, int],
    path: str,
    *,
    max_file_bytes: int,
    max_total_bytes: int = MAX_CHECKOUT_BYTES,
) -> Plan:
    """The patterns that check out the files under ``path`` that fit; a
    :class:`SourceError` when those that fit are more than ``max_total_bytes`` in all."""
    root = root_of(path)
    if root is None:
        return Plan("", ())
    omitted: list[tuple[str, int | None]] = []
    blobs: dict[str, str] = {}
    plain = True
    total = 0
    for e in entries:
        link = e.type == "blob" and e.mode not in _PLAIN_MODES
        if link or posixpath.basename(e.path) == _ATTRIBUTES:
            # a symbolic link (anywhere: the path itself may go through one), or rules
            # that rewrite bytes on checkout: the loader walks what was written
            plain = False
        if e.type != "blob" or not (not root or e.path == root or e.path.startswith(root + "/")):
            continue
        size = sizes.get(e.sha)  # None: the server left it out, as over the filter's limit
        if size is None or size > max_file_bytes:
            if "\n" in e.path or "\r" in e.path or "\ufffd" in e.path:
                # no sparse-checkout pattern can name it (a line break, or bytes that are
                # not UTF-8, read here as U+FFFD): refused whole rather than written
                raise SourceError(f"file {quote(e.path)} is more than {max_file_bytes} bytes")
            omitted.append((e.path, size))
        else:
            total += size
            blobs[e.path] = e.sha
            # a name that is not UTF-8 (read as U+FFFD) is known to the walk alone
            plain = plain and "\ufffd" not in e.path
    if total > max_total_bytes:
        raise SourceError(
            f"the files under {quote(path)} are {total} bytes, more than {max_total_bytes};"
            " not checked out"
        )
    lines = ["/" + _escape(root) if root else "/*"]
    lines += ["!/" + _escape(p) for p, _ in omitted]
    listing = Listing(root, blobs) if plain else None
    return Plan("\n".join(lines) + "\n", tuple(omitted), listing)


def _escape(path: str) -> str:
    return "".join("\\" + c if c in _SPECIAL else c for c in path)
