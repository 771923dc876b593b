"""Sync-level state that belongs to no single MyApp, visible in the cluster.

A ConfigMap per instance (``gitsync-status-<instance name>``) holds the revision,
the result, the last error and the counts of the last pass; an Event is recorded on it
when the result or the prune decision changes. Written with SSA, and only
when its content changes, so a no-op resync costs no write.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import threading
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field

from gitsync.engine.changeset import WRITES, Change, ChangeSet, summary_of
from gitsync.errors import APIError, APINotFoundError
from gitsync.gitops import failures
from gitsync.kube.client import resource_path
from gitsync.kube.events import EventRecorder, EventType
from gitsync.kube.interfaces import Client
from gitsync.kube.records import status_configmap
from gitsync.model.api import (
    ACCEPT_ANNOTATION,
    FIELD_MANAGER,
    KIND,
    MANAGED_BY,
    MANAGED_BY_LABEL,
    Obj,
)
from gitsync.model.instance import INSTANCE_LABEL, STATUS_PREFIX
from gitsync.model.myapp_status import now

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SyncState:
    revision: str = ""
    result: str = ""
    last_error: str = ""
    #: MyApps the source declares
    managed: int = 0
    failed: int = 0
    #: the summary of the last pass that changed something; a pass that changes
    #: nothing leaves it, so steady state writes nothing here either
    last_change: str = ""
    prune_skipped: str = ""
    #: --verify-commits: the applied commit's good signature, or why the tip was refused
    verification: str = ""
    #: --verify-commits: the commit (or tag) refused, while the ref names it
    rejected: str = ""
    #: the commit the cluster is at: what the next revision must descend from
    applied_commit: str = ""
    #: the last commit applied by the one-shot accept annotation (not accepted again)
    accepted_once: str = ""
    #: the pins the pass honoured, one line each ("instance pinned to REV by WHO at
    #: TIME: REASON"); the pins themselves are the ``pin`` keys (gitsync.gitops.pins)
    pinned: str = ""
    #: sharded: how many of the live members' passes at this revision the record sums
    #: ("2 of 3 replicas"); unsharded, "" and not in the ConfigMap
    replicas: str = ""
    #: sharded: the buckets no replica serves, and since when ("" and not in the
    #: ConfigMap while every bucket is served)
    unserved: str = ""

    def data(self) -> dict[str, str]:
        out = {_camel(f.name): str(getattr(self, f.name)) for f in dataclasses.fields(self)}
        for optional in ("replicas", "unserved"):
            if not out[optional]:
                del out[optional]
        return out


@dataclass(frozen=True)
class Part:
    """One sharded member's pass over its buckets, as its member Lease carries it to the
    leader, which records the instance's sum (:func:`merged`)."""

    revision: str = ""
    managed: int = 0
    #: objects that failed and errors of the pass itself
    failed: int = 0
    last_error: str = ""
    #: this pass's objects by action
    counts: Mapping[str, int] = field(default_factory=dict)
    #: the revision of this member's last pass that changed something, and its counts
    changed_at: str = ""
    changed: Mapping[str, int] = field(default_factory=dict)

    def text(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True, separators=(",", ":"))

    @classmethod
    def parse(cls, text: str) -> Part | None:
        """The part a Lease carries; None for none, or for one this version cannot read."""
        try:
            raw = json.loads(text)
            part = cls(**raw)
        except (ValueError, TypeError):
            return None
        texts = ("revision", "last_error", "changed_at")
        ok = all(isinstance(getattr(part, f), str) for f in texts)
        ok = ok and all(type(getattr(part, f)) is int for f in ("managed", "failed"))
        ok = ok and all(_is_counts(getattr(part, f)) for f in ("counts", "changed"))
        return part if ok else None


def _is_counts(m: object) -> bool:
    return isinstance(m, dict) and all(isinstance(k, str) and type(v) is int for k, v in m.items())


def part_of(changes: ChangeSet, state: SyncState, previous: Part | None) -> Part:
    """This member's part of a pass: ``state`` is what it would record alone."""
    counts = {a: n for a, n in sorted(changes.counts().items()) if n}
    at: str = ""
    then: Mapping[str, int] = {}
    if any(counts.get(a) for a in WRITES):
        at, then = changes.revision, counts
    elif previous is not None:
        at, then = previous.changed_at, previous.changed
    return Part(
        revision=changes.revision,
        managed=state.managed,
        failed=changes.failures(),
        last_error=state.last_error,
        counts=counts,
        changed_at=at,
        changed=then,
    )


def merged(
    own: SyncState, mine: Part, others: Mapping[str, Part], members: int, unserved: str = ""
) -> SyncState:
    """The instance's record when sharded: the leader's own ``own`` (revision, prune,
    verification, pins), with the sums of the parts at its revision, its ``mine`` and
    the other live members' ``others`` (by identity). A member not at that revision yet
    is not summed, and ``replicas`` says so. Buckets no replica serves (``unserved``, in
    words) make the record a failure whatever the parts say: their MyApps were applied
    by nobody. Steady state sums the same parts to the same record: no write."""
    at = [mine] + [others[m] for m in sorted(others) if others[m].revision == own.revision]
    failed = sum(p.failed for p in at)
    errors = [unserved] + [p.last_error for p in at if p.last_error]
    last_change = own.last_change
    if any(p.changed_at == own.revision for p in at):
        total: Counter[str] = Counter()
        for p in at:
            total.update(p.changed if p.changed_at == own.revision else p.counts)
        last_change = summary_of(total)
    return dataclasses.replace(
        own,
        result="Failed" if failed or unserved or own.result == "Failed" else own.result,
        last_error=failures.join(errors),
        managed=sum(p.managed for p in at),
        failed=failed,
        last_change=last_change,
        replicas=f"{len(at)} of {max(members, len(at))} replicas",
        unserved=unserved,
    )


def state_of(
    changes: ChangeSet, previous: SyncState | None, pinned: str | None = None
) -> SyncState:
    """What the ConfigMap says of a pass's change set; ``pinned``: the pins it honoured
    (None: not known, as before)."""
    changed = any(changes.count(a) for a in ("created", "configured", "pruned"))
    return SyncState(
        revision=changes.revision,
        result="Succeeded" if changes.ok else "Failed",
        # the objects that failed too: their messages name them, and a refused or
        # invalid MyApp is what someone reading the ConfigMap looks for
        last_error=failures.summary(
            changes.errors,
            [_named(c) for c in changes.changes if c.action == "failed"],
            len(changes.changes),
        ),
        managed=sum(
            1 for c in changes.changes if c.action != "pruned" and c.subject.startswith(f"{KIND}/")
        ),
        failed=changes.failures(),
        last_change=changes.summary() if changed else (previous.last_change if previous else ""),
        prune_skipped=changes.prune_skipped or "",
        verification=changes.verification,
        rejected=changes.rejection.sha if changes.rejection else "",
        applied_commit=changes.applied_commit,
        accepted_once=changes.accepted_once,
        pinned=(previous.pinned if previous else "") if pinned is None else pinned,
    )


def last_applied(cm: Obj | None) -> tuple[str, str, str]:
    """From the status ConfigMap: the commit the cluster is at, the last commit accepted
    once by the annotation, and the commit the annotation names now ("" each when none).
    A record written before ``appliedCommit`` existed names the commit in its revision."""
    data = dict((cm or {}).get("data") or {})
    annotations = ((cm or {}).get("metadata") or {}).get("annotations") or {}
    applied = data.get("appliedCommit") or data.get("revision", "").partition("@sha1:")[2]
    wanted = annotations.get(ACCEPT_ANNOTATION)
    return (
        applied,
        data.get("acceptedOnce", ""),
        (wanted.strip().lower() if isinstance(wanted, str) else ""),
    )


def _named(c: Change) -> str:
    """The reason of a failed object, naming it when the reason does not already."""
    return c.reason if c.subject in c.reason else f"{c.subject}: {c.reason}"


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p.title() for p in rest)


class StateWriter:
    def __init__(
        self,
        kube: Client,
        namespace: str,
        instance: str,
        *,
        events: EventRecorder | None = None,
        field_manager: str = FIELD_MANAGER,
    ) -> None:
        self.kube = kube
        self.namespace = namespace
        self.instance = instance
        self.name = STATUS_PREFIX + instance
        self.events = events
        self.field_manager = field_manager
        self._last: SyncState | None = None
        self._lock = threading.Lock()

    @property
    def path(self) -> str:
        return resource_path("v1", "configmaps", self.namespace, self.name)

    def read(self) -> dict[str, str]:
        try:
            cm = self.kube.get(self.path, subject=f"ConfigMap/{self.namespace}/{self.name}")
        except APINotFoundError:
            return {}
        return dict(cm.get("data") or {})

    def read_object(self) -> Obj | None:
        """The ConfigMap as the API server holds it, or None when there is none."""
        try:
            return self.kube.get(self.path, subject=f"ConfigMap/{self.namespace}/{self.name}")
        except APINotFoundError:
            return None

    @staticmethod
    def read_all(kube: Client, namespace: str) -> dict[str, dict[str, str]]:
        """The sync state of every instance in ``namespace``, by instance name."""
        selector = f"{MANAGED_BY_LABEL}={MANAGED_BY},{INSTANCE_LABEL}"
        path = resource_path("v1", "configmaps", namespace)
        items = kube.list(path, params={"labelSelector": selector}).get("items", [])
        return {
            cm["metadata"]["labels"][INSTANCE_LABEL]: dict(cm.get("data") or {}) for cm in items
        }

    @property
    def last(self) -> SyncState | None:
        return self._last

    def record_changes(self, changes: ChangeSet, *, pinned: str | None = None) -> None:
        """Record a pass's change set (a pass that changed nothing keeps the last
        change's summary, so steady state writes nothing) and the pins it honoured."""
        self.record(state_of(changes, self.last, pinned))

    def record(self, state: SyncState) -> None:
        with self._lock:
            if state == self._last:
                return  # nothing new: no write
            previous, self._last = self._last, state
        data = state.data() | {"lastChangeTime": now()}
        body = status_configmap(self.namespace, self.name, self.instance, data)
        try:
            cm = self.kube.apply(
                self.path,
                body,
                field_manager=self.field_manager,
                force=True,
                subject=f"ConfigMap/{self.namespace}/{self.name}",
            )
        except APIError as e:
            log.warning("could not record the sync state: %s", e)
            with self._lock:
                self._last = previous
            return
        if self.events is None:
            return
        if (
            previous is None
            or previous.result != state.result
            or previous.revision != state.revision
        ):
            kind: EventType = "Normal" if state.result == "Succeeded" else "Warning"
            msg = f"sync {state.result.lower()} at {state.revision or 'no revision'}"
            if state.last_error:
                msg += f": {state.last_error}"
            if not state.rejected:  # a refused commit has an Event of its own, below
                self.events.emit(cm, kind, f"Sync{state.result}", msg)
        if state.rejected and (previous is None or previous.verification != state.verification):
            self.events.emit(cm, "Warning", "VerificationFailed", state.verification)
        if previous is not None and previous.pinned != state.pinned:
            # a pin is explicit and visible: set, changed and lifted each say so, once
            reason, words = (
                ("Pinned", state.pinned.replace("\n", "; ")) if state.pinned else ("Resumed", "")
            )
            self.events.emit(cm, "Normal", reason, words or "no pin: syncing the ref's head")
        if state.prune_skipped and (
            previous is None or previous.prune_skipped != state.prune_skipped
        ):
            self.events.emit(cm, "Warning", "PruneSkipped", state.prune_skipped)
