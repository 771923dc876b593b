"""The MyApp schema as gitsync enforces it on each document read from Git.

Pure: :class:`Checker` takes one constructed YAML document (plain Python values) and returns
the clean MyApp object, or ``None``, with every problem found as a (field path, message)
pair. It knows nothing of files and lines; :mod:`gitsync.source.manifests` maps each path back to
the line in the file.

Stricter than the CRD on purpose: where the API server would prune an unknown field
silently, or gitsync would fight another value every sync (the labels and annotation it
sets itself), the user gets an error that names the field, before anything is applied.
"""

from __future__ import annotations

import fnmatch
import json
import re
from typing import cast

from gitsync.errors import plain_or_quote, quote
from gitsync.model.api import (
    API_VERSION,
    DRIFT_POLICIES,
    KIND,
    MANAGED_BY,
    MANAGED_BY_LABEL,
    SOURCE_LABEL,
    SOURCE_PATH_ANNOTATION,
    Obj,
)
from gitsync.model.integers import as_integer
from gitsync.model.quantity import canonical_quantity

_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_QUALIFIED_KEY = re.compile(
    r"([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
)
_IMAGE = re.compile(r"[!-~]+")
_LABEL_VALUE = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?")
# Kubernetes quantities (resource.Quantity), non-negative: 100m, 1.5, 128Mi, 1e3
_QUANTITY = re.compile(r"(\d+(\.\d*)?|\.\d+)([KMGTPE]i|[numkMGTPE]|[eE][+-]?\d+)?")
_SPEC_FIELDS = ("image", "replicas", "port", "env", "resources", "driftPolicy", "suspend")
_INT32_MAX = 2**31 - 1
_RESERVED = {"labels": (SOURCE_LABEL, MANAGED_BY_LABEL), "annotations": (SOURCE_PATH_ANNOTATION,)}

# nor does any quantity the API server accepts hold more characters than this
_MAX_QUANTITY = 100

FieldPath = tuple[str | int, ...]


class Problems(list[tuple[FieldPath, str]]):
    """(field path, message) pairs, at most ``limit`` kept and the rest only counted: a
    list of half a million wrong items must not cost half a million messages."""

    def __init__(self, limit: int = 1_000_000) -> None:
        super().__init__()
        self.limit = limit
        self.dropped = 0

    def append(self, problem: tuple[FieldPath, str]) -> None:
        if len(self) < self.limit:
            super().append(problem)
        else:
            self.dropped += 1


def field_name(path: FieldPath) -> str:
    """``("spec", "env", 0, "name")`` as a user would write it: ``spec.env[0].name``.

    A key that is not a plain name is quoted, ``metadata.labels['a b']``: keys come from
    the file, and one holding a newline must not start a line of its own.
    """
    name = ""
    for seg in path:
        if isinstance(seg, int):
            name += f"[{seg}]"
        elif plain_or_quote(seg) != seg:
            name += f"[{quote(seg)}]"
        else:
            name += f".{seg}" if name else seg
    return name


def key_text(key: object) -> str:
    """A mapping key as a field path segment: a string as it is, a key YAML read as
    something else as it would be written (``~`` is ``null``, ``on`` is ``true``)."""
    if isinstance(key, str):
        return key
    if key is None or isinstance(key, bool):
        return json.dumps(key)
    return str(key)


def is_dns_label(value: object) -> bool:
    return isinstance(value, str) and len(value) <= 63 and bool(_DNS_LABEL.fullmatch(value))


def _name(value: object, missing: str) -> str:
    """An apiVersion or kind from the file, bare when plain, quoted otherwise."""
    if not value:
        return missing
    return plain_or_quote(value) if isinstance(value, str) else _kind(value)


def _kind(value: object) -> str:
    """How an error message names a value the user wrote."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"boolean {str(value).lower()}"
    if isinstance(value, int | float):
        return f"number {value}"
    if isinstance(value, str):
        return f"string {quote(value)}{_non_ascii(value)}"
    if isinstance(value, list | dict):
        return "a list" if isinstance(value, list) else "a mapping"
    return f"a {type(value).__name__}"  # a date or timestamp, which YAML also knows


def _non_ascii(value: str) -> str:
    """Where a string leaves ASCII: a homoglyph (Cyrillic "\\u0435" for "e") looks like the
    letter it imitates even quoted, so the message names it."""
    if value.isascii():
        return ""
    at, char = next((i, c) for i, c in enumerate(value) if not c.isascii())
    return f" (character {at + 1} is U+{ord(char):04X}, not ASCII)"


def denied_by(
    namespace: str, denied: tuple[str, ...], allowed: frozenset[str] | None
) -> str | None:
    """The deny pattern ``namespace`` matches, unless it is allowed by name: whoever can
    push to the repository must not run images in ``kube-system`` or next to gitsync's
    own credentials, except where the operator said so explicitly."""
    if allowed is not None and namespace in allowed:
        return None
    return next((p for p in denied if fnmatch.fnmatchcase(namespace, p)), None)


class Checker:
    """Checks one document against the MyApp schema and builds the clean object."""

    def __init__(
        self,
        default_namespace: str,
        allowed: frozenset[str] | None,
        denied: tuple[str, ...] = (),
        *,
        watched: str | None = None,
    ) -> None:
        self._default_namespace = default_namespace
        self._allowed = allowed
        self._denied = denied
        self._watched = watched

    def check(self, doc: object, out: Problems) -> Obj | None:
        if not isinstance(doc, dict):
            out.append(((), f"a document must be a {KIND} mapping, found {_kind(doc)}"))
            return None
        api, kind = doc.get("apiVersion"), doc.get("kind")
        if api != API_VERSION or kind != KIND:
            field = "apiVersion" if api != API_VERSION else "kind"
            found = f"{_name(api, '(no apiVersion)')} {_name(kind, '(no kind)')}"
            msg = f"only {API_VERSION} {KIND} is accepted, found {found}"
            out.append(((field,), msg))
            return None
        for key in doc:
            if key == "status":
                out.append((("status",), "status is written by the operator, not by Git"))
            elif key not in ("apiVersion", "kind", "metadata", "spec"):
                out.append(((key_text(key),), "unknown field (a MyApp has metadata and spec)"))
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
                out.append((("metadata", key_text(key)), msg))
        name = meta.get("name")
        if not is_dns_label(name):
            msg = f"must be a DNS-1123 label (a-z, 0-9, '-', at most 63), found {_kind(name)}"
            out.append((("metadata", "name"), msg))
        namespace = meta.get("namespace", self._default_namespace)
        if not is_dns_label(namespace):
            msg = f"must be a DNS-1123 label (a-z, 0-9, '-', at most 63), found {_kind(namespace)}"
            out.append((("metadata", "namespace"), msg))
        elif self._allowed is not None and namespace not in self._allowed:
            allowed = ", ".join(sorted(self._allowed)) or "none"
            out.append((("metadata", "namespace"), f"{namespace!r} is not allowed ({allowed})"))
        elif (pattern := denied_by(namespace, self._denied, self._allowed)) is not None:
            msg = (
                f"{namespace!r} is denied (matches {pattern!r} of --denied-namespaces);"
                " name it in --allowed-namespaces to allow it"
            )
            out.append((("metadata", "namespace"), msg))
        elif self._watched is not None and namespace != self._watched:
            # the operator would never see it: "created" again every pass, drift unseen
            msg = (
                f"{namespace!r} is outside the namespace gitsync watches"
                f" (--watch-namespace {self._watched})"
            )
            out.append((("metadata", "namespace"), msg))
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
        path: FieldPath = ("metadata", field, key_text(key))
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
        path: FieldPath = ("spec", key_text(key))
        if key == "image":
            # printable ASCII, as every image reference is: an invisible or look-alike
            # character (a registry host spelled with a Cyrillic letter) is refused here
            if not isinstance(value, str) or not _IMAGE.fullmatch(value):
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
    # the CRD says integer: gitsync.model.integers says what stands for one (3.0); a
    # string never, not even "3": kubectl sends it as a string, which the server refuses
    if isinstance(value, str):
        hint = f"; write {value} unquoted" if as_integer(value) is not None else ""
        out.append((path, f"must be an integer from {low} to {high}, found {_kind(value)}{hint}"))
        return value
    converted = as_integer(value)
    if converted is None or not low <= converted <= high:
        shown = value if converted is None else converted
        out.append((path, f"must be an integer from {low} to {high}, found {_kind(shown)}"))
        return value
    return converted


def _env(value: object, path: FieldPath, out: Problems) -> None:
    if not isinstance(value, list):
        out.append((path, f"must be a list of name/value pairs, found {_kind(value)}"))
        return
    seen: dict[str, int] = {}
    for i, item in enumerate(value):
        here = (*path, i)
        if not isinstance(item, dict):
            out.append((here, f"must be a mapping with name and value, found {_kind(item)}"))
            continue
        for key in item:
            if key not in ("name", "value"):
                out.append(((*here, key_text(key)), "unknown field (known: name, value)"))
        name = item.get("name")
        if not isinstance(name, str) or not name:
            out.append(((*here, "name"), f"must be a non-empty string, found {_kind(name)}"))
        elif name in seen:
            out.append(
                ((*here, "name"), f"duplicate env name {quote(name)} (also env[{seen[name]}])")
            )
        else:
            seen[name] = i  # a string: a list or mapping as a name is not hashable
        env_value = item.get("value", "")
        if not isinstance(env_value, str):
            msg = f"must be a string, found {_kind(env_value)}; quote it in the YAML"
            out.append(((*here, "value"), msg))


def _resources(value: object, path: FieldPath, out: Problems) -> None:
    if not isinstance(value, dict):
        out.append((path, f"must be a mapping with requests and limits, found {_kind(value)}"))
        return
    for group, amounts in value.items():
        here: FieldPath = (*path, key_text(group))
        if group not in ("requests", "limits"):
            out.append((here, "unknown field (known: requests, limits)"))
        elif not isinstance(amounts, dict):
            out.append((here, f"must be a mapping of quantities, found {_kind(amounts)}"))
        else:
            for name, amount in amounts.items():
                if not isinstance(name, str) or not name:
                    out.append(((*here, key_text(name)), "a resource name must be a string"))
                if isinstance(amount, float) and amount.is_integer() and abs(amount) < 2**53:
                    # 1e3 reads as a float, as kubectl reads it, and goes on the wire as
                    # the JSON number 1000, as kubectl sends it
                    amount = amounts[name] = int(amount)
                _quantity(amount, (*here, key_text(name)), out)


def _quantity(amount: object, path: FieldPath, out: Problems) -> None:
    if isinstance(amount, int) and not isinstance(amount, bool) and amount >= 0:
        return
    if isinstance(amount, str) and len(amount) > _MAX_QUANTITY:
        out.append((path, f"must be a quantity of at most {_MAX_QUANTITY} characters"))
        return
    if isinstance(amount, str) and _QUANTITY.fullmatch(amount):
        try:
            # the grammar allows what the API server still refuses (1e2000)
            canonical_quantity(amount)
        except ValueError as e:
            out.append((path, str(e)))
        return
    hint = "; quote it in the YAML" if isinstance(amount, float) else ""
    out.append((path, f"must be a quantity such as 500m, 2, 128Mi, found {_kind(amount)}{hint}"))
