"""``make soak``: two replicas of ``gitsync run`` under a steady churn for an hour, sampled
every minute, to find what grows.

On a private control plane (it is restarted once): N MyApps (1000) in Git, a commit every
30 s (five images changed; every fourth commit also adds one MyApp and removes another),
a ``kubectl scale`` of a random Deployment every 10 s (drift, corrected; in the warm-up
each commit and each scale also take the next MyApps in name order, so that every MyApp is
touched once before growth is counted: ``Settings.warmup_share``), a leader
failover every 10 minutes (the leader is paused with SIGSTOP until its Lease lapses and
the standby takes over, then resumed: both processes live the whole run, so each one's
memory is a series of its own), and one kube-apiserver restart past the middle
(``--restarts N``: N, spread evenly after the warm-up; ``--warmup-restart``: one more in
the warm-up, ``--warmup MINUTES``: its length).

Each minute, for each replica: RSS, open file descriptors, threads (from /proc), the
objects in its informer caches against the server's count, its work queue. Replica "b"
traces allocations (``GITSYNC_TRACEMALLOC_DIR``): a heap snapshot at the end of the
warm-up and at the end shows which lines hold what grew. Replica "a" does not, so its
RSS is the daemon's own.

At the end: the driving stops, the namespace must converge to Git; MyApps lost or
re-created, MyApps deleted that Git still named (wrong prunes) and drift left are
counted from the API server; then a third replica is started, and once its caches hold the
fleet, all three are measured (``newcomer``): what the two that ran the whole soak hold
beyond it is what they kept of the churn. Results: ``bench/results/soak-<date>.{json,md,png}``.

    python -m bench.soak [--minutes 60] [--apps 1000]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import signal
import statistics
import tempfile
import time
import tracemalloc
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.common import ROOT, ensure_nodes, kubectl_scale, rss_mib
from gitsync.kube.client import Kube, path_of
from tests.faults.harness import (
    MANAGED,
    Daemon,
    DeletionWatch,
    PrivateControlPlane,
    apps_files,
    verdict,
    wait_converged,
)
from tests.gitserver import Upstream

RESULTS = ROOT / "bench" / "results"
#: a paused leader's Lease lapses after 15 s; 25 s makes the takeover certain
PAUSE_S = 25.0
APISERVER_DOWN_S = 10.0
#: a newcomer's caches full, then two sync passes (every 20 s) settle and tidy its heap
NEWCOMER_SETTLE_S = 45.0


@dataclass
class Settings:
    minutes: float
    apps: int
    commit_every: float = 30.0
    drift_every: float = 10.0
    failover_every: float = 600.0
    #: kube-apiserver restarts, spread evenly past the warm-up
    restarts: int = 1
    #: minutes before growth is counted (None: see ``warmup``)
    warmup_minutes: float | None = None
    #: one more kube-apiserver restart, in the middle of the warm-up
    warmup_restart: bool = False
    sample_every: float = 60.0
    seed: int = 1
    #: in the warm-up, give every MyApp a new image and a ``kubectl scale`` once (see
    #: ``warmup_share``)
    touch_all: bool = True

    @property
    def seconds(self) -> float:
        return self.minutes * 60

    @property
    def warmup(self) -> float:
        """Seconds before growth is counted: caches filled, and each replica has led
        (the first failover is in it): a standby that first leads imports and fills
        what a leader needs."""
        if self.warmup_minutes is not None:
            return self.warmup_minutes * 60
        return min(self.failover_every + 300.0, self.seconds / 4)

    def warmup_share(self, every: float) -> int:
        """How many MyApps each round (a commit, a drift edit: one per ``every`` seconds)
        of the warm-up touches for every MyApp to be touched once in it. The first sync
        makes N Deployments alike but for their names, and a table of shared parts holds
        them as one; each one touched (an image, a scale: new timestamps, managers,
        ReplicaSet names) becomes its own. Counted from an untouched fleet, growth would
        be that, not time: a fleet in use is all touched."""
        rounds = max(1, int(self.warmup // every))
        return -(-self.apps // rounds) if self.touch_all else 0

    def restart_times(self) -> list[float]:
        """When kube-apiserver is restarted: ``restarts`` times, spread evenly past the
        warm-up, and once in the warm-up's middle if asked (a process's first relist
        and first errors cost it once: imports, pools, the allocator's high-water)."""
        span = self.seconds - self.warmup
        step = span / (self.restarts + 1)
        after = [self.warmup + step * (i + 1) for i in range(self.restarts)]
        return [self.warmup / 2, *after] if self.warmup_restart else after


@dataclass
class Replica:
    name: str
    daemon: Daemon
    trace_dir: Path | None = None

    @property
    def pid(self) -> int:
        assert self.daemon.proc is not None
        return self.daemon.proc.pid

    def proc_facts(self) -> dict[str, Any]:
        status = Path(f"/proc/{self.pid}/status").read_text()
        line = next(ln for ln in status.splitlines() if ln.startswith("Threads:"))
        threads = int(line.split()[1])
        fds = len(os.listdir(f"/proc/{self.pid}/fd"))
        return {
            "rss_mib": round(rss_mib(self.pid), 1),
            "rss_by_kind": rss_by_kind(Path(f"/proc/{self.pid}/smaps").read_text()),
            "fds": fds,
            "threads": threads,
        }

    def leads(self) -> bool:
        return self.daemon.metric("gitsync_leader") == 1.0


@dataclass
class World:
    settings: Settings
    kube: Kube
    ns: str
    upstream: Upstream
    replicas: list[Replica]
    rng: random.Random
    images: dict[str, str] = field(default_factory=dict)
    removed: set[str] = field(default_factory=set)
    events: list[dict[str, Any]] = field(default_factory=list)
    samples: list[dict[str, Any]] = field(default_factory=list)
    commits: int = 0
    drift_edits: int = 0
    next_app: int = 0
    #: the warm-up's touches so far, in name order: the last MyApp given a new image, and
    #: the last scaled (a name, not a position: MyApps come and go meanwhile)
    touched: dict[str, str] = field(default_factory=lambda: {"image": "", "scale": ""})
    start: float = field(default_factory=time.monotonic)

    def t(self) -> float:
        return round(time.monotonic() - self.start, 1)

    def event(self, what: str, **facts: Any) -> None:
        self.events.append({"t": self.t(), "what": what, **facts})
        print(f"soak {self.t():7.1f}s {what} {facts or ''}", flush=True)


def _new_app(world: World) -> str:
    name = f"app-{world.next_app:05d}"
    world.next_app += 1
    world.images[name] = "nginx:1.27"
    return name


def commit(world: World) -> None:
    """Five images changed; every fourth commit, one MyApp added and one removed."""
    names = sorted(world.images)
    changed: dict[str, str | None] = {}
    picks = world.rng.sample(names, min(5, len(names)))
    for name in [*picks, *_touches(world, "image", world.settings.commit_every)]:
        world.images[name] = f"nginx:1.27.{world.commits % 50}"
        changed[name] = world.images[name]
    if world.commits % 4 == 3:
        gone = world.rng.choice(sorted(set(names) - set(changed)))
        del world.images[gone]
        world.removed.add(gone)
        files: dict[str, str | None] = {f"apps/{gone}.yaml": None}
        added = _new_app(world)
        changed[added] = world.images[added]
    else:
        files = {}
    files.update(apps_files(world.ns, {n: i for n, i in changed.items() if i is not None}))
    world.upstream.commit(files, f"soak commit {world.commits}")
    world.commits += 1


def _touches(world: World, what: str, every: float) -> list[str]:
    """The MyApps this round of the warm-up touches (none after it)."""
    if world.t() >= world.settings.warmup:
        return []
    share = world.settings.warmup_share(every)
    names = [n for n in sorted(world.images) if n > world.touched[what]][:share]
    if names:
        world.touched[what] = names[-1]
    return names


def drift(world: World) -> None:
    names = [world.rng.choice(sorted(world.images))]
    names += _touches(world, "scale", world.settings.drift_every)
    for name in dict.fromkeys(names):
        try:
            kubectl_scale(world.kube, world.ns, name, 2 + world.drift_edits % 3)
            world.drift_edits += 1
        except Exception as e:  # the API server restarting, or a MyApp just created
            world.event("drift edit failed", app=name, error=type(e).__name__)


def failover(world: World) -> None:
    leader = next((r for r in world.replicas if r.leads()), None)
    if leader is None:
        world.event("failover skipped: no leader")
        return
    os.kill(leader.pid, signal.SIGSTOP)
    time.sleep(PAUSE_S)
    os.kill(leader.pid, signal.SIGCONT)
    deadline = time.monotonic() + 30
    new = None
    while time.monotonic() < deadline and new is None:
        new = next((r.name for r in world.replicas if r is not leader and r.leads()), None)
        time.sleep(0.5)
    world.event("failover", paused=leader.name, now_leading=new)


def live_counts(world: World) -> dict[str, int] | None:
    try:
        return {
            "myapps": len(world.kube.list(path_of("MyApp", world.ns))["items"]),
            "deployments": len(
                world.kube.list(path_of("Deployment", world.ns), params={"labelSelector": MANAGED})[
                    "items"
                ]
            ),
        }
    except Exception:  # the API server restarting
        return None


def inside(r: Replica) -> dict[str, float]:
    """What the C library's allocator and Python hold inside the replica's process."""
    return {
        "malloc_in_use_mib": round(
            r.daemon.metric("gitsync_malloc_bytes", state="in_use") / MIB, 2
        ),
        "malloc_free_mib": round(r.daemon.metric("gitsync_malloc_bytes", state="free") / MIB, 2),
        "python_blocks": r.daemon.metric("gitsync_python_blocks"),
        "shared_nodes": r.daemon.metric("gitsync_shared_nodes"),
    }


def newcomer(world: World, kubeconfig: Path, tmp: Path) -> dict[str, Any]:
    """A third replica, started once the driving has stopped, standing by with the fleet
    as it is now in its caches; then all three measured. What the replicas that ran the
    whole soak hold beyond it is what they kept of the churn; what they gained in the
    soak and it holds too is the fleet itself, grown varied (each MyApp's own images,
    times and conditions: shared by many MyApps while they were new)."""
    daemon = Daemon(
        kubeconfig,
        world.ns,
        world.upstream.file_url,
        tmp / "c.log",
        extra=("--leader-elect", "--instance-name", "soak"),
        interval=20.0,
        cache=tmp / "cache-c",
    )
    replica = Replica("c", daemon)
    daemon.start()
    try:
        live = live_counts(world)
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            cache = {
                i: int(daemon.metric("gitsync_cache_objects", informer=i))
                for i in ("myapps", "deployments")
            }
            if cache == live:
                break
            time.sleep(2.0)
        time.sleep(NEWCOMER_SETTLE_S)
        out: dict[str, Any] = {}
        for r in [*world.replicas, replica]:
            facts: dict[str, Any] = {"rss_mib": round(rss_mib(r.pid), 1), "leader": r.leads()}
            out[r.name] = {**facts, "inside": inside(r)}
        world.event("newcomer measured", **{n: f["inside"] for n, f in out.items()})
        return out
    finally:
        daemon.stop()


def sample(world: World) -> None:
    row: dict[str, Any] = {"t": world.t(), "live": live_counts(world), "replicas": {}}
    for r in world.replicas:
        facts: dict[str, Any] = r.proc_facts()
        facts["leader"] = r.leads()
        facts["cache"] = {
            i: r.daemon.metric("gitsync_cache_objects", informer=i)
            for i in ("myapps", "deployments")
        }
        facts["queue"] = r.daemon.metric("gitsync_workqueue_depth")
        facts["inside"] = inside(r)
        row["replicas"][r.name] = facts
    world.samples.append(row)
    print(f"soak sample {json.dumps(row)}", flush=True)


def snapshot(replica: Replica) -> Path | None:
    """Ask the tracing replica for a heap snapshot; the file it wrote."""
    if replica.trace_dir is None:
        return None
    before = set(replica.trace_dir.glob("*.snapshot"))
    os.kill(replica.pid, signal.SIGUSR2)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        new = set(replica.trace_dir.glob("*.snapshot")) - before
        if new:
            path = new.pop()
            size = -1
            while size != path.stat().st_size:  # written whole
                size = path.stat().st_size
                time.sleep(1.0)
            return path
        time.sleep(0.5)
    return None


def growth_by_line(first: Path, last: Path, top: int = 12) -> list[dict[str, Any]]:
    old, new = tracemalloc.Snapshot.load(str(first)), tracemalloc.Snapshot.load(str(last))
    stats = new.compare_to(old, "lineno")
    out = []
    for s in stats[:top]:
        frame = s.traceback[0]
        where = frame.filename
        for marker in ("/gitsync/", "/site-packages/", "/lib/python3"):
            if marker in where:
                where = where[where.index(marker) + 1 :]
                break
        out.append(
            {
                "where": f"{where}:{frame.lineno}",
                "grew_kib": round(s.size_diff / 1024, 1),
                "now_kib": round(s.size / 1024, 1),
                "blocks_grew": s.count_diff,
            }
        )
    return out


MIB = 1024 * 1024
#: what a mapping of a process holds, by its name in /proc/PID/smaps
RSS_KINDS = ("heap", "anon", "file")


#: sampled from each replica's /metrics (see ``sample``)
INSIDE = ("malloc_in_use_mib", "malloc_free_mib", "python_blocks", "shared_nodes")


def rss_by_kind(smaps: str) -> dict[str, float]:
    """A process's RSS (MiB) split by mapping: the C library's main heap (``[heap]``),
    other anonymous memory (Python's object arenas, the C library's large blocks and
    thread arenas, thread stacks) and mapped files (the interpreter, libraries)."""
    out = dict.fromkeys(RSS_KINDS, 0.0)
    kind = "anon"
    for line in smaps.splitlines():
        head = line.split(maxsplit=6)
        if head and "-" in head[0] and len(head) >= 5:  # a mapping's first line
            name = head[5] if len(head) > 5 else ""
            kind = "heap" if name == "[heap]" else "file" if name.startswith("/") else "anon"
        elif head and head[0] == "Rss:":
            out[kind] += int(head[1]) / 1024
    return {k: round(v, 2) for k, v in out.items()}


def slope_per_hour(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of (seconds, value), per hour."""
    if len(points) < 2:
        return 0.0
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return 0.0 if den == 0 else sum((x - mx) * (y - my) for x, y in points) / den * 3600


def summarize(world: World) -> dict[str, Any]:
    warm = [s for s in world.samples if s["t"] >= world.settings.warmup]
    out: dict[str, Any] = {}
    for r in world.replicas:
        series = [(s["t"], s["replicas"][r.name]) for s in warm]
        rss = [(t, f["rss_mib"]) for t, f in series]
        base = rss[0][1] if rss else 0.0
        slope = slope_per_hour(rss)
        fds = [f["fds"] for _, f in series]
        threads = [f["threads"] for _, f in series]
        mismatched = [
            (t, f["cache"], s_live)
            for (t, f), s_live in zip(series, (s["live"] for s in warm), strict=True)
            if s_live is not None and {k: int(v) for k, v in f["cache"].items()} != s_live
        ]
        out[r.name] = {
            "traced": r.trace_dir is not None,
            "rss_after_warmup_mib": base,
            "rss_end_mib": rss[-1][1] if rss else 0.0,
            "rss_slope_mib_per_hour": round(slope, 2),
            "rss_growth_pct_per_hour": round(100 * slope / base, 2) if base else 0.0,
            "rss_slope_by_kind_mib_per_hour": {
                kind: round(slope_per_hour([(t, f["rss_by_kind"][kind]) for t, f in series]), 2)
                for kind in RSS_KINDS
                if all("rss_by_kind" in f for _, f in series)
            },
            # what the process itself says it holds, after the warm-up and at the end
            "inside": {
                key: [series[0][1]["inside"][key], series[-1][1]["inside"][key]]
                for key in INSIDE
                if series and all("inside" in f for _, f in series)
            },
            "fds_min_max": [min(fds, default=0), max(fds, default=0)],
            "threads_min_max": [min(threads, default=0), max(threads, default=0)],
            "cache_mismatches": len(mismatched),
            "cache_mismatch_examples": mismatched[:3],
            "queue_max": max((f["queue"] for _, f in series), default=0),
        }
    return out


def render(result: dict[str, Any]) -> str:
    s, f = result["settings"], result["figures"]
    lines = [
        f"# Soak, {result['date']}",
        "",
        f"{s['apps']} MyApps, {s['minutes']:.0f} min; a commit every {s['commit_every']:.0f} s "
        f"({result['commits']} commits), a `kubectl scale` every {s['drift_every']:.0f} s "
        f"({result['drift_edits']} edits), a leader failover every "
        f"{s['failover_every'] / 60:.0f} min, kube-apiserver restarts: {s.get('restarts', 1)}"
        f"{' (and one in the warm-up)' if s.get('warmup_restart') else ''}. "
        "Load average at the "
        f"start {result['load_start']}, at the end {result['load_end']} "
        f"({result['cpus']} cores). Growth is counted after a {s['warmup_s'] / 60:.0f}-minute "
        "warm-up"
        + (
            ", in which every MyApp also got a new image and a scale once (edits counted above)."
            if s.get("touch_all")
            else "; the fleet was not touched as a whole in it."
        ),
        "",
        "| replica | RSS after warm-up | at the end | RSS growth | fds (min-max) | "
        "threads (min-max) | cache ≠ server | longest queue |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, r in result["replicas"].items():
        traced = " (tracing allocations)" if r["traced"] else ""
        lines.append(
            f"| {name}{traced} | {r['rss_after_warmup_mib']} MiB | {r['rss_end_mib']} MiB | "
            f"{r['rss_growth_pct_per_hour']} %/h ({r['rss_slope_mib_per_hour']} MiB/h) | "
            f"{r['fds_min_max'][0]}-{r['fds_min_max'][1]} | "
            f"{r['threads_min_max'][0]}-{r['threads_min_max'][1]} | "
            f"{r['cache_mismatches']} of {result['samples_after_warmup']} samples | "
            f"{r['queue_max']:.0f} |"
        )
    for name, r in result["replicas"].items():
        kinds = r.get("rss_slope_by_kind_mib_per_hour")
        if kinds:
            lines += [
                "",
                f"Where replica {name}'s RSS grew (fitted, from /proc/PID/smaps): the C "
                f"library's main heap {kinds['heap']} MiB/h, other anonymous memory (Python's "
                f"object arenas, large blocks, thread stacks) {kinds['anon']} MiB/h, mapped "
                f"files {kinds['file']} MiB/h.",
            ]
        inside = r.get("inside")
        if inside:
            lines[-1] += (
                " What it held after the warm-up and at the end: the C library's allocator "
                f"{inside['malloc_in_use_mib'][0]} and {inside['malloc_in_use_mib'][1]} MiB "
                f"in use, {inside['malloc_free_mib'][0]} and {inside['malloc_free_mib'][1]} "
                f"MiB free; Python {inside['python_blocks'][0]:.0f} and "
                f"{inside['python_blocks'][1]:.0f} blocks; the shared-node table "
                f"{inside['shared_nodes'][0]:.0f} and {inside['shared_nodes'][1]:.0f} nodes."
            )
    lines += [
        "",
        f"At the end: converged in {f['converged_after_s']} s; MyApps lost {f['lost']}, "
        f"re-created {f['recreated']}, wrongly pruned {f['wrong_prunes']} "
        f"(pruned as Git asked: {f['pruned']}), Deployments left drifted {f['drift_left']}.",
        "",
        "Allocations that grew most between the end of the warm-up and the end "
        "(replica b, tracemalloc by line):",
        "",
        "| where | grew | now | blocks |",
        "|---|---|---|---|",
    ]
    for g in result["heap_growth"]:
        lines.append(
            f"| `{g['where']}` | {g['grew_kib']} KiB | {g['now_kib']} KiB | {g['blocks_grew']} |"
        )
    fresh = result.get("newcomer")
    if fresh:
        lines += [
            "",
            "At the end, beside a replica started then (c: its caches filled with the fleet "
            "as it was, standing by), what each process held:",
            "",
            "| replica | role | shared-node table | Python blocks | allocator in use | RSS |",
            "|---|---|---|---|---|---|",
        ]
        for name, r in fresh.items():
            i = r["inside"]
            lines.append(
                f"| {name} | {'leader' if r['leader'] else 'standby'} | "
                f"{i['shared_nodes']:.0f} nodes | {i['python_blocks']:.0f} | "
                f"{i['malloc_in_use_mib']} MiB | {r['rss_mib']} MiB |"
            )
    lines += ["", "Events:", ""]
    lines += [f"- {e['t']:.0f} s: {e['what']}" for e in result["events"] if e["what"] != "commit"]
    return "\n".join(lines) + "\n"


def plot(result: dict[str, Any], path: Path) -> Path | None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("soak: matplotlib is not installed (pip install -e '.[bench]'); no plot")
        return None
    fig, ax = plt.subplots(figsize=(9, 4))
    for name in result["replicas"]:
        ts = [s["t"] / 60 for s in result["samples"]]
        ax.plot(
            ts,
            [s["replicas"][name]["rss_mib"] for s in result["samples"]],
            "o-",
            ms=3,
            label=f"replica {name}" + (" (tracing)" if result["replicas"][name]["traced"] else ""),
        )
    for e in result["events"]:
        if e["what"] in ("failover", "kube-apiserver restarted"):
            ax.axvline(
                e["t"] / 60, color="grey", lw=0.8, ls=":" if e["what"] == "failover" else "--"
            )
    ax.axvspan(0, result["settings"]["warmup_s"] / 60, color="grey", alpha=0.1, label="warm-up")
    ax.set_xlabel("minutes (dotted: failover, dashed: kube-apiserver restart)")
    ax.set_ylabel("RSS, MiB")
    ax.set_title(f"gitsync soak: {result['settings']['apps']} MyApps, RSS over time")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def soak(settings: Settings, tmp: Path) -> dict[str, Any]:
    load_start = [round(x, 2) for x in os.getloadavg()]
    cp = PrivateControlPlane(tmp / "controlplane")
    cp.up()
    kube = Kube.from_kubeconfig(str(cp.kubeconfig))
    try:
        return _soak(settings, tmp, cp, kube, load_start)
    finally:
        kube.close()
        cp.down()


def _soak(
    settings: Settings, tmp: Path, cp: PrivateControlPlane, kube: Kube, load_start: list[float]
) -> dict[str, Any]:
    ns = "soak"
    kube.create(
        "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
    )
    ensure_nodes(kube, settings.apps * 2)
    upstream = Upstream(tmp / "git")
    world = World(settings, kube, ns, upstream, [], random.Random(settings.seed))
    for _ in range(settings.apps):
        _new_app(world)
    upstream.commit(apps_files(ns, world.images), "soak: the fleet")
    for name in ("a", "b"):
        trace = tmp / f"heap-{name}" if name == "b" else None
        daemon = Daemon(
            cp.kubeconfig,
            ns,
            upstream.file_url,
            tmp / f"{name}.log",
            extra=("--leader-elect", "--instance-name", "soak"),
            interval=20.0,
            cache=tmp / f"cache-{name}",
        )
        replica = Replica(name, daemon, trace)
        if trace is not None:
            os.environ["GITSYNC_TRACEMALLOC_DIR"] = str(trace)
        daemon.start()
        os.environ.pop("GITSYNC_TRACEMALLOC_DIR", None)
        world.replicas.append(replica)
    print(f"soak: {settings.apps} MyApps, {settings.minutes} min; logs in {tmp}", flush=True)
    wait_converged(kube, ns, world.images, 900, "the first sync")
    world.event("first sync converged")
    world.start = time.monotonic()
    uids = {
        a["metadata"]["name"]: a["metadata"]["uid"]
        for a in kube.list(path_of("MyApp", ns))["items"]
    }
    first_snapshot: Path | None = None
    restart_times = settings.restart_times()
    due = {"commit": 0.0, "drift": 0.0, "failover": settings.failover_every, "sample": 0.0}
    with DeletionWatch(kube, ns) as deletions:
        while world.t() < settings.seconds:
            now = world.t()
            if now >= due["sample"]:
                sample(world)
                due["sample"] += settings.sample_every
            if first_snapshot is None and now >= settings.warmup:
                first_snapshot = snapshot(world.replicas[1])
                # its name only: the directory is this run's temporary one (printed at the start)
                taken = first_snapshot.name if first_snapshot is not None else None
                world.event("heap snapshot", file=taken)
            if now >= due["commit"]:
                try:
                    commit(world)
                except Exception as e:  # git itself failing is the soak's failure
                    world.event("commit failed", error=str(e))
                    raise
                due["commit"] += settings.commit_every
            if now >= due["drift"]:
                drift(world)
                due["drift"] += settings.drift_every
            if now >= due["failover"]:
                failover(world)
                due["failover"] += settings.failover_every
            if restart_times and now >= restart_times[0]:
                restart_times.pop(0)
                cp.restart("kube-apiserver", APISERVER_DOWN_S, crash=True)
                world.event("kube-apiserver restarted", down_s=APISERVER_DOWN_S)
            time.sleep(0.5)
        sample(world)
        last_snapshot = snapshot(world.replicas[1])
        settle_s, _ = wait_converged(kube, ns, world.images, 900, "the end of the soak")
        time.sleep(5)  # a prune in flight would show in the watch
    fresh = newcomer(world, cp.kubeconfig, tmp)
    final = verdict(kube, ns, world.images)
    live = {
        a["metadata"]["name"]: a["metadata"]["uid"]
        for a in kube.list(path_of("MyApp", ns))["items"]
    }
    deps = kube.list(path_of("Deployment", ns), params={"labelSelector": MANAGED})["items"]
    drift_left = [d["metadata"]["name"] for d in deps if d["spec"].get("replicas") != 1]
    heap = growth_by_line(first_snapshot, last_snapshot) if first_snapshot and last_snapshot else []
    for r in world.replicas:
        r.daemon.stop()
    warm = [s for s in world.samples if s["t"] >= settings.warmup]
    return {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "cpus": os.cpu_count(),
        "load_start": load_start,
        "load_end": [round(x, 2) for x in os.getloadavg()],
        "settings": {**settings.__dict__, "warmup_s": settings.warmup},
        "commits": world.commits,
        "drift_edits": world.drift_edits,
        "samples_after_warmup": len(warm),
        "replicas": summarize(world),
        "figures": {
            "converged_after_s": round(settle_s, 1),
            "lost": len(final.lost),
            "recreated": sum(1 for n, u in uids.items() if n in live and live[n] != u),
            "wrong_prunes": len(set(deletions.deleted) - world.removed),
            "pruned": len(set(deletions.deleted) & world.removed),
            "drift_left": len(drift_left),
        },
        "heap_growth": heap,
        "newcomer": fresh,
        "events": world.events,
        "samples": world.samples,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.soak", description=__doc__)
    parser.add_argument(
        "--minutes", type=float, default=float(os.environ.get("GITSYNC_SOAK_MINUTES", "60"))
    )
    parser.add_argument(
        "--apps", type=int, default=int(os.environ.get("GITSYNC_SOAK_APPS", "1000"))
    )
    parser.add_argument("--commit-every", type=float, default=30.0, metavar="SECONDS")
    parser.add_argument("--drift-every", type=float, default=10.0, metavar="SECONDS")
    parser.add_argument("--failover-every", type=float, default=600.0, metavar="SECONDS")
    parser.add_argument("--restarts", type=int, default=1, help="kube-apiserver restarts")
    parser.add_argument(
        "--warmup", type=float, default=None, metavar="MINUTES", help="before growth counts"
    )
    parser.add_argument(
        "--warmup-restart",
        action="store_true",
        help="one more kube-apiserver restart, in the warm-up",
    )
    parser.add_argument(
        "--untouched",
        action="store_true",
        help="do not touch every MyApp once in the warm-up (growth then counts the fleet "
        "becoming varied)",
    )
    parser.add_argument("--name", default="soak", help="results: bench/results/NAME-<date>.*")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    settings = Settings(
        minutes=args.minutes,
        apps=args.apps,
        commit_every=args.commit_every,
        drift_every=args.drift_every,
        failover_every=args.failover_every,
        restarts=args.restarts,
        warmup_minutes=args.warmup,
        warmup_restart=args.warmup_restart,
        touch_all=not args.untouched,
    )
    # made now, not after the hour: a results directory that cannot be made fails at once
    args.out.mkdir(parents=True, exist_ok=True)
    # kept: the daemons' logs and heap snapshots are what a grown figure is read from
    tmp = Path(tempfile.mkdtemp(prefix="gitsync-soak-"))
    result = soak(settings, tmp)
    stem = args.out / f"{args.name}-{result['date'][:10]}"
    stem.with_suffix(".json").write_text(json.dumps(result, indent=1) + "\n")
    stem.with_suffix(".md").write_text(render(result))
    plot(result, stem.with_suffix(".png"))
    print(render(result))
    bad = result["figures"]
    return 1 if bad["lost"] or bad["recreated"] or bad["wrong_prunes"] or bad["drift_left"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
