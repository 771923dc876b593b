"""Whether a MyApp's change from Git may be applied now: its sync windows, then its
dependencies (``spec.dependsOn``), read from the caches and the ledger.

The rules are pure (:mod:`gitsync.model.window`, :mod:`gitsync.model.order`); this module
puts the reconcile's inputs to them: the clock, what Git declares for each dependency
(the ledger), each dependency's MyApp and Deployment (the caches), and an override (``gitsync
sync --ignore-windows``, or the one-shot annotation on the live MyApp).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass

from gitsync.engine.planner import pending, serving
from gitsync.kube.interfaces import Cache
from gitsync.model import myapp_status as statuslib
from gitsync.model import order as orderlib
from gitsync.model import rollout as rolloutlib
from gitsync.model import window as windowlib
from gitsync.model.api import Obj
from gitsync.reconcile.ledger import Ledger


@dataclass(frozen=True)
class Verdict:
    """What a reconcile may do with a MyApp's change now. ``wait``: what the change waits
    for (None: apply it); ``closed``: the window that is closed for it, overridden or
    not; ``override``: what let the change through a closed window ("" none; the
    annotation's value, or ``--ignore-windows``); ``frozen``: drift stays uncorrected
    (a closed window under --windows-block-corrections)."""

    wait: orderlib.Wait | None = None
    closed: orderlib.Wait | None = None
    override: str = ""
    frozen: bool = False

    @property
    def through_window(self) -> bool:
        """The change is applied although a window is closed for it."""
        return self.wait is None and self.closed is not None and bool(self.override)


OPEN = Verdict()


class Gate:
    def __init__(
        self,
        myapps: Cache,
        deployments: Cache,
        ledger: Ledger,
        record: Callable[[str], rolloutlib.Record | None] = lambda _key: None,
        rollback: rolloutlib.RollbackPolicy = "off",
    ) -> None:
        self.myapps = myapps
        self.deployments = deployments
        self.ledger = ledger
        #: gitsync's record of a MyApp's rollouts, and the policy where Git gives none
        self.record = record
        self.rollback = rollback
        self.windows = windowlib.Windows()
        self.now: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC)

    def judge(self, body: Obj, live: Obj | None) -> Verdict:
        """The verdict on ``body`` for ``live`` (None: not created yet): what a reconcile
        holds the MyApp to, Git's body or its healthy spec under a rollback
        (:func:`gitsync.engine.planner.serving`; the metadata a window matches is Git's
        either way)."""
        moving = pending(body, live)
        closed = self.windows.closed(body, live, self.now())
        if closed is None:
            return Verdict(self.dependency_wait(body)) if moving else OPEN
        if not moving:
            return Verdict(None, closed.wait, closed.override, closed.frozen)
        if not closed.override:
            return Verdict(closed.wait, closed.wait, "", closed.frozen)
        return Verdict(self.dependency_wait(body), closed.wait, closed.override, False)

    def dependency_wait(self, body: Obj) -> orderlib.Wait | None:
        """The first of ``body``'s dependencies that is not Available at its own current
        desired spec, and why."""
        for dep in orderlib.dependencies(body):
            if why := self.not_ready(dep):
                return orderlib.waiting_for(dep, why)
        return None

    def not_ready(self, dep: str) -> str:
        live = self.myapps.get(dep)
        found = self.ledger.get(dep)
        own = found.wait if found is not None else None
        declared = found.declared if found is not None else None
        phase = statuslib.phase_of(self.deployments.get(dep))
        if declared is None:
            return orderlib.not_ready(live, None, False, own, phase)
        git = declared.body
        record = self.record(dep)
        moving = pending(serving(git, record, self.rollback), live)
        held = rolloutlib.holding(record, git.get("spec") or {}, self.rollback)
        return orderlib.not_ready(live, held, moving, own, phase)
