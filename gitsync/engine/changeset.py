"""A pass as values: one ``Change`` per object and per finding, in a ``ChangeSet``.

The one result type of gitsync: ``gitsync diff`` builds a set from the plan (what a
sync would do), a sync pass from what it did, both through the same planner
(:func:`gitsync.engine.planner.decide` for each object, :func:`plan_prune` for what leaves,
over the guards of :func:`gitsync.engine.prune.guarded_plan`).
The CLI prints a set, the sync state ConfigMap records it, the daemon exports its
counts as metrics.

Each object gets one action, what a sync does to it (kubectl's and Flux's words):
``created``, ``configured``, ``unchanged`` or ``pruned``; ``failed`` when it cannot
be rendered, applied or deleted. What a sync leaves standing is a separate change
of its own, never "configured": ``drifted`` (changed by hand, left under policy
``report`` or held by suspend) and ``conflict`` (owned by another controller).
A prune the guards refuse is no object's action: the set's ``prune_skipped`` says
why nothing is pruned. An unchanged object with a reason is held: Git's change to it
is not applied (suspend, a rollback, a pin, a dependency, a window), counted apart.
The writes and the held changes make ``gitsync diff`` exit 1: both are differences
between Git and the cluster.
"""

from __future__ import annotations

import copy
import datetime as dt
from collections import Counter
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Final, Literal

from gitsync.engine import differences
from gitsync.engine import drift as driftlib
from gitsync.engine import prune as prunelib
from gitsync.engine.managedfields import human_path
from gitsync.engine.namespace_plan import NamespacePlan
from gitsync.engine.planner import (
    Hold,
    Settings,
    Step,
    pending,
    plan_app,
    put,
    serving,
    value_at,
    without,
)
from gitsync.errors import VerificationError
from gitsync.model import order as orderlib
from gitsync.model import rollout
from gitsync.model.api import APPLIED_ANNOTATION, KIND, Obj, subject
from gitsync.model.myapp_status import phase_of
from gitsync.model.order import Wait
from gitsync.model.window import Closed, Windows

Action = Literal["created", "configured", "unchanged", "pruned", "failed", "drifted", "conflict"]
#: what writes to the API server: diff exits 1 on these alone
WRITES: Final = ("created", "configured", "pruned")
#: one action per object, in summary order
OBJECT_ACTIONS: Final = ("created", "configured", "unchanged", "pruned")
#: the count of unchanged objects whose change from Git is held back (never "unchanged")
HELD: Final = "held"
DEFAULT_SETTINGS: Final = Settings()
NO_NAMESPACES: Final = NamespacePlan()
NO_WINDOWS: Final = Windows()
_STAMP_PATH: Final = ("f:metadata", "f:annotations", f"f:{APPLIED_ANNOTATION}")


@dataclass(frozen=True)
class Change:
    """One object's action, or one finding (drift, conflict) about it.

    ``paths`` are the fields concerned, ``diff`` their values (``old`` live, ``new``
    Git), ``reason`` why in words. ``live`` and ``desired`` are for a unified diff."""

    subject: str
    action: Action
    paths: tuple[str, ...] = ()
    diff: tuple[differences.Change, ...] = ()
    reason: str = ""
    #: what holds Git's changes back (an unchanged object with a reason is held)
    hold: Hold = ""
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
        if self.hold:
            out["hold"] = self.hold
        return out


@dataclass
class ChangeSet:
    """The changes of one pass (or its preview), and what the pass as a whole met:
    the revision, errors that belong to no object (a fetch, a manifest), why the prune
    was skipped, and how long it took."""

    changes: list[Change] = field(default_factory=list)
    revision: str = ""
    errors: list[str] = field(default_factory=list)
    #: why nothing (or not the rest) is pruned; None when the prune went ahead
    prune_skipped: str | None = None
    #: --verify-commits refused the commit at the ref: nothing of it was applied
    rejection: VerificationError | None = None
    #: --verify-commits: whose good signature the applied commit carries, or why refused
    verification: str = ""
    #: the commit the cluster is at after the pass (the one applied, else the one before):
    #: with --verify-commits, the next must descend from it
    applied_commit: str = ""
    #: the last commit let through once by the accept annotation (never twice)
    accepted_once: str = ""
    fetch_seconds: float = 0.0
    seconds: float = 0.0

    def count(self, action: Action) -> int:
        return sum(1 for c in self.changes if c.action == action)

    @property
    def ok(self) -> bool:
        return not self.errors and not self.failed

    def failures(self) -> int:
        """Objects that failed and errors of the pass itself."""
        return self.count("failed") + len(self.errors)

    @property
    def writes(self) -> bool:
        """Whether a sync would write anything (diff's exit code 1, as is a hold)."""
        return any(c.writes for c in self.changes)

    @property
    def failed(self) -> bool:
        return any(c.action == "failed" for c in self.changes)

    def objects(self) -> list[Change]:
        return [c for c in self.changes if c.action not in ("drifted", "conflict")]

    def held(self) -> list[Change]:
        """Objects whose change from Git is held back (suspend, a rollback, a pin, a
        dependency, a window): unchanged, with why."""
        return [c for c in self.changes if _is_held(c)]

    def waiting(self) -> list[Change]:
        """The held objects whose change waits for a dependency: what a one-shot sync
        leaves undone (the others are held on purpose)."""
        return [c for c in self.held() if c.hold == "dependency"]

    def findings(self) -> list[Change]:
        return [c for c in self.changes if c.action in ("drifted", "conflict")]

    def counts(self) -> Counter[str]:
        """How many changes have each action, a held one (:meth:`held`) counted as
        ``held``, not ``unchanged``: Git's change to it is not applied. In one walk of
        them (a pass over 20,000 MyApps has 20,000)."""
        return Counter(HELD if _is_held(c) else c.action for c in self.changes)

    def summary(self) -> str:
        return summary_of(self.counts(), len(self.errors))


def _is_held(c: Change) -> bool:
    return c.action == "unchanged" and bool(c.reason)


def summary_of(n: Mapping[str, int], errors: int = 0) -> str:
    """ "2 created, 1 configured, 40 unchanged, 0 pruned; 1 failed, 1 held": a pass's
    changes by action (``n``, :meth:`ChangeSet.counts`) and its own errors, the
    objects' first."""
    failures = n.get("failed", 0) + errors
    text = ", ".join(f"{n.get(a, 0)} {a}" for a in OBJECT_ACTIONS)
    extra = [f"{failures} failed"] if failures else []
    extra += [f"{n[a]} {a}" for a in (HELD, "drifted", "conflict") if n.get(a)]
    return text + (f"; {', '.join(extra)}" if extra else "")


@dataclass(frozen=True)
class PruneGuard:
    """The prune flags of ``gitsync sync``, ``diff`` and ``run`` (design §5)."""

    enabled: bool = True
    allow_empty: bool = False
    max_fraction: float = 0.5


def plan_prune(
    desired: Collection[str],
    tracked: Mapping[str, Obj],
    guard: PruneGuard = PruneGuard(),
    *,
    manifests_ok: bool = True,
    applied: Collection[str] = (),
) -> ChangeSet:
    """The prune plan of a pass as a change set: a ``pruned`` change per tracked MyApp
    (by key, live) that Git no longer declares, or none and the guard's reason.
    ``applied``: the keys of ``desired`` the pass applies
    (:func:`gitsync.engine.prune.guarded_plan`). A skip is reported only when something
    would go: a guard that holds back nothing is no news."""
    p = prunelib.guarded_plan(
        desired,
        tracked,
        enabled=guard.enabled,
        manifests_ok=manifests_ok,
        allow_empty=guard.allow_empty,
        max_fraction=guard.max_fraction,
        applied=applied,
    )
    out = ChangeSet()
    if p.skipped:
        out.prune_skipped = p.skipped if set(tracked) - set(desired) else None
        return out
    for key in p.delete:
        ns, name = key.split("/", 1)
        gone = differences.strip_server_fields(tracked[key])
        out.changes.append(Change(subject(KIND, ns, name), "pruned", reason=REMOVED, live=gone))
    return out


#: why a MyApp is pruned
REMOVED: Final = "removed from Git"


def key_of_change(change: Change) -> str:
    """``namespace/name`` of a namespaced object's change (``Kind/namespace/name``)."""
    return change.subject.split("/", 1)[1]


def plan(
    desired: dict[str, Obj],
    myapps: dict[str, Obj],
    deployments: dict[str, Obj],
    prune: ChangeSet | None = None,
    settings: Settings = DEFAULT_SETTINGS,
    namespaces: NamespacePlan = NO_NAMESPACES,
    windows: Windows = NO_WINDOWS,
    now: dt.datetime | None = None,
    records: Mapping[str, rollout.Record] | None = None,
) -> ChangeSet:
    """The plan of a sync pass. ``desired``: MyApp apply bodies by key;
    ``myapps``/``deployments``: live, by key; ``prune``: the prune plan
    (:func:`plan_prune`); ``namespaces``: what the pass does about namespaces that do
    not exist; ``windows``: the instance's sync windows, as they stand at ``now``;
    ``records``: gitsync's records of the MyApps' rollouts, by key.
    A change that waits (for a window, or a dependency not Available at its own
    desired spec) is held, as the pass holds it."""
    out = ChangeSet(prune_skipped=prune.prune_skipped if prune is not None else None)
    closed = {
        key: c
        for key in desired
        if now is not None and (c := windows.closed(desired[key], myapps.get(key), now))
    }
    kept = records or {}
    policy = settings.rollback
    waits = orderlib.plan_waits(
        desired,
        myapps,
        lambda key: pending(serving(desired[key], kept.get(key), policy), myapps.get(key)),
        lambda key: phase_of(deployments.get(key)),
        lambda key: held_by(closed.get(key)),
        lambda key: rollout.holding(kept.get(key), desired[key].get("spec"), policy),
    )
    for body in namespaces.bodies():
        out.changes.append(Change(f"Namespace/{body['metadata']['name']}", "created", desired=body))
    for key in sorted(desired):
        if key in namespaces.missing:  # the sync fails on it the same way, before applying
            ns, name = key.split("/", 1)
            why = namespaces.missing[key]
            out.changes.append(Change(subject(KIND, ns, name), "failed", reason=why))
            continue
        try:
            frozen = key in closed and closed[key].frozen
            steps = plan_app(
                desired[key],
                myapps.get(key),
                deployments.get(key),
                settings,
                waits.get(key),
                frozen=frozen,
                record=kept.get(key),
            )
        except ValueError as e:  # not renderable: the sync fails on it the same way
            ns, name = key.split("/", 1)
            out.changes.append(Change(subject(KIND, ns, name), "failed", reason=str(e)))
            continue
        for step in steps:
            out.changes.extend(changes_of(step))
    if prune is not None:
        out.changes.extend(prune.changes)
    return out


def hold_prunes(
    prune: ChangeSet, tracked: Mapping[str, Obj], windows: Windows, now: dt.datetime
) -> ChangeSet:
    """``prune`` with each delete a closed sync window holds back made a held change:
    a MyApp that left Git is not deleted while a window is closed for it (judged by its
    live namespace and labels), and is at the first pass after it opens."""
    out = ChangeSet(prune_skipped=prune.prune_skipped)
    for change in prune.changes:
        live = tracked.get(key_of_change(change))
        wait = held_by(windows.closed(live, live, now)) if live is not None else None
        if change.action != "pruned" or wait is None:
            out.changes.append(change)
            continue
        why = f"{REMOVED}, not pruned yet: {wait.message}"
        out.changes.append(Change(change.subject, "unchanged", reason=why, hold="window"))
    return out


def held_by(closed: Closed | None) -> Wait | None:
    """The wait a closed window makes, unless something lets the change through it."""
    return closed.wait if closed is not None and not closed.override else None


def changes_of(step: Step) -> list[Change]:
    """The changes one step shows: its action, then what it leaves standing."""
    out = [_action(step)]
    drifted = [i for i in step.drift if not i.conflict]
    conflicts = [i for i in step.drift if i.conflict]
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
    want = without(step.desired, [i.smd_path for i in step.drift])
    values = sorted([*differences.changes(step.live, want), *_removals(step)], key=lambda c: c.path)
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
    # suspended, or rolled back: what Git changed is shown, and not written (the stamp
    # of the desired state is bookkeeping, not a change anyone made)
    items = [i for i in step.held if i.smd_path != _STAMP_PATH]
    if not items:
        return Change(step.subject, "unchanged", reason=step.reason, hold=step.hold)
    held = _finding(step.subject, "unchanged", items, "")
    n = len(held.paths)
    why = f"{step.reason}: {n} change{'s' if n > 1 else ''} from Git held back"
    return Change(step.subject, "unchanged", held.paths, held.diff, why, step.hold)


def _removals(step: Step) -> list[differences.Change]:
    """What the apply removes: fields only gitsync set, which Git no longer sets."""
    if step.live is None:
        return []
    return [differences.Change(human_path(p), value_at(step.live, p), None) for p in step.released]


def _finding(who: str, action: Action, items: list[driftlib.DriftItem], reason: str) -> Change:
    items = sorted(items, key=lambda i: i.path)
    return Change(
        who,
        action,
        paths=tuple(i.path for i in items),
        diff=tuple(differences.Change(i.path, i.live, i.desired) for i in items),
        reason=reason,
    )


def _by(items: list[driftlib.DriftItem]) -> str:
    managers = sorted({i.manager for i in items if i.manager})
    return f" (changed by {', '.join(managers)})" if managers else ""
