"""The gitsync daemons alive in a cluster, as their Leases show: for ``gitsync uninstall``,
which must not release the Deployments while a daemon it did not stop would take them
back (one outside the Deployment it scaled to 0: another namespace, another name, a
process outside the cluster).

Every daemon renews a Lease every retry period: the leader its instance's leader Lease
(``gitsync-leader-<instance>``, :mod:`gitsync.kube.leader`), and with ``--sharding``
every replica its member Lease (labelled ``member-of``, :mod:`gitsync.kube.members`).
A daemon that stops gracefully gives them up (holder emptied, member Lease deleted).

Alive means seen renewing: a Lease's ``(holder, renewTime)`` changed while watched. One
that did not change is its daemon's until it has stood unchanged for its duration by our
own clock (as a standby judges a leader), so that a clock skew between this host and the
daemon's cannot make a live daemon look dead; only a renewTime far older than any skew
ends that wait early. A standby that takes a released Lease over is seen renewing too.

Pure: the caller lists the Leases (:data:`LEASES`, :data:`LEASE_PARAMS`) and the time.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from gitsync.kube.client import resource_path
from gitsync.kube.members import MEMBER_OF_LABEL
from gitsync.model.api import Obj
from gitsync.model.instance import LEASE_PREFIX

#: on a daemon's Leases: the one namespace it watches ("" all); a Lease without it is
#: a daemon's that may watch any (written before the annotation existed)
WATCH_ANNOTATION: Final = "gitsync.apps.example.com/watch-namespace"
#: every Lease of the cluster but the nodes' heartbeats (one per node, never gitsync's)
LEASES: Final = resource_path("coordination.k8s.io/v1", "leases")
LEASE_PARAMS: Final = {"fieldSelector": "metadata.namespace!=kube-node-lease"}
#: the leader Lease's name when no instance names it (a daemon built by hand)
BARE_LEASE: Final = LEASE_PREFIX.rstrip("-")
#: a renewTime older than its duration by this much is dead whatever the clocks say
SKEW: Final = dt.timedelta(minutes=2)


@dataclass(frozen=True)
class Holder:
    """A daemon as one of its Leases names it."""

    #: ``Lease/<namespace>/<name>``
    lease: str
    identity: str
    #: the namespace it watches ("" all, None not said: any)
    watching: str | None

    def watches(self, scope: str | None) -> bool:
        """Whether it may write a Deployment of ``scope`` (None: any namespace)."""
        return not self.watching or scope is None or self.watching == scope

    def __str__(self) -> str:
        """The Lease, its holder, and where the process is (``<hostname>_<pid>``)."""
        host, sep, pid = self.identity.rpartition("_")
        where = f" (process {pid} on host {host!r})" if sep and pid.isdigit() else ""
        return f"{self.lease} by {self.identity!r}{where}"


#: how to stop a daemon, whichever it is
HOW_TO_STOP: Final = (
    "stop each (in a cluster the host is its Pod: scale its Deployment to 0, or give its "
    "namespace and labels to uninstall as -n and --selector)"
)


def is_gitsync_lease(lease: Obj) -> bool:
    """Whether ``lease`` is a gitsync daemon's: an instance's leader Lease, or a member's."""
    meta = lease.get("metadata") or {}
    if MEMBER_OF_LABEL in (meta.get("labels") or {}):
        return True
    name = str(meta.get("name", ""))
    return name == BARE_LEASE or name.startswith(LEASE_PREFIX)


def holder_of(lease: Obj) -> Holder | None:
    """The daemon holding ``lease`` (None: not gitsync's, or given up)."""
    if not is_gitsync_lease(lease):
        return None
    meta = lease.get("metadata") or {}
    identity = str((lease.get("spec") or {}).get("holderIdentity") or "")
    if not identity:
        return None
    watching = (meta.get("annotations") or {}).get(WATCH_ANNOTATION)
    lease_name = f"Lease/{meta.get('namespace', '')}/{meta.get('name', '')}"
    return Holder(lease_name, identity, None if watching is None else str(watching))


def _record(lease: Obj) -> tuple[str, str]:
    spec = lease.get("spec") or {}
    return str(spec.get("holderIdentity") or ""), str(spec.get("renewTime") or "")


def _long_dead(lease: Obj, wall: dt.datetime) -> bool:
    spec = lease.get("spec") or {}
    try:
        renewed = dt.datetime.fromisoformat(str(spec.get("renewTime")))
    except ValueError:
        return False
    if renewed.tzinfo is None:
        return False
    duration = dt.timedelta(seconds=float(spec.get("leaseDurationSeconds") or 0))
    return wall - renewed > duration + SKEW


@dataclass
class _Seen:
    record: tuple[str, str]
    at: float


class Watch:
    """The gitsync Leases watched over time (``observe`` at every look)."""

    def __init__(self, scope: str | None) -> None:
        self.scope = scope
        self._seen: dict[str, _Seen] = {}
        #: the daemons seen renewing, by their Lease
        self.renewing: dict[str, Holder] = {}
        #: the held Leases not seen renewing yet, and when (our clock) each is dead
        self.pending: dict[str, float] = {}

    def observe(self, leases: Iterable[Obj], now: float, wall: dt.datetime) -> None:
        """One look at every Lease of the cluster, at ``now`` (a monotonic clock) and
        ``wall`` (this host's UTC time, for renewTime alone)."""
        self.pending = {}
        for lease in leases:
            holder = holder_of(lease)
            if holder is None or not holder.watches(self.scope):
                continue  # given up, not gitsync's, or never writes in the scope
            record = _record(lease)
            seen = self._seen.get(holder.lease)
            if seen is None:
                seen = self._seen[holder.lease] = _Seen(record, now)
            elif seen.record != record:
                self.renewing[holder.lease] = holder
                seen.record, seen.at = record, now
            if holder.lease in self.renewing:
                continue
            duration = float((lease.get("spec") or {}).get("leaseDurationSeconds") or 0)
            if not _long_dead(lease, wall) and now - seen.at < duration:
                self.pending[holder.lease] = seen.at + duration

    def alive(self) -> list[Holder]:
        """The daemons seen renewing so far, by Lease."""
        return [self.renewing[k] for k in sorted(self.renewing)]
