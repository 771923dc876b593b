"""The curve to 20,000: gitsync alone at each N, each size on a fresh control plane.

At each N (GITSYNC_BENCH_CURVE, default 100,1000,5000,10000,20000):

- the API server's floor for a cold sync (bench/floor.py: a bare client's 3 writes per
  MyApp from 64 threads, the fastest pool at 1000), on a control plane of its own;
- on another fresh one, gitsync's cold sync (one pass, the operator in-process with 8
  workers) timed to the floor's end point (every write accepted), and to every
  Deployment rolled out; the no-op resync's time and CPU (median of 5 passes) and
  requests (all 5); drift in status (a
  ``kubectl scale`` of a MyApp with policy ``report``, p50 of 20);
- ``gitsync diff`` of the synced repository;
- a ``gitsync run`` daemon started on the synced cluster: start to ready (caches synced
  and the first pass done: ``/readyz``; the first pass's own time and its fetch's, from
  the daemon's summaries), its RSS (per MyApp: above an idle daemon's,
  measured first), and webhook push → applied with 1 % of the MyApps changed by one
  commit (p50 of 5); then, the daemon stopped, the same changes' floor (bench/floor.py:
  a bare client's two applies per changed MyApp, p50 of 5) timed to the same end.

Replicas are 1 up to 5000 MyApps and 0 above (GITSYNC_BENCH_CURVE_PODS_UP_TO): on 2
cores the control plane needs most of an hour to create and keep 20,000 ReplicaSets
and Pods, and gitsync's figures do not involve the Pods (rollout is reported apart).
Each size ends with the control plane torn down: deleting 40,000 objects through the
garbage collector would load the next size's measurements.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import signal
import statistics
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench import floor as floorlib
from bench import memory as memorylib
from bench import profile
from bench.common import (
    GIT,
    GITSYNC,
    KUBECTL,
    ROOT,
    app_yaml,
    cpu_seconds,
    delta,
    drift_in_status,
    ensure_nodes,
    git_repo,
    namespace,
    percentiles,
    report_drift,
    server_requests,
    sh,
    wait,
)
from gitsync.daemon.heap import Heap
from gitsync.gitops.sync import Syncer, SyncOptions
from gitsync.kube.client import Kube
from gitsync.reconcile.controller import Controller, ControllerConfig
from gitsync.source.checkout import open_source
from testenv import cluster

Results = dict[str, Any]
FLOOR_WORKERS = 64
PUSHES = 5
#: no-op passes measured one after another (median, and the CPU's range): one pass's
#: CPU varies by a third from one to the next at one N (measured at 10,000: 0.19 to
#: 0.33 ms per MyApp over four passes), more than a doubled N changes it
NOOP_PASSES = 5
DRIFT_EDITS = 20
PODS_UP_TO = int(os.environ.get("GITSYNC_BENCH_CURVE_PODS_UP_TO", "5000"))


def fresh() -> Kube:
    """A control plane with nothing of the sizes before it."""
    cluster.down()
    cluster.up()
    kube = Kube.from_kubeconfig(str(cluster.KUBECONFIG), pool_size=80, timeout=300.0)
    sh(KUBECTL, "apply", "--server-side", "--force-conflicts", "-k", str(ROOT / "crds"))
    return kube


def _cold(kube: Kube, tmp: Path, n: int, replicas: int) -> tuple[Results, Controller, str, Path]:
    ns = namespace(kube, "curve")
    bare, work = git_repo(tmp, f"curve-{n}", ns, n, replicas=replicas)
    url = f"file://{bare}"
    c = Controller(kube, ControllerConfig(namespace=ns, workers=8))
    c.start()
    c.wait_synced(120)
    s = Syncer(c, open_source(url, "main", tmp / f"curve-{n}-cache"), SyncOptions(url, "apps"))
    ours0, server0, cpu0 = dict(kube.requests), server_requests(kube), cpu_seconds()
    start = time.perf_counter()
    cold = s.run()
    pass_s = time.perf_counter() - start
    wait("every write accepted", floorlib.written(c, n), timeout=3600, every=0.05)
    written_s = time.perf_counter() - start
    cold_cpu = cpu_seconds() - cpu0
    cold_server = delta(server_requests(kube), server0)
    ours = {k: v - ours0.get(k, 0) for k, v in kube.requests.items() if v - ours0.get(k, 0)}
    wait("every Deployment rolled out", lambda: _rolled_out(c, n, replicas), 3600, every=1.0)
    rolled_s = time.perf_counter() - start
    c.wait_idle(300)
    time.sleep(2)
    heap = Heap()
    heap.settle()  # as the daemon, after the cold pass
    before = server_requests(kube)
    passes: list[tuple[float, float]] = []
    for _ in range(NOOP_PASSES):
        cpu0, start = cpu_seconds(), time.perf_counter()
        warm = s.run()
        heap.settle()
        passes.append((time.perf_counter() - start, cpu_seconds() - cpu0))
    noop_requests = delta(server_requests(kube), before)
    # one more, its calls counted (slower, so not among the timed ones): a time per MyApp
    # moves with the machine's load, the calls per MyApp only with what a pass does
    _, calls = profile.counted(s.run)
    heap.settle()
    out = {
        "cold": {
            "pass_s": round(pass_s, 2),
            "written_s": round(written_s, 2),
            "rolled_out_s": round(rolled_s, 2),
            "cpu_s": round(cold_cpu, 2),
            "summary": cold.summary(),
            "requests": ours,
            "server_requests": cold_server,
        },
        "noop": {
            "passes": NOOP_PASSES,
            "s": round(statistics.median(t for t, _ in passes), 3),
            "cpu_s": round(statistics.median(cpu for _, cpu in passes), 3),
            "cpu_s_range": [
                round(min(c for _, c in passes), 3),
                round(max(c for _, c in passes), 3),
            ],
            "summary": warm.summary(),
            "server_requests": noop_requests,
            "calls_per_myapp": round(sum(calls.values()) / n, 1),
        },
    }
    return out, c, url, work


def _rolled_out(c: Controller, n: int, replicas: int) -> bool:
    deps = c.deployments.items()
    return len(deps) >= n and all(
        (d.get("status") or {}).get("observedGeneration") == d["metadata"].get("generation")
        and int((d.get("status") or {}).get("availableReplicas") or 0) >= replicas
        for d in deps
    )


def _drift(kube: Kube, c: Controller) -> Results:
    """``kubectl scale`` of a MyApp whose policy is ``report``, to the drift in status."""
    ns = c.config.namespace or ""
    names = [f"app-{i:04d}" for i in range(5)]
    report_drift(kube, ns, names)
    c.wait_idle(120)
    return percentiles(drift_in_status(kube, c.myapps, ns, names, DRIFT_EDITS, 4, 60))


def _diff(work: Path, url: str) -> Results:
    start = time.perf_counter()
    proc = sh(GITSYNC, "diff", "--repo", str(work), "--instance-repo", url, "--path", "apps")
    return {
        "s": round(time.perf_counter() - start, 2),
        "exit": proc.returncode,
        "summary": (proc.stdout.strip().splitlines() or [""])[-1],
    }


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, ""
    except OSError:
        return 0, ""


def _samples(port: int) -> dict[str, float]:
    """The samples without labels of one scrape of the daemon's /metrics."""
    _, text = _get(f"http://127.0.0.1:{port}/metrics")
    return {
        parts[0]: float(parts[1])
        for parts in (line.split() for line in text.splitlines())
        if len(parts) > 1 and not parts[0].startswith("#") and "{" not in parts[0]
    }


def _rss_mib(port: int) -> float:
    return _samples(port).get("process_resident_memory_bytes", 0.0) / 2**20


def _daemon(kube: Kube, tmp: Path, n: int, ns: str, url: str, work: Path, replicas: int) -> Results:
    """A daemon started on the synced cluster: start to ready, RSS, push → applied."""
    secret = tmp / f"curve-{n}-secret"
    secret.write_text("bench-secret")
    port = cluster.free_port()
    env = {**os.environ, "KUBECONFIG": str(cluster.KUBECONFIG), "GITSYNC_LOG_FORMAT": "json"}
    argv = [
        GITSYNC, "run", "--repo", url, "--path", "apps", "--interval", "600", "--jitter", "0",
        "--watch-namespace", ns, "--status-namespace", ns, "--no-leader-elect",
        "--listen", f"127.0.0.1:{port}", "--webhook-secret-file", str(secret),
        "--cache-dir", str(tmp / f"curve-{n}-daemon-cache"),
    ]  # fmt: skip
    # beside the size's repository, not with the control plane's logs: the curve tears
    # the control plane down after each size, and a fresh one starts with no logs
    log = tmp / f"curve-{n}-daemon.log"
    start = time.perf_counter()
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        ready = lambda: _get(f"http://127.0.0.1:{port}/readyz")[0] == 200  # noqa: E731
        wait("the daemon ready", ready, timeout=1800, every=0.05)
        ready_s = time.perf_counter() - start
        # ready is the first pass done: its own time, of which the fetch, from the
        # summaries (one pass so far); the rest is the process's start and the caches
        samples = _samples(port)
        first_pass_s = samples.get("gitsync_sync_duration_seconds_sum", 0.0)
        first_fetch_s = samples.get("gitsync_git_fetch_duration_seconds_sum", 0.0)
        time.sleep(5)
        rss = _rss_mib(port)
        changed = max(1, n // 100)
        pushes = [_push(kube, work, ns, n, changed, i, port, replicas) for i in range(PUSHES)]
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(120)
    # the same changes' floor, once the daemon is gone (it would take them back to Git)
    names = _spread(n, changed)
    floor = [
        floorlib.push_once(kube, ns, names, f"nginx:1.{140 + i}", FLOOR_WORKERS, replicas)
        for i in range(PUSHES)
    ]
    hook, fl = percentiles(pushes), percentiles(floor)
    return {
        "start_to_ready_s": round(ready_s, 2),
        "first_pass_s": round(first_pass_s, 2),
        "first_fetch_s": round(first_fetch_s, 2),
        "rss_mib": round(rss, 1),
        "push_changed": changed,
        "webhook_push_to_applied_s": hook,
        "push_floor_s": fl,
        "push_ratio_to_floor": round(hook["p50"] / fl["p50"], 2),
    }


def _spread(n: int, k: int) -> list[str]:
    """``k`` of the n MyApps, spread over the repository."""
    return [f"app-{j:04d}" for j in range(0, n, max(1, n // k))][:k]


def _push(kube: Kube, work: Path, ns: str, n: int, k: int, i: int, port: int, rep: int) -> float:
    """One commit changing the image of ``k`` MyApps spread over the repository, pushed,
    announced by a webhook; seconds until every one's Deployment has the new image."""
    names = _spread(n, k)
    image = f"nginx:1.{40 + i}"
    for name in names:
        (work / "apps" / f"{name}.yaml").write_text(app_yaml(ns, name, image, replicas=rep))
    bare = work.parent / f"{work.name.removesuffix('-work')}.git"
    for args in (["commit", "-qam", f"bump {i}"], ["push", "-q", str(bare), "main"]):
        subprocess.run([*GIT, "-C", str(work), *args], check=True)
    body = b'{"ref":"refs/heads/main","after":"%d"}' % i
    sig = "sha256=" + hmac.new(b"bench-secret", body, hashlib.sha256).hexdigest()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/hooks/git", data=body, method="POST")
    req.add_header("X-Hub-Signature-256", sig)
    send = lambda: urllib.request.urlopen(req, timeout=10).close()  # noqa: E731
    return floorlib.until_applied(kube, ns, names, image, send)


def at(tmp: Path, n: int, idle_mib: float, fresh: Callable[[], Kube] = fresh) -> Results:
    """Every figure of the curve at n; ``idle_mib``: the RSS of a daemon holding no
    MyApp; ``fresh`` gives a client of a control plane that holds nothing of the steps
    before."""
    replicas = 1 if n <= PODS_UP_TO else 0
    kube = fresh()
    if replicas:
        ensure_nodes(kube, n)
    floor_s = floorlib.floor_once(kube, n, FLOOR_WORKERS, replicas=replicas)
    print(f"bench: curve N={n}: floor {floor_s:.1f} s", flush=True)
    kube = fresh()
    if replicas:
        ensure_nodes(kube, n)
    out, c, url, work = _cold(kube, tmp, n, replicas)
    print(f"bench: curve N={n}: cold {out['cold']}", flush=True)
    out["floor"] = {"s": round(floor_s, 2), "workers": FLOOR_WORKERS}
    out["ratio_to_floor"] = round(out["cold"]["written_s"] / floor_s, 2)
    out["replicas"] = replicas
    out["drift_in_status_s"] = _drift(kube, c)
    ns = c.config.namespace or ""
    c.stop()
    out["diff"] = _diff(work, url)
    out["daemon"] = _daemon(kube, tmp, n, ns, url, work, replicas)
    out["per_myapp"] = {
        "cold_cpu_ms": round(out["cold"]["cpu_s"] * 1000 / n, 2),
        "noop_cpu_ms": round(out["noop"]["cpu_s"] * 1000 / n, 3),
        "rss_kib": round((out["daemon"]["rss_mib"] - idle_mib) * 1024 / n, 1),
        "start_to_ready_ms": round(out["daemon"]["start_to_ready_s"] * 1000 / n, 2),
    }
    return out


def curve(tmp: Path, sizes: list[int], saved: Callable[[Results], None]) -> Results:
    """The curve; ``saved`` is given it after each size (a late failure loses no size)."""
    out: Results = {}
    try:
        idle = memorylib.daemon_rss(fresh(), tmp, 0)["rss_mib"]
        out["idle_rss_mib"] = idle
        for n in sizes:
            print(f"bench: curve at N={n}", flush=True)
            out[str(n)] = at(tmp, n, idle)
            saved(out)
    finally:
        cluster.down()
        cluster.up()  # the rest of the run, and the caller, find one as they left it
    return out
