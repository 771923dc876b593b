"""Leadership lost in the middle of a pass: a test takes the Lease over while the daemon
applies changed MyApps (200; 60 in the short version) and is about to prune. The old
leader stops writing within its renew deadline and prunes nothing after it."""

from __future__ import annotations

import datetime as dt
import random
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from gitsync.errors import APIError
from gitsync.kube.client import Kube, resource_path
from tests.faults.harness import (
    Daemon,
    DeletionWatch,
    PrivateControlPlane,
    apps_files,
    report,
    runs,
    seeded,
    wait_converged,
)
from tests.gitserver import Upstream
from tests.support import wait_until

pytestmark = [pytest.mark.faults, pytest.mark.integration]

APPS = runs(60, 200)
GONE = APPS * 3 // 10  # leave Git: under the prune guard's half
RENEW_DEADLINE = 10.0  # gitsync.kube.leader.LeaderElector's default
WRITES = ("APPLY", "PATCH", "POST", "PUT", "DELETE", "CREATE")


def now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class Usurper:
    """Takes the Lease and keeps renewing it, as a new leader would."""

    def __init__(self, kube: Kube, ns: str, name: str) -> None:
        self.kube = kube
        self.path = resource_path("coordination.k8s.io/v1", "leases", ns, name)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._renew, daemon=True)

    def take(self) -> None:
        while True:
            lease = self.kube.get(self.path)
            lease["spec"].update(
                holderIdentity="usurper",
                acquireTime=now(),
                renewTime=now(),
                leaseDurationSeconds=60,
            )
            try:
                self.kube.request("PUT", self.path, body=lease)
                break
            except APIError:  # the old leader renewed in between: read again
                continue
        self.thread.start()

    def _renew(self) -> None:
        while not self.stop.wait(1.0):
            lease = self.kube.get(self.path)
            lease["spec"]["renewTime"] = now()
            try:
                self.kube.request("PUT", self.path, body=lease)
            except APIError:
                continue


def writes(daemon: Daemon) -> float:
    return sum(daemon.metric("gitsync_api_requests_total", verb=v) for v in WRITES)


@dataclass
class Takeover:
    step_down_s: float
    late_writes: float
    late_prunes: int


def applying(kube: Kube, ns: str) -> bool:
    apps = kube.list(resource_path("apps.example.com/v1", "myapps", ns))["items"]
    return any(a["spec"]["image"] == "nginx:1.28" for a in apps)


def take_over_once(
    cp: PrivateControlPlane, kube: Kube, ns: str, work: Path, rng: random.Random, run: int
) -> Takeover:
    (work / f"srv-{run}").mkdir()
    upstream = Upstream(work / f"srv-{run}")
    daemon = Daemon(
        cp.kubeconfig,
        ns,
        upstream.file_url,
        work / f"daemon-{run}.log",
        ("--leader-elect", "--instance-name", f"faults-{run}"),
    )
    images = {f"app-{i:03d}": "nginx:1.27" for i in range(APPS)}
    upstream.commit(apps_files(ns, images), f"run {run}")
    usurper = Usurper(kube, ns, f"gitsync-leader-faults-{run}")
    with DeletionWatch(kube, ns) as deletions:
        try:
            daemon.start()
            wait_converged(kube, ns, images, 600, "the first sync")
            changed = {n: "nginx:1.28" for n in list(images)[GONE:]}
            gone: dict[str, str | None] = {f"apps/{n}.yaml": None for n in list(images)[:GONE]}
            upstream.commit(apps_files(ns, changed) | gone, "some leave, the others change")
            wait_until(lambda: applying(kube, ns), timeout=120, what="the pass to start")
            time.sleep(rng.uniform(0.0, 1.5))
            usurper.take()
            taken = time.monotonic()
            print(f"run {run}: Lease taken over mid-pass")
            wait_until(
                lambda: daemon.metric("gitsync_leader") == 0,
                timeout=RENEW_DEADLINE + 20,
                what="the old leader to step down",
            )
            stopped = time.monotonic() - taken
            time.sleep(max(0.0, RENEW_DEADLINE - stopped) + 1.0)
            before, deleted_by_deadline = writes(daemon), len(deletions.deleted)
            # a whole renew deadline more, five sync intervals, with no leadership
            time.sleep(RENEW_DEADLINE)
            after = writes(daemon)
        finally:
            usurper.stop.set()
            daemon.kill()
    print(
        f"run {run}: stepped down {stopped:.1f}s after the takeover; "
        f"{len(deletions.deleted)} pruned in all, {after - before:.0f} late writes"
    )
    assert set(deletions.deleted) <= set(list(images)[:GONE]), "a MyApp still in Git was deleted"
    return Takeover(stopped, after - before, len(deletions.deleted) - deleted_by_deadline)


def test_leadership_lost_mid_pass(
    private_cp: PrivateControlPlane, pkube: Kube, pns: str, work: Path
) -> None:
    count = runs(1, 3)
    rng = seeded("leadership takeovers")
    results = []
    for run in range(1, count + 1):
        ns = pns if run == 1 else f"{pns}-{run}"
        if run > 1:
            body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
            pkube.create(resource_path("v1", "namespaces"), body)
        results.append(take_over_once(private_cp, pkube, ns, work, rng, run))
    report(
        "leadership lost mid-pass",
        runs=count,
        stepped_down=len(results),
        max_step_down_s=f"{max(r.step_down_s for r in results):.1f}",
        writes_after_deadline=int(sum(r.late_writes for r in results)),
        prunes_after_deadline=sum(r.late_prunes for r in results),
    )
    assert all(r.late_writes == 0 for r in results), "a deposed leader went on writing"
    assert all(r.late_prunes == 0 for r in results), "a deposed leader pruned"
