"""The MyApp schema as gitsync enforces it on each document read from Git.

Pure: :class:`Checker` takes one constructed YAML document (plain Python values) and returns
the clean MyApp object, or ``None``, with every problem found as a (field path, message)
pair. It knows nothing of files and lines; :mod:`gitsync.source.manifests` maps each path back to
the line in the file.

The spec is checked as the CRD's own schema says (:mod:`gitsync.model.spec_schema`); the
document around it (apiVersion, kind, the metadata gitsync applies) here.

Stricter than the CRD on purpose: where the API server would prune an unknown field
silently, or gitsync would fight another value every sync (the labels and annotation it
sets itself), the user gets an error that names the field, before anything is applied.
Every ``gitsync.apps.example.com/`` label and annotation is refused: a control such as
the one-shot window override is set by hand on the live object, and declared in Git it
would be applied back after each use.
"""

from __future__ import annotations

import fnmatch
import json
import re
from typing import cast

from gitsync.errors import plain_or_quote
from gitsync.model.api import (
    API_VERSION,
    CONTROL_PREFIX,
    KIND,
    MANAGED_BY,
    MANAGED_BY_LABEL,
    SOURCE_LABEL,
    SOURCE_PATH_ANNOTATION,
    Obj,
)
from gitsync.model.problems import FieldPath, Problems, field_name, key_text, kind_of
from gitsync.model.spec_schema import SPEC

# re-exported: the loader and the tests name them here, beside the checker
__all__ = [
    "Checker",
    "FieldPath",
    "Problems",
    "denied_by",
    "field_name",
    "is_dns_label",
    "key_text",
]

_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_QUALIFIED_KEY = re.compile(
    r"([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
)
_LABEL_VALUE = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?")
_RESERVED = {"labels": (SOURCE_LABEL, MANAGED_BY_LABEL), "annotations": (SOURCE_PATH_ANNOTATION,)}
_CONTROL = (
    f"is reserved ({CONTROL_PREFIX} keys are gitsync's own, or controls set by hand on the"
    " live object, never declared in Git); remove it"
)


def is_dns_label(value: object) -> bool:
    return isinstance(value, str) and len(value) <= 63 and bool(_DNS_LABEL.fullmatch(value))


def _name(value: object, missing: str) -> str:
    """An apiVersion or kind from the file, bare when plain, quoted otherwise."""
    if not value:
        return missing
    return plain_or_quote(value) if isinstance(value, str) else kind_of(value)


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
            out.append(((), f"a document must be a {KIND} mapping, found {kind_of(doc)}"))
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
            out.append((("metadata",), f"must be a mapping with a name, found {kind_of(meta)}"))
            return None
        for key in meta:
            if key not in ("name", "namespace", "labels", "annotations"):
                msg = "unknown field (gitsync applies name, namespace, labels, annotations)"
                out.append((("metadata", key_text(key)), msg))
        name = meta.get("name")
        if not is_dns_label(name):
            msg = f"must be a DNS-1123 label (a-z, 0-9, '-', at most 63), found {kind_of(name)}"
            out.append((("metadata", "name"), msg))
        namespace = meta.get("namespace", self._default_namespace)
        if not is_dns_label(namespace):
            msg = (
                f"must be a DNS-1123 label (a-z, 0-9, '-', at most 63), found {kind_of(namespace)}"
            )
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
        out.append((("metadata", field), f"must be a mapping of strings, found {kind_of(value)}"))
        return {}
    for key, item in value.items():
        path: FieldPath = ("metadata", field, key_text(key))
        if not isinstance(key, str) or not _QUALIFIED_KEY.fullmatch(key) or len(key) > 317:
            out.append((path, "invalid key: [dns-prefix/]name, name at most 63 of a-z0-9-_."))
        elif key in reserved and not (key == MANAGED_BY_LABEL and item == MANAGED_BY):
            out.append((path, "is set by gitsync; remove it"))
        elif key.startswith(CONTROL_PREFIX):
            # declared in Git, a one-shot control (a window override) would be applied
            # back after each use, and gitsync's own keys would be fought over
            out.append((path, _CONTROL))
        if not isinstance(item, str):
            out.append((path, f"must be a string, found {kind_of(item)}; quote it"))
        elif field == "labels" and not _LABEL_VALUE.fullmatch(item):
            out.append((path, "invalid label value: at most 63 of a-z0-9-_., alphanumeric ends"))
    return dict(value)


def _spec(spec: object, out: Problems) -> Obj | None:
    checked = SPEC(spec, ("spec",), out)
    return cast(Obj, checked) if isinstance(spec, dict) else None
