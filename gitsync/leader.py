"""Leader election on a ``coordination.k8s.io`` Lease: only the leader writes.

Why not ``kubernetes.leaderelection``: its loop cannot be stopped (so SIGTERM
cannot release the Lease, and a standby waits a whole lease duration), its
LeaseLock talks through the global default client rather than ours, and it
offers no cheap "am I still leader right now" check. This is the same
protocol as client-go's: optimistic-concurrency updates of holderIdentity and
renewTime, expiry judged by our own clock from when we last saw the record
change (so clock skew between replicas does not matter).
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from gitsync.errors import APIConflictError, APIError, APINotFoundError
from gitsync.kube import Kube, resource_path

log = logging.getLogger(__name__)

#: a standby that receives a push webhook asks the leader for a sync through the
#: Lease both already read every retry period (no extra RBAC, no extra watch)
SYNC_REQUEST_ANNOTATION = "gitsync.apps.example.com/sync-requested"


def _micro_time() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    def __init__(
        self,
        kube: Kube,
        namespace: str,
        name: str,
        identity: str,
        *,
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.kube = kube
        self.path = resource_path("coordination.k8s.io/v1", "leases", namespace, name)
        self.collection = resource_path("coordination.k8s.io/v1", "leases", namespace)
        self.identity = identity
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self._clock = clock
        self._renewed_at = -1e18
        self._observed: tuple[str, str] | None = None  # (holder, renewTime) last seen
        self._observed_at = 0.0
        self._leading = False
        self._seen_request: str | None = None
        #: called (on the leader) when a standby asked for a sync
        self.on_sync_request: Callable[[], None] = lambda: None

    def is_leader(self) -> bool:
        """True only while our last renewal is fresher than the renew deadline:
        a leader cut off from the API server stops writing before anyone else
        can take over (renew_deadline < lease_duration)."""
        return self._leading and self._clock() - self._renewed_at < self.renew_deadline

    def run(
        self,
        stop: threading.Event,
        on_started: Callable[[], None] = lambda: None,
        on_stopped: Callable[[], None] = lambda: None,
    ) -> None:
        """Campaign and renew until ``stop`` is set. The Lease is not released here:
        the caller releases it once its last write is done (``release``)."""
        while not stop.is_set():
            ok = self._try_acquire_or_renew()
            if ok and not self._leading:
                self._leading = True
                log.info("became leader", extra={"identity": self.identity})
                on_started()
            elif not ok and self._leading and not self.is_leader():
                self._leading = False
                log.warning("lost leadership", extra={"identity": self.identity})
                on_stopped()
            stop.wait(self.retry_period)

    def release(self) -> None:
        """Give the Lease up so a standby takes over at once rather than after expiry."""
        if not self._leading:
            return
        self._leading = False
        try:
            lease = self.kube.get(self.path)
            spec = lease.get("spec", {})
            if spec.get("holderIdentity") != self.identity:
                return
            spec["holderIdentity"] = ""
            spec["leaseDurationSeconds"] = 1
            spec["renewTime"] = _micro_time()
            self.kube.request("PUT", self.path, body=lease, subject="Lease")
            log.info("released leadership", extra={"identity": self.identity})
        except APIError as e:
            log.warning("could not release the lease: %s", e)

    def _try_acquire_or_renew(self) -> bool:
        now = self._clock()
        try:
            lease = self.kube.get(self.path, subject="Lease")
        except APINotFoundError:
            return self._create(now)
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
        if holder and holder != self.identity and now - self._observed_at < duration:
            return False  # someone else holds a live lease
        if holder != self.identity:
            spec["leaseTransitions"] = int(spec.get("leaseTransitions", 0)) + 1
            spec["acquireTime"] = _micro_time()
        spec["holderIdentity"] = self.identity
        spec["leaseDurationSeconds"] = int(self.lease_duration)
        spec["renewTime"] = _micro_time()
        try:
            self.kube.request("PUT", self.path, body=lease, subject="Lease", timeout=5.0)
        except APIConflictError:
            return False  # another candidate wrote first; look again next period
        except APIError as e:
            log.warning("renewing the lease failed: %s", e)
            return False
        self._renewed_at = now
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
        for _ in range(3):
            try:
                lease = self.kube.get(self.path, subject="Lease")
                meta = lease.setdefault("metadata", {})
                meta.setdefault("annotations", {})[SYNC_REQUEST_ANNOTATION] = _micro_time()
                self.kube.request("PUT", self.path, body=lease, subject="Lease", timeout=5.0)
            except APIConflictError:
                continue  # the leader renewed in between; read again
            except APIError as e:
                log.warning("could not ask the leader for a sync: %s", e)
                return False
            return True
        return False

    def _create(self, now: float) -> bool:
        ts = _micro_time()
        body = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": self.path.rsplit("/", 1)[1]},
            "spec": {
                "holderIdentity": self.identity,
                "leaseDurationSeconds": int(self.lease_duration),
                "acquireTime": ts,
                "renewTime": ts,
                "leaseTransitions": 0,
            },
        }
        try:
            self.kube.create(self.collection, body, subject="Lease")
        except APIError as e:
            log.info("creating the lease failed: %s", e)
            return False
        self._renewed_at = now
        return True
