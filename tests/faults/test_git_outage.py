"""The git server down for at least three sync intervals, then back."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from gitsync.kube.client import Kube, resource_path
from tests.faults.harness import (
    Daemon,
    DeletionWatch,
    PrivateControlPlane,
    apps_files,
    report,
    wait_converged,
)
from tests.gitserver import Upstream, free_port, wait_for_port
from tests.support import wait_until

pytestmark = [pytest.mark.faults, pytest.mark.integration]

INTERVAL = 2.0


class GitDaemon:
    """`git daemon` on a fixed port, so that it can go away and come back at one URL."""

    def __init__(self, upstream: Upstream) -> None:
        self.upstream = upstream
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"git://127.0.0.1:{self.port}/{self.upstream.bare.name}"

    def start(self) -> None:
        base = str(self.upstream.base)
        argv = ["git", "daemon", "--reuseaddr", f"--base-path={base}", "--export-all"]
        self.proc = subprocess.Popen(
            [*argv, f"--port={self.port}", "--listen=127.0.0.1", base],
            env=self.upstream.env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # its per-connection children share its process group
        )
        wait_for_port(self.port)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)


def status_map(kube: Kube, ns: str) -> dict[str, str]:
    path = resource_path("v1", "configmaps", ns, "gitsync-status-faults")
    data: dict[str, str] = kube.get(path).get("data") or {}
    return data


def test_git_server_down_for_three_intervals(
    private_cp: PrivateControlPlane, pkube: Kube, pns: str, upstream: Upstream, work: Path
) -> None:
    images = {f"app-{i}": "nginx:1.27" for i in range(4)}
    upstream.commit(apps_files(pns, images), "four MyApps")
    git = GitDaemon(upstream)
    git.start()
    extra = ("--allow-insecure-git", "--git-timeout", "5", "--instance-name", "faults")
    daemon = Daemon(
        private_cp.kubeconfig, pns, git.url, work / "daemon.log", extra, interval=INTERVAL
    )
    with DeletionWatch(pkube, pns) as deletions:
        try:
            daemon.start()
            wait_converged(pkube, pns, images, 300, "the first sync")
            git.stop()
            # removed from Git while the server is down: gitsync cannot know yet, and a
            # failed fetch must never read as "everything is gone"
            upstream.commit({"apps/app-3.yaml": None}, "app-3 leaves")
            wait_until(
                lambda: daemon.metric("gitsync_sync_total", result="failure") >= 3,
                timeout=120,
                what="three failed passes while git is down",
            )
            state = status_map(pkube, pns)
            assert state["result"] == "Failed", state
            assert str(git.port) in state["lastError"] or "git" in state["lastError"].lower()
            # Events are written in the background: waited for
            wait_until(
                lambda: any(
                    e["reason"] == "SyncFailed"
                    for e in pkube.list(resource_path("v1", "events", pns))["items"]
                ),
                what="the SyncFailed Event",
            )
            assert deletions.deleted == [], "nothing may be pruned while git is down"

            failures = daemon.metric("gitsync_sync_total", result="failure")
            successes = daemon.metric("gitsync_sync_total", result="success")
            git.start()
            back = time.monotonic()
            wait_until(
                lambda: daemon.metric("gitsync_sync_total", result="success") > successes,
                timeout=120,
                what="a good pass once git is back",
            )
            recovered = time.monotonic() - back
            # one pass may have been in flight when the server came back; no more
            assert daemon.metric("gitsync_sync_total", result="failure") <= failures + 1
            wait_until(
                lambda: status_map(pkube, pns).get("result") == "Succeeded",
                timeout=30,
                what="the status ConfigMap to show success",
            )
            del images["app-3"]
            wait_converged(pkube, pns, images, 300, "after git is back")
            took = time.monotonic() - back
        finally:
            daemon.kill()
            git.stop()
    report(
        "git server down 3 intervals",
        runs=1,
        converged=1,
        objects_lost=0,
        wrong_prunes=len([d for d in deletions.deleted if d != "app-3"]),
        first_good_pass_s=f"{recovered:.1f}",
        max_converge_s=f"{took:.1f}",
    )
    assert deletions.deleted == ["app-3"], "only the MyApp removed from Git goes, once git is back"
