"""Load and validate the MyApp manifests of a checkout.

Pure: reads files under a root directory, talks to no cluster and no network. Every problem
is a :class:`ManifestError` naming file, document, line and field; one broken file never
stops the others from loading (the caller skips prune when anything failed).

This is the public face of loading (:func:`load`, :class:`Limits`, :class:`DesiredApp`,
:class:`LoadResult`): it finds the files without leaving the repository, reads each one
within its limits, and ties the two lower layers together, so that a problem found on a
field path comes back as a file and line. Composing YAML at a bounded cost is
:mod:`gitsync._yaml`; what a valid MyApp is, is :mod:`gitsync.schema`.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import yaml

from gitsync._yaml import Composer, Loader, TooComplex, line_of
from gitsync.api import Obj
from gitsync.errors import ConfigError, ManifestError
from gitsync.schema import Checker, Problems, field_name, is_dns_label

_EXTENSIONS = (".yaml", ".yml")


@dataclass(frozen=True)
class Limits:
    """Bounds on what one manifest file may cost to load."""

    max_file_bytes: int = 1 << 20
    max_depth: int = 32
    max_aliases: int = 100
    max_documents: int = 1000


@dataclass(frozen=True)
class DesiredApp:
    """One valid MyApp from Git, and where it was written."""

    obj: Obj
    file: str
    document: int
    line: int

    @property
    def key(self) -> str:
        meta = self.obj["metadata"]
        return f"{meta['namespace']}/{meta['name']}"


@dataclass(frozen=True)
class LoadResult:
    apps: tuple[DesiredApp, ...]
    errors: tuple[ManifestError, ...]
    files: int

    @property
    def ok(self) -> bool:
        return not self.errors


def load(
    root: Path,
    path: str = ".",
    *,
    default_namespace: str = "default",
    allowed_namespaces: frozenset[str] | None = None,
    denied_namespaces: tuple[str, ...] = (),
    limits: Limits = Limits(),
) -> LoadResult:
    """Load every ``*.yaml``/``*.yml`` under ``root/path``, in sorted order."""
    real_root = Path(os.path.realpath(root))
    start = Path(os.path.realpath(real_root / path))
    if not _within(real_root, start):
        raise ConfigError(f"path {path!r} is outside the repository")
    if not start.exists():
        raise ConfigError(f"path {path!r} does not exist in the repository")
    if not is_dns_label(default_namespace):
        raise ConfigError(f"default namespace {default_namespace!r} is not a DNS-1123 label")
    checker = Checker(default_namespace, allowed_namespaces, denied_namespaces)
    apps: list[DesiredApp] = []
    errors: list[ManifestError] = []
    files = 0
    for rel, file in _manifest_files(real_root, start, errors):
        files += 1
        _load_file(rel, file, checker, limits, apps, errors)
    unique, duplicates = _split_duplicates(apps)
    return LoadResult(apps=unique, errors=(*errors, *duplicates), files=files)


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
            f"MyApp {key} is also defined at {same[0].file}:{same[0].line}"
            f" (document {same[0].document})",
            document=other.document,
            line=other.line,
            field="metadata.name",
        )
        for key, same in by_key.items()
        for other in same[1:]
    ]
    return tuple(app for app in apps if len(by_key[app.key]) == 1), errors


# --- finding the files -------------------------------------------------------------------


def _within(root: Path, target: Path) -> bool:
    return target == root or root in target.parents


def _manifest_files(
    root: Path, start: Path, errors: list[ManifestError]
) -> Iterator[tuple[str, Path]]:
    """(path relative to the root, posix; path to open), sorted, hidden entries skipped."""
    if start.is_file():
        yield start.relative_to(root).as_posix(), start
    else:
        yield from _walk(root, start, set(), errors)


def _walk(
    root: Path, directory: Path, seen: set[str], errors: list[ManifestError]
) -> Iterator[tuple[str, Path]]:
    real_dir = os.path.realpath(directory)
    if real_dir in seen:  # a symlinked directory inside the repository may point back up
        return
    seen.add(real_dir)
    try:
        entries = sorted(os.scandir(directory), key=lambda e: e.name)
    except OSError as e:
        errors.append(ManifestError(directory.relative_to(root).as_posix(), e.strerror or "?"))
        return
    for entry in entries:
        if entry.name.startswith("."):
            continue  # .git, .github, .gitlab-ci.yml, editor files: never MyApps
        here = Path(entry.path)
        rel = here.relative_to(root).as_posix()
        is_manifest = entry.name.endswith(_EXTENSIONS)
        if entry.is_symlink():
            real = Path(os.path.realpath(here))
            if not _within(root, real):
                # a checkout must never make us read the host's files (a link to /etc/passwd)
                if is_manifest or real.is_dir():
                    errors.append(ManifestError(rel, "symlink resolves outside the repository"))
                continue
        if entry.is_dir():
            yield from _walk(root, here, seen, errors)
        elif is_manifest:
            real_file = os.path.realpath(here)
            if real_file not in seen:  # linked twice is still one file
                seen.add(real_file)
                yield rel, here


# --- reading and composing one file ------------------------------------------------------


def _load_file(
    rel: str,
    file: Path,
    checker: Checker,
    limits: Limits,
    apps: list[DesiredApp],
    errors: list[ManifestError],
) -> None:
    try:
        text = _read_text(rel, file, limits.max_file_bytes)
    except ManifestError as e:
        errors.append(e)
        return
    loader = Loader(text)
    composer = Composer(loader, max_depth=limits.max_depth, max_aliases=limits.max_aliases)
    try:
        for node in composer.documents():
            if composer.index >= limits.max_documents:
                msg = f"more than {limits.max_documents} documents in one file"
                errors.append(ManifestError(rel, msg, document=composer.index))
                return
            _check_document(rel, composer, node, loader, checker, apps, errors)
    except yaml.MarkedYAMLError as e:
        line = e.problem_mark.line + 1 if e.problem_mark else None
        msg = f"invalid YAML: {e.problem or e.context}"
        errors.append(ManifestError(rel, msg, document=composer.index, line=line))
    except (yaml.YAMLError, TooComplex) as e:
        line = e.line if isinstance(e, TooComplex) else None
        errors.append(ManifestError(rel, str(e), document=composer.index, line=line))
    finally:
        loader.dispose()


def _read_text(rel: str, file: Path, max_bytes: int) -> str:
    try:
        # O_NONBLOCK: opening a FIFO named x.yaml must not hang the sync
        fd = os.open(file, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as e:
        raise ManifestError(rel, f"cannot open: {e.strerror}") from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise ManifestError(rel, "not a regular file")
        if st.st_size > max_bytes:  # refused before reading any of it
            raise ManifestError(rel, f"file is {st.st_size} bytes, more than {max_bytes}")
        data = f.read(max_bytes + 1)  # it may have grown since fstat
    if len(data) > max_bytes:
        raise ManifestError(rel, f"file is more than {max_bytes} bytes")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise ManifestError(rel, f"not valid UTF-8 (byte {e.start})") from None


# --- one document ------------------------------------------------------------------------


def _check_document(
    rel: str,
    composer: Composer,
    node: yaml.Node,
    loader: yaml.SafeLoader,
    checker: Checker,
    apps: list[DesiredApp],
    errors: list[ManifestError],
) -> None:
    index, line = composer.index, node.start_mark.line + 1
    if node.tag == "tag:yaml.org,2002:null":
        return  # an empty document (a stray "---", or only comments) is no error
    try:
        value = loader.construct_document(node)
    except (yaml.YAMLError, ValueError, TypeError, OverflowError) as e:
        mark = getattr(e, "problem_mark", None)
        where = mark.line + 1 if mark is not None else line
        problem = getattr(e, "problem", None) or str(e)
        errors.append(ManifestError(rel, f"invalid YAML: {problem}", document=index, line=where))
        return
    problems: Problems = []
    obj = checker.check(value, problems)
    for key, key_line in composer.duplicate_keys:
        errors.append(ManifestError(rel, f"duplicate key {key!r}", document=index, line=key_line))
    for path, message in problems:
        field = field_name(path) or None
        at = line_of(node, path)
        errors.append(ManifestError(rel, message, document=index, line=at, field=field))
    if obj is not None and not problems and not composer.duplicate_keys:
        apps.append(DesiredApp(obj=obj, file=rel, document=index, line=line))
