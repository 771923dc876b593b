"""The replicas of one instance as members, each with a Lease of its own, and the
buckets of MyApps each one serves.

Every retry period a member renews its Lease (which also says the buckets it holds and
the ones it claims), then lists the instance's member Leases, computes the assignment
from the live members' names (:func:`gitsync.model.shards.assign`, the same in every
replica) and moves its claims one step (:func:`gitsync.model.shards.step_claims`). So
the Leases alone coordinate the replicas; there is no other channel between them.

Safety, as for the leader: a member serves a bucket only while its last renewal is
fresher than the renew deadline, which is shorter than the Lease duration after which
the others stop counting its Lease. A bucket given up is written out of the Lease only
once no work on it is in flight (:meth:`Membership.working`), so its next holder never
writes alongside the last one.

Requests in steady state: one PUT of the member's own Lease and one LIST of the
instance's member Leases per retry period; nothing per MyApp.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Final

from gitsync.errors import APIError, APITimeoutError, quote
from gitsync.kube.client import resource_path
from gitsync.kube.interfaces import LeaseClient
from gitsync.model.api import Obj
from gitsync.model.shards import (
    BUCKETS,
    Claims,
    assign,
    bucket_of,
    format_buckets,
    held_by,
    parse_buckets,
    step_claims,
)

log = logging.getLogger(__name__)

#: on every member Lease: the instance's leader Lease name, to list an instance's members
MEMBER_OF_LABEL: Final = "gitsync.apps.example.com/member-of"
HELD_ANNOTATION: Final = "gitsync.apps.example.com/buckets"
CLAIMED_ANNOTATION: Final = "gitsync.apps.example.com/claiming"
COUNT_ANNOTATION: Final = "gitsync.apps.example.com/bucket-count"
#: when a member last asked the others for a sync pass (a push delivered to it)
SYNC_ANNOTATION: Final = "gitsync.apps.example.com/sync-requested"
#: the member's last pass over its buckets, for the leader's record of the instance
RESULT_ANNOTATION: Final = "gitsync.apps.example.com/last-pass"
#: a member Lease unchanged this many of its durations is its dead member's: deleted
FORGET_AFTER: Final = 20
NEVER: Final = -1e18
LABEL_VALUE_MAX: Final = 63
#: seconds to the next step while a claim waits to be read back
CLAIM_STEP: Final = 0.25
#: the longest duration a member Lease may give itself, in this member's durations:
#: every member of an instance runs with the same, and a Lease that outlives its member
#: by hours (one written by hand) would hold its buckets that long
MAX_DURATIONS: Final = 4


def member_lease_name(group: str, identity: str) -> str:
    """The Lease of the member ``identity`` of the instance whose leader Lease is
    ``group``: a valid object name whatever the identity holds."""
    return f"{group}-member-{hashlib.sha256(identity.encode()).hexdigest()[:12]}"


def member_of(group: str) -> str:
    """The ``member-of`` label value of an instance's member Leases: its leader Lease's
    name, shortened with a hash of it when longer than a label value may be (63)."""
    if len(group) <= LABEL_VALUE_MAX:
        return group
    digest = hashlib.sha256(group.encode()).hexdigest()[:16]
    return f"{group[: LABEL_VALUE_MAX - len(digest) - 1].rstrip('-.')}-{digest}"


def _micro_time() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass
class _Seen:
    """Another member's Lease as last read: when (our clock) it changed, as far as we
    can tell, and when we last read it."""

    version: str
    at: float
    asked: str
    read: float


@dataclass(frozen=True)
class Member:
    """A live member as its Lease says."""

    identity: str
    claims: Claims
    #: its last pass, as it published it ("" before its first)
    last_pass: str = ""


def check_member(
    lease: Obj, buckets: int, group: str | None = None, max_duration: float | None = None
) -> Member | str:
    """The member a Lease describes, or why it describes none. A Lease is read back from
    the cluster, where anyone allowed to write Leases may have written it: it is a member
    only when a member of this instance could have written it (named after its holder
    in the instance ``group``, in this bucket count, its buckets and duration readable
    and within bounds); anything else is no member, and can stop no bucket being served."""
    meta = lease.get("metadata") or {}
    spec = lease.get("spec") or {}
    notes = meta.get("annotations") or {}
    identity = spec.get("holderIdentity")
    if not isinstance(identity, str) or not identity:
        return "it names no holder"
    if group is not None and meta.get("name") != member_lease_name(group, identity):
        return f"its name is not the one a member {quote(identity)} of {quote(group)} writes"
    count = notes.get(COUNT_ANNOTATION)
    if count != str(buckets):
        return f"its bucket count is {quote(count)}, not {buckets}"
    duration = spec.get("leaseDurationSeconds")
    if max_duration is not None and (type(duration) is not int or not 0 < duration <= max_duration):
        shown = duration if type(duration) is int else quote(duration)
        return f"its leaseDurationSeconds {shown} is not within 1-{max_duration:g}"
    try:
        held = parse_buckets(str(notes.get(HELD_ANNOTATION, "")), buckets)
        claimed = parse_buckets(str(notes.get(CLAIMED_ANNOTATION, "")), buckets)
    except ValueError as e:
        return f"its buckets cannot be read: {e}"
    return Member(identity, Claims(held, claimed), str(notes.get(RESULT_ANNOTATION) or ""))


def read_member(lease: Obj, buckets: int, group: str | None = None) -> Member | None:
    """The member a Lease describes, or None (:func:`check_member` says why)."""
    found = check_member(lease, buckets, group)
    return None if isinstance(found, str) else found


def serving_now(
    leases: list[Obj], buckets: int, now: dt.datetime, group: str | None = None
) -> dict[int, str]:
    """Each bucket's member, as the member Leases ``leases`` say at ``now`` (a report's
    view, for ``gitsync drift``: a Lease whose renewTime is older than its duration is
    a dead member's, judged by this host's clock; with ``group``, the instance's leader
    Lease, one not named after its holder is no member's)."""
    out: dict[int, str] = {}
    for member in live_members(leases, buckets, now, group):
        out.update(dict.fromkeys(member.claims.held, member.identity))
    return out


def live_members(
    leases: list[Obj], buckets: int, now: dt.datetime, group: str | None = None
) -> list[Member]:
    """The members whose Leases (of ``leases``) were renewed within their duration at
    ``now``, judged by this host's clock: a report's view, not a member's."""
    out = []
    for lease in leases:
        spec = lease.get("spec") or {}
        try:
            renewed = dt.datetime.fromisoformat(str(spec.get("renewTime")))
        except ValueError:
            continue
        if now - renewed > dt.timedelta(seconds=float(spec.get("leaseDurationSeconds") or 0)):
            continue
        member = read_member(lease, buckets, group)
        if member is not None:
            out.append(member)
    return out


class Membership:
    def __init__(
        self,
        kube: LeaseClient,
        namespace: str,
        group: str,
        identity: str,
        *,
        buckets: int = BUCKETS,
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
        annotations: Mapping[str, str] | None = None,
    ) -> None:
        if not 0 < renew_deadline < lease_duration:
            raise ValueError("the renew deadline must be shorter than the lease duration")
        self.kube = kube
        self.group = group
        self.identity = identity
        self.buckets = buckets
        self.name = member_lease_name(group, identity)
        #: written on the Lease with every renewal: what the member is, for others to read
        self.annotations = dict(annotations or {})
        self.collection = resource_path("coordination.k8s.io/v1", "leases", namespace)
        self.path = f"{self.collection}/{self.name}"
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self._clock = clock
        self._wall = wall
        #: called with the buckets served whenever they change (from the stepping thread)
        self.on_change: Callable[[frozenset[int]], None] = lambda _: None
        #: called when another member asked for a sync pass (a push it received)
        self.on_sync_request: Callable[[], None] = lambda: None
        self._asked = ""  # our own request, written with every renewal from then on
        self._last_pass = ""  # our last pass, written with every renewal from then on
        #: the other live members' last passes by identity, as the last step read them
        self.passes: dict[str, str] = {}
        #: called when another member's last pass, the set of members or the buckets
        #: left unserved changed, from the stepping thread: it must return at once (no
        #: request), or renewals wait
        self.on_passes: Callable[[], None] = lambda: None
        self._passes_read: dict[str, str] = {}
        #: the live members' identities at the last step, this one included
        self.members: tuple[str, ...] = ()
        #: buckets taken and given up so far
        self.handovers = 0
        #: live Leases under this instance's member label that no member of it could
        #: have written, by name, with why: ignored (and logged once per Lease and why)
        self.ignored: dict[str, str] = {}
        self._logged: dict[str, str] = {}
        #: who holds each bucket, as the last step read the Leases (this member included)
        self.holders: dict[int, str] = {}
        #: the buckets nobody has held for longer than a member's Lease may take to be
        #: taken over (:meth:`_overdue`), with when (wall clock) each was first seen unheld:
        #: replaced whole, read by the pass that records the instance
        self.unserved: dict[int, float] = {}
        self._unheld: dict[int, float] = {}
        #: set once a step has left nothing claimed: the buckets served are what this
        #: member is to serve (until the membership changes), not a start's empty set
        self.settled = threading.Event()
        self._lock = threading.Lock()  # serving and in-flight, read by every worker
        self._serving: frozenset[int] = frozenset()
        self._inflight: Counter[int] = Counter()
        self._turn = threading.Lock()  # one step (or the release) at a time
        self._released = False
        self._claimed: frozenset[int] = frozenset()  # as last written
        self._acquired = _micro_time()
        #: the resourceVersion of our Lease as last written or listed (None: create it)
        self._version: str | None = None
        self._renewed_at = NEVER
        self._seen: dict[str, _Seen] = {}
        #: when the first live Lease of another member expires, unless renewed (our clock)
        self._expiring: float | None = None

    # --- asked by the workers -------------------------------------------------------

    def serving(self) -> frozenset[int]:
        """The buckets served now (none once the last renewal is too old)."""
        with self._lock:
            return self._serving if self._fresh() else frozenset()

    def bucket(self, key: str) -> int:
        namespace, _, name = key.partition("/")
        return bucket_of(namespace, name, self.buckets)

    def replica_of(self, key: str) -> str:
        """Who serves ``key``, as the Leases last said ("" while nobody does)."""
        return self.holders.get(self.bucket(key), "")

    @contextlib.contextmanager
    def working(self, key: str) -> Iterator[bool]:
        """Whether this member serves ``key`` now; while the block runs, its bucket is
        not written out of the Lease (given up, it stays held until the work is done)."""
        b = self.bucket(key)
        with self._lock:
            ok = b in self._serving and self._fresh()
            if ok:
                self._inflight[b] += 1
        try:
            yield ok
        finally:
            if ok:
                with self._lock:
                    self._inflight[b] -= 1

    def _fresh(self) -> bool:
        return self._clock() - self._renewed_at < self.renew_deadline

    # --- the stepping thread ----------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        """Step every retry period until ``stop`` is set; :meth:`release` is the caller's,
        once the work in flight is done."""
        while not stop.is_set():
            try:
                self.step()
            except Exception:
                # a bug in one step must not end membership: the Lease would lapse and
                # the buckets go elsewhere, while this replica still looked alive
                log.exception("membership step crashed")
            stop.wait(self.next_step())

    def next_step(self) -> float:
        """Seconds to the next step: a retry period, or sooner when a claim waits to be
        read back or another member's Lease is about to expire (its buckets are served
        again that much sooner; the protocol is one of order, not of timing)."""
        wait = self.retry_period
        if self._claimed:
            wait = min(wait, CLAIM_STEP)
        if self._expiring is not None:
            wait = min(wait, self._expiring - self._clock() + CLAIM_STEP / 5)
        return max(wait, CLAIM_STEP / 5)

    def step(self) -> None:
        """Renew, read the members, move the claims one step."""
        with self._turn:
            if self._released:
                return
            now = self._clock()
            if now - self._renewed_at >= self.renew_deadline:
                # lapsed (or never renewed): what the Lease said may be another's by now
                self._set_serving(frozenset(), "the member lease was not renewed in time")
                self._claimed = frozenset()
            held = self._published()
            claims = Claims(held, self._claimed)
            deadline = now + self.renew_deadline
            renewed = self._write(claims, deadline)
            try:
                listed = self.kube.request(
                    "GET",
                    self.collection,
                    params={"labelSelector": f"{MEMBER_OF_LABEL}={member_of(self.group)}"},
                    subject="member Leases",
                    timeout=max(0.1, deadline - self._clock()),
                )
            except APIError as e:
                log.warning("listing the member leases failed: %s", e)
                return
            items = listed.get("items") or []
            if not renewed:
                # our Lease as it stands (created by a write whose answer was lost, or
                # edited by someone): the next renewal writes over that version
                mine = next((x for x in items if x["metadata"].get("name") == self.name), None)
                self._version = None if mine is None else mine["metadata"]["resourceVersion"]
                return
            self._renewed_at = now
            others = self._live_others(items, now)
            self.members = tuple(sorted({self.identity, *others}))
            if self._passes_read != self.passes:
                self.passes = self._passes_read
                self.on_passes()
            target = held_by(assign(self.members, self.buckets), self.identity)
            nxt = step_claims(self.identity, target, claims, others)
            self._claimed = nxt.claimed
            if not nxt.claimed:
                self.settled.set()  # before on_change: its pass finds the member settled
            self._set_serving(nxt.held, "")
            holders = {b: m for m, c in others.items() for b in c.held}
            self.holders = holders | dict.fromkeys(nxt.held, self.identity)
            if self._overdue(now):
                self.on_passes()

    def _overdue(self, now: float) -> bool:
        """Note the buckets nobody holds; whether the set of those unheld for longer than
        a handover may take (a dead member's Lease expiring, then a claim read back)
        changed. Such a bucket's MyApps are applied by no replica: the record says so."""
        wall = self._wall()
        self._unheld = {
            b: self._unheld.get(b, wall) for b in range(self.buckets) if b not in self.holders
        }
        grace = self.lease_duration + 2 * self.retry_period
        overdue = {b: t for b, t in self._unheld.items() if t <= wall - grace}
        if overdue.keys() == self.unserved.keys():
            return False
        if overdue:
            log.warning(
                "buckets %s served by no replica for over %.0fs",
                format_buckets(overdue),
                grace,
                extra={"identity": self.identity},
            )
        self.unserved = overdue
        return True

    def _published(self) -> frozenset[int]:
        """What the Lease says is held: the buckets served, and those given up whose
        work is still in flight."""
        with self._lock:
            return self._serving | {b for b, n in self._inflight.items() if n > 0}

    def _set_serving(self, buckets: frozenset[int], why: str) -> None:
        with self._lock:
            before = self._serving
            self._serving = buckets
        if buckets == before:
            return
        gained, lost = buckets - before, before - buckets
        self.handovers += len(gained) + len(lost)
        log.info(
            "serving %d buckets (%d taken, %d given up)%s",
            len(buckets),
            len(gained),
            len(lost),
            f": {why}" if why else "",
            extra={"identity": self.identity},
        )
        self.on_change(buckets)

    def _live_others(self, leases: list[Obj], now: float) -> dict[str, Claims]:
        """The other members whose Leases changed within their duration."""
        out: dict[str, Claims] = {}
        self._passes_read = {}
        names = set()
        self.ignored = {}
        self._expiring = None
        for lease in leases:
            meta = lease.get("metadata") or {}
            name = str(meta.get("name", ""))
            if name == self.name:
                continue
            names.add(name)
            version = str(meta.get("resourceVersion", ""))
            asked = str((meta.get("annotations") or {}).get(SYNC_ANNOTATION, ""))
            seen = self._seen.get(name)
            if seen is not None and asked != seen.asked:
                # a push delivered to that member: every member runs a pass for its part
                log.info("member lease %s asked for a sync", name)
                self.on_sync_request()
            if seen is None:
                seen = self._seen[name] = _Seen(version, now, asked, now)
            elif seen.version != version:
                # renewed after our last read of the old version: its member stops
                # writing a renew deadline after the renewal began, so the change may be
                # dated back to that read, but never further than half the slack
                # between the renew deadline and the duration (a late read of ours
                # must not make a live member look expired)
                slack = max(0.0, (self.lease_duration - self.renew_deadline) / 2)
                at = max(seen.read, now - slack)
                seen = self._seen[name] = _Seen(version, at, asked, now)
            else:
                seen.read = now
            duration = float((lease.get("spec") or {}).get("leaseDurationSeconds") or 0)
            if now - seen.at >= duration * FORGET_AFTER:
                self._forget(name, version)
                continue
            if now - seen.at >= duration:
                continue  # its member stopped writing before now
            expires = seen.at + duration
            self._expiring = expires if self._expiring is None else min(self._expiring, expires)
            member = check_member(
                lease, self.buckets, self.group, MAX_DURATIONS * self.lease_duration
            )
            if isinstance(member, Member):
                out[member.identity] = member.claims
                self._passes_read[member.identity] = member.last_pass
            else:
                self._ignore(name, member)
        for gone in self._seen.keys() - names:
            del self._seen[gone]
        self._logged = {n: v for n, v in self._logged.items() if n in names}
        return out

    def _ignore(self, name: str, why: str) -> None:
        """A Lease under the member label that is no member's: it may claim any bucket,
        so trusting it would let whoever wrote it stop this instance serving them."""
        self.ignored[name] = why
        if self._logged.get(name) != why:  # not at every renewal of such a Lease
            self._logged[name] = why
            log.warning("member lease %s ignored: %s", name, why, extra={"identity": self.identity})

    def _forget(self, name: str, version: str) -> None:
        """Delete a dead member's Lease (unless it changed since we read it)."""
        try:
            self.kube.request(
                "DELETE",
                f"{self.collection}/{name}",
                body={"preconditions": {"resourceVersion": version}},
                subject=f"Lease {name}",
                timeout=self.renew_deadline,
            )
            log.info("deleted the lease of a member gone long ago: %s", name)
        except APIError as e:
            log.debug("could not delete the lease %s: %s", name, e)

    def _body(self, claims: Claims) -> Obj:
        return {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {
                "name": self.name,
                "labels": {MEMBER_OF_LABEL: member_of(self.group)},
                "annotations": {
                    **self.annotations,
                    COUNT_ANNOTATION: str(self.buckets),
                    HELD_ANNOTATION: format_buckets(claims.held),
                    CLAIMED_ANNOTATION: format_buckets(claims.claimed),
                    **({SYNC_ANNOTATION: self._asked} if self._asked else {}),
                    **({RESULT_ANNOTATION: self._last_pass} if self._last_pass else {}),
                },
            },
            "spec": {
                "holderIdentity": self.identity,
                "acquireTime": self._acquired,
                "leaseDurationSeconds": int(self.lease_duration),
                "renewTime": _micro_time(),
            },
        }

    def _write(self, claims: Claims, deadline: float) -> bool:
        """Renew the Lease with these claims: one PUT over the version last written (a
        Lease is updated only with its resourceVersion), or a create when there is none.
        A failure leaves the version to be taken from the next LIST (no get to grant)."""
        body = self._body(claims)
        try:
            if self._version is None:
                written = self._call("POST", deadline, body, self.collection)
            else:
                body["metadata"]["resourceVersion"] = self._version
                written = self._call("PUT", deadline, body)
        except APIError as e:
            log.warning("renewing the member lease failed: %s", e)
            return False
        self._version = str((written.get("metadata") or {}).get("resourceVersion") or "") or None
        return True

    def _call(self, method: str, deadline: float, body: Obj | None = None, path: str = "") -> Obj:
        left = deadline - self._clock()
        if left <= 0:
            raise APITimeoutError("Lease", f"{method} not sent: the renew deadline has passed")
        return self.kube.request(
            method, path or self.path, body=body, subject=f"Lease {self.name}", timeout=left
        )

    def request_sync(self) -> None:
        """Ask every other member for a sync pass: written with the next renewal (within
        a retry period), read by the others at their next step."""
        self._asked = _micro_time()

    def publish(self, last_pass: str) -> None:
        """This member's last pass, for the leader: written with the next renewal (within
        a retry period) and every one after, so publishing costs no request."""
        self._last_pass = last_pass

    def release(self, timeout: float = 10.0) -> None:
        """Stop serving, wait (bounded) for the work in flight, and delete the Lease so
        the others take the buckets at their next step. Final."""
        with self._turn:
            self._released = True
            self._set_serving(frozenset(), "shutting down")
            end = self._clock() + timeout
            while self._published() and self._clock() < end:
                time.sleep(0.05)
            if self._published():
                # the Lease stays and lapses: its buckets move only after its duration
                log.warning("work still in flight; the member lease is left to expire")
                return
            try:
                self.kube.request(
                    "DELETE", self.path, subject=f"Lease {self.name}", timeout=timeout
                )
            except APIError as e:
                log.warning("could not delete the member lease: %s", e)
