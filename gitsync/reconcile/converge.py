"""Bring one live object to its desired state, or report why not.

Shared by the MyApp (desired = Git) and its Deployment (desired = rendered from
the live MyApp). What to write is decided by :func:`gitsync.engine.planner.decide`, the
same decision ``gitsync diff`` shows; this module carries it out.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from gitsync.engine import drift as driftlib
from gitsync.engine.changeset import changes_of
from gitsync.engine.differences import strip_server_fields
from gitsync.engine.planner import Decision, Policy, Step, decide
from gitsync.kube.interfaces import Writer
from gitsync.model.api import Obj

log = logging.getLogger(__name__)


@dataclass
class Outcome:
    action: Decision
    live: Obj | None
    #: drift still standing after this step (reported in status)
    drift: list[driftlib.DriftItem] = field(default_factory=list)
    #: drift taken back from one-off tools in this step (policy correct)
    corrected: list[driftlib.DriftItem] = field(default_factory=list)
    #: configured: the paths of the fields this step wrote a new value to
    paths: tuple[str, ...] = ()


def converge(
    applier: Writer,
    label: str,
    desired: Obj,
    live: Obj | None,
    p: Policy,
    *,
    source: object = None,
) -> Outcome:
    """``source``: what ``desired`` is made from, held unchanged by its owner
    (:func:`gitsync.engine.planner.stamp_of`)."""
    return execute(applier, decide(label, desired, live, p, source=source))


def execute(applier: Writer, step: Step) -> Outcome:
    """Carry out ``step``: at most one apply, after a dry-run for a change of an
    object whose desired state did not move (drift the fast path may have misread)."""
    if step.body is None:
        # what suspend holds back is no drift: status reports what others changed
        return Outcome("unchanged", step.live, list(step.drift))
    if step.live is None:
        return Outcome("created", applier.apply(step.body))
    if not step.moved and not _confirmed(applier, step.body, step.live):
        # the server would store exactly what is live: a value our projection
        # does not canonicalise (or a field the schema prunes); nothing to write and
        # nothing taken back, but what the step leaves (conflicts, drift the policy
        # only reports) still stands and stays in status
        log.debug("%s: fast path differed, dry-run did not", step.subject)
        return Outcome("unchanged", step.live, list(step.drift))
    applied = applier.apply(step.body, force=step.force)
    # what changed, as diff shows it (worked out for a write only: a write is rare)
    paths = changes_of(step)[0].paths
    return Outcome("configured", applied, list(step.drift), list(step.corrected), paths)


def _confirmed(applier: Writer, body: Obj, live: Obj) -> bool:
    """Confirm a difference by SSA dry-run: compare what the server would store."""
    result = applier.apply(body, force=True, dry_run=True)
    return bool(strip_server_fields(result) != strip_server_fields(live))
