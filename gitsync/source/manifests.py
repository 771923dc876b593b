"""Load and validate the MyApp manifests of a checkout.

Pure: reads files under a root directory, talks to no cluster and no network. Every problem
is a :class:`ManifestError` naming file, document, line and field; one broken file never
stops the others from loading (the caller skips prune when anything failed).

This is the public face of loading (:func:`load`, :class:`Limits`, :class:`DesiredApp`,
:class:`LoadResult`): it finds the files without leaving the repository, reads each one
within its limits, and ties the two lower layers together, so that a problem found on a
field path comes back as a file, line and column. Finding and reading the files safely is
:mod:`gitsync.source._files`; composing YAML at a bounded cost is
:mod:`gitsync.source._yaml`; what a valid MyApp is, is :mod:`gitsync.model.schema`. Errors are
capped per file and per load, the rest counted, so that a hostile file cannot flood the
output, the logs or memory.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import yaml

from gitsync.engine.fieldpaths import Lines, line_in, lines_of
from gitsync.errors import ConfigError, ManifestError, one_line, plain_or_quote, quote
from gitsync.model import order as orderlib
from gitsync.model import stored
from gitsync.model.api import Obj
from gitsync.model.compact import SHARED
from gitsync.model.schema import Checker, Problems, field_name, is_dns_label, key_text
from gitsync.source._files import (
    EXTENSIONS,
    MAX_DEPTH,
    decode,
    manifest_files,
    position,
    read_bytes,
    within,
)
from gitsync.source._yaml import Composer, Loader, TooComplex, line_of
from gitsync.source.sparse import Listing


@dataclass(frozen=True)
class Limits:
    """Bounds on what one manifest file may cost to load."""

    max_file_bytes: int = 1 << 20
    max_depth: int = 32
    #: directories below the manifest path the walk goes into (git checks out thousands)
    max_dir_depth: int = MAX_DEPTH
    max_aliases: int = 100
    max_documents: int = 1000
    #: a document, aliases expanded, may be no larger than a file may be; nor may the
    #: MyApp it holds, as the API server stores it (JSON)
    max_document_bytes: int = 1 << 20
    #: one value (a scalar, a list, a mapping), aliases expanded; Kubernetes caps all of
    #: an object's annotations together at this size
    max_value_bytes: int = 256 << 10
    #: errors reported per file and per load; the rest are counted ("… and N more"), so
    #: a hostile file cannot flood the output, the logs or memory
    max_errors_per_file: int = 20
    max_errors: int = 200


@dataclass(frozen=True)
class DesiredApp:
    """One valid MyApp from Git, and where it was written."""

    obj: Obj
    file: str
    document: int
    line: int
    column: int = 1
    #: the line of each of its fields, kept from the YAML nodes (which are not), so that
    #: the drift page needs neither the file nor a parser
    lines: Lines = field(default=None, compare=False, repr=False)

    @cached_property
    def key(self) -> str:
        meta = self.obj["metadata"]
        return f"{meta['namespace']}/{meta['name']}"


@dataclass(frozen=True)
class LoadResult:
    apps: tuple[DesiredApp, ...]
    #: the errors to show, at most ``Limits.max_errors_per_file`` per file and
    #: ``Limits.max_errors`` in all, each cut list ending with an "… and N more" entry
    errors: tuple[ManifestError, ...]
    files: int
    #: every error found, shown or not
    error_count: int = 0

    @property
    def ok(self) -> bool:
        return not self.errors


def ordering(apps: Iterable[DesiredApp], exists: Callable[[str], bool]) -> dict[str, ManifestError]:
    """The MyApps whose ``spec.dependsOn`` cannot be ordered (:func:`gitsync.model.order.problems`),
    each with an error at the line of its ``dependsOn``; ``exists(key)``: whether a MyApp
    outside these is in the cluster."""
    by_key = {app.key: app for app in apps}
    graph = {key: orderlib.dependencies(app.obj) for key, app in by_key.items()}
    out: dict[str, ManifestError] = {}
    for key, message in sorted(orderlib.problems(graph, exists).items()):
        app = by_key[key]
        line = line_in(app.lines, app.obj, ("f:spec", "f:dependsOn")) or app.line
        out[key] = ManifestError(
            app.file, message, document=app.document, line=line, field="spec.dependsOn"
        )
    return out


def load(
    root: Path,
    path: str = ".",
    *,
    default_namespace: str = "default",
    allowed_namespaces: frozenset[str] | None = None,
    denied_namespaces: tuple[str, ...] = (),
    watch_namespace: str | None = None,
    limits: Limits = Limits(),
    cache: ParseCache | None = None,
    omitted: Iterable[tuple[str, int | None]] = (),
    listing: Listing | None = None,
) -> LoadResult:
    """Load every ``*.yaml``/``*.yml`` under ``root/path``, in sorted order.

    ``watch_namespace``: the daemon's operator sees that namespace only, so a MyApp that
    Git puts elsewhere could never be observed (it would be "created" every pass, its
    drift never seen): it is refused here, like a namespace that is not allowed.

    ``cache``: what the previous load with that cache found in each file; a file whose
    path and bytes are the same is not parsed or checked again.

    ``omitted``: files the checkout left out as too large (path in the repository, size
    or None when unknown); each under ``path`` is an error, as if it had been read.

    ``listing``: the files the checkout wrote, with their blob ids; taken instead of a
    walk when it gives the same files (see :func:`_listed`), and a file whose path and
    blob are in ``cache`` is not even read. The result is the walk's, file for file.
    """
    real_root = Path(os.path.realpath(root))
    start = Path(os.path.realpath(real_root / path))
    if not within(real_root, start):
        raise ConfigError(f"path {path!r} is outside the repository")
    if not start.exists():
        raise ConfigError(f"path {path!r} does not exist in the repository")
    if not is_dns_label(default_namespace):
        raise ConfigError(f"default namespace {default_namespace!r} is not a DNS-1123 label")
    checker = Checker(
        default_namespace, allowed_namespaces, denied_namespaces, watched=watch_namespace
    )
    apps: list[DesiredApp] = []
    # bounded as they are found: a tree of a hundred thousand broken files costs no more
    errors = _Capped(limits.max_errors)
    files = 0
    parsed = cache if cache is not None else ParseCache()
    parsed.begin(
        (default_namespace, allowed_namespaces, denied_namespaces, watch_namespace, limits)
    )
    listed: Iterable[tuple[str, str, str | None]] | None
    listed = _listed(listing, real_root, start, limits.max_dir_depth)
    if listed is None:
        walked = manifest_files(real_root, start, errors, limits.max_dir_depth)
        listed = ((rel, str(file), None) for rel, file in walked)
    for rel, file, blob in listed:
        files += 1
        found = _load_file(rel, file, checker, limits, parsed, blob)
        apps.extend(found.apps)
        errors.extend(found.errors)
    parsed.end()
    for rel, size in omitted:
        hidden = any(part.startswith(".") for part in rel.split("/"))  # the walk skips them
        if within(start, real_root / rel) and rel.endswith(EXTENSIONS) and not hidden:
            files += 1
            if size is None:
                msg = f"file is more than {limits.max_file_bytes} bytes"
            else:
                msg = f"file is {size} bytes, more than {limits.max_file_bytes}"
            errors.append(ManifestError(rel, msg))
    unique, duplicates = _split_duplicates(apps)
    errors.extend(duplicates)
    return LoadResult(
        apps=unique, errors=tuple(errors.shown("")), files=files, error_count=errors.total
    )


def _listed(
    listing: Listing | None, root: Path, start: Path, max_depth: int
) -> list[tuple[str, str, str | None]] | None:
    """The manifest files the walk would find under ``start``, in its order, from the
    checkout's listing; None when only the walk can tell (no listing, a listing of
    another path, a single file, a directory deeper than the walk goes)."""
    if listing is None or not start.is_dir():
        return None
    prefix = start.relative_to(root).as_posix()
    prefix = "" if prefix == "." else prefix
    if listing.root and not (prefix == listing.root or prefix.startswith(listing.root + "/")):
        return None  # the listing holds less than the path
    out: list[tuple[tuple[str, ...], str, str]] = []
    for rel, blob in listing.blobs.items():
        if prefix:
            if not rel.startswith(prefix + "/"):
                continue
            below = rel[len(prefix) + 1 :].split("/")
        else:
            below = rel.split("/")
        if len(below) - 1 > max_depth:
            return None  # the walk says which directory it did not read
        if any(part.startswith(".") for part in below):
            continue  # hidden, as the walk skips it
        if below[-1].endswith(EXTENSIONS):
            out.append((tuple(below), rel, blob))
    # the walk's order: depth first, each directory's entries sorted by name
    out.sort()
    base = str(root)
    return [(rel, f"{base}/{rel}", blob) for _, rel, blob in out]


@dataclass(frozen=True)
class _Found:
    """What one file holds: its valid MyApps, and its errors as shown (at most
    ``Limits.max_errors_per_file``, then an "… and N more" entry)."""

    apps: tuple[DesiredApp, ...]
    errors: tuple[ManifestError, ...]


class ParseCache:
    """What each file of the last load held, by its path and a digest of its bytes.

    A commit changes a few files of thousands: with the cache, a load still reads every
    file (to learn which changed) but parses and checks only the new ones. The entries
    are the files of the last load alone, and every entry goes when the settings that
    checked them (namespaces, limits) change. The objects handed out are shared from
    one load to the next: callers copy before they edit (``render.desired_myapp`` does).
    For one loader at a time (a Syncer's passes never overlap).
    """

    def __init__(self) -> None:
        self._settings: object = None
        self._found: dict[tuple[str, bytes], _Found] = {}
        self._next: dict[tuple[str, bytes], _Found] = {}
        #: files parsed by the last load, and files taken from the cache
        self.parsed = 0
        self.reused = 0

    def begin(self, settings: object) -> None:
        if settings != self._settings:
            self._found = {}
            self._settings = settings
        self._next = {}
        self.parsed = self.reused = 0

    def get(self, key: tuple[str, bytes]) -> _Found | None:
        found = self._found.get(key)
        if found is not None:
            self.reused += 1
            self._next[key] = found
        return found

    def put(self, key: tuple[str, bytes], found: _Found) -> None:
        self.parsed += 1
        self._next[key] = found

    def end(self) -> None:
        """The files of this load are the cache now; those gone from the tree are dropped."""
        self._found, self._next = self._next, {}


class _More(ManifestError):
    """The "… and N more" entry that stands for ``hidden`` errors not shown."""

    def __init__(self, file: str, hidden: int, where: str = "") -> None:
        self.hidden = hidden
        super().__init__(file, f"… and {hidden} more errors" + (f" {where}" if where else ""))


class _Capped(list[ManifestError]):
    """Errors: the first ``cap`` are kept, the rest only counted (a :class:`_More` entry
    counts as the errors it stands for)."""

    def __init__(self, cap: int) -> None:
        super().__init__()
        self.cap = cap
        self.total = 0
        self.hidden = 0

    def append(self, error: ManifestError) -> None:
        n = error.hidden if isinstance(error, _More) else 1
        self.total += n
        if len(self) < self.cap:
            super().append(error)
        else:
            self.hidden += n

    def extend(self, errors: Iterable[ManifestError]) -> None:
        for error in errors:
            self.append(error)

    def drop(self, n: int) -> None:
        """``n`` more errors, found and not kept."""
        self.total += n
        self.hidden += n

    def shown(self, file: str, where: str = "") -> list[ManifestError]:
        return [*self, _More(file, self.hidden, where)] if self.hidden else list(self)


def _split_duplicates(
    apps: list[DesiredApp],
) -> tuple[tuple[DesiredApp, ...], list[ManifestError]]:
    """Two definitions of one MyApp conflict: apply neither (either could be the intended
    one, and alternating would flap), and name both places."""
    by_key: dict[str, list[DesiredApp]] = {}
    for app in apps:
        by_key.setdefault(app.key, []).append(app)
    errors = [
        ManifestError(
            other.file,
            f"MyApp {key} is also defined at {plain_or_quote(same[0].file)}:{same[0].line}"
            f" (document {same[0].document})",
            document=other.document,
            line=other.line,
            column=other.column,
            field="metadata.name",
        )
        for key, same in by_key.items()
        for other in same[1:]
    ]
    return tuple(app for app in apps if len(by_key[app.key]) == 1), errors


# --- reading and composing one file ------------------------------------------------------


def _load_file(
    rel: str, file: str, checker: Checker, limits: Limits, cache: ParseCache, blob: str | None
) -> _Found:
    """What one file holds; ``blob``: its blob id, when the checkout's listing gave it
    (the file is then known by it, and read only when the cache does not hold it)."""
    if blob is not None:
        key = (rel, b"git:" + blob.encode())
        found = cache.get(key)
        if found is not None:
            return found
    try:
        data = read_bytes(rel, file, limits.max_file_bytes)
    except ManifestError as e:  # not a regular file, too large, unreadable: not cached
        return _Found((), (e,))
    if blob is None:
        key = (rel, hashlib.blake2b(data, digest_size=32).digest())
        found = cache.get(key)
    if found is None:
        apps: list[DesiredApp] = []
        errors = _Capped(limits.max_errors_per_file)
        _parse_file(rel, data, checker, limits, apps, errors)
        found = _Found(tuple(apps), tuple(errors.shown(rel, "in this file")))
        cache.put(key, found)
    return found


def _parse_file(
    rel: str,
    data: bytes,
    checker: Checker,
    limits: Limits,
    apps: list[DesiredApp],
    errors: _Capped,
) -> None:
    try:
        text = decode(rel, data)
    except ManifestError as e:
        errors.append(e)
        return
    loader = Loader(text)
    composer = Composer(
        loader,
        max_depth=limits.max_depth,
        max_aliases=limits.max_aliases,
        max_document_bytes=limits.max_document_bytes,
        max_value_bytes=limits.max_value_bytes,
    )
    try:
        for node in composer.documents():
            if composer.index >= limits.max_documents:
                msg = f"more than {limits.max_documents} documents in one file"
                line, column = node.start_mark.line + 1, node.start_mark.column + 1
                errors.append(
                    ManifestError(rel, msg, document=composer.index, line=line, column=column)
                )
                return
            _check_document(rel, composer, node, loader, checker, limits, apps, errors)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        msg = f"invalid YAML: {one_line(e.problem or e.context or 'syntax error')}"
        errors.append(_at(rel, msg, mark, composer.document))
    except TooComplex as e:
        errors.append(
            ManifestError(rel, str(e), document=composer.document, line=e.line, column=e.column)
        )
    except yaml.YAMLError as e:  # a reader error: decode refuses those characters first
        line, column = position(text, getattr(e, "position", 0))
        msg = f"invalid YAML: {one_line(getattr(e, 'reason', '') or str(e))}"
        errors.append(ManifestError(rel, msg, line=line, column=column))
    finally:
        loader.dispose()


def _at(rel: str, message: str, mark: object, document: int | None) -> ManifestError:
    line = getattr(mark, "line", None)
    column = getattr(mark, "column", None)
    return ManifestError(
        rel,
        message,
        document=document if document is not None and document >= 0 else None,
        line=line + 1 if line is not None else None,
        column=column + 1 if column is not None else None,
    )


# --- one document ------------------------------------------------------------------------


def _check_document(
    rel: str,
    composer: Composer,
    node: yaml.Node,
    loader: yaml.SafeLoader,
    checker: Checker,
    limits: Limits,
    apps: list[DesiredApp],
    errors: _Capped,
) -> None:
    index, line, column = composer.index, node.start_mark.line + 1, node.start_mark.column + 1
    if node.tag == "tag:yaml.org,2002:null":
        return  # an empty document (a stray "---", or only comments) is no error
    try:
        value = loader.construct_document(node)
    except (yaml.YAMLError, ValueError, TypeError, OverflowError) as e:
        mark = getattr(e, "problem_mark", None) or node.start_mark
        problem = one_line(getattr(e, "problem", None) or str(e))
        errors.append(_at(rel, f"invalid YAML: {problem}", mark, index))
        return
    problems = Problems(limit=errors.cap)
    obj = checker.check(value, problems)
    for key, key_line, key_column in composer.duplicate_keys:
        msg = f"duplicate key {quote(key)}"
        errors.append(ManifestError(rel, msg, document=index, line=key_line, column=key_column))
    for path, message in problems:
        field = field_name(path) or None
        at, col = line_of(node, path, key_text)
        errors.append(ManifestError(rel, message, document=index, line=at, column=col, field=field))
    errors.drop(problems.dropped)
    if obj is not None and not problems and not composer.duplicate_keys:
        nbytes = stored.size(obj)
        if nbytes > limits.max_document_bytes:
            # the YAML's bytes undercount: JSON writes a control character in six, and
            # the object must still fit in etcd once gitsync adds its status
            msg = (
                f"the MyApp is {nbytes} bytes as the API server stores it (JSON, control"
                f" characters escaped), more than {limits.max_document_bytes}"
            )
            errors.append(ManifestError(rel, msg, document=index, line=line, column=column))
            return
        apps.append(
            DesiredApp(
                # compacted: held until the file changes, sharing its nodes with the
                # live MyApp's in the cache
                obj=SHARED.compact(obj),
                file=rel,
                document=index,
                line=line,
                column=column,
                lines=lines_of(node),
            )
        )
