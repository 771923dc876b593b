"""The reconcile of one MyApp, apart from the loop that schedules it.

One entry point, :meth:`Reconciler.reconcile`, for the operator's workers and the sync
pass alike: the MyApp against Git (when Git declares it), its rendered Deployment
against the live one (``converge``: no write when equal), then the status (written only
when it changed). Its inputs are explicit: the key, and from a sync pass the MyApp as
Git declares it (:class:`~gitsync.reconcile.ledger.Declared`); everything else comes
from the caches and from the one record per MyApp in the
:class:`~gitsync.reconcile.ledger.Ledger`, which this class alone writes. Every read
comes from the caches; the only requests in steady state are the watches.

It returns a :class:`Result`, a value: the loop (:mod:`gitsync.reconcile.controller`)
turns it into queue operations, the sync pass into the pass's change for the MyApp.

Depends on the narrow interfaces of :mod:`gitsync.kube.interfaces` alone, so that unit
tests drive it with fakes.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable
from typing import Final, Protocol

from gitsync.engine import drift as driftlib
from gitsync.engine.planner import Settings, forget_stamps, policy_for
from gitsync.errors import (
    APINotFoundError,
    APITooManyRequestsError,
    GitsyncError,
    OwnershipError,
    quote,
)
from gitsync.kube.client import path_of
from gitsync.kube.interfaces import Cache, Reader, Recorder, RecordStore, StatusWriter, Writer
from gitsync.kube.records import MemoryRecords
from gitsync.model import myapp_status as statuslib
from gitsync.model import order as orderlib
from gitsync.model import rollout as rolloutlib
from gitsync.model.api import KIND, Obj
from gitsync.model.render import inputs as render_inputs
from gitsync.model.render import render
from gitsync.model.window import IGNORE_FLAG, OVERRIDE_ANNOTATION
from gitsync.reconcile.announce import Announcer
from gitsync.reconcile.converge import Outcome, converge
from gitsync.reconcile.gate import Gate, Verdict
from gitsync.reconcile.keylock import KeyLocks
from gitsync.reconcile.ledger import Declared, Ledger, Record
from gitsync.reconcile.result import MyAppAction, Result, Served, crash_message, foreign_deployment

log = logging.getLogger(__name__)

DEFAULT_SETTINGS: Final = Settings()
#: how long the status of a MyApp whose Deployment's spec was just written (created, or
#: a new template) waits for the deployment controller's word on that generation, so
#: that one write says both (the revision and the rollout from the Deployment's own
#: status) instead of two
STATUS_WAIT: Final = 2.0


class ObjectWriter(Writer, StatusWriter, Protocol):
    """What reconcile writes: objects and MyApp status (an :class:`~gitsync.kube.apply.Applier`)."""


class Reconciler:
    def __init__(
        self,
        myapps: Cache,
        deployments: Cache,
        reader: Reader,
        writer: ObjectWriter,
        events: Recorder,
        settings: Settings = DEFAULT_SETTINGS,
        ledger: Ledger | None = None,
        records: RecordStore | None = None,
    ) -> None:
        self.myapps = myapps
        self.deployments = deployments
        self.reader = reader
        self.writer = writer
        self.events = events
        #: the policy inputs ``gitsync diff`` plans with too
        self.settings = settings
        #: what is remembered of each MyApp between reconciles; written here alone
        self.ledger = ledger if ledger is not None else Ledger()
        #: gitsync's own record of each MyApp's rollouts (in memory alone without an
        #: instance's ConfigMap)
        self.records: RecordStore = records if records is not None else MemoryRecords()
        #: each record's text and what it holds, read once per text
        self._read_records: dict[str, tuple[tuple[str, str], rolloutlib.Record | None]] = {}
        #: a loop takes keys back when asked (``Result.requeue_after``): the status of
        #: a MyApp whose Deployment's spec was just written is then held back until the
        #: deployment controller has seen it (:meth:`_status_wait`); without one
        #: (``gitsync sync`` alone) it is written at once
        self.defer_status = False
        # the sync pass reconciles outside the queue: one key is never reconciled twice at once
        self._key_locks = KeyLocks()
        self.clock: Callable[[], float] = time.monotonic
        #: whether a change may be applied now: sync windows, then dependencies
        self.gate = Gate(myapps, deployments, self.ledger, self.record, settings.rollback)
        #: what reconciles tell people (Events, once per news, and log lines)
        self.announce = Announcer(events, self.ledger)
        #: reconciles so far; workers and the sync pass count from their own threads,
        #: and ``+=`` is a read and a write another thread can come between
        self.reconciles = 0
        self._count_lock = threading.Lock()

    def reconcile(
        self, key: str, declared: Declared | None = None, *, deployment_absent: bool = False
    ) -> Result:
        """Level-based: reads the caches, writes only what differs.

        ``declared``, from a sync pass: the MyApp as Git declares it now, applied
        (created when absent) and remembered, so that later reconciles hold the live
        MyApp to it; a failure then also says, in the Synced condition, that this
        revision did not apply. Without it, the MyApp as the cache holds it, against
        what Git last declared. ``deployment_absent``: the pass's LIST of the namespace,
        moments ago, showed no Deployment of this name (one LIST per namespace instead
        of one GET per new MyApp). A permanent failure to apply the Deployment is
        recorded in status and an Event, and returned as permanent: it waits for the
        MyApp or its Deployment to change.

        A pass's apply that failed for a reason that may pass (``Result.temporary``) is
        remembered (``Record.retry``): until one succeeds, a reconcile without
        ``declared`` is the pass's again, with the body and revision Git declared, so
        the queue's backoff retries it rather than the next pass (a worker's reconcile
        alone would create no MyApp, and would only report Git's change to one whose
        drift policy is ``report``)."""
        with self._key_locks.hold(key):
            with self._count_lock:
                self.reconciles += 1
            rec = self.ledger.record(key)
            if declared is not None:
                rec.declared = declared
            elif rec.retry:
                declared = rec.declared
            result = self._reconcile(key, rec, declared, deployment_absent)
            if declared is not None:
                rec.retry = result.temporary
            return result

    def load_failed(self, key: str, sync: statuslib.SyncInfo) -> Result:
        """The file in Git that declared ``key`` no longer loads (``sync`` says where and
        why): nothing of it is applied, the MyApp stays held to what Git last declared
        (if anything), and its Synced condition says so from now until a pass declares
        it again."""
        with self._key_locks.hold(key):
            with self._count_lock:
                self.reconciles += 1
            rec = self.ledger.record(key)
            rec.sync = sync
            if rec.declared is not None:
                # a worker's reconcile that changes the MyApp reports the source of
                # what it holds the MyApp to: this failure, not the last "Applied"
                rec.declared = dataclasses.replace(rec.declared, sync=sync)
            return self._reconcile(key, rec, None, False)

    def _reconcile(
        self, key: str, rec: Record, declared: Declared | None, deployment_absent: bool
    ) -> Result:
        """:meth:`reconcile`'s steps, under the key's lock."""
        live = self.myapps.get(key)
        # a MyApp Git declares that was not created while its change waited is
        # created when the wait ends (the event of what it waited for brings it here)
        waited = live is None and rec.declared is not None and rec.wait is not None
        if (
            declared is None
            and not waited
            and (live is None or live["metadata"].get("deletionTimestamp"))
        ):
            self.ledger.forget_reconcile(key)
            forget_stamps(*key.split("/", 1))
            self._forget_record(key)
            return Result()  # the garbage collector takes the Deployment
        action: MyAppAction = "failed"
        try:
            served = self._converge_myapp(key, live, rec)
            if served is None:
                # not declared (gone or foreign, nothing to serve), or not created
                # while its change waits
                wait = rec.wait
                return Result(held=wait.message, hold=wait.hold) if wait else Result()
            action = served.action
            changed = action != "unchanged"
            # the revision a MyApp reports is the one that last changed it: the
            # pass's, or the one a change that waited came from
            source = declared or (rec.declared if changed else None)
            if source is not None:
                rec.sync = statuslib.source_for(changed, served.myapp, source.sync)
            return self._deployment_and_status(
                key,
                rec,
                served,
                from_git=declared is not None,
                deployment_absent=deployment_absent,
            )
        except APITooManyRequestsError as e:
            # throttled: the caller waits the hint out and tries again; an Event or a
            # status write now would only be one more request for the server to refuse
            return Result(requeue_after=e.retry_after, error=str(e), action=action, temporary=True)
        except (GitsyncError, ValueError) as e:
            # the MyApp could not be applied, or its status not written: tried again
            # with backoff, even when the error is permanent (what Git declares for
            # this key changes with no watch event of it); a pass's revision did not
            # apply, and Synced says so
            if declared is not None:
                self._sync_failed(key, rec, declared, str(e))
            temporary = isinstance(e, GitsyncError) and e.temporary
            return Result(error=str(e), action=action, temporary=temporary)
        except Exception as e:
            # a defect met on this MyApp (an input read back from the cluster that no
            # check foresaw): it fails alone, said as a failure, and the pass and every
            # other MyApp go on; the traceback is in the log
            log.exception("internal error", extra={"key": key})
            message = crash_message(e)
            if declared is not None:
                self._sync_failed(key, rec, declared, message)
            return Result(error=message, action=action)

    def _sync_failed(self, key: str, rec: Record, declared: Declared, error: str) -> None:
        """Synced=False on the MyApp (when it exists): this revision did not apply."""
        s = declared.sync
        rec.sync = statuslib.SyncInfo(s.revision, s.path, s.time, ok=False, message=error)
        live = self.myapps.get(key)
        if live is None:
            return
        # what the pass could not find out, status keeps: the Deployment's facts from
        # the cache and the drift last recorded; the failure is the Synced condition
        kept = list((live.get("status") or {}).get("drift") or [])
        try:
            self._write_status(live, rec, self.deployments.get(key), kept, error, announce=False)
        except GitsyncError as e:
            log.warning("could not record the failure in status: %s", e, extra={"key": key})

    def _deployment_and_status(
        self, key: str, rec: Record, served: Served, *, from_git: bool, deployment_absent: bool
    ) -> Result:
        """The Deployment, its rollout judged, then the status. A temporary failure of
        the Deployment is retried without a status write (a sync pass records that its
        revision did not apply); a permanent one is recorded, then returned as such.
        Raises what the status write raises."""
        myapp, items, action = served.myapp, served.items, served.action
        held, hold = served.held()
        state: rolloutlib.State | None = None
        try:
            outcome: Outcome | None = self._converge_deployment(
                key, myapp, deployment_absent, frozen=served.frozen
            )
            error, permanent = "", False
            rec.last_error = None
            # a MyApp whose change waits runs a spec that is not Git's: no verdict on Git's
            if outcome is not None and served.git is not None and served.wait is None:
                myapp, outcome, state = self._judge_rollout(key, rec, served, outcome)
        except APITooManyRequestsError:
            raise
        except (GitsyncError, ValueError) as e:
            outcome, error = None, str(e)
            permanent = not (isinstance(e, GitsyncError) and e.temporary)
            self.announce.error(myapp, rec, error)
            if from_git:
                s = rec.sync or statuslib.SyncInfo("", "", "")
                rec.sync = statuslib.SyncInfo(s.revision, s.path, s.time, ok=False, message=error)
            elif not permanent:
                return Result(error=error, action=action, held=held, hold=hold)
        if outcome is not None and (wait := self._status_wait(rec, outcome, state)):
            return Result(
                requeue_after=wait,
                action=action,
                outcome=outcome,
                held=held,
                hold=hold,
                paths=served.paths,
            )
        if state is None and served.git is not None:
            # not judged now: status shows gitsync's record as it stands, never what
            # status said before (a report is no source, not even of itself)
            record = self.record(key) or rolloutlib.Record()
            state = rolloutlib.State(record.healthy, record.rollback)
        self._status(key, rec, myapp, items, outcome, error, state)
        if error:
            return Result(
                permanent=permanent,
                error=error,
                action=action,
                held=held,
                hold=hold,
                temporary=not permanent,
            )
        return Result(action=action, outcome=outcome, held=held, hold=hold, paths=served.paths)

    def _judge_rollout(
        self, key: str, rec: Record, served: Served, outcome: Outcome
    ) -> tuple[Obj, Outcome, rolloutlib.State | None]:
        """The rollout of a MyApp held to Git, judged by its Deployment
        (:func:`gitsync.model.rollout.judge`); the MyApp and the Deployment as they are
        now (rolled back, maybe), and what status says of it (None: carried over)."""
        assert served.git is not None
        git_spec: Obj = served.git.get("spec") or {}
        record = self.record(key)
        found = rolloutlib.judge(
            policy=rolloutlib.policy_of(git_spec, self.settings.rollback),
            git_spec=git_spec,
            record=record,
            phase=str((served.myapp.get("status") or {}).get("phase") or ""),
            deployment=outcome.live,
            available=statuslib.phase_of(outcome.live) == "Available",
            # a field another controller owns (an HPA's replicas) is left to it for good:
            # the spec is no less healthy for it, and such an app could otherwise never
            # be rolled back
            drift_free=not any(not i.conflict for i in (*served.items, *outcome.drift)),
            revision=rec.sync.revision if rec.sync is not None else "",
            hold=served.hold,
            pinned=rec.declared is not None and rec.declared.pinned,
            now=statuslib.now(),
        )
        if found is None:
            return served.myapp, outcome, None
        if found.state.record != (record or rolloutlib.Record()):
            # the record first: a daemon stopped half way, or another replica, finds
            # the rollback and completes it rather than applying the failed spec again
            found = self._keep_record(key, found)
        for kind, reason, message in found.events:
            self.events.emit(served.myapp, kind, reason, message)
        if found.roll_back:
            return self._roll_back(key, rec, served, outcome, found.state)
        return served.myapp, outcome, found.state

    def _roll_back(
        self, key: str, rec: Record, served: Served, outcome: Outcome, state: rolloutlib.State
    ) -> tuple[Obj, Outcome, rolloutlib.State]:
        """Re-apply the last healthy spec, and its Deployment. The rollback is recorded
        (gitsync's record, then the status that shows it) first."""
        assert served.git is not None and state.healthy is not None and state.rollback
        rb = state.rollback
        entries = driftlib.status_entries(served.items + outcome.drift)
        myapp = self._write_status(
            served.myapp, rec, outcome.live, entries, "", rollout=state, announce=False
        )
        log.warning("rolled back to %s", rb.target, extra={"key": key})
        body = rolloutlib.with_spec(served.git, state.healthy.spec)
        mp = policy_for(body, self.settings, suspendable=False)
        res = converge(self.writer, f"{KIND}/{key.split('/', 1)[1]}", body, myapp, mp)
        if res.live is not None and res.action != "unchanged":
            myapp = res.live
            self.myapps.observe(res.live)
        return myapp, self._converge_deployment(key, myapp, False), state

    def record(self, key: str) -> rolloutlib.Record | None:
        """gitsync's record of MyApp ``key``'s rollouts, or None. One that gitsync could
        not have written is ignored (and said once per text): no hold, no healthy spec."""
        healthy, rollback = rolloutlib.record_keys(key)
        texts = (self.records.get(healthy) or "", self.records.get(rollback) or "")
        if not any(texts):
            return None
        known = self._read_records.get(key)
        if known is not None and known[0] == texts:
            return known[1]
        found: rolloutlib.Record | None
        try:
            found = rolloutlib.record_of(*texts)
        except rolloutlib.RecordError as e:
            log.warning("gitsync's rollback record is ignored: %s", e, extra={"key": key})
            found = None
        self._read_records[key] = (texts, found)
        return found

    def _forget_record(self, key: str) -> None:
        """The MyApp is gone: so is gitsync's record of its rollouts (as its status went
        with it), else the records of every MyApp ever pruned would fill the ConfigMap.
        A write only where there is a record."""
        self._read_records.pop(key, None)
        try:
            self.records.put(rolloutlib.Record().texts(key))
        except GitsyncError as e:
            log.warning("could not remove the rollback record: %s", e, extra={"key": key})

    def _keep_record(self, key: str, found: rolloutlib.Judgement) -> rolloutlib.Judgement:
        """Write what ``found`` makes of the record; the judgement as it stands when the
        record cannot take it (full): no healthy spec kept, and no rollback to one."""
        if self.records.put(found.state.record.texts(key)):
            return found
        log.warning(
            "gitsync's rollback records are full: this MyApp's last healthy spec is not kept",
            extra={"key": key},
        )
        state = dataclasses.replace(found.state, healthy=None, rollback=None)
        return rolloutlib.Judgement(state)

    def _status_wait(
        self, rec: Record, outcome: Outcome, rollout: rolloutlib.State | None
    ) -> float:
        """Seconds to hold back the status of a MyApp whose Deployment's spec was just
        written (created, or a new template), until the deployment controller has seen
        that generation (0: write now). A write now would say "Progressing" with the
        figures of the old generation (or none), and the Deployment's status, moments
        later, would need another; its watch event brings the key back, and one write
        says both: the revision and the rollout as the deployment controller sees it,
        within :data:`STATUS_WAIT` of the write. News of the rollout itself (a
        rollback, a failure, a hold released) is never held back."""
        if (
            self.defer_status
            and outcome.action != "unchanged"
            and rec.awaiting_since is None
            and _unobserved(outcome.live)
            and (rollout is None or not (rollout.rollback or rollout.failed or rollout.released))
        ):
            rec.awaiting_since = self.clock()
        if rec.awaiting_since is None:
            return 0.0
        left = rec.awaiting_since + STATUS_WAIT - self.clock()
        if left > 0 and _unobserved(outcome.live):
            return left
        return 0.0  # the status write now ends the wait (_write_status)

    def _status(
        self,
        key: str,
        rec: Record,
        myapp: Obj,
        items: list[driftlib.DriftItem],
        outcome: Outcome | None,
        error: str,
        rollout: rolloutlib.State | None = None,
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
        self._write_status(myapp, rec, deployment, entries, error, rollout=rollout)

    def _uncached_deployment(self, key: str, myapp: Obj, absent: bool) -> Obj | None:
        """A Deployment the cache does not hold: not created yet, not seen yet, or
        someone else's (the cache holds only those labelled as ours). Asked only
        when about to create, so steady state still reads nothing."""
        if absent:
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

    def _converge_myapp(self, key: str, myapp: Obj | None, rec: Record) -> Served | None:
        """The live MyApp against Git, when Git declares it (not in operator-only use).
        The drift policy is the one Git gives the MyApp: an edit of the live
        driftPolicy is itself drift, not a way around it. While a rollback holds Git's
        spec back, the MyApp is held to the healthy spec instead."""
        declared = rec.declared
        if declared is None or declared.claim.refusal(myapp) is not None:
            # another instance's MyApp, or one made by hand (re-created since our
            # pass): our Git held against it would take it over; the sync pass reports
            # the refusal
            self.announce.wait(key, rec, myapp, None)
            return Served(myapp, [], "unchanged") if myapp is not None else None
        name = key.split("/", 1)[1]
        git = declared.body
        held = rolloutlib.hold_of(self.record(key), git.get("spec"), self.settings.rollback)
        body = git if held is None else rolloutlib.with_spec(git, held.spec)
        verdict = self.gate.judge(body, myapp)
        wait = verdict.wait
        on = orderlib.dependencies(body) if wait is not None and wait.hold == "dependency" else ()
        self.announce.wait(key, rec, myapp, wait, on)
        if wait is not None:
            # nothing of Git's change is applied; the live MyApp serves as it is, and
            # its Deployment is still held to it
            if myapp is None:
                return None
            rb = held.rollback if held else None
            return Served(myapp, [], "unchanged", git, rb, wait, verdict.frozen)
        # suspend stops the Deployment, not the comparison of the MyApp with Git
        mp = policy_for(body, self.settings, suspendable=False)
        if verdict.frozen:
            mp = dataclasses.replace(mp, correct=False)
        # the ledger keeps Git's body unchanged until Git changes it
        kept = git if held is None else None
        res = converge(self.writer, f"{KIND}/{name}", body, myapp, mp, source=kept)
        if verdict.through_window and res.action != "unchanged" and res.live is not None:
            self._through_window(res.live, verdict)
        if res.corrected and myapp is not None:
            fixed = ", ".join(f"{i.path} (changed by {i.manager})" for i in res.corrected)
            self.events.emit(myapp, "Normal", "DriftCorrected", f"MyApp {name}: {fixed}")
        if res.action != "unchanged" and res.live is not None:
            myapp = res.live
            self.myapps.observe(res.live)
        if myapp is None:
            return None
        rb = held.rollback if held else None
        return Served(myapp, list(res.drift), res.action, git, rb, None, verdict.frozen, res.paths)

    def _through_window(self, myapp: Obj, verdict: Verdict) -> None:
        """A change applied through a closed window: logged, recorded as an Event, and
        the one-shot annotation that let it through removed (kept, it would let every
        later change through too)."""
        assert verdict.closed is not None
        meta = myapp["metadata"]
        key = f"{meta['namespace']}/{meta['name']}"
        how = verdict.override
        if how != IGNORE_FLAG:
            how = f"{OVERRIDE_ANNOTATION}={quote(how)}"
            try:
                # ahead of the watch event: a reconcile before it must not find it again
                self.myapps.observe(
                    self.writer.remove_annotation(
                        KIND, meta["namespace"], meta["name"], OVERRIDE_ANNOTATION
                    )
                )
            except GitsyncError as e:
                log.warning("could not remove the override: %s", e, extra={"key": key})
        self.announce.through_window(myapp, verdict.closed, how)

    def _converge_deployment(
        self, key: str, myapp: Obj, absent: bool, *, frozen: bool = False
    ) -> Outcome:
        """``frozen``: drift is reported, not corrected (a closed window under
        --windows-block-corrections)."""
        name = key.split("/", 1)[1]
        live = self.deployments.get(key) or self._uncached_deployment(key, myapp, absent)
        desired = render(myapp)
        p = policy_for(myapp, self.settings)
        if frozen:
            p = dataclasses.replace(p, correct=False)
        outcome = converge(
            self.writer, f"Deployment/{name}", desired, live, p, source=self._inputs(key, myapp)
        )
        if outcome.live is not None and outcome.action != "unchanged":
            self.deployments.observe(outcome.live)
        self.announce.action(myapp, outcome)
        return outcome

    def _inputs(self, key: str, myapp: Obj) -> tuple[object, ...] | None:
        """What ``myapp``'s Deployment is rendered from, as the cache holds it, for the
        planner's memo to keep rather than a copy of the rendering (a write's reply is
        not kept: the cache holds a compacted copy of it); None if the cache holds other
        inputs (a newer spec), or none."""
        cached = self.myapps.get(key)
        if cached is None:
            return None
        held = render_inputs(cached)
        return held if held == render_inputs(myapp) else None

    def _write_status(
        self,
        myapp: Obj,
        rec: Record,
        deployment: Obj | None,
        entries: list[Obj],
        error: str,
        *,
        announce: bool = True,
        rollout: rolloutlib.State | None = None,
    ) -> Obj:
        """Write the status computed from these facts, when it differs from the live one;
        the MyApp as it is now.

        ``entries`` are ``status.drift[]``; with ``announce`` a change of the drifted
        paths is an Event. A pass that failed before it could compare passes the
        recorded drift and ``announce=False``: nothing was found resolved."""
        meta = myapp["metadata"]
        rec.awaiting_since = None
        new = statuslib.compute(
            myapp,
            deployment,
            drift=entries,
            sync=rec.sync,
            error=error,
            rollout=rollout,
            wait=rec.wait,
        )
        if announce:
            self.announce.drift(myapp, rec, entries)
        if statuslib.same(myapp.get("status"), new):
            return myapp
        written = self.writer.apply_status(meta["namespace"], meta["name"], new)
        # ahead of the watch event: the next reconcile compares with what we wrote
        self.myapps.observe(written)
        log.debug("status written", extra={"key": f"{meta['namespace']}/{meta['name']}"})
        return written


def _unobserved(deployment: Obj | None) -> bool:
    """The deployment controller has not said anything yet of this Deployment's
    current generation (its status describes an older spec, or there is none)."""
    return deployment is not None and not rolloutlib.seen(deployment)
