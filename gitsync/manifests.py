"""Load and validate the MyApp manifests of a checkout.

Pure: reads files under a root directory, talks to no cluster and no network. Every problem
is a :class:`ManifestError` naming file, document, line and field; one broken file never
stops the others from loading (the caller skips prune when anything failed).
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import yaml

from gitsync.api import (
    API_VERSION,
    DRIFT_POLICIES,
    KIND,
    MANAGED_BY,
    MANAGED_BY_LABEL,
    SOURCE_LABEL,
    SOURCE_PATH_ANNOTATION,
    Obj,
)
from gitsync.errors import ConfigError, ManifestError

# libyaml parses ~10x faster than the pure-Python parser and gives the same events and marks
_Loader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

_EXTENSIONS = (".yaml", ".yml")
# aliases share nodes, so a small file can stand for a huge tree; a 1 MiB file of plain YAML
# has well under this many nodes, so anything above is amplification, refused
_MAX_NODES_PER_FILE = 1_000_000
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_QUALIFIED_KEY = re.compile(
    r"([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
)
_LABEL_VALUE = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?")
# Kubernetes quantities (resource.Quantity), non-negative: 100m, 1.5, 128Mi, 1e3
_QUANTITY = re.compile(r"(\d+(\.\d*)?|\.\d+)([KMGTPE]i|[numkMGTPE]|[eE][+-]?\d+)?")
_SPEC_FIELDS = ("image", "replicas", "port", "env", "resources", "driftPolicy", "suspend")
_INT32_MAX = 2**31 - 1
_RESERVED = {"labels": (SOURCE_LABEL, MANAGED_BY_LABEL), "annotations": (SOURCE_PATH_ANNOTATION,)}

FieldPath = tuple[str | int, ...]


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
    limits: Limits = Limits(),
) -> LoadResult:
    """Load every ``*.yaml``/``*.yml`` under ``root/path``, in sorted order."""
    real_root = Path(os.path.realpath(root))
    start = Path(os.path.realpath(real_root / path))
    if not _within(real_root, start):
        raise ConfigError(f"path {path!r} is outside the repository")
    if not start.exists():
        raise ConfigError(f"path {path!r} does not exist in the repository")
    if not _is_dns_label(default_namespace):
        raise ConfigError(f"default namespace {default_namespace!r} is not a DNS-1123 label")
    checker = _Checker(default_namespace, allowed_namespaces)
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
    checker: _Checker,
    limits: Limits,
    apps: list[DesiredApp],
    errors: list[ManifestError],
) -> None:
    try:
        text = _read_text(rel, file, limits.max_file_bytes)
    except ManifestError as e:
        errors.append(e)
        return
    loader = _Loader(text)
    composer = _Composer(loader, limits)
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
    except (yaml.YAMLError, _TooComplex) as e:
        line = e.line if isinstance(e, _TooComplex) else None
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


class _TooComplex(Exception):
    """A limit was hit while composing; the rest of the file is not read."""

    def __init__(self, message: str, mark: Any) -> None:
        super().__init__(message)
        self.line: int | None = mark.line + 1 if mark is not None else None


@dataclass
class _Built:
    node: yaml.Node
    size: int  # nodes in the tree once aliases are expanded
    aliases: int  # alias uses in the tree once aliases are expanded


class _Composer:
    """Builds nodes from parser events, bounding depth and alias expansion as it goes.

    libyaml's composer cannot be hooked, and the alias bomb is cheap to compose (nodes are
    shared) but explodes in whatever walks the result; so count here what a walk would see.
    """

    def __init__(self, loader: Any, limits: Limits) -> None:
        self._loader = loader
        self._limits = limits
        self._anchors: dict[str, _Built] = {}
        self._open: set[str] = set()
        self._file_nodes = 0
        self.index = -1
        self.duplicate_keys: list[tuple[str, int]] = []

    def documents(self) -> Iterator[yaml.Node]:
        self._loader.get_event()  # StreamStartEvent
        while not self._loader.check_event(yaml.StreamEndEvent):
            ev = self._loader.get_event()  # DocumentStartEvent
            self.index += 1
            self._anchors.clear()  # anchors never cross documents
            self.duplicate_keys = []
            built = self._compose(0)
            self._loader.get_event()  # DocumentEndEvent
            self._file_nodes += built.size
            if self._file_nodes > _MAX_NODES_PER_FILE:
                raise _TooComplex("too many YAML nodes once aliases are expanded", ev.start_mark)
            yield built.node

    def _compose(self, depth: int) -> _Built:
        ev = self._loader.get_event()
        if isinstance(ev, yaml.AliasEvent):
            return self._alias(ev)
        if isinstance(ev, yaml.ScalarEvent):
            tag = ev.tag
            if tag is None or tag == "!":
                tag = self._loader.resolve(yaml.ScalarNode, ev.value, ev.implicit)
            marks: Any = (ev.start_mark, ev.end_mark)  # libyaml's Mark type, same fields
            node = yaml.ScalarNode(tag, ev.value, marks[0], marks[1], style=ev.style)
            return self._anchor(ev, _Built(node, 1, 0))
        if depth >= self._limits.max_depth:
            raise _TooComplex(f"nested deeper than {self._limits.max_depth}", ev.start_mark)
        if ev.anchor is not None:
            self._open.add(ev.anchor)
        if isinstance(ev, yaml.SequenceStartEvent):
            built = self._sequence(ev, depth)
        else:
            built = self._mapping(ev, depth)
        self._open.discard(ev.anchor or "")
        return self._anchor(ev, built)

    def _alias(self, ev: yaml.AliasEvent) -> _Built:
        if ev.anchor in self._open:
            raise _TooComplex(f"recursive alias *{ev.anchor}", ev.start_mark)
        target = self._anchors.get(ev.anchor or "")
        if target is None:
            raise _TooComplex(f"undefined alias *{ev.anchor}", ev.start_mark)
        built = _Built(target.node, target.size, target.aliases + 1)
        return self._bounded(built, ev)

    def _anchor(self, ev: Any, built: _Built) -> _Built:
        if ev.anchor is not None:
            self._anchors[ev.anchor] = built
        return built

    def _bounded(self, built: _Built, ev: Any) -> _Built:
        if built.aliases > self._limits.max_aliases:
            msg = f"YAML aliases expand more than {self._limits.max_aliases} times"
            raise _TooComplex(msg, ev.start_mark)
        return built

    def _sequence(self, ev: Any, depth: int) -> _Built:
        node = yaml.SequenceNode(_tag(ev, _SEQ), [], ev.start_mark, None, flow_style=ev.flow_style)
        built = _Built(node, 1, 0)
        while not self._loader.check_event(yaml.SequenceEndEvent):
            item = self._compose(depth + 1)
            node.value.append(item.node)
            self._add(built, item, ev)
        node.end_mark = self._loader.get_event().end_mark
        return built

    def _mapping(self, ev: Any, depth: int) -> _Built:
        node = yaml.MappingNode(_tag(ev, _MAP), [], ev.start_mark, None, flow_style=ev.flow_style)
        built = _Built(node, 1, 0)
        keys: set[str] = set()
        while not self._loader.check_event(yaml.MappingEndEvent):
            key = self._compose(depth + 1)
            value = self._compose(depth + 1)
            if isinstance(key.node, yaml.ScalarNode) and key.node.value != "<<":
                # PyYAML keeps the last of two equal keys silently; a GitOps tool must not
                if key.node.value in keys:
                    self.duplicate_keys.append((key.node.value, key.node.start_mark.line + 1))
                keys.add(key.node.value)
            node.value.append((key.node, value.node))
            self._add(built, key, ev)
            self._add(built, value, ev)
        node.end_mark = self._loader.get_event().end_mark
        return built

    def _add(self, parent: _Built, child: _Built, ev: Any) -> None:
        parent.size += child.size
        parent.aliases += child.aliases
        self._bounded(parent, ev)


_SEQ = "tag:yaml.org,2002:seq"
_MAP = "tag:yaml.org,2002:map"


def _tag(ev: Any, default: str) -> str:
    return default if ev.tag in (None, "!") else str(ev.tag)


# --- one document ------------------------------------------------------------------------


def _check_document(
    rel: str,
    composer: _Composer,
    node: yaml.Node,
    loader: yaml.SafeLoader,
    checker: _Checker,
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
    problems: list[tuple[FieldPath, str]] = []
    obj = checker.check(value, problems)
    for key, key_line in composer.duplicate_keys:
        errors.append(ManifestError(rel, f"duplicate key {key!r}", document=index, line=key_line))
    for path, message in problems:
        field = _field_name(path) or None
        at = _line_of(node, path)
        errors.append(ManifestError(rel, message, document=index, line=at, field=field))
    if obj is not None and not problems and not composer.duplicate_keys:
        apps.append(DesiredApp(obj=obj, file=rel, document=index, line=line))


def _field_name(path: FieldPath) -> str:
    name = ""
    for seg in path:
        name += f"[{seg}]" if isinstance(seg, int) else f".{seg}" if name else seg
    return name


def _line_of(node: yaml.Node, path: FieldPath) -> int:
    """Line of the deepest node on ``path`` (for a mapping entry, its key's line)."""
    line = node.start_mark.line + 1
    for seg in path:
        if isinstance(node, yaml.MappingNode):
            match = [(k, v) for k, v in node.value if isinstance(k, yaml.ScalarNode)]
            found = next(((k, v) for k, v in match if k.value == str(seg)), None)
            if found is None:
                return line
            line, node = found[0].start_mark.line + 1, found[1]
        elif isinstance(node, yaml.SequenceNode) and isinstance(seg, int) and seg < len(node.value):
            node = node.value[seg]
            line = node.start_mark.line + 1
        else:
            return line
    return line


# --- the MyApp schema --------------------------------------------------------------------

Problems = list[tuple[FieldPath, str]]


def _is_dns_label(value: object) -> bool:
    return isinstance(value, str) and len(value) <= 63 and bool(_DNS_LABEL.fullmatch(value))


def _kind(value: object) -> str:
    """How an error message names a value the user wrote."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"boolean {str(value).lower()}"
    if isinstance(value, int | float):
        return f"number {value}"
    if isinstance(value, str):
        return f"string {value!r}"
    if isinstance(value, list | dict):
        return "a list" if isinstance(value, list) else "a mapping"
    return f"a {type(value).__name__}"  # a date or timestamp, which YAML also knows


class _Checker:
    """Checks one document against the MyApp schema and builds the clean object."""

    def __init__(self, default_namespace: str, allowed: frozenset[str] | None) -> None:
        self._default_namespace = default_namespace
        self._allowed = allowed

    def check(self, doc: object, out: Problems) -> Obj | None:
        if not isinstance(doc, dict):
            out.append(((), f"a document must be a {KIND} mapping, found {_kind(doc)}"))
            return None
        api, kind = doc.get("apiVersion"), doc.get("kind")
        if api != API_VERSION or kind != KIND:
            field = "apiVersion" if api != API_VERSION else "kind"
            found = f"{api or '(no apiVersion)'} {kind or '(no kind)'}"
            msg = f"only {API_VERSION} {KIND} is accepted, found {found}"
            out.append(((field,), msg))
            return None
        for key in doc:
            if key == "status":
                out.append((("status",), "status is written by the operator, not by Git"))
            elif key not in ("apiVersion", "kind", "metadata", "spec"):
                out.append(((str(key),), "unknown field (a MyApp has metadata and spec)"))
        metadata = self._metadata(doc.get("metadata"), out)
        spec = _spec(doc.get("spec"), out)
        if metadata is None or spec is None or out:
            return None
        obj = {"apiVersion": API_VERSION, "kind": KIND, "metadata": metadata, "spec": spec}
        # a plain tree: YAML aliases share objects, which a later in-place edit would leak
        return cast(Obj, json.loads(json.dumps(obj)))

    def _metadata(self, meta: object, out: Problems) -> Obj | None:
        if not isinstance(meta, dict):
            out.append((("metadata",), f"must be a mapping with a name, found {_kind(meta)}"))
            return None
        for key in meta:
            if key not in ("name", "namespace", "labels", "annotations"):
                msg = "unknown field (gitsync applies name, namespace, labels, annotations)"
                out.append((("metadata", str(key)), msg))
        name = meta.get("name")
        if not _is_dns_label(name):
            msg = f"must be a DNS-1123 label (a-z, 0-9, '-', at most 63), found {_kind(name)}"
            out.append((("metadata", "name"), msg))
        namespace = meta.get("namespace", self._default_namespace)
        if not _is_dns_label(namespace):
            msg = f"must be a DNS-1123 label (a-z, 0-9, '-', at most 63), found {_kind(namespace)}"
            out.append((("metadata", "namespace"), msg))
        elif self._allowed is not None and namespace not in self._allowed:
            allowed = ", ".join(sorted(self._allowed)) or "none"
            out.append((("metadata", "namespace"), f"{namespace!r} is not allowed ({allowed})"))
        result: Obj = {"name": name, "namespace": namespace}
        # gitsync sets these itself; a different value in Git would be fought over every sync
        for field, reserved in _RESERVED.items():
            if field in meta:
                result[field] = _string_map(meta[field], field, reserved, out)
        return result


def _string_map(value: object, field: str, reserved: tuple[str, ...], out: Problems) -> Obj:
    if not isinstance(value, dict):
        out.append((("metadata", field), f"must be a mapping of strings, found {_kind(value)}"))
        return {}
    for key, item in value.items():
        path: FieldPath = ("metadata", field, str(key))
        if not isinstance(key, str) or not _QUALIFIED_KEY.fullmatch(key) or len(key) > 317:
            out.append((path, "invalid key: [dns-prefix/]name, name at most 63 of a-z0-9-_."))
        elif key in reserved and not (key == MANAGED_BY_LABEL and item == MANAGED_BY):
            out.append((path, "is set by gitsync; remove it"))
        if not isinstance(item, str):
            out.append((path, f"must be a string, found {_kind(item)}; quote it"))
        elif field == "labels" and not _LABEL_VALUE.fullmatch(item):
            out.append((path, "invalid label value: at most 63 of a-z0-9-_., alphanumeric ends"))
    return dict(value)


def _spec(spec: object, out: Problems) -> Obj | None:
    if not isinstance(spec, dict):
        out.append((("spec",), f"must be a mapping with an image, found {_kind(spec)}"))
        return None
    result: Obj = {}
    for key, value in spec.items():
        path: FieldPath = ("spec", str(key))
        if key == "image":
            if not isinstance(value, str) or not value or any(c.isspace() for c in value):
                out.append((path, f"must be a non-empty image reference, found {_kind(value)}"))
        elif key == "replicas":
            value = _integer(value, 0, _INT32_MAX, path, out)
        elif key == "port":
            value = _integer(value, 1, 65535, path, out)
        elif key == "env":
            _env(value, path, out)
        elif key == "resources":
            _resources(value, path, out)
        elif key == "driftPolicy" and value not in DRIFT_POLICIES:
            out.append((path, f"must be one of {', '.join(DRIFT_POLICIES)}, found {_kind(value)}"))
        elif key == "suspend" and not isinstance(value, bool):
            out.append((path, f"must be true or false (unquoted), found {_kind(value)}"))
        elif key not in _SPEC_FIELDS:
            # the CRD's structural schema would prune it silently; tell the user instead
            out.append((path, f"unknown field (known: {', '.join(_SPEC_FIELDS)})"))
        result[str(key)] = value
    if "image" not in spec:
        out.append((("spec", "image"), "required"))
    return result


def _integer(value: object, low: int, high: int, path: FieldPath, out: Problems) -> object:
    # the CRD says integer; "3" is what a quoted YAML scalar gives, and means 3
    if isinstance(value, str) and value.isascii() and value.isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        out.append((path, f"must be an integer from {low} to {high}, found {_kind(value)}"))
    return value


def _env(value: object, path: FieldPath, out: Problems) -> None:
    if not isinstance(value, list):
        out.append((path, f"must be a list of name/value pairs, found {_kind(value)}"))
        return
    seen: dict[object, int] = {}
    for i, item in enumerate(value):
        here = (*path, i)
        if not isinstance(item, dict):
            out.append((here, f"must be a mapping with name and value, found {_kind(item)}"))
            continue
        for key in item:
            if key not in ("name", "value"):
                out.append(((*here, str(key)), "unknown field (known: name, value)"))
        name = item.get("name")
        if not isinstance(name, str) or not name:
            out.append(((*here, "name"), f"must be a non-empty string, found {_kind(name)}"))
        elif name in seen:
            out.append(((*here, "name"), f"duplicate env name {name!r} (also env[{seen[name]}])"))
        seen.setdefault(name, i)
        env_value = item.get("value", "")
        if not isinstance(env_value, str):
            msg = f"must be a string, found {_kind(env_value)}; quote it in the YAML"
            out.append(((*here, "value"), msg))


def _resources(value: object, path: FieldPath, out: Problems) -> None:
    if not isinstance(value, dict):
        out.append((path, f"must be a mapping with requests and limits, found {_kind(value)}"))
        return
    for group, amounts in value.items():
        here: FieldPath = (*path, str(group))
        if group not in ("requests", "limits"):
            out.append((here, "unknown field (known: requests, limits)"))
        elif not isinstance(amounts, dict):
            out.append((here, f"must be a mapping of quantities, found {_kind(amounts)}"))
        else:
            for name, amount in amounts.items():
                if not isinstance(name, str) or not name:
                    out.append(((*here, str(name)), "a resource name must be a string"))
                _quantity(amount, (*here, str(name)), out)


def _quantity(amount: object, path: FieldPath, out: Problems) -> None:
    if isinstance(amount, int) and not isinstance(amount, bool) and amount >= 0:
        return
    if isinstance(amount, str) and _QUANTITY.fullmatch(amount):
        return
    hint = "; quote it in the YAML" if isinstance(amount, float) else ""
    out.append((path, f"must be a quantity such as 500m, 2, 128Mi, found {_kind(amount)}{hint}"))
