"""What gitsync remembers of each MyApp between two reconciles, in one place.

A reconcile reads the cluster from the caches; what the caches cannot say is kept
here, one :class:`Record` per MyApp: the MyApp as Git last declared it (what the
operator holds the live one to between passes), the source its status reports, the
drift last announced, the error last announced, and when a status write was held
back. One owner (the :class:`~gitsync.reconcile.reconciler.Reconciler`) writes it,
under the key's lock; the sync pass only hands values in (:class:`Declared`) and lets
go of what left Git; the page reads it.
"""

from __future__ import annotations

import threading
from collections.abc import Collection
from dataclasses import dataclass

from gitsync.model import instance as instancelib
from gitsync.model.api import Obj
from gitsync.model.myapp_status import SyncInfo
from gitsync.model.order import Wait


@dataclass(frozen=True)
class Claim:
    """Who declares the MyApps of a pass: the instance, and whether it takes over a MyApp
    made by hand (``--adopt``). A live MyApp the claim does not cover is not held to Git."""

    instance: instancelib.Instance
    adopt: bool = False

    def refusal(self, live: Obj | None) -> str | None:
        """Whose ``live`` is, when not this instance's to hold to Git, else None."""
        refused = instancelib.refusal_of(self.instance, "", live, self.adopt)
        return refused.reason if refused is not None else None


@dataclass(frozen=True)
class Declared:
    """A sync pass's input to one reconcile: the MyApp as Git declares it (the apply
    body), the pass's revision and file, and the claim it is declared under."""

    body: Obj
    sync: SyncInfo
    claim: Claim
    #: the body comes from a pin (``gitsync rollback --to``), not from the head of the ref
    pinned: bool = False


@dataclass(slots=True)
class Record:
    """One MyApp's memory. ``declared`` is None where Git does not (or no longer)
    declare it: the operator then serves the live MyApp as it is."""

    declared: Declared | None = None
    #: the source the MyApp's status reports (the revision that last changed it); every
    #: status write carries it, so a reconcile from a cache older than the pass keeps it
    sync: SyncInfo | None = None
    #: the drifted (object, path) pairs last announced by an Event
    announced: frozenset[tuple[str, str]] | None = None
    #: the apply error last announced by an Event
    last_error: str | None = None
    #: when its status was held back for the deployment controller's word on a
    #: Deployment spec just written
    awaiting_since: float | None = None
    #: Git's declaration did not apply for a reason that may pass (a timeout, a 5xx):
    #: the queue's retries apply it again, as the pass would, instead of the next pass
    retry: bool = False
    #: what Git's change to it waits for (a dependency, a window), set by
    #: :meth:`Ledger.set_wait` alone (which keeps the index of who waits on whom)
    wait: Wait | None = None


class Ledger:
    """Records by ``namespace/name``. The dict is guarded by a lock (the sync pass lets go
    of keys while workers reconcile others); a record's fields are written only under
    its key's lock (see :class:`~gitsync.reconcile.keylock.KeyLocks`)."""

    def __init__(self) -> None:
        self._records: dict[str, Record] = {}
        #: by dependency: the MyApps whose change waits while it is not ready, so that
        #: its watch event wakes them (no scan of every record per event)
        self._waiters: dict[str, set[str]] = {}
        #: what each waiting MyApp is indexed under in ``_waiters``
        self._waits_on: dict[str, tuple[str, ...]] = {}
        self._lock = threading.Lock()

    def record(self, key: str) -> Record:
        """The record of ``key``, made empty when there is none."""
        with self._lock:
            found = self._records.get(key)
            if found is None:
                found = self._records[key] = Record()
            return found

    def get(self, key: str) -> Record | None:
        with self._lock:
            return self._records.get(key)

    def git(self, key: str) -> Obj | None:
        """The apply body Git last declared for ``key``, if Git still declares it."""
        rec = self.get(key)
        return rec.declared.body if rec is not None and rec.declared is not None else None

    def declared_keys(self) -> set[str]:
        with self._lock:
            return {k for k, r in self._records.items() if r.declared is not None}

    def release(self, keys: Collection[str]) -> None:
        """``keys`` left Git: the operator no longer holds them to it (pruned or not).
        Their source stays until they are gone: a MyApp the prune guard kept still
        reports where it came from."""
        with self._lock:
            for key in keys:
                if (rec := self._records.get(key)) is not None:
                    rec.declared = rec.wait = None
                    self._unindex(key)

    def forget(self, key: str) -> None:
        """``key`` was pruned: nothing of it is kept."""
        with self._lock:
            self._records.pop(key, None)
            self._unindex(key)

    def forget_reconcile(self, key: str) -> None:
        """``key``'s MyApp is gone from the cluster (deleted, or being deleted): what the
        reconciles remembered goes; what Git declares stays, for the pass that
        creates it again. A record Git no longer declares goes whole, its source with
        it: a MyApp deleted by hand after it left Git would otherwise be remembered
        for the life of the process."""
        with self._lock:
            rec = self._records.get(key)
            if rec is None:
                return
            rec.announced = rec.last_error = rec.awaiting_since = None
            if rec.declared is None:
                del self._records[key]
                self._unindex(key)

    def declare(self, declared: dict[str, Declared]) -> None:
        """A pass's MyApps as Git declares them, handed in before any is reconciled: a
        MyApp's dependency is judged against what Git declares for it *now*, even when
        the pass has not reached the dependency yet (db and app changed by one commit:
        app must see db's change as not applied, not db as it was)."""
        with self._lock:
            for key, d in declared.items():
                found = self._records.get(key)
                if found is None:
                    found = self._records[key] = Record()
                found.declared = d

    def set_wait(self, key: str, wait: Wait | None, on: tuple[str, ...] = ()) -> None:
        """What ``key``'s change waits for now, and the MyApps whose change of state may
        end the wait (its dependencies)."""
        with self._lock:
            if (rec := self._records.get(key)) is not None:
                rec.wait = wait
            self._unindex(key)
            if wait is not None and on:
                self._waits_on[key] = on
                for dep in on:
                    self._waiters.setdefault(dep, set()).add(key)

    def _unindex(self, key: str) -> None:
        for dep in self._waits_on.pop(key, ()):
            if (waiters := self._waiters.get(dep)) is not None:
                waiters.discard(key)
                if not waiters:
                    del self._waiters[dep]

    def waiters(self, key: str) -> list[str]:
        """The MyApps whose change waits on ``key``, to be looked at again when it changes."""
        with self._lock:
            return sorted(self._waiters.get(key, ()))

    def waits(self) -> dict[str, Wait]:
        """Every MyApp whose change waits, with what for (the page, the metric)."""
        with self._lock:
            return {k: r.wait for k, r in self._records.items() if r.wait is not None}

    def awaiting_status(self) -> bool:
        """Some MyApp's status is held back."""
        with self._lock:
            return any(r.awaiting_since is not None for r in self._records.values())
