"""High availability of the operator: leader election between two processes,
and recovery from an API server restart without restarting gitsync."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from gitsync.errors import APINotFoundError
from gitsync.kube.client import Kube, path_of, resource_path
from gitsync.reconcile.controller import Controller
from tests.gitserver import free_port
from tests.support import SHARDED, app_yaml, available, get, myapp, wait_until

#: two sharded replicas both write, by design: tests/integration/test_sharding.py
LEADER_ONLY = pytest.mark.skipif(SHARDED, reason="sharded, both replicas write")

GITSYNC = str(Path(sys.executable).parent / "gitsync")


class Replica:
    def __init__(
        self, kubeconfig: str, namespace: str, log: Path, extra: tuple[str, ...] = ()
    ) -> None:
        self.port = free_port()
        self.log = log
        env = {**os.environ, "KUBECONFIG": kubeconfig, "GITSYNC_LOG_FORMAT": "json"}
        argv = [
            GITSYNC,
            "run",
            "--leader-elect",
            "--watch-namespace",
            namespace,
            "--status-namespace",
            namespace,
            "--listen",
            f"127.0.0.1:{self.port}",
            *extra,
        ]
        with log.open("wb") as out:
            self.proc = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT)

    def metric(self, name: str, **labels: str) -> float:
        url = f"http://127.0.0.1:{self.port}/metrics"
        with urllib.request.urlopen(url, timeout=5) as resp:
            text = resp.read().decode()
        want = name + (
            "{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}" if labels else ""
        )
        for line in text.splitlines():
            if line.startswith(want + " "):
                return float(line.rsplit(" ", 1)[1])
        return 0.0

    def up(self) -> bool:
        try:
            return self.metric("gitsync_leader") >= 0
        except OSError:
            return False

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(30)


@pytest.fixture
def replicas(kubeconfig: str, crd: str, namespace: str, tmp_path: Path) -> Iterator[list[Replica]]:
    pair = [Replica(kubeconfig, namespace, tmp_path / f"replica-{i}.log") for i in range(2)]
    yield pair
    for r in pair:
        r.stop(signal.SIGKILL)


def holder(kube: Kube, namespace: str) -> str:
    # `gitsync run` without --repo is the instance "operator"
    path = resource_path("coordination.k8s.io/v1", "leases", namespace, "gitsync-leader-operator")
    try:
        lease = kube.get(path)
    except APINotFoundError:  # not created yet: a replica on a loaded machine starts slowly
        return ""
    return str(lease.get("spec", {}).get("holderIdentity") or "")


@LEADER_ONLY
def test_only_the_leader_writes_and_the_standby_takes_over(
    kube: Kube, namespace: str, replicas: list[Replica]
) -> None:
    for r in replicas:
        wait_until(r.up, timeout=60, what="both replicas serving /metrics")
    wait_until(lambda: holder(kube, namespace), timeout=30, what="a leader")
    kube.create(path_of("MyApp", namespace), myapp(namespace, "one"))
    wait_until(lambda: get(kube, "Deployment", namespace, "one"), what="the Deployment")
    [leader] = wait_until(
        lambda: [r for r in replicas if r.metric("gitsync_leader") == 1],
        what="the leader's gitsync_leader gauge",
    )
    standby = next(r for r in replicas if r is not leader)
    assert holder(kube, namespace).endswith(f"_{leader.proc.pid}")
    # the Deployment and then the MyApp's status: the status may still be on its way
    wait_until(
        lambda: leader.metric("gitsync_api_requests_total", verb="APPLY") >= 2,
        what="the leader's applies of the Deployment and the status",
    )
    assert standby.metric("gitsync_api_requests_total", verb="APPLY") == 0

    # a crash: no release, the standby waits out the lease (15 s)
    leader.stop(signal.SIGKILL)
    start = time.monotonic()
    wait_until(
        lambda: holder(kube, namespace).endswith(f"_{standby.proc.pid}"),
        timeout=40,
        what="the standby to take the lease",
    )
    print(f"takeover after SIGKILL: {time.monotonic() - start:.1f}s")
    kube.create(path_of("MyApp", namespace), myapp(namespace, "two"))
    wait_until(lambda: get(kube, "Deployment", namespace, "two"), what="the new leader to work")
    assert standby.metric("gitsync_api_requests_total", verb="APPLY") >= 1

    # a graceful stop releases the lease
    standby.stop(signal.SIGTERM)
    assert standby.proc.returncode == 0
    assert holder(kube, namespace) == ""


def test_recovers_from_an_api_server_restart(
    kube: Kube, namespace: str, controller: Controller
) -> None:
    from testenv import cluster

    kube.create(path_of("MyApp", namespace), myapp(namespace, "before"))
    wait_until(lambda: get(kube, "Deployment", namespace, "before"), what="before")
    relists = controller.myapps.relists
    cluster.restart("kube-apiserver", downtime=3)
    kube.create(path_of("MyApp", namespace), myapp(namespace, "after"))
    wait_until(
        lambda: get(kube, "Deployment", namespace, "after"),
        timeout=90,
        what="the operator to recover and reconcile",
    )
    assert controller.myapps.relists > relists
    wait_until(lambda: available(kube, namespace, "after", 1), timeout=60, what="status to follow")


@LEADER_ONLY
def test_a_webhook_delivered_to_the_standby_reaches_the_leader(
    kube: Kube, kubeconfig: str, crd: str, namespace: str, tmp_path: Path
) -> None:
    repo = tmp_path / "repo"
    (repo / "apps").mkdir(parents=True)
    (repo / "apps" / "a.yaml").write_text(app_yaml(namespace, "a"))
    secret = tmp_path / "secret"
    secret.write_text("s3cret")
    extra = (
        "--repo",
        str(repo),
        "--path",
        "apps",
        "--interval",
        "3600",
        "--webhook-secret-file",
        str(secret),
    )
    pair = [Replica(kubeconfig, namespace, tmp_path / f"hook-{i}.log", extra) for i in range(2)]
    try:
        for r in pair:
            wait_until(r.up, timeout=60, what="both replicas serving")
        wait_until(lambda: get(kube, "MyApp", namespace, "a"), timeout=30, what="first sync")
        standby = next(r for r in pair if r.metric("gitsync_leader") == 0)
        (repo / "apps" / "b.yaml").write_text(app_yaml(namespace, "b"))
        body = b"{}"
        req = urllib.request.Request(
            f"http://127.0.0.1:{standby.port}/hooks/git", data=body, method="POST"
        )
        req.add_header("X-Gitlab-Token", "s3cret")
        start = time.monotonic()
        with urllib.request.urlopen(req, timeout=10) as resp:
            assert resp.status == 202
            assert b"leader" in resp.read()
        wait_until(lambda: get(kube, "MyApp", namespace, "b"), timeout=15, what="b via the leader")
        print(f"webhook via the standby to applied: {time.monotonic() - start:.1f}s")
        assert standby.metric("gitsync_webhook_requests_total", result="forwarded") == 1
    finally:
        for r in pair:
            r.stop(signal.SIGKILL)
