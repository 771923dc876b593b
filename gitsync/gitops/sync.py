"""One pass of the GitOps loop: fetch → load → apply MyApps → their Deployments
and status (through the operator's reconcile) → guarded prune → sync state.

A pass is complete on its own, so ``gitsync sync`` in a CI pipeline leaves the
cluster finished without a daemon. Results are values: every object gets an
action in the pass's ``ChangeSet`` (:mod:`gitsync.engine.changeset`), which the CLI prints,
the sync state records and the daemon exports.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Collection, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Protocol

from gitsync.engine.changeset import (
    Change,
    ChangeSet,
    PruneGuard,
    hold_prunes,
    key_of_change,
    plan_prune,
)
from gitsync.engine.planner import Settings
from gitsync.errors import (
    APIConflictError,
    APIError,
    APINotFoundError,
    ConfigError,
    GitsyncError,
    OwnershipError,
    SourceError,
    VerificationError,
)
from gitsync.gitops import increment
from gitsync.gitops import namespaces as nslib
from gitsync.gitops.lineage import Lineage
from gitsync.gitops.pinned import PinnedRevisions, selection_failures
from gitsync.gitops.sync_state import Part, StateWriter, SyncState, merged, part_of, state_of
from gitsync.gitops.unloaded import load_failures
from gitsync.gitops.waves import Waves
from gitsync.kube.client import path_of
from gitsync.kube.interfaces import Cache, Client, Recorder, RecordStore, Writer
from gitsync.kube.records import Records
from gitsync.kube.throttle import Throttle
from gitsync.model import instance as instancelib
from gitsync.model import order as orderlib
from gitsync.model import pin as pinlib
from gitsync.model.api import (
    KIND,
    MANAGED_BY,
    MANAGED_BY_LABEL,
    SOURCE_LABEL,
    SOURCE_PATH_ANNOTATION,
    Obj,
    key_of,
    subject,
)
from gitsync.model.compact import SHARED
from gitsync.model.myapp_status import SyncInfo, now
from gitsync.model.render import desired_myapp
from gitsync.model.shards import unserved_words
from gitsync.reconcile.gate import Gate
from gitsync.reconcile.ledger import Claim, Declared, Ledger
from gitsync.reconcile.result import Result, crash_message
from gitsync.source import manifests
from gitsync.source.checkout import Revision, Source

#: deletes tried per pruned MyApp when it changed between the read and the delete
_PRUNE_ATTEMPTS = 3
#: how long a prune waits for the watch to bring a MyApp's newer version
_CACHE_CATCH_UP_SECONDS = 2.0

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SyncOptions:
    repo: str
    path: str = "."
    ref: str = "main"
    #: the repository URL that names this source instance (default: repo); lets a
    #: local checkout stand in for the URL a daemon syncs from
    instance: str = ""
    #: the instance's name (default: derived from the repository, path and ref)
    instance_name: str = ""
    default_namespace: str = "default"
    allowed_namespaces: frozenset[str] | None = None
    #: namespace patterns MyApps may not use unless allowed by name
    denied_namespaces: tuple[str, ...] = ()
    #: the operator's only namespace (None: all); Git MyApps elsewhere are refused
    watch_namespace: str | None = None
    #: create missing target namespaces (with SSA, labelled as gitsync's; never deleted)
    create_namespace: bool = False
    #: take over MyApps made by hand (no source label) that Git declares; without it
    #: only one whose owner annotated it gitsync.apps.example.com/adopt=true
    adopt: bool = False
    prune: bool = True
    allow_empty: bool = False
    prune_max_fraction: float = 0.5
    #: MyApps applied in parallel: a pass is bound by API round trips, not CPU
    #: (measured at 300 MyApps: 8 → 10.9 s, 32 → 6.1 s, 64 → 5.8 s; at 1000 on a fresh
    #: control plane: 32 → 10.2 s, 64 → 7.7 s)
    concurrency: int = 64
    #: a pass for a new commit applies only the MyApps the commit changed (and those not
    #: left in Git's state last time) while the last pass over every MyApp is younger than
    #: this many seconds (see :mod:`gitsync.gitops.increment`); 0: every pass is full
    full_every: float = 0.0
    #: the instance, when the caller named it already (a local checkout is named after
    #: the repository it is a checkout of); else resolved from the fields above
    identity: instancelib.Instance | None = None
    #: seconds a pass waits in all for the dependencies it applied to become Available
    #: before applying what depends on them (a one-shot sync); 0: the daemon's workers
    #: apply those when the dependencies' watch events wake them
    await_dependencies: float = 0.0


def myapp_body(app: manifests.DesiredApp, source_label: str) -> Obj:
    """The apply body of a Git MyApp, with the labels that make it ours to prune."""
    body = desired_myapp(app.obj)
    meta = body["metadata"]
    meta["labels"] = {
        **meta.get("labels", {}),
        MANAGED_BY_LABEL: MANAGED_BY,
        SOURCE_LABEL: source_label,
    }
    meta["annotations"] = {**meta.get("annotations", {}), SOURCE_PATH_ANNOTATION: app.file}
    return body


def _unchanged(key: str) -> Change:
    ns, name = key.split("/", 1)
    return Change(subject(KIND, ns, name), "unchanged")


def identity_of(options: SyncOptions) -> instancelib.Instance:
    if options.identity is not None:
        return options.identity
    return instancelib.resolve(
        options.instance_name, options.instance or options.repo, options.path, options.ref
    )


def tracked_by(myapps: Iterable[Obj], source_label: str) -> dict[str, Obj]:
    return {
        key_of(o): o
        for o in myapps
        if (o["metadata"].get("labels") or {}).get(SOURCE_LABEL) == source_label
    }


class Shares(Protocol):
    """The passes of a sharded instance's members (a
    :class:`~gitsync.kube.members.Membership`): each publishes its own, the leader sums
    them into the instance's record."""

    @property
    def members(self) -> tuple[str, ...]:
        """The live members, this one included."""

    @property
    def passes(self) -> dict[str, str]:
        """The other live members' last passes by identity, as published."""

    @property
    def unserved(self) -> Mapping[int, float]:
        """The buckets no live member has held for longer than a handover takes, with
        when each was first seen unserved (seconds since the epoch)."""

    def publish(self, last_pass: str) -> None: ...


class Operator(Protocol):
    """What a sync pass needs of the operator (a :class:`~gitsync.reconcile.controller.Controller`):
    its one reconcile entry point, its caches, a writer for the prune, the ledger to let
    go of what left Git, a client for what no cache holds, and whether this replica
    leads."""

    def reconcile(
        self, key: str, declared: Declared | None = None, *, deployment_absent: bool = False
    ) -> Result: ...

    def requeue(self, key: str, after: float) -> None: ...

    def retry(self, key: str, result: Result) -> None: ...

    def load_failed(self, key: str, sync: SyncInfo) -> Result: ...

    @property
    def myapps(self) -> Cache: ...

    @property
    def deployments(self) -> Cache: ...

    @property
    def applier(self) -> Writer: ...

    @property
    def events(self) -> Recorder: ...

    @property
    def ledger(self) -> Ledger: ...

    @property
    def settings(self) -> Settings: ...

    @property
    def kube(self) -> Client: ...

    @property
    def gate(self) -> Gate: ...

    @property
    def is_leader(self) -> Callable[[], bool]: ...

    def serves(self, key: str) -> bool: ...

    def working(self, key: str) -> AbstractContextManager[bool]: ...

    @property
    def sharded(self) -> bool: ...

    def keep_records(self, records: RecordStore) -> None:
        """Keep gitsync's own records (what a rollback needs) in ``records``."""


class Syncer:
    def __init__(
        self,
        controller: Operator,
        source: Source,
        options: SyncOptions,
        state: StateWriter | None = None,
        records: Records | None = None,
    ) -> None:
        self.controller = controller
        self.source = source
        self.options = options
        self.state = state
        #: gitsync's own records (the operator's reconciles read and write them), read
        #: again with the pins before every pass: another replica, or the daemon
        #: before a restart, may have written them
        self.records = records
        if records is not None:
            controller.keep_records(records)
        self._loaded: tuple[str, manifests.LoadResult] | None = None
        #: the last load's MyApps by key, with the commit read: replaced whole, so that
        #: the drift page (another thread) reads one load or the next, never a mix
        self._declared: tuple[str, dict[str, manifests.DesiredApp]] = ("", {})
        #: each file's MyApps by its bytes: a new commit parses only the files it changed
        self._parsed = manifests.ParseCache()
        #: set on shutdown: the pass stops after the objects in flight
        self.cancel = threading.Event()
        #: the pass's threads wait out a 429's Retry-After together
        self.throttle = Throttle(self.cancel.wait)
        self._interrupted = threading.Event()
        self.identity = identity_of(options)
        self.source_label = self.identity.label
        #: MyApps this instance refused (another instance's, or made by hand), with
        #: the refusal, announced by an Event once
        self._refused: dict[str, instancelib.Refusal] = {}
        #: the commit the cluster is at, which each new revision must descend from
        self.lineage = Lineage(state)
        #: the pins the last pass honoured (None: they could not be read), for the CLI
        self.pins: pinlib.Pins | None = pinlib.Pins()
        #: the MyApps of the commits single MyApps are pinned to
        self._pinned = PinnedRevisions(source, self._read)
        #: what the last pass left, when it ended clean: what the next may start from
        self._base: increment.Base | None = None
        #: whether the last pass applied only what its commit changed
        self.incremental = False
        #: sharded: the members' passes, summed by the leader into the record
        self.shares: Shares | None = None
        #: sharded: this member's last pass, alone and as published
        self._own: tuple[SyncState, Part] | None = None
        self._recording = threading.Lock()
        self._waves = Waves(controller.gate, self.cancel, options.await_dependencies)

    def run(self) -> ChangeSet:
        start = time.monotonic()
        self._interrupted.clear()
        result = ChangeSet()
        try:
            self._run(result, start)
        except Exception as e:
            # a bug, or an exception no boundary mapped (a RecursionError): the pass failed,
            # and that is recorded where every failed pass is (the ConfigMap, its SyncFailed
            # Event and so the notification, the metric); unrecorded, the cluster would go
            # on showing the last pass's "Succeeded" while nothing is applied any more
            log.exception("sync pass crashed")
            result.errors.append(crash_message(e))
            result.prune_skipped = "the sync failed unexpectedly; nothing is pruned"
            self._record(result, start)
        return result

    def _run(self, result: ChangeSet, start: float) -> None:
        # taken, and left again only by a pass that ends clean: after any failure the
        # next pass is a full one
        base, self._base = self._base, None
        self.incremental = False
        relists = self.controller.myapps.relists + self.controller.deployments.relists
        try:
            pins = self._read_pins()
        except APIError as e:
            # never taken for "not pinned": the pass would go back to the head
            self.pins = None
            result.errors.append(f"the pins cannot be read: {e}")
            result.prune_skipped = "the pins could not be read; nothing is pruned"
            log.error("the pins cannot be read: %s", e)
            self._record(result, start)
            return
        self.pins = pins
        if pinlib.INSTANCE_KEY in pins.invalid:
            # unreadable is not "not pinned": going back to the head would undo the pin
            why = pins.invalid[pinlib.INSTANCE_KEY]
            result.errors.append(
                f"the instance's pin cannot be read ({why}); nothing is applied until it"
                " is fixed or lifted (gitsync resume)"
            )
            result.prune_skipped = "the instance's pin cannot be read; nothing is pruned"
            self._record(result, start)
            return
        try:
            rev = self._fetch(pins)
        except VerificationError as e:
            self._reject(result, e, start)
            return
        except (SourceError, APIError, ConfigError) as e:
            result.errors.append(str(e))
            result.prune_skipped = "the fetch failed; nothing is pruned"
            log.error("fetch failed: %s", e)
            self._record(result, start)
            return
        result.fetch_seconds = time.monotonic() - start
        result.revision = str(rev)
        result.verification = rev.verified
        try:
            loaded = self._load(rev)
        except ConfigError as e:  # --path missing or outside the repository
            result.errors.append(str(e))
            result.prune_skipped = "the manifests could not be read; nothing is pruned"
            self._record(result, start)
            return
        for err in loaded.errors:
            result.errors.append(str(err))
            log.error("invalid manifest: %s", err)
        info = SyncInfo(revision=str(rev), path="", time=now())
        selection = self._pinned.select({app.key: app for app in loaded.apps}, pins)
        result.changes.extend(selection_failures(selection))
        desired = selection.apps
        # pinned MyApps their revision does not give: not applied, and not pruned either
        held = set(selection.missing)
        infos = {
            key: SyncInfo(f"{rev.ref}@sha1:{pin.revision}", "", info.time)
            for key, pin in selection.pinned.items()
            if pin.revision != rev.sha
        }
        # before applying: what the prune may delete is what was tracked when the pass
        # began (the guard adds what the pass applies, see plan_prune)
        tracked = self.tracked()
        # a MyApp whose dependsOn cannot be ordered is an error, neither applied nor
        # pruned nor let go; the rest applies
        unordered = manifests.ordering(desired.values(), self._live)
        for err in unordered.values():
            result.errors.append(str(err))
            log.error("invalid manifest: %s", err)
        held |= set(unordered)
        missing = self._namespaces(desired, result)
        for key, message in sorted(missing.items()):
            ns, name = key.split("/", 1)
            result.changes.append(Change(subject(KIND, ns, name), "failed", reason=message))
        todo = [app for key, app in desired.items() if key not in missing | unordered.keys()]
        only = increment.scope(
            base,
            sha=rev.sha,
            apps=desired,
            pinned=bool(pins),
            relists=relists,
            now=start,
            full_every=self.options.full_every,
        )
        self.incremental = only is not None
        # with sharding, the MyApps of the buckets other replicas serve are theirs: this
        # pass neither applies nor reports them (without sharding every one is served)
        declared_here = {app.key for app in todo}
        # a refusal is remembered while Git declares its MyApp (an incremental pass does
        # not look at it again), and no longer: the map would only grow
        self._refused = {k: r for k, r in self._refused.items() if k in declared_here}
        todo = [app for app in todo if self.controller.serves(app.key)]
        applying = todo if only is None else [app for app in todo if app.key in only]
        # a proof of absence holds for this pass only: handed to each reconcile
        absent = self._absent_deployments(app.key for app in applying)
        # the operator holds MyApps to Git only where this pass may apply them
        claim = Claim(self.identity, self.options.adopt)
        pinned = {key for key in desired if pins.instance is not None or key in selection.pinned}
        declared = {
            app.key: self._declared_of(app, infos.get(app.key, info), claim, app.key in pinned)
            for app in applying
        }
        self._declare_dependencies(declared)
        #: the MyApps whose status is held back for the deployment controller's word,
        #: and when it is due
        held_statuses: dict[str, float] = {}
        by_key = {app.key: app for app in applying}
        with ThreadPoolExecutor(max(1, self.options.concurrency)) as pool:
            # each MyApp after the ones of the pass it depends on (gitops.waves)
            done = self._waves.apply(
                pool,
                {key: d.body for key, d in declared.items()},
                lambda key: self._apply(by_key[key], declared[key], key in absent, held_statuses),
            )
            self._held_statuses(pool, held_statuses)
            # the MyApps of the files that no longer load: left as they are, and said so
            failures = load_failures(
                tracked, desired.keys() | held, loaded.errors, str(rev), info.time
            )
            self._load_failed(pool, failures)
        clean: list[str] = []
        for app in todo:
            # in Git's order, as a full pass lists them; one not applied is as the last
            # pass left it: in Git's state
            change = done[app.key] if app.key in done else _unchanged(app.key)
            if change is None:
                continue
            result.changes.append(change)
            if change.action != "failed" and not change.reason and not change.hold:
                clean.append(app.key)
        if self._interrupted.is_set():
            # stopped half way: what was not looked at is not known to be gone
            result.errors.append(
                "the sync was interrupted (shutdown, leadership lost, or a bucket handed over)"
            )
            result.prune_skipped = "the sync was interrupted; nothing is pruned"
            self._record(result, start)
            return
        if loaded.ok:
            # what left Git is no longer held to Git (pruned or not); while a file is
            # broken, what it declared may be in it, so nothing is let go
            ledger = self.controller.ledger
            ledger.release(ledger.declared_keys() - set(desired) - held)
        # what the pass applied, counted by the prune guard as diff counts it: all it
        # was given but what it refused (the refusals are the only failures known
        # before applying; a MyApp whose Deployment failed is tracked all the same)
        applied = declared_here - set(self._refused)
        if self.controller.is_leader() or not self.controller.sharded:
            # one replica prunes: with sharding, the others serve their buckets only
            # (without, a pass that lost leadership finds out in the prune, and says so)
            self._prune(result, set(desired) | held, tracked, loaded.ok, applied)
        if loaded.ok and not result.errors:
            self._base = increment.after(
                base,
                sha=rev.sha,
                apps=desired,
                clean=clean,
                relists=relists,
                started=start,
                full=only is None,
            )
        self._record(result, start)

    def _read_pins(self) -> pinlib.Pins:
        """The pins, read from the cluster before every pass (one GET of the status
        ConfigMap per poll, none per MyApp), so that every replica, a new leader and a
        restarted daemon honour a pin from their next pass on; none without a record."""
        if self.state is None:
            return pinlib.Pins()
        cm = self.state.read_object()
        if self.records is not None:
            self.records.load(cm)
        return pinlib.pins_of((cm or {}).get("data"))

    def _fetch(self, pins: pinlib.Pins) -> Revision:
        """The revision every MyApp without a pin of its own comes from: the instance's
        pin, else the ref's commit (which must descend from the one last applied)."""
        if pins.instance is None:
            return self.lineage.fetch(self.source)
        # the ref is not fetched at all while pinned, and the commit the cluster is
        # recorded at stays the head applied before the pin (see Lineage.hold)
        self.lineage.hold()
        return self.source.fetch_commit(pins.instance.revision)

    def _absent_deployments(self, desired: Iterable[str]) -> frozenset[str]:
        """Desired MyApps whose Deployment does not exist, by one LIST per namespace.

        Before creating a Deployment the controller makes sure none of that name
        exists (it never takes over another's); the cache holds only ours, so that
        costs a GET per new MyApp: 1000 on a cold sync of 1000. Listed when more
        than one is missing, so steady state (nothing missing) still reads nothing."""
        missing = [k for k in desired if self.controller.deployments.get(k) is None]
        if len(missing) < 2:
            return frozenset()
        absent: set[str] = set()
        for ns in sorted({k.split("/", 1)[0] for k in missing}):
            try:
                items = self.controller.kube.list(path_of("Deployment", ns)).get("items", [])
            except GitsyncError as e:
                log.debug("listing Deployments in %s failed (%s); checking one by one", ns, e)
                continue
            present = {key_of(o) for o in items}
            absent |= {k for k in missing if k.split("/", 1)[0] == ns and k not in present}
        return frozenset(absent)

    def _load(self, rev: Revision) -> manifests.LoadResult:
        # a commit's files never change: when the ref has not moved, the manifests
        # are not read again (a local directory has no sha and is always read); a new
        # commit has every file read but only those it changed parsed
        if rev.sha and self._loaded is not None and self._loaded[0] == rev.sha:
            return self._loaded[1]
        loaded = self._read(rev)
        log.debug(
            "manifests loaded: %d files parsed, %d unchanged",
            self._parsed.parsed,
            self._parsed.reused,
        )
        self._loaded = (rev.sha, loaded)
        self._declared = (rev.sha, {app.key: app for app in loaded.apps})
        return loaded

    def _read(self, rev: Revision) -> manifests.LoadResult:
        """The manifests of a checked-out revision (a pinned MyApp's commit is read with
        this alone: it is not kept as the last load)."""
        return manifests.load(
            rev.dir,
            self.options.path,
            default_namespace=self.options.default_namespace,
            allowed_namespaces=self.options.allowed_namespaces,
            denied_namespaces=self.options.denied_namespaces,
            watch_namespace=self.options.watch_namespace,
            cache=self._parsed,
            omitted=rev.omitted,
            listing=rev.listing,
        )

    def declared(self, key: str, sha: str) -> manifests.DesiredApp | None:
        """MyApp ``key`` as the last load read it, if that load was of commit ``sha`` (""
        for a local directory): what the drift page shows of Git, without reading or
        parsing a file per request."""
        loaded_sha, apps = self._declared
        return apps.get(key) if loaded_sha == sha else None

    def _namespaces(
        self, desired: dict[str, manifests.DesiredApp], result: ChangeSet
    ) -> dict[str, str]:
        """Why each MyApp that cannot be applied for want of a namespace is not; the
        namespaces created (when asked) are in ``result``."""
        o = self.options
        missing, created = nslib.ensure(
            self.controller.kube,
            desired,
            {k for k in desired if self.controller.myapps.get(k) is not None},
            create=o.create_namespace,
            instance=self.identity.name,
            allowed=o.allowed_namespaces,
            denied=o.denied_namespaces,
            field_manager=self.controller.settings.field_manager,
        )
        result.changes.extend(Change(f"Namespace/{ns}", "created") for ns in created)
        return missing

    def _live(self, key: str) -> bool:
        return self.controller.myapps.get(key) is not None

    def _declared_of(
        self, app: manifests.DesiredApp, info: SyncInfo, claim: Claim, pinned: bool = False
    ) -> Declared:
        # compacted: the ledger holds it until Git changes it
        body = SHARED.compact(myapp_body(app, self.source_label))
        return Declared(body, SyncInfo(info.revision, app.file, info.time), claim, pinned)

    def _declare_dependencies(self, declared: dict[str, Declared]) -> None:
        """Hand the operator, before any MyApp is applied, what Git declares now for each
        MyApp another one depends on (not refused: another instance's is not held to
        this Git): a dependent applied in parallel with its dependency must see the
        dependency's change as not applied yet, not the dependency as it was."""
        needed = {dep for d in declared.values() for dep in orderlib.dependencies(d.body)}
        ahead = {
            key: d
            for key, d in declared.items()
            if key in needed
            and instancelib.refusal_of(
                self.identity, key, self.controller.myapps.get(key), self.options.adopt
            )
            is None
        }
        if ahead:
            self.controller.ledger.declare(ahead)

    def _apply(
        self,
        app: manifests.DesiredApp,
        declared: Declared,
        absent: bool,
        held_statuses: dict[str, float],
    ) -> Change | None:
        key = app.key
        with self.controller.working(key) as mine:
            if self.cancel.is_set() or not mine:
                # shutting down, no longer leader, or the MyApp's bucket given up: finish
                # the objects in flight, start no more (the pass then counts as
                # interrupted and prunes nothing)
                self._interrupted.set()
                return None
            ns, name = key.split("/", 1)
            who = subject(KIND, ns, name)
            refused = self._refuse(key, who)
            if refused is not None:
                return refused
            done = self.throttle.call(
                lambda: self.controller.reconcile(key, declared, deployment_absent=absent),
                refused=lambda r: r.requeue_after if r.throttled else None,
            )
        if done.error:
            log.error("apply failed: %s", done.error, extra={"key": key})
            if done.temporary:
                # a timeout, a 5xx, a conflict: the workers try it again with backoff
                # (Git's body, this revision), not the next pass an interval away
                self.controller.retry(key, done)
            return Change(who, "failed", reason=done.error)
        if done.requeue_after is not None:
            # its status is held back: a worker writes it (see STATUS_WAIT)
            held_statuses[key] = time.monotonic() + done.requeue_after
            self.controller.requeue(key, done.requeue_after)
        assert done.action != "failed"  # (a failure carries its error)
        return Change(who, done.action, paths=done.paths, reason=done.held, hold=done.hold)

    def _held_statuses(self, pool: ThreadPoolExecutor, held: dict[str, float]) -> None:
        """Write, with the pass's own threads, the statuses held back that are due and
        not written yet: the workers write them one by one (a few at a time, between
        watch events), so after creating thousands of MyApps they would still be writing
        long after the pass. Those not due yet stay the workers'; one a worker wrote
        meanwhile is held back no more (and a reconcile of it would write nothing)."""
        now = time.monotonic()
        ledger = self.controller.ledger
        due = [
            key
            for key, at in sorted(held.items(), key=lambda kv: kv[1])
            if at <= now and (rec := ledger.get(key)) is not None and rec.awaiting_since is not None
        ]

        def write(key: str) -> None:
            with self.controller.working(key) as mine:
                if self.cancel.is_set() or not mine:
                    return  # the workers have it queued
                self.throttle.call(
                    lambda: self.controller.reconcile(key),
                    refused=lambda r: r.requeue_after if r.throttled else None,
                )

        list(pool.map(write, due))

    def _load_failed(self, pool: ThreadPoolExecutor, failures: dict[str, SyncInfo]) -> None:
        """Record in each MyApp's Synced condition that its file does not load; the error
        itself is the pass's already."""

        def write(key: str) -> None:
            with self.controller.working(key) as mine:
                if self.cancel.is_set() or not mine:
                    return  # the next pass says it
                done = self.controller.load_failed(key, failures[key])
            if done.error:
                log.warning("could not record the load failure: %s", done.error, extra={"key": key})

        list(pool.map(write, failures))

    def _refuse(self, key: str, who: str) -> Change | None:
        """Another instance's MyApp is never applied over (as a Deployment not owned by
        its MyApp is never taken over): the two instances would flap the MyApp between
        their revisions, and each would prune it when it left the other's Git. Nor is
        one made by hand, unless handed over (:func:`~gitsync.model.instance.refusal_of`).

        Read from the informer cache, which holds every MyApp it watches (no label
        selector): one absent from it was absent when the watch last spoke, so a create
        can take over only one made within the watch's latency."""
        live = self.controller.myapps.get(key)
        refused = instancelib.refusal_of(self.identity, who, live, self.options.adopt)
        if live is None or refused is None:
            self._refused.pop(key, None)
            return None
        error = OwnershipError(refused.message)
        log.error("apply refused: %s", error, extra={"key": key})
        if self._refused.get(key) != refused:
            # once per MyApp and owner, not on every poll
            self._refused[key] = refused
            self.controller.events.emit(live, "Warning", refused.reason, str(error))
        return Change(who, "failed", reason=str(error))

    def tracked(self) -> dict[str, Obj]:
        """Live MyApps that carry this source instance's label, by key."""
        return tracked_by(self.controller.myapps.items(), self.source_label)

    def _prune(
        self,
        result: ChangeSet,
        desired: set[str],
        tracked: dict[str, Obj],
        manifests_ok: bool,
        applied: Collection[str] = (),
    ) -> None:
        """Carry out the prune plan ``gitsync diff`` shows (:func:`plan_prune`)."""
        o = self.options
        guard = PruneGuard(o.prune, o.allow_empty, o.prune_max_fraction)
        planned = plan_prune(desired, tracked, guard, manifests_ok=manifests_ok, applied=applied)
        gate = self.controller.gate
        planned = hold_prunes(planned, tracked, gate.windows, gate.now())
        result.changes.extend(c for c in planned.changes if c.action != "pruned")
        if planned.prune_skipped:
            result.prune_skipped = planned.prune_skipped
            log.warning("prune skipped: %s", planned.prune_skipped)
        for change in (c for c in planned.changes if c.action == "pruned"):
            key, who = key_of_change(change), change.subject
            if self.cancel.is_set() or not self.controller.is_leader():
                # checked before every delete, not once per pass: a replica deposed
                # during the apply phase would otherwise delete what a newer leader,
                # maybe at a newer revision, has just declared
                result.errors.append("prune stopped: shutdown, or leadership lost")
                result.prune_skipped = "the sync was interrupted; the rest is not pruned"
                log.warning("prune stopped before %s: shutdown, or leadership lost", who)
                return
            try:
                if not self._prune_one(key, tracked[key]["metadata"]["uid"]):
                    continue
            except APIError as e:
                result.changes.append(Change(who, "failed", reason=f"prune: {e}"))
                continue
            # (no longer held to Git: run() let go of what left it before pruning)
            self.controller.ledger.forget(key)
            result.changes.append(Change(who, "pruned"))
            self.controller.events.emit(
                tracked[key], "Normal", "Pruned", f"{who} left Git; deleted"
            )
            log.info("pruned", extra={"key": key})

    def _prune_one(self, key: str, uid: str) -> bool:
        """Delete one tracked MyApp if it is still this instance's as the cache shows it;
        whether it was deleted. The delete carries the resourceVersion that was checked,
        so a relabel by another instance in between is never overridden. A 409 is most
        often a status write the cache has not seen yet: judged again once it has."""
        ns, name = key.split("/", 1)
        for _ in range(_PRUNE_ATTEMPTS):
            obj = self.controller.myapps.get(key)
            meta = obj["metadata"] if obj is not None else {}
            if (
                obj is None
                or meta.get("uid") != uid
                or (meta.get("labels") or {}).get(SOURCE_LABEL) != self.source_label
            ):
                return False  # gone, replaced, or relabelled since the pass began
            if self.cancel.is_set() or not self.controller.is_leader():
                return False  # the caller stops the prune before the next key
            version = meta.get("resourceVersion")
            try:
                self.controller.applier.delete(KIND, ns, name, uid, version)
                return True
            except APINotFoundError:
                return False  # deleted meanwhile: what prune wanted
            except APIConflictError:
                self._await_newer(key, version)
        log.info("not pruned: changed since it was read", extra={"key": key})
        return False  # judged again next pass

    def _await_newer(self, key: str, version: str | None) -> None:
        """Wait (bounded, and cut short by shutdown) until the cache holds another
        version of ``key`` than ``version``."""
        deadline = time.monotonic() + _CACHE_CATCH_UP_SECONDS
        while time.monotonic() < deadline and not self.cancel.is_set():
            obj = self.controller.myapps.get(key)
            if obj is None or obj["metadata"].get("resourceVersion") != version:
                return
            self.cancel.wait(0.05)

    def _reject(self, result: ChangeSet, error: VerificationError, start: float) -> None:
        """An untrusted commit: nothing applied, nothing pruned; the revision recorded
        stays the one the cluster is still at."""
        result.rejection = error
        result.errors.append(str(error))
        result.verification = str(error)
        result.prune_skipped = "the commit is not trusted; nothing is pruned"
        if self.state is not None:
            last = self.state.last
            try:
                result.revision = last.revision if last else self.state.read().get("revision", "")
            except APIError as e:  # the record below will fail alike, and say so
                log.debug("cannot read the last revision: %s", e)
        self._record(result, start)

    def _record(self, result: ChangeSet, start: float) -> None:
        result.seconds = time.monotonic() - start
        baseline = self.lineage.baseline
        if baseline is None:
            # the record could not be read: writing this pass's would erase it, and
            # with it what the next commit must descend from
            log.warning("the sync state is not recorded: %s", "; ".join(result.errors))
            return
        result.applied_commit, result.accepted_once = baseline
        if self.state is None:
            return
        pinned = None if self.pins is None else "\n".join(self.pins.lines())
        if not self.controller.sharded:
            self.state.record_changes(result, pinned=pinned)
            return
        # sharded: each member's pass is a part, published through its member Lease;
        # the instance's record is the leader's sum of the parts at its revision
        with self._recording:
            own = state_of(result, self.state.last, pinned)
            part = part_of(result, own, None if self._own is None else self._own[1])
            self._own = (own, part)
            if self.shares is not None:
                self.shares.publish(part.text())
        self.record_parts()

    def record_parts(self) -> None:
        """Sharded, on the leader: record the sum of this member's last pass and the
        other members' (again when one of theirs changes); a no-op when nothing did."""
        if self.state is None or not self.controller.is_leader():
            return
        with self._recording:
            if self._own is None:
                return  # no pass of ours yet: its revision is the record's
            own, part = self._own
            shares = self.shares
            texts = {} if shares is None else shares.passes
            others = {m: p for m, t in texts.items() if (p := Part.parse(t)) is not None}
            members = 1 if shares is None else len(shares.members)
            unserved = "" if shares is None else unserved_words(shares.unserved)
            self.state.record(merged(own, part, others, members, unserved))
