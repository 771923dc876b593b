"""Bring one live object to its desired state, or report why not.

Shared by the MyApp (desired = Git) and its Deployment (desired = rendered
from the live MyApp). A difference is one of three things, told apart by who
owns the live value in managedFields:

- owned by gitsync: the desired state moved (a Git commit, a MyApp edit) and
  is applied, whatever the drift policy;
- owned by a one-off tool (``kubectl*``, ``before-first-apply``): drift; with
  policy ``correct`` it is taken back with ``force``, with ``report`` left;
- owned by another controller (an HPA, another operator): a conflict, always
  reported and never fought over: the field is left out of our apply body, so
  gitsync gives up its claim instead of flapping with the other owner.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import logging
from dataclasses import dataclass, field

from gitsync import drift as driftlib
from gitsync.api import APPLIED_ANNOTATION, Obj
from gitsync.apply import Applier
from gitsync.diff import strip_server_fields
from gitsync.managedfields import Path

log = logging.getLogger(__name__)


@dataclass
class Outcome:
    action: str  # created | configured | unchanged
    live: Obj | None
    #: drift still standing after this step (reported in status)
    drift: list[driftlib.DriftItem] = field(default_factory=list)
    #: drift taken back from one-off tools in this step (policy correct)
    corrected: list[driftlib.DriftItem] = field(default_factory=list)


@dataclass(frozen=True)
class Policy:
    correct: bool
    suspended: bool
    force_managers: tuple[str, ...]
    field_manager: str


def converge(applier: Applier, label: str, desired: Obj, live: Obj | None, p: Policy) -> Outcome:
    if live is None:
        if p.suspended:
            return Outcome("unchanged", None)
        return Outcome("created", applier.apply(stamped(desired)))
    # the fast path first, on the desired state alone: the stamp (a hash of the
    # whole body) is only needed to explain a difference, never in steady state
    if driftlib.fast_equal(desired, live):
        return Outcome("unchanged", live)
    desired = stamped(desired)
    items = driftlib.attribute(
        driftlib.drift_items(label, desired, live),
        live.get("metadata", {}).get("managedFields") or [],
        self_manager=p.field_manager,
        force_managers=p.force_managers,
    )
    if not items:
        return Outcome("unchanged", live)
    ours, foreign = _split(items, p, moved=_stamp(live) != _stamp(desired))
    takeback = [i for i in foreign if not i.conflict] if p.correct else []
    leave = [i for i in foreign if i not in takeback]
    if p.suspended or not (ours or takeback):
        return Outcome("unchanged", live, foreign)
    body = without(desired, [i.smd_path for i in leave])
    if not _confirmed(applier, body, live):
        # the server would store exactly what is live: a value our projection
        # does not canonicalise; nothing to write and nothing drifted
        log.debug("%s: fast path differed, dry-run did not", label)
        return Outcome("unchanged", live)
    applied = applier.apply(body, force=bool(takeback))
    return Outcome("configured", applied, leave, takeback)


def stamped(desired: Obj) -> Obj:
    """``desired`` with the hash of itself in an annotation. Live carrying the same
    hash means the desired state has not moved since it was applied, so every
    difference is drift, even one no manager owns (a field removed by hand leaves
    its nearest owned parent, ours, as the only owner in managedFields)."""
    digest = hashlib.sha256(json.dumps(desired, sort_keys=True).encode()).hexdigest()[:16]
    # prefixed: a bare digest such as 123e4567... reads as a number to YAML parsers
    digest = f"sha256:{digest}"
    meta = desired.get("metadata", {})
    annotations = {**(meta.get("annotations") or {}), APPLIED_ANNOTATION: digest}
    return {**desired, "metadata": {**meta, "annotations": annotations}}


def _stamp(obj: Obj) -> str | None:
    return (obj.get("metadata", {}).get("annotations") or {}).get(APPLIED_ANNOTATION)


def _split(
    items: list[driftlib.DriftItem], p: Policy, *, moved: bool
) -> tuple[list[driftlib.DriftItem], list[driftlib.DriftItem]]:
    """(the desired state moved: apply) and (drift: by policy)."""
    if moved:
        ours = [i for i in items if i.manager in (None, p.field_manager)]
        return ours, [i for i in items if i not in ours]
    # nothing moved on our side: a difference under our name was made by someone
    # we cannot name (a removal); it is drift like any other, never a conflict
    unknown = [
        dataclasses.replace(i, manager=None, operation=None, conflict=False)
        if i.manager == p.field_manager
        else i
        for i in items
    ]
    return [], unknown


def _confirmed(applier: Applier, body: Obj, live: Obj) -> bool:
    """Confirm a difference by SSA dry-run: compare what the server would store."""
    result = applier.apply(body, force=True, dry_run=True)
    return bool(strip_server_fields(result) != strip_server_fields(live))


def without(obj: Obj, paths: list[Path]) -> Obj:
    """``obj`` minus the fields at these structured-merge-diff paths."""
    if not paths:
        return obj
    out = copy.deepcopy(obj)
    for path in paths:
        _remove(out, path)
    return out


def _remove(node: object, path: Path) -> None:
    for i, element in enumerate(path):
        last = i == len(path) - 1
        if isinstance(node, dict) and element.startswith("f:"):
            name = element[2:]
            if name not in node:
                return
            if last:
                del node[name]
                return
            node = node[name]
        elif isinstance(node, list) and element.startswith("k:"):
            match = next((it for it in node if _matches(it, element)), None)
            if match is None:
                return
            if last:
                node.remove(match)
                return
            node = match
        else:
            return


def _matches(item: object, element: str) -> bool:
    if not isinstance(item, dict):
        return False
    key = json.loads(element[2:])
    return all(item.get(k) == v for k, v in key.items())
