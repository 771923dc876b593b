"""The reconcile steps of one MyApp, apart from the loop that schedules them.

reconcile: the MyApp against Git (when a source is configured), its rendered
Deployment against the live one (``converge``: no write when equal), then the
status (written only when it changed). Every read comes from the caches; the only
requests in steady state are the watches.

``reconcile`` returns a :class:`Result`, and the loop (:mod:`gitsync.reconcile.controller`)
turns it into queue operations: the policy of "when again" is a value here, not a
type of exception. The sync pass calls :meth:`Reconciler.apply_from_git`, which
raises instead, so that it can report the object as failed.

Depends on the narrow interfaces of :mod:`gitsync.kube.interfaces` alone, so that unit
tests drive it with fakes.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, Protocol

from gitsync.engine import drift as driftlib
from gitsync.engine.planner import Policy, Settings, policy_for
from gitsync.errors import APINotFoundError, APITooManyRequestsError, GitsyncError, OwnershipError
from gitsync.kube.client import path_of
from gitsync.kube.interfaces import Cache, Reader, Recorder, StatusWriter, Writer
from gitsync.model import myapp_status as statuslib
from gitsync.model.api import KIND, Obj
from gitsync.model.render import render
from gitsync.reconcile.converge import Outcome, converge
from gitsync.reconcile.keylock import KeyLocks

log = logging.getLogger(__name__)

DEFAULT_SETTINGS: Final = Settings()
#: how long the first status of a MyApp whose Deployment was just created waits for
#: the deployment controller's first word on it, so that one write says both (the
#: revision and a phase from the Deployment's own status) instead of two
FIRST_STATUS_WAIT: Final = 2.0


class ObjectWriter(Writer, StatusWriter, Protocol):
    """What reconcile writes: objects and MyApp status (an :class:`~gitsync.kube.apply.Applier`)."""


@dataclass(frozen=True)
class Result:
    """What the loop does with a key after one reconcile.

    ``requeue_after``: try again in that many seconds (the server's Retry-After);
    ``error`` without ``terminal``: it failed for now (a timeout, a 5xx) and is tried
    again with the queue's backoff; ``terminal``: it failed for good with these
    inputs (recorded in status and an Event) and waits for the MyApp or its
    Deployment to change. Otherwise done: the key's backoff is forgotten."""

    requeue_after: float | None = None
    terminal: bool = False
    error: str = ""
    outcome: Outcome | None = None

    @property
    def retry(self) -> bool:
        return bool(self.error) and not self.terminal and self.requeue_after is None


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


class Reconciler:
    def __init__(
        self,
        myapps: Cache,
        deployments: Cache,
        reader: Reader,
        writer: ObjectWriter,
        events: Recorder,
        settings: Settings = DEFAULT_SETTINGS,
    ) -> None:
        self.myapps = myapps
        self.deployments = deployments
        self.reader = reader
        self.writer = writer
        self.events = events
        #: the policy inputs ``gitsync diff`` plans with too
        self.settings = settings
        #: MyApps as Git declares them (apply bodies), set by the sync loop
        self.git: dict[str, Obj] = {}
        #: whom else a live MyApp belongs to, if anyone (set by the sync loop): another
        #: gitsync instance, or its maker (made by hand, not handed over); such a MyApp
        #: is not held to this instance's Git
        self.foreign_owner: Callable[[Obj | None], str | None] = lambda _obj: None
        #: the sync loop's last word on each MyApp; every status write carries it, so a
        #: reconcile that starts from a cache older than the last sync cannot drop it
        self.sync_info: dict[str, statuslib.SyncInfo] = {}
        #: Deployments a sync pass has just listed as absent (Syncer: one LIST per
        #: namespace instead of one GET per new MyApp); emptied when the pass ends
        self.absent_deployments: frozenset[str] = frozenset()
        #: set while workers run: a Deployment a sync pass creates is handed to them
        #: (see :meth:`_status`)
        self.handoff: Callable[[str], None] | None = None
        self._signatures: dict[str, frozenset[tuple[str, str]]] = {}
        # the sync pass reconciles outside the queue: one key is never reconciled twice at once
        self._key_locks = KeyLocks()
        self._last_error: dict[str, str] = {}
        #: new MyApps a sync pass handed to the workers with the Deployment it just
        #: created, and no status yet: since when (see :meth:`_first_status_wait`)
        self._awaiting_status: dict[str, float] = {}
        self.clock: Callable[[], float] = time.monotonic
        #: reconciles so far; workers and the sync pass count from their own threads,
        #: and ``+=`` is a read and a write another thread can come between
        self.reconciles = 0
        self._count_lock = threading.Lock()

    def reconcile(self, key: str) -> Result:
        """Level-based: reads the caches, writes only what differs. A permanent failure
        to apply the Deployment is recorded in status and an Event, and is terminal."""
        with self._key_locks.hold(key):
            myapp = self.myapps.get(key)
            if myapp is None or myapp["metadata"].get("deletionTimestamp"):
                self._forget(key)
                return Result()  # the garbage collector takes the Deployment
            try:
                converged, items, _ = self._converge_myapp(key, myapp)
                return self._reconcile(key, converged or myapp, items, None)
            except APITooManyRequestsError as e:
                return Result(requeue_after=e.retry_after, error=str(e))
            except GitsyncError as e:
                # temporary, or the MyApp itself could not be applied: with backoff
                return Result(error=str(e))

    def apply_from_git(self, key: str, body: Obj, sync: statuslib.SyncInfo) -> str:
        """A sync pass's step for one MyApp: the MyApp as Git declares it, then its
        Deployment and status. Returns what happened to the MyApp; raises when the
        MyApp or its Deployment cannot be applied."""
        with self._key_locks.hold(key):
            self.git[key] = body
            try:
                myapp, items, action = self._converge_myapp(key, self.myapps.get(key))
                assert myapp is not None  # converge created it
                # the revision a MyApp reports is the one that last changed it
                sync = statuslib.source_for(action != "unchanged", myapp, sync)
                self._reconcile(key, myapp, items, sync, strict=True)
            except APITooManyRequestsError:
                raise  # not a failure of this revision: the pass waits and tries again
            except (GitsyncError, ValueError) as e:
                self._sync_failed(key, sync, str(e))
                raise
            return action

    def _sync_failed(self, key: str, sync: statuslib.SyncInfo, error: str) -> None:
        """Synced=False on the MyApp (when it exists) says this revision did not apply."""
        failed = statuslib.SyncInfo(sync.revision, sync.path, sync.time, ok=False, message=error)
        self.sync_info[key] = failed
        live = self.myapps.get(key)
        if live is None:
            return
        # what the pass could not find out, status keeps: the Deployment's facts from
        # the cache and the drift last recorded; the failure is the Synced condition
        kept = list((live.get("status") or {}).get("drift") or [])
        try:
            self._write_status(live, self.deployments.get(key), kept, failed, error, announce=False)
        except GitsyncError as e:
            log.warning("could not record the failure in status: %s", e, extra={"key": key})

    def _forget(self, key: str) -> None:
        # (the key's lock is not ours to drop: the caller holds it, and KeyLocks
        # lets it go once no thread holds or waits for it)
        self._signatures.pop(key, None)
        self._last_error.pop(key, None)
        self._awaiting_status.pop(key, None)

    def awaiting_status(self) -> bool:
        """Some new MyApp's first status is held back (see :data:`FIRST_STATUS_WAIT`)."""
        return bool(self._awaiting_status)

    def _reconcile(
        self,
        key: str,
        myapp: Obj,
        items: list[driftlib.DriftItem],
        sync: statuslib.SyncInfo | None,
        strict: bool = False,
    ) -> Result:
        """The Deployment, then the status. Raises what is temporary (for the caller's
        backoff); a permanent failure, once recorded, is a terminal result (raised
        with ``strict``, for the sync pass to report)."""
        with self._count_lock:
            self.reconciles += 1
        if sync is not None:
            self.sync_info[key] = sync
        sync = self.sync_info.get(key)
        try:
            outcome: Outcome | None = self._converge_deployment(key, myapp)
            error, failure = "", None
            self._last_error.pop(key, None)
        except APITooManyRequestsError:
            # throttled: the caller waits the hint out and tries again; an Event or a
            # status write now would only be one more request for the server to refuse
            raise
        except (GitsyncError, ValueError) as e:
            outcome, error, failure = None, str(e), e
            self._report_error(key, myapp, error)
            if isinstance(e, GitsyncError) and e.temporary:
                raise
        if (
            not strict
            and failure is None
            and (wait := self._first_status_wait(key, myapp, outcome))
        ):
            return Result(requeue_after=wait, outcome=outcome)
        self._status(key, myapp, items, outcome, sync, error, strict)
        if failure is not None:
            if strict:
                raise failure
            return Result(terminal=True, error=error)
        return Result(outcome=outcome)

    def _first_status_wait(self, key: str, myapp: Obj, outcome: Outcome | None) -> float:
        """Seconds to hold back the first status of a new MyApp whose Deployment a sync
        pass has just created, until the deployment controller has said something of it (0:
        write now). A write now would say "Progressing" with no replica figures, and the
        Deployment's first status, moments later, would need another; status still shows
        the revision and a phase within :data:`FIRST_STATUS_WAIT` of the creation."""
        since = self._awaiting_status.get(key)
        if since is None:
            return 0.0
        deployment = outcome.live if outcome is not None else None
        left = since + FIRST_STATUS_WAIT - self.clock()
        if (
            left > 0
            and not myapp.get("status")
            and deployment is not None
            and not (deployment.get("status") or {}).get("observedGeneration")
        ):
            return left
        self._awaiting_status.pop(key, None)
        return 0.0

    def _status(
        self,
        key: str,
        myapp: Obj,
        items: list[driftlib.DriftItem],
        outcome: Outcome | None,
        sync: statuslib.SyncInfo | None,
        error: str,
        strict: bool,
    ) -> None:
        if outcome is not None:
            entries = driftlib.status_entries(items + outcome.drift)
            deployment = outcome.live
        else:
            # the Deployment could not be applied: the old one still serves, so status
            # keeps its facts and the Deployment's drift last recorded (not known in
            # this pass); the error is the Ready condition, not an erasure
            entries = statuslib.keep_recorded_drift(
                driftlib.status_entries(items), myapp, f"Deployment/{key.split('/', 1)[1]}"
            )
            deployment = self.deployments.get(key)
        if (
            outcome is not None
            and outcome.action == "created"
            and self.handoff is not None
            and strict
        ):
            # a Deployment created by a sync pass while the workers run: its status
            # moves through Pending and Progressing within seconds, and each step
            # comes back as a watch event; the worker that takes it writes the status
            # (with this pass's source), so the pass does not write a Pending first;
            # the worker holds a first status back until the Deployment has one
            if not myapp.get("status"):
                self._awaiting_status[key] = self.clock()
            self.handoff(key)
        else:
            self._write_status(myapp, deployment, entries, sync, error)

    def _uncached_deployment(self, key: str, myapp: Obj) -> Obj | None:
        """A Deployment the cache does not hold: not created yet, not seen yet, or
        someone else's (the cache holds only those labelled as ours). Asked only
        when about to create, so steady state still reads nothing."""
        if key in self.absent_deployments:
            # the sync pass's LIST of the namespace, moments ago, is the same proof as
            # the GET (and the GET is no closer to the create than a few milliseconds)
            return None
        ns, name = key.split("/", 1)
        try:
            found = self.reader.get(path_of("Deployment", ns, name), subject=f"Deployment/{key}")
        except APINotFoundError:
            return None
        if problem := foreign_deployment(key, found, myapp):
            raise OwnershipError(problem)
        return found

    def _report_error(self, key: str, myapp: Obj, error: str) -> None:
        # one Event per distinct error, not one per retry
        if self._last_error.get(key) != error:
            self._last_error[key] = error
            self.events.emit(myapp, "Warning", "ApplyFailed", error)

    def _policy(self, myapp: Obj) -> Policy:
        return policy_for(myapp, self.settings)

    def _converge_myapp(
        self, key: str, myapp: Obj | None
    ) -> tuple[Obj | None, list[driftlib.DriftItem], str]:
        """The live MyApp against Git, when Git declares it (not in operator-only use).
        The drift policy is the one Git gives the MyApp: an edit of the live
        driftPolicy is itself drift, not a way around it."""
        git = self.git.get(key)
        if git is None or self.foreign_owner(myapp) is not None:
            # another instance's MyApp, or one made by hand (re-created since our
            # pass): our Git held against it would take it over; the sync pass reports
            # the refusal
            return myapp, [], "unchanged"
        name = key.split("/", 1)[1]
        # suspend stops the Deployment, not the comparison of the MyApp with Git
        mp = policy_for(git, self.settings, suspendable=False)
        res = converge(self.writer, f"{KIND}/{name}", git, myapp, mp)
        if res.corrected and myapp is not None:
            fixed = ", ".join(f"{i.path} (changed by {i.manager})" for i in res.corrected)
            self.events.emit(myapp, "Normal", "DriftCorrected", f"MyApp {name}: {fixed}")
        if res.action != "unchanged" and res.live is not None:
            myapp = res.live
            self.myapps.observe(res.live)
        return myapp, list(res.drift), res.action

    def _converge_deployment(self, key: str, myapp: Obj) -> Outcome:
        name = key.split("/", 1)[1]
        live = self.deployments.get(key) or self._uncached_deployment(key, myapp)
        desired = render(myapp)
        outcome = converge(self.writer, f"Deployment/{name}", desired, live, self._policy(myapp))
        if outcome.live is not None and outcome.action != "unchanged":
            self.deployments.observe(outcome.live)
        self._record_action(myapp, outcome)
        return outcome

    def _record_action(self, myapp: Obj, outcome: Outcome) -> None:
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

    def _write_status(
        self,
        myapp: Obj,
        deployment: Obj | None,
        entries: list[Obj],
        sync: statuslib.SyncInfo | None,
        error: str,
        *,
        announce: bool = True,
    ) -> None:
        """Write the status computed from these facts, when it differs from the live one.

        ``entries`` are ``status.drift[]``; with ``announce`` a change of the drifted
        paths is an Event. A pass that failed before it could compare passes the
        recorded drift and ``announce=False``: nothing was found resolved."""
        meta = myapp["metadata"]
        key = f"{meta['namespace']}/{meta['name']}"
        self._awaiting_status.pop(key, None)
        new = statuslib.compute(myapp, deployment, drift=entries, sync=sync, error=error)
        if announce:
            self._announce_drift(myapp, key, entries)
        if statuslib.same(myapp.get("status"), new):
            return
        written = self.writer.apply_status(meta["namespace"], meta["name"], new)
        # ahead of the watch event: the next reconcile compares with what we wrote
        self.myapps.observe(written)
        log.debug("status written", extra={"key": key})

    def _announce_drift(self, myapp: Obj, key: str, entries: list[Obj]) -> None:
        signature = frozenset((str(e.get("object")), str(e.get("path"))) for e in entries)
        if key not in self._signatures:
            # after a restart or a failover, what status already says was announced
            recorded = (myapp.get("status") or {}).get("drift") or []
            self._signatures[key] = frozenset(
                (str(d.get("object")), str(d.get("path"))) for d in recorded
            )
        if signature == self._signatures[key]:
            return
        self._signatures[key] = signature
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
