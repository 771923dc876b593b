"""What one reconcile returns, and the values it passes between its steps."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from gitsync.engine import drift as driftlib
from gitsync.engine.planner import Decision, Hold
from gitsync.errors import one_line
from gitsync.model import order as orderlib
from gitsync.model import rollout as rolloutlib
from gitsync.model.api import KIND, Obj
from gitsync.reconcile.converge import Outcome
from gitsync.source.giturl import redact_url

#: what a reconcile did to the MyApp itself; "failed": it could not be applied
MyAppAction = Literal[Decision, "failed"]


@dataclass(frozen=True)
class Result:
    """What one reconcile did, and what the loop does with the key next.

    ``requeue_after``: come back in that many seconds (with ``error``: the server's
    Retry-After, see :attr:`throttled`; without: a first status held back).
    ``error`` without ``permanent``: it failed for now (a timeout, a 5xx) and is tried
    again with the queue's backoff; ``permanent``: it failed for good with these inputs
    (recorded in status and an Event) and waits for the MyApp or its Deployment to
    change (the reading of :attr:`gitsync.errors.GitsyncError.temporary`).
    ``temporary``: the error may pass by itself (a timeout, a 5xx, a conflict,
    throttling); a sync pass's apply that failed so is tried again by the queue's
    backoff with Git's body (:attr:`gitsync.reconcile.ledger.Record.retry`), not
    only by the next pass. Otherwise done: the key's backoff is forgotten. ``action``
    is what happened to the MyApp object, ``outcome`` to its Deployment."""

    requeue_after: float | None = None
    permanent: bool = False
    error: str = ""
    temporary: bool = False
    action: MyAppAction = "unchanged"
    outcome: Outcome | None = None
    #: why Git's spec for the MyApp is not what runs (a rollback holds it back, or its
    #: change waits for a dependency or a window), or ""
    held: str = ""
    #: what holds it ("" when nothing does)
    hold: Hold = ""
    #: the paths of the MyApp's fields written (``action`` configured)
    paths: tuple[str, ...] = ()

    @property
    def retry(self) -> bool:
        return bool(self.error) and not self.permanent and self.requeue_after is None

    @property
    def throttled(self) -> bool:
        """Refused by the server for now (429): nothing of it was recorded."""
        return bool(self.error) and self.requeue_after is not None


def foreign_deployment(key: str, deployment: Obj, myapp: Obj | None) -> str | None:
    """Why ``deployment`` (found where MyApp ``key``'s would go) is not gitsync's to
    take over, or None when that MyApp owns it (``myapp`` None: not created yet)."""
    uid = (myapp or {}).get("metadata", {}).get("uid")
    refs = deployment.get("metadata", {}).get("ownerReferences") or []
    if uid and any(r.get("controller") and r.get("uid") == uid for r in refs):
        return None
    return (
        f"Deployment/{key} exists and is not owned by {KIND}/{key}; "
        "gitsync does not take it over (rename the MyApp or remove the Deployment)"
    )


@dataclass(frozen=True)
class Served:
    """The MyApp a reconcile serves, after its step against Git: the live object, the
    drift that step left, what it did, the body Git declares (None: not held to Git),
    the rollback that holds Git's spec back and what Git's change waits for."""

    myapp: Obj
    items: list[driftlib.DriftItem]
    action: MyAppAction
    git: Obj | None = None
    hold: rolloutlib.Rollback | None = None
    wait: orderlib.Wait | None = None
    #: drift is reported, not corrected (a closed window under --windows-block-corrections)
    frozen: bool = False
    #: configured: the paths of the MyApp's fields the step changed
    paths: tuple[str, ...] = ()

    def held(self) -> tuple[str, Hold]:
        """Why Git's spec is not what runs, and what holds it (("", "") when nothing)."""
        if self.wait is not None:
            return self.wait.message, self.wait.hold
        if self.hold is not None:
            return self.hold.summary(), "rollback"
        return "", ""


def crash_message(e: BaseException) -> str:
    """What the status says of an unexpected exception: its type, and its message on one
    line, cut, with any URL's credentials hidden (the traceback is in the log)."""
    text = redact_url(one_line(str(e), 200))
    return f"internal error: {type(e).__name__}" + (f": {text}" if text else "")
