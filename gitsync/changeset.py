"""A pass's plan as values: one ``Change`` per object and per finding, in a ``ChangeSet``.

Each object gets one action, what a sync does to it: ``created``, ``configured``,
``unchanged`` or ``pruned`` (``failed`` when it cannot even be rendered). What a
sync leaves standing is a separate change of its own, never "configured":
``drifted`` (changed by hand, left under policy ``report`` or held by suspend) and
``conflict`` (owned by another controller). ``gitsync diff`` prints the set; only
the writes make it exit 1.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Final, Literal

from gitsync import diff as difflib
from gitsync import drift as driftlib
from gitsync.api import APPLIED_ANNOTATION, KIND, Obj, subject
from gitsync.managedfields import human_path
from gitsync.namespaces import NamespacePlan
from gitsync.plan import Settings, Step, plan_app, put, value_at, without

Action = Literal["created", "configured", "unchanged", "pruned", "failed", "drifted", "conflict"]
#: what writes to the API server: diff exits 1 on these alone
WRITES: Final = ("created", "configured", "pruned")
#: one action per object, in summary order
OBJECT_ACTIONS: Final = ("created", "configured", "unchanged", "pruned")
DEFAULT_SETTINGS: Final = Settings()
NO_NAMESPACES: Final = NamespacePlan()
_STAMP_PATH: Final = ("f:metadata", "f:annotations", f"f:{APPLIED_ANNOTATION}")


@dataclass(frozen=True)
class Change:
    """One object's action, or one finding (drift, conflict) about it.

    ``paths`` are the fields concerned, ``diff`` their values (``old`` live, ``new``
    Git), ``reason`` why in words. ``live`` and ``desired`` are for a unified diff."""

    subject: str
    action: Action
    paths: tuple[str, ...] = ()
    diff: tuple[difflib.Change, ...] = ()
    reason: str = ""
    live: Obj | None = field(default=None, compare=False, repr=False)
    desired: Obj | None = field(default=None, compare=False, repr=False)

    @property
    def writes(self) -> bool:
        return self.action in WRITES

    def to_json(self) -> Obj:
        out: Obj = {
            "object": self.subject,
            "action": self.action,
            "changes": [{"path": c.path, "live": c.old, "git": c.new} for c in self.diff],
        }
        if self.reason:
            out["reason"] = self.reason
        return out


@dataclass
class ChangeSet:
    changes: list[Change] = field(default_factory=list)

    def count(self, action: Action) -> int:
        return sum(1 for c in self.changes if c.action == action)

    @property
    def writes(self) -> bool:
        """Whether a sync would write anything (diff's exit code 1)."""
        return any(c.writes for c in self.changes)

    @property
    def failed(self) -> bool:
        return any(c.action == "failed" for c in self.changes)

    def objects(self) -> list[Change]:
        return [c for c in self.changes if c.action not in ("drifted", "conflict")]

    def held(self) -> list[Change]:
        """Objects suspend holds back: unchanged, with what Git would change."""
        return [c for c in self.changes if c.action == "unchanged" and c.reason]

    def findings(self) -> list[Change]:
        return [c for c in self.changes if c.action in ("drifted", "conflict")]

    def summary(self) -> str:
        text = ", ".join(f"{self.count(a)} {a}" for a in OBJECT_ACTIONS)
        extra = [f"{self.count(a)} {a}" for a in ("failed", "drifted", "conflict") if self.count(a)]
        return text + (f"; {', '.join(extra)}" if extra else "")


def plan(
    desired: dict[str, Obj],
    myapps: dict[str, Obj],
    deployments: dict[str, Obj],
    prune: Iterable[str] = (),
    settings: Settings = DEFAULT_SETTINGS,
    namespaces: NamespacePlan = NO_NAMESPACES,
) -> ChangeSet:
    """The plan of a sync pass. ``desired``: MyApp apply bodies by key;
    ``myapps``/``deployments``: live, by key; ``prune``: keys the prune guard lets go;
    ``namespaces``: what the pass does about namespaces that do not exist."""
    out = ChangeSet()
    for body in namespaces.bodies():
        out.changes.append(Change(f"Namespace/{body['metadata']['name']}", "created", desired=body))
    for key in sorted(desired):
        if key in namespaces.missing:  # the sync fails on it the same way, before applying
            ns, name = key.split("/", 1)
            why = namespaces.missing[key]
            out.changes.append(Change(subject(KIND, ns, name), "failed", reason=why))
            continue
        try:
            steps = plan_app(desired[key], myapps.get(key), deployments.get(key), settings)
        except ValueError as e:  # not renderable: the sync fails on it the same way
            ns, name = key.split("/", 1)
            out.changes.append(Change(subject(KIND, ns, name), "failed", reason=str(e)))
            continue
        for step in steps:
            out.changes.extend(changes_of(step))
    for key in prune:
        ns, name = key.split("/", 1)
        live = myapps.get(key)
        gone = difflib.strip_server_fields(live) if live is not None else None
        out.changes.append(
            Change(subject(KIND, ns, name), "pruned", reason="removed from Git", live=gone)
        )
    return out


def changes_of(step: Step) -> list[Change]:
    """The changes one step shows: its action, then what it leaves standing."""
    out = [_action(step)]
    drifted = [i for i in step.left if not i.conflict]
    conflicts = [i for i in step.left if i.conflict]
    if drifted:
        why = "suspended" if step.reason == "suspended" else "driftPolicy report"
        out.append(_finding(step.subject, "drifted", drifted, f"{why}: left as is{_by(drifted)}"))
    if conflicts:
        owners = ", ".join(sorted({i.manager or "?" for i in conflicts}))
        why = f"owned by {owners}, another controller: left to it"
        out.append(_finding(step.subject, "conflict", conflicts, why))
    return out


def _action(step: Step) -> Change:
    if step.action == "unchanged":
        return _held(step)
    # shown without the stamp annotation and without what is left to others: the
    # values a user changed, not the bookkeeping
    want = without(step.desired, [i.smd_path for i in step.left])
    values = sorted([*difflib.changes(step.live, want), *_removals(step)], key=lambda c: c.path)
    reason = f"drift corrected{_by(list(step.corrected))}" if step.corrected else ""
    shown = driftlib.comparable(want)
    live = None
    if step.live is not None:
        live = copy.deepcopy(driftlib.project(step.live, shown))
        for path in step.released:
            put(live, path, value_at(step.live, path))
    return Change(
        step.subject,
        step.action,
        paths=tuple(c.path for c in values),
        diff=tuple(values),
        reason=reason,
        live=live,
        desired=shown,
    )


def _held(step: Step) -> Change:
    # suspended: what Git changed is shown, and not written (the stamp of the
    # desired state is bookkeeping, not a change anyone made)
    items = [i for i in step.held if i.smd_path != _STAMP_PATH]
    if not items:
        return Change(step.subject, "unchanged", reason=step.reason)
    held = _finding(step.subject, "unchanged", items, "")
    n = len(held.paths)
    why = f"suspended: {n} change{'s' if n > 1 else ''} from Git held back"
    return Change(step.subject, "unchanged", held.paths, held.diff, why)


def _removals(step: Step) -> list[difflib.Change]:
    """What the apply removes: fields only gitsync set, which Git no longer sets."""
    if step.live is None:
        return []
    return [difflib.Change(human_path(p), value_at(step.live, p), None) for p in step.released]


def _finding(who: str, action: Action, items: list[driftlib.DriftItem], reason: str) -> Change:
    items = sorted(items, key=lambda i: i.path)
    return Change(
        who,
        action,
        paths=tuple(i.path for i in items),
        diff=tuple(difflib.Change(i.path, i.live, i.desired) for i in items),
        reason=reason,
    )


def _by(items: list[driftlib.DriftItem]) -> str:
    managers = sorted({i.manager for i in items if i.manager})
    return f" (changed by {', '.join(managers)})" if managers else ""
