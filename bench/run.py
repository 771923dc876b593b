"""``make bench``: gitsync's figures (design §12), measured side by side in one run.

    python -m bench.run            # everything below, at the default sizes

Nine parts (GITSYNC_BENCH_PARTS, default
``core,scale,floor,memory,versus,rollback,order,curve,sharding``):

- core: the figures of design §12 at GITSYNC_BENCH_N MyApps (default 1000), gitsync
  next to ``kubectl apply/diff --server-side``;
- scale: the kubectl comparisons at each size of GITSYNC_BENCH_SCALE (default
  100,1000,5000): cold sync, no-op resync requests and CPU, diff, daemon RSS;
- floor: the API server's floor for a cold sync (the fewest writes, from a bare
  client) next to gitsync's cold sync timed to the same end, at each size of
  GITSYNC_BENCH_FLOOR (default 1000) (bench/floor.py);
- memory: the daemon's RSS per MyApp above the idle daemon's, at each size of
  GITSYNC_BENCH_MEMORY (default 1000,5000) (bench/memory.py);
- versus: gitsync next to Flux (bench/versus.py) at GITSYNC_BENCH_VS_N (default
  1000), GITSYNC_BENCH_RUNS alternating runs (default 3), one poll interval of
  GITSYNC_BENCH_INTERVAL seconds for both (default 60); a run at another N keeps
  the earlier one, labelled with its run;
- rollback: a commit that breaks apps, gitsync with ``--rollback auto`` next to Flux
  (bench/rollback.py);
- order: a chain of MyApps (``dependsOn``) changed by one commit: push to the last link,
  and gitsync's delay per link (bench/order.py);
- curve: gitsync alone at each size of GITSYNC_BENCH_CURVE (default
  100,1000,5000,10000,20000), each on a fresh control plane: cold sync and its floor,
  no-op resync, diff, drift, start to ready, RSS, push → applied with 1 % changed and
  that push's floor (bench/curve.py); a run of some sizes keeps the others from the
  last results, each labelled with the run that measured it. It restarts the control
  plane;
- sharding: ``gitsync run --sharding`` replicas as local processes: cold sync of
  GITSYNC_BENCH_SHARD_N MyApps (default 5000) with 1, 2 and 4 replicas and each one's
  RSS; buckets moved 3 → 4 and 4 → 3, and failover over GITSYNC_BENCH_SHARD_KILLS
  SIGKILLs (default 5) at GITSYNC_BENCH_SHARD_CHURN_N MyApps (default 1000)
  (bench/sharding.py).

Prints a Markdown table and writes bench/results/<date>.json, .md and the plots.
The parts a run leaves out are carried over from bench/results/latest.json (unless
either is a smoke run), each labelled with the date and load of the run that
measured it.
Absolute times on a small shared machine are noisy; the ratios measured in one
run are what to compare.
"""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
import hmac
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import yaml

from bench import curve as curvelib
from bench import floor as floorlib
from bench import memory as memorylib
from bench import order as orderlib
from bench import profile, report, versus
from bench import rollback as rollbacklib
from bench import sharding as shardinglib
from bench.common import (
    GIT,
    GITSYNC,
    KUBECTL,
    ROOT,
    app_yaml,
    control_plane_cpu,
    cpu_delta,
    cpu_seconds,
    delta,
    drift_in_status,
    ensure_nodes,
    git_repo,
    image_of,
    kubectl_scale,
    namespace,
    percentiles,
    report_drift,
    server_requests,
    sh,
    wait,
    writes,
)
from gitsync.daemon.heap import Heap
from gitsync.engine.planner import stamped
from gitsync.gitops.sync import Syncer, SyncOptions
from gitsync.kube.client import Kube, path_of
from gitsync.model.render import render
from gitsync.reconcile.controller import Controller, ControllerConfig
from gitsync.source.checkout import GitSource, open_source
from testenv import cluster

N = int(os.environ.get("GITSYNC_BENCH_N", "1000"))
EDITS = int(os.environ.get("GITSYNC_BENCH_EDITS", "100"))
#: where results, profiles and the partial results of a run go
RESULTS = ROOT / "bench" / "results"
Results = dict[str, Any]
T = TypeVar("T")


def available_count(kube: Kube, ns: str) -> int:
    items = kube.list(path_of("MyApp", ns)).get("items", [])
    return sum(1 for a in items if (a.get("status") or {}).get("phase") == "Available")


def bench_operator(kube: Kube, out: Results, n: int) -> None:
    """n MyApps created at once: time to every Deployment and every Available."""
    ns = namespace(kube, "bench-operator")
    c = Controller(kube, ControllerConfig(namespace=ns, workers=8))
    c.start()
    c.wait_synced(60)
    before = server_requests(kube)
    bodies = [yaml.safe_load(app_yaml(ns, f"app-{i:04d}")) for i in range(n)]
    start = time.perf_counter()
    # "at once": as fast as 16 clients can create them
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda body: kube.create(path_of("MyApp", ns), body), bodies))
    created = time.perf_counter() - start
    wait("every Deployment", lambda: len(c.deployments.items()) >= n)
    deployed = time.perf_counter() - start
    wait("every MyApp Available", lambda: available_count(kube, ns) >= n, every=1.0)
    ready = time.perf_counter() - start
    c.wait_idle(120)
    counts = delta(server_requests(kube), before)
    idle_before = server_requests(kube)
    for obj in c.myapps.items():
        c.reconcile(f"{ns}/{obj['metadata']['name']}")
    idle = delta(server_requests(kube), idle_before)
    c.stop()
    out["operator"] = {
        "myapps": n,
        "create_requests_s": round(created, 2),
        "all_deployments_s": round(deployed, 2),
        "all_available_s": round(ready, 2),
        "server_requests": counts,
        # ours are all server-side apply: APPLY (Deployments) and APPLY/status (MyApps);
        # POST is the benchmark creating MyApps, PUT/status the controller-manager
        "gitsync_writes_per_myapp": round(
            (counts.get("APPLY", 0) + counts.get("APPLY/status", 0)) / n, 2
        ),
        "resync_server_requests": idle,
    }


def bench_sync(kube: Kube, tmp: Path, out: Results, n: int) -> tuple[Controller, Path, str]:
    ns = namespace(kube, "bench-sync")
    bare, work = git_repo(tmp, "sync", ns, n)
    url = f"file://{bare}"
    c = Controller(kube, ControllerConfig(namespace=ns, workers=4))
    c.start()
    c.wait_synced(60)
    s = Syncer(c, open_source(url, "main", tmp / "cache"), SyncOptions(repo=url, path="apps"))
    before = server_requests(kube)
    server_cpu0, start = control_plane_cpu(), time.perf_counter()
    cold = profiled(s.run, f"cold-sync-{n}")
    cold_s = time.perf_counter() - start
    cold_cpu = cpu_delta(server_cpu0, cold_s)
    cold_counts = delta(server_requests(kube), before)
    wait("every MyApp Available", lambda: available_count(kube, ns) >= n, every=1.0)
    c.wait_idle(120)
    before, ours = server_requests(kube), dict(kube.requests)
    # the best of three: a resync shares the process with the informers, whose
    # watch events (status churn elsewhere) are not the resync's cost
    runs = []
    heap = Heap()
    heap.settle()  # as the daemon, after the cold pass
    for _ in range(3):
        cpu0, start = cpu_seconds(), time.perf_counter()
        warm = s.run()
        heap.settle()
        runs.append((time.perf_counter() - start, cpu_seconds() - cpu0))
    warm_s, warm_cpu = min(r[0] for r in runs), min(r[1] for r in runs)
    ours_delta = {k: v - ours.get(k, 0) for k, v in kube.requests.items() if v - ours.get(k, 0)}
    out["sync"] = {
        "cold_s": round(cold_s, 2),
        "cold_summary": cold.summary(),
        "cold_server_requests": cold_counts,
        # how busy the cold sync kept the control plane: with every core busy, the
        # cold sync is bound by the server, not by gitsync
        "cold_control_plane_cpu": cold_cpu,
        "warm_s": round(warm_s, 3),
        "warm_cpu_s": round(warm_cpu, 3),
        "warm_summary": warm.summary(),
        "warm_server_requests": delta(server_requests(kube), before),
        "warm_gitsync_requests": ours_delta,
    }
    return c, work, url


def profiled(fn: Callable[[], T], name: str) -> T:
    """``fn()``, sampled by py-spy across every thread when GITSYNC_BENCH_PROFILE is set:
    the summary goes to bench/results/profile-<name>.txt. The sampler takes CPU from a
    control plane that already has every core busy, so a profiled cold sync is slower
    (the run's figures go to profiled-<date>.*, not latest.*)."""
    if not os.environ.get("GITSYNC_BENCH_PROFILE"):
        return fn()
    path = RESULTS / f"profile-{name}.txt"
    path.parent.mkdir(exist_ok=True)
    try:
        return profile.profiled(fn, path)
    finally:
        print(f"bench: profile in {path.relative_to(ROOT)}", flush=True)


def bench_kubectl_apply(kube: Kube, tmp: Path, out: Results, n: int) -> None:
    """The same 2N objects through ``kubectl apply --server-side``."""
    ns = namespace(kube, "bench-kubectl")
    docs = []
    for i in range(n):
        app = yaml.safe_load(app_yaml(ns, f"app-{i:04d}"))
        dep = render({**app, "metadata": {**app["metadata"], "uid": "0" * 8}})
        dep["metadata"].pop("ownerReferences")
        docs += [app, dep]
    manifest = tmp / "kubectl.yaml"
    manifest.write_text(yaml.safe_dump_all(docs))
    cpu0, start = control_plane_cpu(), time.perf_counter()
    sh(KUBECTL, "apply", "--server-side", "--field-manager=kubectl-bench", "-f", str(manifest))
    out["kubectl_apply_server_side_s"] = round(time.perf_counter() - start, 2)
    out["kubectl_apply_control_plane_cpu"] = cpu_delta(cpu0, out["kubectl_apply_server_side_s"])
    wait("kubectl's Deployments to settle", lambda: _settled(kube, ns, n), every=1.0)


def _settled(kube: Kube, ns: str, n: int) -> bool:
    items = kube.list(path_of("Deployment", ns)).get("items", [])
    return len(items) >= n and all(
        (d.get("status") or {}).get("availableReplicas") == d["spec"]["replicas"] for d in items
    )


def live_manifest(c: Controller, tmp: Path) -> Path:
    """What gitsync applies for the synced MyApps (MyApp bodies and their rendered
    Deployments), for ``kubectl diff --server-side`` of the very same objects."""
    docs: list[Any] = []
    for key in sorted(c.ledger.declared_keys()):
        body = c.ledger.git(key) or {}
        live = c.myapps.get(key)
        docs += [stamped(body), stamped(render(live or body))]
    path = tmp / "synced.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    return path


def bench_diff(kube: Kube, work: Path, url: str, manifest: Path, out: Results) -> None:
    before = server_requests(kube)
    start = time.perf_counter()
    proc = sh(GITSYNC, "diff", "--repo", str(work), "--instance-repo", url, "--path", "apps")
    ours = time.perf_counter() - start
    gitsync_writes = writes(delta(server_requests(kube), before))
    start = time.perf_counter()
    kubectl = sh(KUBECTL, "diff", "--server-side", "--field-manager=gitsync", "-f", str(manifest))
    theirs = time.perf_counter() - start
    out["diff"] = {
        "gitsync_diff_s": round(ours, 2),
        "gitsync_diff_exit": proc.returncode,
        "gitsync_diff_summary": proc.stdout.strip().splitlines()[-1],
        "gitsync_diff_server_writes": gitsync_writes,
        "kubectl_diff_server_side_s": round(theirs, 2),
        "kubectl_diff_exit": kubectl.returncode,
        "speedup": round(theirs / ours, 1),
    }


def bench_drift(kube: Kube, c: Controller, out: Results) -> None:
    """kubectl scale, then: in status (policy report) / corrected (policy correct)."""
    ns = c.config.namespace or ""
    report = [f"app-{i:04d}" for i in range(10)]
    report_drift(kube, ns, report)
    c.wait_idle(60)
    # every edit changes its app's replicas from the value of its previous edit
    detect = drift_in_status(kube, c.myapps, ns, report, EDITS, 5, 30)
    correct = []
    for i in range(EDITS):
        name = f"app-{10 + i % 50:04d}"
        t0 = kubectl_scale(kube, ns, name, 4)

        def back(name: str = name) -> bool:
            dep = c.deployments.get(f"{ns}/{name}") or {}
            return bool(dep.get("spec", {}).get("replicas") == 1)

        wait("correction", back, timeout=30, every=0.01)
        correct.append(time.perf_counter() - t0)
    out["drift"] = {
        "detected_in_status_s": percentiles(detect),
        "corrected_s": percentiles(correct),
        "edits": EDITS,
    }


def bench_daemon(kube: Kube, tmp: Path, out: Results, n: int) -> None:
    """RSS at n MyApps, poll cost, webhook and polling latency, with a real git repo."""
    ns = namespace(kube, "bench-daemon")
    bare, work = git_repo(tmp, "daemon", ns, n)
    git = GIT
    url = f"file://{bare}"
    src = open_source(url, "main", tmp / "poll-cache")
    assert isinstance(src, GitSource)
    src.fetch()
    start = time.perf_counter()
    src.fetch()
    out["poll_nothing_changed"] = {
        "s": round(time.perf_counter() - start, 3),
        "fetches": src.fetches,
    }

    secret = tmp / "secret"
    secret.write_text("bench-secret")
    port = _free_port()
    env = {**os.environ, "KUBECONFIG": str(cluster.KUBECONFIG), "GITSYNC_LOG_FORMAT": "json"}
    argv = [
        GITSYNC,
        "run",
        "--repo",
        url,
        "--path",
        "apps",
        "--interval",
        "5",
        "--jitter",
        "0",
        "--watch-namespace",
        ns,
        "--status-namespace",
        ns,
        "--listen",
        f"127.0.0.1:{port}",
        "--webhook-secret-file",
        str(secret),
        "--cache-dir",
        str(tmp / "daemon-cache"),
    ]
    with (tmp / "daemon.log").open("wb") as log:
        proc = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        wait("the first sync", lambda: available_count(kube, ns) >= n, every=1.0)
        time.sleep(3)
        rss = _own_rss_mib(port)
        hook, poll = [], []
        for i in range(10):
            hook.append(
                _commit_and_wait(kube, git, work, bare, ns, i, functools.partial(_webhook, port, i))
            )
        for i in range(10, 13):
            poll.append(_commit_and_wait(kube, git, work, bare, ns, i, lambda: None))
        out["daemon"] = {
            "rss_mib_at_n": round(rss, 1),
            "webhook_push_to_applied_s": percentiles(hook),
            "polling_push_to_applied_s_interval_5": [round(p, 2) for p in poll],
        }
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)


def _own_rss_mib(port: int) -> float:
    """The daemon's RSS as it reports it itself (``process_resident_memory_bytes``, which
    prometheus_client reads from /proc/self): what a Prometheus scraping it would see.
    The tool comparison (bench/versus.py) reads /proc for every tool alike."""
    url = f"http://127.0.0.1:{port}/metrics"
    with urllib.request.urlopen(url, timeout=10) as resp:
        text = resp.read().decode()
    for line in text.splitlines():
        if line.startswith("process_resident_memory_bytes "):
            return float(line.split()[1]) / 2**20
    raise RuntimeError("the daemon's /metrics has no process_resident_memory_bytes")


def _commit_and_wait(
    kube: Kube, git: list[str], work: Path, bare: Path, ns: str, i: int, trigger: Any
) -> float:
    f = work / "apps" / "app-0000.yaml"
    f.write_text(app_yaml(ns, "app-0000", image=f"nginx:1.{i}"))
    for args in (["commit", "-qam", f"bump {i}"], ["push", "-q", str(bare), "main"]):
        subprocess.run([*git, "-C", str(work), *args], check=True)
    start = time.perf_counter()
    trigger()

    def applied() -> bool:
        dep = kube.get(path_of("Deployment", ns, "app-0000"))
        return image_of(dep) == f"nginx:1.{i}"

    wait("the push to be applied", applied, timeout=60, every=0.05)
    return time.perf_counter() - start


def _webhook(port: int, push: int) -> None:
    # a body per push, as a Git host sends: gitsync ignores a repeated one as a replay
    body = b'{"ref":"refs/heads/main","after":"%d"}' % push
    sig = "sha256=" + hmac.new(b"bench-secret", body, hashlib.sha256).hexdigest()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/hooks/git", data=body, method="POST")
    req.add_header("X-Hub-Signature-256", sig)
    urllib.request.urlopen(req, timeout=10).close()


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


NAMESPACES = ("bench-operator", "bench-sync", "bench-kubectl", "bench-daemon")


def core(kube: Kube, tmp: Path, n: int, *, scale_only: bool = False) -> Results:
    """Today's figures at n MyApps; ``scale_only`` keeps those of the scale curve
    (kubectl apply vs cold sync, no-op resync, diff, daemon RSS)."""
    out: Results = {"n": n}
    tmp = tmp / f"n{n}"  # each size its own repositories and caches
    tmp.mkdir()
    try:
        if not scale_only:
            bench_operator(kube, out, n)
            print(json.dumps(out["operator"], indent=2), flush=True)
        # side by side: kubectl first, then gitsync, each after the cluster settled
        # from the step before, so both see the same background work
        bench_kubectl_apply(kube, tmp, out, n)
        c, work, url = bench_sync(kube, tmp, out, n)
        out["cold_sync_vs_kubectl_apply"] = round(
            out["sync"]["cold_s"] / out["kubectl_apply_server_side_s"], 2
        )
        bench_diff(kube, work, url, live_manifest(c, tmp), out)
        if not scale_only:
            bench_drift(kube, c, out)
        c.stop()
        bench_daemon(kube, tmp, out, n)
    finally:
        # waited for: the next size starts on a cluster without this one's Pods
        for ns in NAMESPACES:
            sh(KUBECTL, "delete", "namespace", ns, "--ignore-not-found", check=False)
    return out


def _sizes(name: str, default: str) -> list[int]:
    return [int(v) for v in os.environ.get(name, default).split(",") if v.strip()]


def _partial(out: Results) -> None:
    """What is measured so far, so a part that fails late loses nothing before it."""
    path = RESULTS / "partial.json"
    path.write_text(json.dumps(out, indent=2, default=str) + "\n")
    print(f"bench: so far in {path.relative_to(ROOT)}", flush=True)


def main() -> int:
    parts = set(
        os.environ.get(
            "GITSYNC_BENCH_PARTS",
            "core,scale,floor,memory,versus,rollback,order,curve,sharding",
        ).split(",")
    )
    scale = _sizes("GITSYNC_BENCH_SCALE", "100,1000,5000")
    floor_sizes = _sizes("GITSYNC_BENCH_FLOOR", "1000")
    memory_sizes = _sizes("GITSYNC_BENCH_MEMORY", "1000,5000")
    curve_sizes = _sizes("GITSYNC_BENCH_CURVE", "100,1000,5000,10000,20000")
    settings = versus.Settings(
        n=int(os.environ.get("GITSYNC_BENCH_VS_N", "1000")),
        runs=int(os.environ.get("GITSYNC_BENCH_RUNS", "3")),
        interval=float(os.environ.get("GITSYNC_BENCH_INTERVAL", "60")),
    )
    cluster.up()
    # the measuring client: patient, so a loaded API server slows the figures, not the run
    kube = Kube.from_kubeconfig(str(cluster.KUBECONFIG), pool_size=32, timeout=120.0)
    sh(KUBECTL, "apply", "--server-side", "--force-conflicts", "-k", str(ROOT / "crds"))
    # kubectl's and gitsync's copies of the largest size are up at once, next to the
    # operator's: kwok Nodes with room for all of their Pods
    ensure_nodes(kube, 4 * max([N, *scale, *floor_sizes, *memory_sizes]))
    tmp = Path(tempfile.mkdtemp(prefix="gitsync-bench-"))
    out: Results = {"n": N, "facts": report.facts(kube)}
    if min([N, *scale, *floor_sizes, *memory_sizes, *curve_sizes, settings.n]) < 100:
        out["smoke"] = True  # the report says so: sizes this small check the harness only
    if os.environ.get("GITSYNC_BENCH_PROFILE"):
        out["profiled"] = True
    try:
        core_out: Results = {}
        if "core" in parts:
            core_out = core(kube, tmp, N)
            out.update(core_out)
            _partial(out)
        if "scale" in parts:
            out["scale"] = {}
            for n in scale:
                if n == N and "core" in parts:
                    out["scale"][str(n)] = core_out
                    continue
                print(f"bench: scale curve at N={n}", flush=True)
                out["scale"][str(n)] = core(kube, tmp, n, scale_only=True)
                _partial(out)
        if "floor" in parts:
            out["floor"] = floorlib.compare(kube, tmp, floor_sizes)
            _partial(out)
        if "memory" in parts:
            out["memory"] = memorylib.memory(kube, tmp, memory_sizes)
            _partial(out)
        if "versus" in parts:
            out["versus"] = versus.versus(kube, tmp, settings)
            _partial(out)
        if "rollback" in parts:
            out["rollback"] = rollbacklib.rollback(kube, tmp)
            _partial(out)
        if "order" in parts:
            out["order"] = orderlib.chain(kube, tmp)
            _partial(out)
        if "sharding" in parts:
            out["sharding"] = shardinglib.sharding(
                kube,
                tmp,
                int(os.environ.get("GITSYNC_BENCH_SHARD_N", "5000")),
                int(os.environ.get("GITSYNC_BENCH_SHARD_CHURN_N", "1000")),
                int(os.environ.get("GITSYNC_BENCH_SHARD_KILLS", "5")),
            )
            _partial(out)
        if "curve" in parts:
            out["curve"] = curvelib.curve(
                tmp, curve_sizes, lambda so_far: _partial({**out, "curve": so_far})
            )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if out.get("profiled"):
        # figures slowed by the profiler: kept beside the profiles, never as latest.*
        written = report.write(
            out, RESULTS, f"profiled-{dt.date.today().isoformat()}", latest=False
        )
    else:
        if (RESULTS / "latest.json").exists():
            out = report.carry_over(out, json.loads((RESULTS / "latest.json").read_text()), parts)
        written = report.write(out, RESULTS)
    print(report.markdown(out))
    print("bench: results in " + ", ".join(str(p.relative_to(ROOT)) for p in written))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
