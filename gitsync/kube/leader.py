"""Leader election on a ``coordination.k8s.io`` Lease: only the leader writes.

Why not ``kubernetes.leaderelection`` (kubernetes 37): its ``run`` loops until the
Lease is lost and takes no stop signal (so SIGTERM cannot release the Lease, and a
standby waits a whole lease duration), its LeaseLock builds a ``CoordinationV1Api()``
on the global default client rather than ours (our timeouts, our request counts),
and it offers no cheap "am I still leader right now" check. This is the same
protocol as client-go's: optimistic-concurrency updates of holderIdentity and
renewTime, expiry judged by our own clock from when we last saw the record
change (so clock skew between replicas does not matter).

Timing: every Lease request gets what is left of the renew deadline as its
timeout, so a stalled API server cannot hold an attempt past the point where
the leadership it would renew has lapsed anyway; and a leader stops acting
the moment it cannot prove it leads (the renew deadline passed since the
start of its last successful renewal, or the Lease names another holder).
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from gitsync.errors import APIConflictError, APIError, APINotFoundError, APITimeoutError
from gitsync.kube.client import resource_path
from gitsync.kube.interfaces import LeaseClient
from gitsync.model.api import Obj

log = logging.getLogger(__name__)

#: a standby that receives a push webhook asks the leader for a sync through the
#: Lease both already read every retry period (no extra RBAC, no extra watch)
SYNC_REQUEST_ANNOTATION = "gitsync.apps.example.com/sync-requested"
NEVER = -1e18  # a renewal time that proves nothing


def _micro_time() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    def __init__(
        self,
        kube: LeaseClient,
        namespace: str,
        name: str,
        identity: str,
        *,
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
        clock: Callable[[], float] = time.monotonic,
        annotations: Mapping[str, str] | None = None,
    ) -> None:
        self.kube = kube
        self.path = resource_path("coordination.k8s.io/v1", "leases", namespace, name)
        #: written on the Lease with every renewal: what the holder is, for others to read
        self.annotations = dict(annotations or {})
        self.collection = resource_path("coordination.k8s.io/v1", "leases", namespace)
        self.identity = identity
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self._clock = clock
        #: when the last successful renewal *started* (a renewTime the others saw is later)
        self._renewed_at = NEVER
        self._observed: tuple[str, str] | None = None  # (holder, renewTime) last seen
        self._observed_at = 0.0
        self._leading = False  # as last announced through on_started / on_stopped
        self._on_started: Callable[[], None] = lambda: None
        self._on_stopped: Callable[[], None] = lambda: None
        self._seen_request: str | None = None
        # one Lease attempt at a time: release() (on shutdown, from another thread)
        # waits for a renewal in flight, and no renewal follows it
        self._turn = threading.Lock()
        self._released = False
        #: called (on the leader) when a standby asked for a sync
        self.on_sync_request: Callable[[], None] = lambda: None

    def is_leader(self) -> bool:
        """True only while our last renewal is fresher than the renew deadline:
        a leader cut off from the API server stops writing before anyone else
        can take over (renew_deadline < lease_duration). Cheap (no request):
        callable right before every write."""
        return self._leading and self._clock() - self._renewed_at < self.renew_deadline

    def run(
        self,
        stop: threading.Event,
        on_started: Callable[[], None] = lambda: None,
        on_stopped: Callable[[], None] = lambda: None,
    ) -> None:
        """Campaign and renew until ``stop`` is set. The Lease is not released here:
        the caller releases it once its last write is done (``release``)."""
        self._on_started, self._on_stopped = on_started, on_stopped
        while not stop.is_set():
            try:
                self.step()
            except Exception:
                # a bug must not end the campaign: this replica would never lead again,
                # without a word (leading, it stops at the renew deadline, as on any lapse)
                log.exception("leader election step crashed")
            stop.wait(self.retry_period)

    def step(self) -> None:
        """One retry period's work: renew (or campaign), and announce any change."""
        with self._turn:
            if self._released:
                return
            if self._leading and not self.is_leader():
                self._stop_leading("the lease was not renewed within the renew deadline")
            ok = self._try_acquire_or_renew()
            if ok and not self._leading:
                self._leading = True
                log.info("became leader", extra={"identity": self.identity})
                self._on_started()
            elif not ok and self._leading and not self.is_leader():
                self._stop_leading("the lease could not be renewed")

    def _stop_leading(self, why: str) -> None:
        # every lapse is announced, even one a later renewal ends: work refused while
        # we were not leader (the workers drop keys then) is redone by on_started
        self._leading = False
        log.warning("lost leadership: %s", why, extra={"identity": self.identity})
        self._on_stopped()

    def release(self) -> None:
        """Give the Lease up so a standby takes over at once rather than after expiry.
        Final: no later renewal takes it back."""
        with self._turn:
            self._released = True
            if not self._leading:
                return
            self._leading = False
            deadline = self._clock() + self.renew_deadline
            try:
                lease = self._call("GET", deadline)
                spec = lease.get("spec", {})
                if spec.get("holderIdentity") != self.identity:
                    return
                spec["holderIdentity"] = ""
                spec["leaseDurationSeconds"] = 1
                spec["renewTime"] = _micro_time()
                self._call("PUT", deadline, body=lease)
                log.info("released leadership", extra={"identity": self.identity})
            except APIError as e:
                log.warning("could not release the lease: %s", e)

    def _call(
        self, method: str, deadline: float, body: Obj | None = None, path: str | None = None
    ) -> Obj:
        """One Lease request, bounded by what is left until ``deadline``."""
        left = deadline - self._clock()
        if left <= 0:
            raise APITimeoutError("Lease", f"{method} not sent: the renew deadline has passed")
        return self.kube.request(
            method, path or self.path, body=body, subject="Lease", timeout=left
        )

    def _try_acquire_or_renew(self) -> bool:
        now = self._clock()
        # read and write within one renew deadline, and a leader's within its own:
        # a stalled API server must not hold us past the moment we stop leading
        deadline = now + self.renew_deadline
        if self._leading:
            deadline = min(deadline, self._renewed_at + self.renew_deadline)
        try:
            lease = self._call("GET", deadline)
        except APINotFoundError:
            return self._create(now, deadline)
        except APIError as e:
            log.warning("reading the lease failed: %s", e)
            return False
        spec: dict[str, Any] = lease.setdefault("spec", {})
        holder = str(spec.get("holderIdentity") or "")
        self._check_sync_request(lease, holder)
        record = (holder, str(spec.get("renewTime", "")))
        if record != self._observed:
            self._observed, self._observed_at = record, now
        duration = float(spec.get("leaseDurationSeconds") or self.lease_duration)
        if holder and holder != self.identity:
            if self._leading:
                # the Lease names someone else: whatever our last renewal said, we do
                # not lead now; stop at once and campaign again from the next period
                self._renewed_at = NEVER
                self._stop_leading(f"the lease is held by {holder!r}")
                return False
            if now - self._observed_at < duration:
                return False  # someone else holds a live lease
        if holder != self.identity:
            spec["leaseTransitions"] = int(spec.get("leaseTransitions", 0)) + 1
            spec["acquireTime"] = _micro_time()
        spec["holderIdentity"] = self.identity
        spec["leaseDurationSeconds"] = int(self.lease_duration)
        spec["renewTime"] = _micro_time()
        if self.annotations:
            meta = lease.setdefault("metadata", {})
            meta["annotations"] = (meta.get("annotations") or {}) | self.annotations
        try:
            self._call("PUT", deadline, body=lease)
        except APIConflictError:
            return False  # another candidate wrote first; look again next period
        except APIError as e:
            log.warning("renewing the lease failed: %s", e)
            return False
        return self._renewed(now)

    def _renewed(self, started: float) -> bool:
        if self._leading and not self.is_leader():
            # renewed, but only after our leadership had lapsed: announce the gap, so
            # on_started redoes the work refused meanwhile
            self._stop_leading("the renewal came after the renew deadline")
        self._renewed_at = started
        return True

    def _check_sync_request(self, lease: dict[str, Any], holder: str) -> None:
        annotations = lease.get("metadata", {}).get("annotations") or {}
        request = annotations.get(SYNC_REQUEST_ANNOTATION)
        if request != self._seen_request:
            self._seen_request = request
            if holder == self.identity and self._leading and request:
                log.info("a standby asked for a sync", extra={"identity": self.identity})
                self.on_sync_request()

    def request_sync(self) -> bool:
        """On a standby: ask the leader for a sync now (it sees it within a retry period)."""
        deadline = self._clock() + self.renew_deadline
        for _ in range(3):
            try:
                lease = self._call("GET", deadline)
                meta = lease.setdefault("metadata", {})
                meta.setdefault("annotations", {})[SYNC_REQUEST_ANNOTATION] = _micro_time()
                self._call("PUT", deadline, body=lease)
            except APIConflictError:
                continue  # the leader renewed in between; read again
            except APIError as e:
                log.warning("could not ask the leader for a sync: %s", e)
                return False
            return True
        return False

    def _create(self, now: float, deadline: float) -> bool:
        ts = _micro_time()
        body = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {
                "name": self.path.rsplit("/", 1)[1],
                **({"annotations": self.annotations} if self.annotations else {}),
            },
            "spec": {
                "holderIdentity": self.identity,
                "leaseDurationSeconds": int(self.lease_duration),
                "acquireTime": ts,
                "renewTime": ts,
                "leaseTransitions": 0,
            },
        }
        try:
            self._call("POST", deadline, body=body, path=self.collection)
        except APIError as e:
            log.info("creating the lease failed: %s", e)
            return False
        return self._renewed(now)
