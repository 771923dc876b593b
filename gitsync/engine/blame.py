"""Blame: where each field gitsync manages got its live value.

For every field gitsync sets on a MyApp and on its Deployment, one :class:`BlameRow`:
the live value and its origin, which is one of

- ``git``: the manifest line that sets it (file, line, and the commit that last
  changed that line, from ``git blame``);
- ``drift``: a one-off tool (``kubectl scale``, ``kubectl edit``) changed it: its field
  manager, operation and time, read from managedFields;
- ``conflict``: another controller owns it (gitsync reports it and leaves it alone);
- ``rendered`` / ``default``: gitsync derives it from the MyApp's identity or a default.

A Deployment field rendered from a MyApp field points through to that field's origin
(``containers[name=app].image ← spec.image ← apps/web.yaml:7``).

Pure functions over plain dicts and YAML nodes: the Git lookups (file text at a
revision, ``git blame --porcelain``) are done by :mod:`gitsync.source.gitblame`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Final, Literal

import yaml

from gitsync.engine import drift as driftlib
from gitsync.engine.fieldpaths import Lines, leaves, line_in, line_of, value_at
from gitsync.engine.managedfields import (
    Path,
    human_path,
)
from gitsync.errors import printable
from gitsync.model.api import (
    DEFAULT_FORCE_MANAGERS,
    FIELD_MANAGER,
    KIND,
    MANAGED_BY_LABEL,
    Obj,
    subject,
)
from gitsync.model.render import (
    CONTAINER_NAME,
    DEFAULT_REPLICAS,
    FROM_SPEC,
    desired_myapp,
    render,
)

OriginKind = Literal["git", "drift", "conflict", "rendered", "default"]
_CONTAINER: Final = (
    "f:spec",
    "f:template",
    "f:spec",
    "f:containers",
    f'k:{{"name":"{CONTAINER_NAME}"}}',
)
#: where each row of render's FROM_SPEC lands, as an SMD path
_FROM_SPEC: Final = tuple(
    ((*(("f:spec",) if row.into == "spec" else _CONTAINER), f"f:{row.key}"), row)
    for row in FROM_SPEC
)


@dataclass(frozen=True)
class Commit:
    """The commit that last changed a manifest line."""

    sha: str
    author: str
    date: str  # ISO 8601, UTC
    summary: str

    @property
    def short(self) -> str:
        return self.sha[:7]


@dataclass(frozen=True)
class GitView:
    """A MyApp as Git declares it at the applied revision.

    ``node`` is the YAML document (for line numbers) and ``obj`` its value; both are
    None when the file could not be read (no repository given). Instead of ``node``,
    ``field_lines`` may give the lines, as the loader kept them (the drift page).
    ``lines`` maps a line number to the commit that last changed it (empty without a
    repository).
    """

    file: str
    revision: str
    obj: Obj | None = None
    node: yaml.Node | None = None
    lines: Mapping[int, Commit] = field(default_factory=dict)
    field_lines: Lines = None


@dataclass(frozen=True)
class Origin:
    kind: OriginKind
    file: str = ""
    line: int | None = None
    revision: str = ""
    commit: Commit | None = None
    manager: str = ""
    operation: str = ""
    time: str = ""
    #: for a Deployment field: the MyApp field it is rendered from
    via: str = ""
    note: str = ""

    def to_json(self) -> Obj:
        out: Obj = {"kind": self.kind}
        for name in ("file", "line", "revision", "manager", "operation", "time", "via", "note"):
            value = getattr(self, name)
            if value not in ("", None):
                out[name] = value
        if self.commit is not None:
            c = self.commit
            out["commit"] = {"sha": c.sha, "author": c.author, "date": c.date, "subject": c.summary}
        return out


@dataclass(frozen=True)
class BlameRow:
    object: str  # MyApp/ns/name or Deployment/ns/name
    path: str
    live: Any
    desired: Any
    origin: Origin
    drifted: bool = False
    #: for a drifted field: where the value gitsync wants comes from
    wanted: Origin | None = None

    def to_json(self) -> Obj:
        out: Obj = {
            "object": self.object,
            "path": self.path,
            "live": self.live,
            "desired": self.desired,
            "drifted": self.drifted,
            "origin": self.origin.to_json(),
        }
        if self.wanted is not None:
            out["desiredOrigin"] = self.wanted.to_json()
        return out


def blame(
    myapp: Obj,
    deployment: Obj | None,
    git: GitView | None,
    *,
    self_manager: str = FIELD_MANAGER,
    force_managers: tuple[str, ...] = DEFAULT_FORCE_MANAGERS,
) -> list[BlameRow]:
    """Rows for the MyApp's fields, then its Deployment's."""
    attribute = _attributor(self_manager, force_managers)
    app_rows = _myapp_rows(myapp, git, attribute)
    if deployment is None:
        return app_rows
    by_path = {r.path: r for r in app_rows if r.object.startswith(f"{KIND}/")}
    return app_rows + _deployment_rows(myapp, deployment, git, by_path, attribute)


def drifted(rows: list[BlameRow]) -> bool:
    return any(r.drifted for r in rows)


# --- the MyApp ---------------------------------------------------------------------------


def _myapp_rows(myapp: Obj, git: GitView | None, attribute: Any) -> list[BlameRow]:
    meta = myapp.get("metadata") or {}
    label = subject(KIND, meta.get("namespace", ""), meta.get("name", ""))
    if git is not None and git.obj is not None:
        desired = desired_myapp(git.obj)
        items = attribute(driftlib.drift_items(label, desired, myapp), myapp)
    else:
        # without the manifest, the drift the operator last recorded is the best word
        desired = desired_myapp(myapp)
        items = _recorded_drift(myapp, label)
    rows = []
    for path in leaves(desired):
        in_git = _git_origin(git, path, myapp)
        origin = _drift_origin(items, path) or in_git
        drifted = origin.kind in ("drift", "conflict")
        rows.append(
            BlameRow(
                object=label,
                path=human_path(path),
                live=value_at(myapp, path),
                desired=value_at(driftlib.canonicalise(desired), path),
                origin=origin,
                drifted=drifted,
                wanted=in_git if drifted else None,
            )
        )
    return rows


def _recorded_drift(myapp: Obj, label: str) -> list[driftlib.DriftItem]:
    out = []
    for entry in (myapp.get("status") or {}).get("drift") or []:
        if entry.get("object") not in (label, f"{KIND}/{(myapp['metadata'] or {}).get('name')}"):
            continue
        out.append(
            driftlib.DriftItem(
                object=label,
                path=str(entry.get("path", "")),
                smd_path=(),
                desired=entry.get("desired"),
                live=entry.get("live"),
                manager=entry.get("manager"),
                operation=entry.get("operation"),
                time=entry.get("time"),
                conflict=bool(entry.get("conflict")),
            )
        )
    return out


def _git_origin(git: GitView | None, path: Path, myapp: Obj) -> Origin:
    if git is None:
        source = (myapp.get("status") or {}).get("source") or {}
        if not source.get("path"):
            return Origin("rendered", note="not from Git: this MyApp was created in the cluster")
        return Origin("git", file=str(source["path"]), revision=str(source.get("revision", "")))
    line: int | None = None
    if git.node is not None:
        line = line_of(git.node, path)
    elif git.field_lines is not None and git.obj is not None:
        line = line_in(git.field_lines, git.obj, path)
    commit = git.lines.get(line) if line is not None else None
    return Origin("git", file=git.file, line=line, revision=git.revision, commit=commit)


# --- the Deployment ----------------------------------------------------------------------


def _deployment_rows(
    myapp: Obj,
    deployment: Obj,
    git: GitView | None,
    app_rows: Mapping[str, BlameRow],
    attribute: Any,
) -> list[BlameRow]:
    meta = deployment.get("metadata") or {}
    label = subject("Deployment", meta.get("namespace", ""), meta.get("name", ""))
    desired = render(myapp)
    items = attribute(driftlib.drift_items(label, desired, deployment), deployment)
    canonical = driftlib.canonicalise(driftlib.comparable(desired))
    rows = []
    for path in leaves(desired):
        rendered = _rendered_origin(path, myapp, git, app_rows)
        origin = _drift_origin(items, path) or rendered
        drifted = origin.kind in ("drift", "conflict")
        rows.append(
            BlameRow(
                object=label,
                path=human_path(path),
                live=value_at(deployment, path),
                desired=value_at(canonical, path),
                origin=origin,
                drifted=drifted,
                wanted=rendered if drifted else None,
            )
        )
    return rows


def rendered_from(path: Path) -> Path | None:
    """The MyApp field a Deployment field is rendered from (render's ``FROM_SPEC``), or
    None for what gitsync derives from the MyApp's identity."""
    for at, row in _FROM_SPEC:
        if path[: len(at)] == at:
            return ("f:spec", f"f:{row.field}", *(path[len(at) :] if row.same_shape else ()))
    if path[: len(_CONTAINER)] == _CONTAINER:
        return None  # the container's name: a constant
    if "f:ownerReferences" in path or path[-1] == f"f:{MANAGED_BY_LABEL}":
        return None  # the MyApp's uid, gitsync's own label
    # the other labels and the selector are the MyApp's name
    return ("f:metadata", "f:name")


def _rendered_origin(
    path: Path, myapp: Obj, git: GitView | None, app_rows: Mapping[str, BlameRow]
) -> Origin:
    source = rendered_from(path)
    if source is None:
        return Origin("rendered", note="set by gitsync (constant, or the MyApp's uid)")
    via = human_path(source)
    row = app_rows.get(via)
    if row is not None:
        # the live MyApp's value, wherever that came from (a kubectl edit of the MyApp too)
        return replace(row.origin, via=via)
    if source == ("f:spec", "f:replicas"):
        note = f"the MyApp sets no replicas: default {DEFAULT_REPLICAS}"
        return Origin("default", via=via, note=note)
    if source == ("f:metadata", "f:name"):
        return replace(_git_origin(git, source, myapp), via=via)
    return Origin("rendered", via=via, note="set by gitsync")


# --- shared ------------------------------------------------------------------------------


def _attributor(self_manager: str, force_managers: tuple[str, ...]) -> Any:
    def attribute(items: list[driftlib.DriftItem], live: Obj) -> list[driftlib.DriftItem]:
        managed = (live.get("metadata") or {}).get("managedFields") or []
        return driftlib.attribute(
            items, managed, self_manager=self_manager, force_managers=force_managers
        )

    return attribute


def _drift_origin(items: list[driftlib.DriftItem], path: Path) -> Origin | None:
    text = human_path(path)
    for item in items:
        # a missing list item or map is one drift item for every leaf under it
        covers = (
            path[: len(item.smd_path)] == item.smd_path
            if item.smd_path
            else text == item.path or text.startswith(f"{item.path}.")
        )
        if covers:
            return Origin(
                "conflict" if item.conflict else "drift",
                manager=item.manager or "unknown",
                operation=item.operation or "",
                time=item.time or "",
            )
    return None


# --- text --------------------------------------------------------------------------------


def describe(origin: Origin) -> str:
    """One line of text for an origin."""
    if origin.kind in ("drift", "conflict"):
        who = f"{origin.manager} ({origin.operation})" if origin.operation else origin.manager
        when = f" at {origin.time}" if origin.time else ""
        if origin.kind == "conflict":
            return f"conflict: another controller, {who}{when}"
        return f"drift: changed by {who}{when}"
    parts = [f"← {origin.via}"] if origin.via else []
    if origin.kind == "git":
        where = f"{origin.file}:{origin.line}" if origin.line else origin.file
        if origin.commit is not None:
            c = origin.commit
            text = f'{where}, {c.short} "{c.summary}" by {c.author}, {c.date}'
        else:
            text = f"{where} at {origin.revision}" if origin.revision else where
        parts.append(f"← {text}")
    else:
        parts.append(origin.note)
    return " ".join(parts)


def render_text(rows: list[BlameRow]) -> str:
    """The text table. Commit subjects, authors, file names and values come from whoever
    can push or edit an object: each cell is :func:`printable`, so that no escape
    sequence (OSC 52 writes the terminal's clipboard) reaches the terminal and every row
    stays one line, as in ``gitsync drift`` and ``diff``."""
    width = max((len(printable(r.path)) for r in rows), default=0)
    vwidth = max((len(_show(r.live)) for r in rows), default=0)
    out: list[str] = []
    current = ""
    for r in rows:
        if r.object != current:
            current = r.object
            out.append(printable(r.object))
        live = _show(r.live)
        text = describe(r.origin)
        if r.drifted:
            wanted = f" {describe(r.wanted)}" if r.wanted is not None else ""
            text += f"; Git says {_show(r.desired)}{wanted}"
        out.append(f"  {printable(r.path).ljust(width)}  {live.ljust(vwidth)}  {printable(text)}")
    return "\n".join(out) + "\n"


def _show(value: Any, width: int = 40) -> str:
    if value is None:
        return "<none>"
    text = printable(value if isinstance(value, str) else json.dumps(value, sort_keys=True))
    # the text table stays readable; -o json and yaml give whole values
    return text if len(text) <= width else text[: width - 1] + "…"
