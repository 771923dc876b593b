"""What a reconcile tells people: Kubernetes Events and log lines, each said once per
piece of news (a drift that appeared or went, an error, a wait on something new, a
change let through a closed window), never once per reconcile. What was last said of
each MyApp is kept in its :class:`~gitsync.reconcile.ledger.Record`."""

from __future__ import annotations

import logging

from gitsync.kube.interfaces import Recorder
from gitsync.model import order as orderlib
from gitsync.model.api import Obj
from gitsync.reconcile.converge import Outcome
from gitsync.reconcile.ledger import Ledger, Record

log = logging.getLogger(__name__)


class Announcer:
    def __init__(self, events: Recorder, ledger: Ledger) -> None:
        self.events = events
        self.ledger = ledger

    def action(self, myapp: Obj, outcome: Outcome) -> None:
        """What a reconcile did to the Deployment: created, updated, drift taken back."""
        if outcome.action == "unchanged":
            return
        name = myapp["metadata"]["name"]
        if outcome.corrected:
            fixed = ", ".join(f"{i.path} (changed by {i.manager})" for i in outcome.corrected[:5])
            self.events.emit(myapp, "Normal", "DriftCorrected", f"Deployment {name}: {fixed}")
        else:
            verb = "Created" if outcome.action == "created" else "Updated"
            self.events.emit(myapp, "Normal", verb, f"Deployment {name} {outcome.action}")
        log.info(
            "deployment %s",
            outcome.action,
            extra={"key": f"{myapp['metadata']['namespace']}/{name}"},
        )

    def error(self, myapp: Obj, rec: Record, error: str) -> None:
        """An apply that failed: one Event per distinct error, not one per retry."""
        if rec.last_error != error:
            rec.last_error = error
            self.events.emit(myapp, "Warning", "ApplyFailed", error)

    def drift(self, myapp: Obj, rec: Record, entries: list[Obj]) -> None:
        """``status.drift`` entries: an Event when the drifted paths change."""
        signature = _pairs(entries)
        if rec.announced is None:
            # after a restart or a failover, what status already says was announced
            recorded = (myapp.get("status") or {}).get("drift") or []
            rec.announced = _pairs(recorded)
        if signature == rec.announced:
            return
        rec.announced = signature
        if entries:
            paths = ", ".join(
                f"{e['object']} {e['path']} (by {e.get('manager') or 'unknown'})"
                for e in entries[:5]
            )
            self.events.emit(
                myapp, "Warning", "Drifted", f"drift detected: {paths}", {"drift": entries}
            )
        else:
            self.events.emit(myapp, "Normal", "DriftResolved", "live state matches desired")

    def wait(
        self,
        key: str,
        rec: Record,
        myapp: Obj | None,
        wait: orderlib.Wait | None,
        on: tuple[str, ...] = (),
    ) -> None:
        """Record what ``key``'s change waits for; a wait on something new is an Event
        (once, not on every reconcile nor on every phase of what it waits for), the end
        of a wait is logged."""
        before = rec.wait
        self.ledger.set_wait(key, wait, on)
        if wait == before or (
            before is not None
            and wait is not None
            and (before.reason, before.on) == (wait.reason, wait.on)
        ):
            return
        if wait is not None:
            log.info("change held: %s", wait.message, extra={"key": key})
            if myapp is not None:
                self.events.emit(myapp, "Normal", wait.reason, wait.message)
        elif before is not None:
            log.info("no longer held: applying", extra={"key": key})

    def through_window(self, myapp: Obj, closed: orderlib.Wait, how: str) -> None:
        """A change applied although ``closed`` holds it, because of ``how``."""
        meta = myapp["metadata"]
        message = f"applied through a closed window ({closed.message}): {how}"
        log.warning("%s", message, extra={"key": f"{meta['namespace']}/{meta['name']}"})
        self.events.emit(myapp, "Normal", "SyncWindowOverridden", message)


_NONE: frozenset[tuple[str, str]] = frozenset()


def _pairs(entries: list[Obj]) -> frozenset[tuple[str, str]]:
    """The (object, path) pairs of drift entries; no drift is one shared empty set (a
    record per MyApp holds it: 216 bytes each otherwise)."""
    if not entries:
        return _NONE
    return frozenset((str(e.get("object")), str(e.get("path"))) for e in entries)
