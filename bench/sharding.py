"""Sharding: one instance's MyApps shared by several ``gitsync run --sharding`` processes.

- cold sync of N MyApps with 1, 2 and 4 replicas (every MyApp Available), and each
  replica's RSS once settled: the Deployment cache is split, the MyApp cache is not;
- buckets moved when a 4th replica joins 3 and when one of 4 is killed, read from the
  member Leases the API server holds, against 1/N + 10 %;
- failover: a replica SIGKILLed, a MyApp of its buckets drifted at once; seconds until
  another replica has corrected it, over several kills (goal: Lease duration + 2 s).

The replicas are local processes on this 2-core machine, as is the control plane: the
cold sync is bound by the API server here, so more replicas do not make it faster; the
point is memory per replica and failover.
"""

from __future__ import annotations

import datetime as dt
import os
import signal
import statistics
import subprocess
import time
import urllib.request
from functools import partial
from pathlib import Path
from typing import Any

from bench.common import GITSYNC, git_repo, namespace, wait
from gitsync.kube.client import Kube, path_of, resource_path
from gitsync.kube.members import MEMBER_OF_LABEL, serving_now
from gitsync.model.shards import BUCKETS, bucket_of, moved
from testenv import cluster

Results = dict[str, Any]
#: after the last MyApp is Available: status writes and watch events die down
SETTLE_S = 10.0
LEASE_DURATION_S = 15.0


class Replica:
    def __init__(self, ns: str, bare: Path, tmp: Path, tag: str) -> None:
        self.port = cluster.free_port()
        env = {**os.environ, "KUBECONFIG": str(cluster.KUBECONFIG), "GITSYNC_LOG_FORMAT": "json"}
        argv = [
            GITSYNC, "run", "--sharding", "--repo", f"file://{bare}", "--path", "apps",
            "--interval", "300", "--watch-namespace", ns, "--status-namespace", ns,
            "--listen", f"127.0.0.1:{self.port}", "--cache-dir", str(tmp / f"cache-{tag}"),
        ]  # fmt: skip
        log = cluster.STATE / "logs" / f"bench-sharding-{tag}.log"
        with log.open("wb") as out:
            self.proc = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT)

    def metric(self, name: str) -> float | None:
        try:
            url = f"http://127.0.0.1:{self.port}/metrics"
            with urllib.request.urlopen(url, timeout=10) as resp:
                text = resp.read().decode()
        except OSError:
            return None
        for line in text.splitlines():
            if line.startswith(name + " ") or line.startswith(name + "{"):
                return float(line.rsplit(" ", 1)[1])
        return None

    def rss_mib(self) -> float:
        return round((self.metric("process_resident_memory_bytes") or 0.0) / 2**20, 1)

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


def _available(kube: Kube, ns: str) -> int:
    items = kube.list(path_of("MyApp", ns)).get("items", [])
    return sum(1 for a in items if (a.get("status") or {}).get("phase") == "Available")


def _holders(kube: Kube, ns: str) -> dict[int, str]:
    leases = kube.list(
        resource_path("coordination.k8s.io/v1", "leases", ns),
        params={"labelSelector": MEMBER_OF_LABEL},
    ).get("items", [])
    return serving_now(leases, BUCKETS, dt.datetime.now(dt.UTC))


def _settled(kube: Kube, ns: str, replicas: list[Replica]) -> bool:
    held = _holders(kube, ns)
    pids = {r.proc.pid for r in replicas}
    return len(held) == BUCKETS and {int(m.rsplit("_", 1)[1]) for m in held.values()} == pids


def _cleanup(ns: str) -> None:
    subprocess.run(
        [str(cluster.STATE / "bin" / "kubectl"), "delete", "namespace", ns, "--wait=false"],
        env={**os.environ, "KUBECONFIG": str(cluster.KUBECONFIG)},
        capture_output=True,
        check=False,
    )


def cold(kube: Kube, tmp: Path, n: int, k: int) -> Results:
    """k replicas sync n MyApps from nothing; the RSS of each once settled."""
    ns = namespace(kube, f"bench-shard-{k}")
    bare, _work = git_repo(tmp, f"shard-{k}", ns, n)
    replicas = [Replica(ns, bare, tmp, f"{k}-{i}") for i in range(k)]
    start = time.perf_counter()
    try:
        wait("every MyApp Available", lambda: _available(kube, ns) >= n, 3600, every=1.0)
        synced_s = time.perf_counter() - start
        time.sleep(SETTLE_S)
        return {
            "replicas": k,
            "all_available_s": round(synced_s, 1),
            "rss_mib": [r.rss_mib() for r in replicas],
            "myapps_served": [r.metric("gitsync_shard_myapps") for r in replicas],
        }
    finally:
        for r in replicas:
            r.stop()
        _cleanup(ns)


def _drift(kube: Kube, ns: str, name: str) -> None:
    kube.request(
        "PATCH",
        path_of("Deployment", ns, name),
        body={"spec": {"replicas": 3}},
        content_type="application/merge-patch+json",
        params={"fieldManager": "kubectl-edit"},
    )


def _corrected(kube: Kube, ns: str, name: str) -> bool:
    dep = kube.get(path_of("Deployment", ns, name))
    return bool(dep["spec"]["replicas"] == 1)


def churn(kube: Kube, tmp: Path, n: int, kills: int) -> Results:
    """3 replicas, then a 4th (buckets moved), then kills: each time a replica is
    SIGKILLed, a MyApp of its buckets is drifted at once and the time until another
    replica corrects it is taken; a new replica replaces the one killed."""
    ns = namespace(kube, "bench-shard-churn")
    bare, _work = git_repo(tmp, "shard-churn", ns, n)
    names = [f"app-{i:04d}" for i in range(n)]
    replicas = [Replica(ns, bare, tmp, f"churn-{i}") for i in range(3)]
    started = len(replicas)
    out: Results = {"n": n}
    try:
        wait("every MyApp Available", lambda: _available(kube, ns) >= n, 3600, every=1.0)
        wait("3 members settled", lambda: _settled(kube, ns, replicas), 120, every=0.5)
        three = _holders(kube, ns)
        replicas.append(Replica(ns, bare, tmp, f"churn-{started}"))
        started += 1
        wait("4 members settled", lambda: _settled(kube, ns, replicas), 120, every=0.5)
        four = _holders(kube, ns)
        out["moved_3_to_4"] = len(moved(three, four))
        took: list[float] = []
        for i in range(kills):
            before = _holders(kube, ns)
            victim = replicas.pop(i % len(replicas))
            identity = next(m for m in before.values() if m.endswith(f"_{victim.proc.pid}"))
            mine = [x for x in names if before.get(bucket_of(ns, x)) == identity]
            victim.stop(signal.SIGKILL)
            killed = time.perf_counter()
            target = mine[0]
            _drift(kube, ns, target)
            wait("the drift corrected", partial(_corrected, kube, ns, target), 120, every=0.1)
            took.append(round(time.perf_counter() - killed, 2))
            wait("3 members settled", lambda: _settled(kube, ns, replicas), 120, every=0.5)
            if i == 0:
                out["moved_4_to_3"] = len(moved(before, _holders(kube, ns)))
            replicas.append(Replica(ns, bare, tmp, f"churn-{started}"))
            started += 1
            wait("4 members settled", lambda: _settled(kube, ns, replicas), 120, every=0.5)
        out["failover_s"] = {
            "runs": took,
            "p50": round(statistics.median(took), 2),
            "max": max(took),
        }
        out["failover_goal_s"] = LEASE_DURATION_S + 2
        return out
    finally:
        for r in replicas:
            r.stop(signal.SIGKILL)
        _cleanup(ns)


def sharding(kube: Kube, tmp: Path, n: int, churn_n: int, kills: int) -> Results:
    out: Results = {"n": n, "buckets": BUCKETS, "cold": {}}
    for k in (1, 2, 4):
        print(f"bench: sharding, cold sync of {n} with {k} replicas", flush=True)
        out["cold"][str(k)] = cold(kube, tmp, n, k)
    print(f"bench: sharding, churn at {churn_n} with {kills} kills", flush=True)
    out["churn"] = churn(kube, tmp, churn_n, kills)
    return out
