"""Crashes in the middle of a 200-MyApp sync (40 in the short version): kube-apiserver,
etcd and the daemon itself are SIGKILLed at a random (seeded, printed) moment and started
again. Every time,
gitsync converges: every MyApp in Git exists once with its Deployment, its status matches
the live Deployment, and no MyApp still in Git was ever deleted."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from gitsync.kube.client import Kube
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

pytestmark = [pytest.mark.faults, pytest.mark.integration]

APPS = runs(40, 200)  # `make test` runs a smaller sync; `make faults` the 200
CONVERGE = 600.0  # generous: a loaded 2-core machine rolls out 200 Deployments slowly


def images_for(run: int) -> dict[str, str]:
    # each run changes every image, so that each run is a full 200-object sync in flight
    return {f"app-{i:03d}": f"nginx:1.{run}.{i}" for i in range(APPS)}


def crash_component(
    name: str,
    private_cp: PrivateControlPlane,
    pkube: Kube,
    pns: str,
    upstream: Upstream,
    work: Path,
    count: int,
) -> None:
    rng = seeded(f"{name} kills")
    daemon = Daemon(private_cp.kubeconfig, pns, upstream.file_url, work / "daemon.log")
    worst, converged, lost = 0.0, 0, 0
    with DeletionWatch(pkube, pns) as deletions:
        try:
            upstream.commit(apps_files(pns, images_for(0)), f"{APPS} MyApps")
            daemon.start()
            wait_converged(pkube, pns, images_for(0), CONVERGE, "the first sync")
            for run in range(1, count + 1):
                upstream.commit(apps_files(pns, images_for(run)), f"images of run {run}")
                delay = rng.uniform(0.5, 6.0)
                time.sleep(delay)
                downtime = rng.uniform(1.0, 5.0)
                print(
                    f"run {run}: {name} SIGKILLed {delay:.1f}s into the sync, down {downtime:.1f}s"
                )
                private_cp.restart(name, downtime, crash=True)
                # kwok (the stand-in kubelet) does not retry a Pod's stage that failed
                # while the store was down, where a kubelet resyncs its Pods: such Pods
                # would stay Pending for good, whatever gitsync does. Restarted, kwok
                # lists the Pods again and plays their stages
                private_cp.restart("kwok", 0.0, crash=False)
                took, final = wait_converged(
                    pkube, pns, images_for(run), CONVERGE, f"run {run} after the {name} kill"
                )
                print(f"run {run}: converged {took:.1f}s after {name} was back")
                worst, converged = max(worst, took), converged + 1
                lost += len(final.lost)
        finally:
            daemon.kill()
    report(
        f"{name} SIGKILL mid-sync",
        runs=count,
        converged=converged,
        objects_lost=lost,
        wrong_prunes=len(deletions.deleted),
        max_converge_s=f"{worst:.1f}",
    )
    assert deletions.deleted == [], f"MyApps still in Git were deleted: {deletions.deleted}"
    assert daemon.proc is not None and "Traceback" not in daemon.log_text()


def test_apiserver_sigkilled_mid_sync(
    private_cp: PrivateControlPlane, pkube: Kube, pns: str, upstream: Upstream, work: Path
) -> None:
    crash_component("kube-apiserver", private_cp, pkube, pns, upstream, work, runs(1, 5))


def test_etcd_sigkilled_under_a_running_daemon(
    private_cp: PrivateControlPlane, pkube: Kube, pns: str, upstream: Upstream, work: Path
) -> None:
    crash_component("etcd", private_cp, pkube, pns, upstream, work, runs(1, 3))


def test_daemon_sigkilled_at_random_points(
    private_cp: PrivateControlPlane, pkube: Kube, pns: str, upstream: Upstream, work: Path
) -> None:
    count = runs(1, 20)
    rng = seeded("daemon kills")
    daemon = Daemon(private_cp.kubeconfig, pns, upstream.file_url, work / "daemon.log")
    worst, converged, lost = 0.0, 0, 0
    with DeletionWatch(pkube, pns) as deletions:
        try:
            upstream.commit(apps_files(pns, images_for(0)), f"{APPS} MyApps")
            daemon.start()
            wait_converged(pkube, pns, images_for(0), CONVERGE, "the first sync")
            for run in range(1, count + 1):
                upstream.commit(apps_files(pns, images_for(run)), f"images of run {run}")
                # the interval is 2 s: kills land before, during and after the pass
                delay = rng.uniform(0.0, 8.0)
                time.sleep(delay)
                daemon.kill()
                print(f"run {run}: daemon SIGKILLed {delay:.1f}s after the commit")
                daemon.start()
                took, final = wait_converged(
                    pkube, pns, images_for(run), CONVERGE, f"run {run} after the daemon kill"
                )
                print(f"run {run}: converged {took:.1f}s after the restart")
                worst, converged = max(worst, took), converged + 1
                lost += len(final.lost)
        finally:
            daemon.kill()
    report(
        "daemon SIGKILL mid-sync",
        runs=count,
        converged=converged,
        objects_lost=lost,
        wrong_prunes=len(deletions.deleted),
        max_converge_s=f"{worst:.1f}",
    )
    assert deletions.deleted == [], f"MyApps still in Git were deleted: {deletions.deleted}"
