"""gitsync and Flux side by side: the same control plane, Git repo, MyApps and operator.

For each run and each tool (the order alternates between runs), a fresh
namespace gets N MyApps from a Git repository served over loopback HTTP:

- ``gitsync``: ``gitsync run --repo …`` (sync loop, webhook and operator in one process);
- ``flux``: source-controller + kustomize-controller, a GitRepository and one
  Kustomization (plain manifests, ``prune: true``), and ``gitsync run`` without
  ``--repo`` (the operator alone), so the Deployments cost the same in both;
- ``flux-tuned``: Flux as its docs advise for many apps: the MyApps split over
  ``Settings.kustomizations`` Kustomizations (one directory each), both controllers
  with ``--concurrent`` raised and the kube-api QPS and burst raised.

The repository is split into those directories for every tool (gitsync and the one
Kustomization read them all, recursively).

Before each run's first tool, a reference for its cold sync: the floor's writes
(bench/floor.py) and the rollout they start, to the same end point.

Then, in that order: cold sync, steady state over whole intervals, a commit
changing 10 % of MyApps, drift on up to 100 MyApps, a commit removing 10 %.
Flux is told of a push the way its Receiver does it: the
``reconcile.fluxcd.io/requestedAt`` annotation on the GitRepository (the Receiver's
HTTP hop is left out; gitsync's webhook hop is measured). The observer is a
list+watch cache of MyApps and Deployments in the run's namespace, polled in memory.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import signal
import statistics
import subprocess
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench import floor as floorlib
from bench import flux as fluxlib
from bench.common import (
    GITSYNC,
    app_yaml,
    namespace,
    proc_cpu_seconds,
    rss_mib,
    server_requests,
    sh,
    wait,
)
from bench.gitserver import GitHttpServer
from gitsync.errors import APINotFoundError
from gitsync.kube.client import Kube, path_of, resource_path
from gitsync.kube.informer import Informer
from testenv import cluster, peers

GIT = ["git", "-c", "user.name=bench", "-c", "user.email=bench@example.com"]
TOOLS = ("gitsync", "flux", "flux-tuned")
#: flux-tuned's controller flags (Flux's vertical-scaling guide: concurrency 10 or
#: more; QPS and burst to match it)
FLUX_TUNED_FLAGS = ("--concurrent=20", "--kube-api-qps=500", "--kube-api-burst=1000")
#: resources whose server-side request counts belong to the tools (plus the
#: controller manager's Deployment status writes, the same in both); not leases:
#: leader election is off for both, and kwok's Node heartbeats are leases
RESOURCES = ("myapps", "deployments", "gitrepositories", "kustomizations", "events", "configmaps")
SECRET = b"bench-secret"
Results = dict[str, Any]


@dataclass(frozen=True)
class Settings:
    n: int
    runs: int = 3
    interval: float = 60.0  # the same poll/reconcile interval for both tools
    steady_intervals: int = 2
    drift: int = 100  # MyApps edited in the drift scenario (at most n)
    timeout: float = 900.0
    #: directories of the repository, and flux-tuned's Kustomizations (one each)
    kustomizations: int = 10


# --- the Git repository ---------------------------------------------------------------


@dataclass
class Repo:
    bare: Path
    work: Path
    url: str
    ns: str
    apps: list[str] = field(default_factory=list)
    shards: int = 1

    def file(self, app: str) -> Path:
        """``apps/sK/<app>.yaml``: the apps in ``shards`` runs of consecutive numbers, so
        that a tenth taken every tenth app (a commit's change, a prune) touches every
        directory, and no directory empties."""
        shard = int(app.rsplit("-", 1)[1]) * self.shards // max(1, len(self.apps))
        return self.work / "apps" / f"s{shard}" / f"{app}.yaml"

    def write(self, app: str, image: str = "nginx:1.27") -> None:
        extra = {"driftPolicy": "report"} if app in _report_apps(self.apps) else {}
        path = self.file(app)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(app_yaml(self.ns, app, image, **extra))

    def git(self, *args: str) -> None:
        subprocess.run([*GIT, "-C", str(self.work), *args], check=True, capture_output=True)

    def push(self, message: str) -> None:
        self.git("add", "--all")
        self.git("commit", "-qm", message)
        self.git("push", "-q", str(self.bare), "main")


def make_repo(
    root: Path, server: GitHttpServer, name: str, ns: str, n: int, shards: int = 1
) -> Repo:
    bare, work = root / f"{name}.git", root / f"{name}-work"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(bare)], check=True)
    (work / "apps").mkdir(parents=True)
    subprocess.run([*GIT, "init", "-q", "-b", "main", str(work)], check=True)
    apps = [f"app-{i:04d}" for i in range(n)]
    repo = Repo(bare, work, server.url(bare.name), ns, apps, shards)
    for app in repo.apps:
        repo.write(app)
    repo.push("apps")
    return repo


# --- the processes under test ---------------------------------------------------------


def _gitsync_requests(port: int) -> Counter[str]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        text = r.read().decode()
    out: Counter[str] = Counter()
    for line in text.splitlines():
        if line.startswith("gitsync_api_requests_total{"):
            verb = line.split('verb="', 1)[1].split('"', 1)[0]
            out[verb] += int(float(line.rsplit(" ", 1)[1]))
    return out


@dataclass
class Running:
    """One tool's processes: ``main`` are the tool's own (measured for CPU, RSS and
    requests); ``operator`` is gitsync's operator alone in the Flux runs."""

    tool: str
    main_pids: list[int]
    requests: Callable[[], Counter[str]]
    stop: Callable[[], None]
    notify: Callable[[int], None]  # tell the tool of push number i
    procs: list[tuple[subprocess.Popen[bytes], Path]] = field(default_factory=list)
    operator_pid: int | None = None

    def check(self) -> None:
        """Fail at once, naming the log, when a process under test has exited."""
        for proc, log in self.procs:
            if proc.poll() is not None:
                raise RuntimeError(f"{self.tool}: a process exited ({proc.returncode}); log {log}")


def _gitsync_process(argv: list[str], log: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "KUBECONFIG": str(cluster.KUBECONFIG), "GITSYNC_LOG_FORMAT": "json"}
    with log.open("ab") as out:
        return subprocess.Popen(
            argv, env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
        )


def _stop_process(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)


def _gitsync_argv(ns: str, port: int, tmp: Path, extra: list[str]) -> list[str]:
    return [
        GITSYNC,
        "run",
        "--watch-namespace",
        ns,
        "--status-namespace",
        ns,
        "--no-leader-elect",  # as Flux is run here
        "--listen",
        f"127.0.0.1:{port}",
        *extra,
    ]


def start_gitsync(repo: Repo, tmp: Path, s: Settings, extra: tuple[str, ...] = ()) -> Running:
    port = cluster.free_port()
    secret = tmp / "webhook-secret"
    secret.write_bytes(SECRET)
    argv = _gitsync_argv(
        repo.ns,
        port,
        tmp,
        [
            "--repo",
            repo.url,
            "--allow-insecure-git",  # plain http:// on loopback
            "--path",
            "apps",
            "--interval",
            str(s.interval),
            "--jitter",
            "0",
            "--webhook-secret-file",
            str(secret),
            "--cache-dir",
            str(tmp / "gitsync-cache"),
            *extra,
        ],
    )
    log = cluster.STATE / "logs" / "bench-gitsync.log"
    proc = _gitsync_process(argv, log)

    def notify(i: int) -> None:
        # a body per push, as a Git host sends: gitsync ignores a repeated one as a replay
        body = b'{"ref":"refs/heads/main","after":"%d"}' % i
        sig = "sha256=" + hmac.new(SECRET, body, hashlib.sha256).hexdigest()
        req = urllib.request.Request(f"http://127.0.0.1:{port}/hooks/git", data=body)
        req.add_header("X-Hub-Signature-256", sig)
        urllib.request.urlopen(req, timeout=10).close()

    return Running(
        "gitsync",
        [proc.pid],
        lambda: _gitsync_requests(port),
        lambda: _stop_process(proc),
        notify,
        [(proc, log)],
    )


def _kustomizations(repo: Repo, tuned: bool) -> dict[str, str]:
    """Name → path: one over every directory, or (tuned) one per directory."""
    if not tuned:
        return {"bench": "./apps"}
    return {f"bench-{k}": f"./apps/s{k}" for k in range(repo.shards)}


def start_flux(kube: Kube, repo: Repo, tmp: Path, s: Settings, *, tuned: bool = False) -> Running:
    port = cluster.free_port()
    log = cluster.STATE / "logs" / "bench-operator.log"
    operator = _gitsync_process(_gitsync_argv(repo.ns, port, tmp, []), log)
    flux = fluxlib.Flux()
    kustomizations = _kustomizations(repo, tuned)
    try:
        flux = fluxlib.start(tmp, FLUX_TUNED_FLAGS if tuned else ())
        every = f"{s.interval:g}s"
        # created with the controllers just started, as gitsync's repo is given at its
        # start: both cold syncs count from the same moment, process start included
        kube.create(
            resource_path("source.toolkit.fluxcd.io/v1", "gitrepositories", repo.ns),
            fluxlib.git_repository(repo.ns, repo.url, every),
        )
        for name, path in kustomizations.items():
            kube.create(
                resource_path("kustomize.toolkit.fluxcd.io/v1", "kustomizations", repo.ns),
                fluxlib.kustomization(repo.ns, every, name, path),
            )
    except BaseException:
        flux.stop()
        _stop_process(operator)
        raise

    def notify(i: int) -> None:
        # what Flux's Receiver does on a push: ask the source to reconcile now
        kube.request(
            "PATCH",
            resource_path("source.toolkit.fluxcd.io/v1", "gitrepositories", repo.ns, "bench"),
            body={"metadata": {"annotations": {"reconcile.fluxcd.io/requestedAt": f"push-{i}"}}},
            content_type="application/merge-patch+json",
        )

    def stop() -> None:
        # the Flux objects go while their controllers still run: a Kustomization
        # keeps a finalizer, and with no controller to lift it the namespace would
        # stay Terminating for good
        paths = [
            *(
                resource_path("kustomize.toolkit.fluxcd.io/v1", "kustomizations", repo.ns, k)
                for k in kustomizations
            ),
            resource_path("source.toolkit.fluxcd.io/v1", "gitrepositories", repo.ns, "bench"),
        ]
        try:
            # their objects are left to the namespace's deletion: a Kustomization that
            # prunes deletes its whole inventory before it lets its finalizer go (minutes
            # at 5000 objects, and not a figure of the run)
            for path in paths[:-1]:
                with contextlib.suppress(APINotFoundError):
                    kube.request(
                        "PATCH",
                        path,
                        body={"spec": {"prune": False}},
                        content_type="application/merge-patch+json",
                    )
            for path in paths:
                with contextlib.suppress(APINotFoundError):
                    kube.delete(path)
            wait(
                "the Flux objects to go",
                lambda: not any(_exists(kube, p) for p in paths),
                s.timeout,
            )
        finally:
            flux.stop()
            _stop_process(operator)

    procs = [(c.proc, c.log) for c in flux.controllers] + [(operator, log)]
    tool = "flux-tuned" if tuned else "flux"
    return Running(tool, flux.pids, flux.requests, stop, notify, procs, operator.pid)


def _exists(kube: Kube, path: str) -> bool:
    try:
        kube.get(path)
    except APINotFoundError:
        return False
    return True


# --- what the cluster holds ------------------------------------------------------------


class Observer:
    """List+watch caches of the run's MyApps and Deployments."""

    def __init__(self, kube: Kube, ns: str) -> None:
        self.myapps = Informer(kube, path_of("MyApp", ns), name="bench-myapps")
        self.deployments = Informer(kube, path_of("Deployment", ns), name="bench-deployments")
        self.ns = ns
        #: every version of a tracked MyApp the watch delivered, with when it arrived
        self._seen: dict[str, list[tuple[float, dict[str, Any]]]] = {}
        self._lock = threading.Lock()
        self.myapps.add_handler(self._arrived)

    def _arrived(self, _kind: str, obj: dict[str, Any]) -> None:
        now = time.perf_counter()
        with self._lock:
            seen = self._seen.get(obj["metadata"]["name"])
            if seen is not None:
                seen.append((now, obj))

    def track(self, names: list[str]) -> None:
        """Record, from now on, each version of these MyApps as the watch delivers it."""
        with self._lock:
            for name in names:
                self._seen[name] = []

    def first_seen(
        self, name: str, done: Callable[[dict[str, Any], int], bool], generation: int
    ) -> float | None:
        """When the watch first delivered a version of tracked ``name`` that is
        ``done(version, generation)``."""
        with self._lock:
            versions = list(self._seen.get(name, ()))
        return next((t for t, obj in versions if done(obj, generation)), None)

    def __enter__(self) -> Observer:
        for inf in (self.myapps, self.deployments):
            inf.start()
            if not inf.wait_synced(120):
                raise RuntimeError(f"the observer's {inf.name} did not sync")
        return self

    def __exit__(self, *exc: object) -> None:
        self.myapps.stop()
        self.deployments.stop()

    def myapp(self, name: str) -> dict[str, Any]:
        return self.myapps.get(f"{self.ns}/{name}") or {}

    def all_available(self, names: list[str]) -> bool:
        for name in names:
            dep = self.deployments.get(f"{self.ns}/{name}")
            if dep is None or not self.myapp(name):
                return False
            want = dep.get("spec", {}).get("replicas", 1)
            if (dep.get("status") or {}).get("availableReplicas") != want:
                return False
        return True


def _spread(values: list[float]) -> dict[str, float]:
    if not values:
        return {}
    qs = sorted(values)
    return {
        "p50": round(statistics.median(qs), 3),
        "p99": round(qs[min(len(qs) - 1, round(0.99 * (len(qs) - 1)))], 3),
        "max": round(qs[-1], 3),
    }


def _watch_times(
    names: list[str],
    t0: dict[str, float],
    done_at: Callable[[str], float | None],
    timeout: float,
) -> list[float]:
    """Seconds from each name's ``t0`` until the moment ``done_at(name)`` names (None:
    not done yet), asked every 10 ms."""
    left, out = set(names), {}
    deadline = time.perf_counter() + timeout
    while left and time.perf_counter() < deadline:
        for name in list(left):
            at = done_at(name)
            if at is not None:
                out[name] = at - t0[name]
                left.discard(name)
        time.sleep(0.01)
    if left:
        raise RuntimeError(f"{len(left)} of {len(names)} not done within {timeout:.0f}s")
    return [out[n] for n in names]


def _polled(done: Callable[[str], bool]) -> Callable[[str], float | None]:
    """``done`` as a moment: now, when it holds now."""
    return lambda name: time.perf_counter() if done(name) else None


# --- one run of one tool ----------------------------------------------------------------


def one_run(
    kube: Kube, server: GitHttpServer, tmp: Path, tool: str, run: int, s: Settings
) -> Results:
    ns = namespace(kube, f"vs-{tool}-{run}")
    repo = make_repo(tmp, server, f"{tool}-{run}", ns, s.n, s.kustomizations)
    out: Results = {}
    with Observer(kube, ns) as obs:
        t0 = time.perf_counter()
        if tool == "gitsync":
            running = start_gitsync(repo, tmp, s)
        else:
            running = start_flux(kube, repo, tmp, s, tuned=tool == "flux-tuned")
        try:

            def synced() -> bool:
                running.check()
                return obs.all_available(repo.apps)

            wait("cold sync", synced, s.timeout, every=0.05)
            out["cold_sync_s"] = round(time.perf_counter() - t0, 3)
            _steady(kube, running, s, out)
            _diff(repo, tool, out)
            _change(obs, repo, running, s, out)
            _drift(kube, obs, repo, tool, s, out)
            _prune(obs, repo, running, s, out)
        finally:
            running.stop()
    # gone before the next tool starts: the garbage collector deleting N Deployments,
    # ReplicaSets and Pods would load the server through the next tool's cold sync
    sh(
        *_kubectl(),
        "delete",
        "namespace",
        ns,
        "--wait=true",
        f"--timeout={s.timeout:g}s",
        check=False,
    )
    return out


def _kubectl() -> list[str]:
    return [str(cluster.STATE / "bin" / "kubectl")]


def _steady(kube: Kube, running: Running, s: Settings, out: Results) -> None:
    # settle first: the first interval after a cold sync still carries its tail
    time.sleep(min(s.interval, 10.0))
    pids = running.main_pids + ([running.operator_pid] if running.operator_pid else [])
    cpu0 = {p: proc_cpu_seconds(p) for p in pids}
    server0, client0 = server_requests(kube, RESOURCES), running.requests()
    time.sleep(s.interval * s.steady_intervals)
    client = running.requests() - client0
    server = server_requests(kube, RESOURCES) - server0
    k = s.steady_intervals
    tool_cpu = sum(proc_cpu_seconds(p) - cpu0[p] for p in running.main_pids)
    out["steady"] = {
        "client_requests_per_interval": {v: round(n / k, 1) for v, n in sorted(client.items())},
        "client_requests_per_interval_total": round(sum(client.values()) / k, 1),
        "server_requests_per_interval": {v: round(n / k, 1) for v, n in sorted(server.items())},
        "cpu_s_per_interval": round(tool_cpu / k, 3),
        "rss_mib": round(sum(rss_mib(p) for p in running.main_pids), 1),
    }
    if running.operator_pid:
        op = running.operator_pid
        out["steady"]["operator_cpu_s_per_interval"] = round(
            (proc_cpu_seconds(op) - cpu0[op]) / k, 3
        )
        out["steady"]["operator_rss_mib"] = round(rss_mib(op), 1)


def _diff(repo: Repo, tool: str, out: Results) -> None:
    """Nothing changed: ``gitsync diff`` of the work tree in the gitsync runs, ``flux diff
    kustomization`` of each Kustomization (or, without the flux CLI, ``kubectl diff
    --server-side``) in Flux's, one after the other."""
    argvs: list[list[str]] = []
    if tool == "gitsync":
        argv = [GITSYNC, "diff", "--repo", str(repo.work), "--instance-repo", repo.url]
        argvs.append([*argv, "--path", "apps"])
    elif peers.binary("flux").exists():
        for name, path in _kustomizations(repo, tool == "flux-tuned").items():
            argv = [str(peers.binary("flux")), "diff", "kustomization", name, "-n", repo.ns]
            argv += ["--path", str(repo.work / path), "--kubeconfig", str(cluster.KUBECONFIG)]
            argvs.append(argv)
    else:
        argv = [*_kubectl(), "diff", "--server-side", "--field-manager=kustomize-controller"]
        argvs.append([*argv, "-R", "-f", str(repo.work / "apps")])
    start = time.perf_counter()
    codes = [sh(*argv, check=False).returncode for argv in argvs]
    first = argvs[0]
    out["diff"] = {
        "command": " ".join(Path(first[0]).name if i == 0 else a for i, a in enumerate(first[:3])),
        "commands": len(argvs),
        "s": round(time.perf_counter() - start, 3),
        "exit": max(codes),
    }


def _tenth(repo: Repo, offset: int) -> list[str]:
    step = 10
    return repo.apps[offset::step] or repo.apps[:1]


def _change(obs: Observer, repo: Repo, running: Running, s: Settings, out: Results) -> None:
    changed = _tenth(repo, 0)
    for app in changed:
        repo.write(app, image="nginx:1.28")
    repo.push("change a tenth")
    start = time.perf_counter()
    running.notify(1)

    def applied(name: str) -> bool:
        return bool(obs.myapp(name).get("spec", {}).get("image") == "nginx:1.28")

    times = _watch_times(changed, dict.fromkeys(changed, start), _polled(applied), s.timeout)
    out["push_to_applied_s"] = {"objects": len(changed), "all": round(max(times), 3)}


def _report_apps(apps: list[str]) -> list[str]:
    """MyApps that Git gives ``driftPolicy: report`` (the last tenth, at most 10):
    gitsync records their drift in status and leaves it; Flux, which knows no such
    policy, reverts them like the others."""
    return apps[-max(1, min(10, len(apps) // 10)) :]


#: an edit: when its request left, and the generation the server gave the MyApp by it
Edit = tuple[float, int]


def _edit_replicas(
    kube: Kube, obs: Observer, ns: str, names: list[str], replicas: int
) -> dict[str, Edit]:
    """What ``kubectl patch``/``edit`` sends (an Update under the manager ``kubectl``),
    one MyApp after another. The observer records what the watch delivers from the
    first request on, so an answer to an early edit is timed when it arrives, not
    when the last edit has been sent."""
    obs.track(names)
    edits: dict[str, Edit] = {}
    for name in names:
        t0 = time.perf_counter()
        edited = kube.request(
            "PATCH",
            path_of("MyApp", ns, name),
            params={"fieldManager": "kubectl"},
            body={"spec": {"replicas": replicas}},
            content_type="application/merge-patch+json",
        )
        edits[name] = (t0, int(edited["metadata"]["generation"]))
    return edits


def _answer_times(
    obs: Observer,
    edits: dict[str, Edit],
    answered: Callable[[dict[str, Any], int], bool],
    timeout: float,
) -> list[float]:
    """Seconds from each edit until the watch delivered a version of its MyApp that
    ``answered(obj, generation of the edit)``."""
    t0 = {name: sent for name, (sent, _) in edits.items()}
    return _watch_times(
        list(edits), t0, lambda n: obs.first_seen(n, answered, edits[n][1]), timeout
    )


def _drift(kube: Kube, obs: Observer, repo: Repo, tool: str, s: Settings, out: Results) -> None:
    """Edit ``spec.replicas`` of up to ``drift`` MyApps (policy correct): time from each
    edit until the watch delivers it reverted. Then, gitsync only, of the report-policy
    MyApps: until the drift is visible in ``status.drift`` (Flux records drift nowhere)."""
    report = set(_report_apps(repo.apps))
    names = [a for a in repo.apps if a not in report][: s.drift]
    edits = _edit_replicas(kube, obs, repo.ns, names, 3)

    def reverted(obj: dict[str, Any], gen: int) -> bool:
        later = int(obj["metadata"].get("generation", 0)) > gen
        return later and obj.get("spec", {}).get("replicas") == 1

    out["drift"] = {
        "objects": len(names),
        "reverted_s": _spread(_answer_times(obs, edits, reverted, s.timeout)),
    }
    if tool != "gitsync":
        out["drift"]["in_status_s"] = None
        return
    shown = sorted(report)
    edits = _edit_replicas(kube, obs, repo.ns, shown, 3)

    def in_status(obj: dict[str, Any], _gen: int) -> bool:
        drift = (obj.get("status") or {}).get("drift") or []
        return any(d.get("path") == "spec.replicas" and d.get("live") == 3 for d in drift)

    out["drift"]["in_status_s"] = _spread(_answer_times(obs, edits, in_status, s.timeout))
    out["drift"]["in_status_objects"] = len(shown)


def _prune(obs: Observer, repo: Repo, running: Running, s: Settings, out: Results) -> None:
    removed = _tenth(repo, 5)
    for app in removed:
        repo.file(app).unlink()
    repo.push("remove a tenth")
    start = time.perf_counter()
    running.notify(2)
    gone = _polled(lambda n: not obs.myapp(n))
    times = _watch_times(removed, dict.fromkeys(removed, start), gone, s.timeout)
    out["prune_s"] = {"objects": len(removed), "all": round(max(times), 3)}


# --- all runs -----------------------------------------------------------------------------


def install_flux_crds() -> None:
    for crd in fluxlib.crd_files():
        sh(*_kubectl(), "apply", "--server-side", "--force-conflicts", "-f", str(crd))
    for name in (
        "gitrepositories.source.toolkit.fluxcd.io",
        "kustomizations.kustomize.toolkit.fluxcd.io",
    ):
        sh(*_kubectl(), "wait", "--for=condition=Established", f"crd/{name}", "--timeout=60s")


def _runs(s: Settings) -> Iterator[tuple[int, str]]:
    for run in range(s.runs):
        # alternate who goes first, so neither always meets a fresher cluster
        for tool in TOOLS if run % 2 == 0 else tuple(reversed(TOOLS)):
            yield run, tool


def versus(kube: Kube, tmp: Path, s: Settings) -> Results:
    install_flux_crds()
    per_tool: dict[str, list[Results]] = {t: [] for t in TOOLS}
    floors: list[float] = []
    with GitHttpServer(tmp) as server:
        for run, tool in _runs(s):
            if len(floors) == run:  # once a run, before its first tool
                print(f"bench: versus run {run + 1}/{s.runs}: the floor (N={s.n})", flush=True)
                floors.append(floor_rolled_out(kube, s))
            print(f"bench: versus run {run + 1}/{s.runs}: {tool} (N={s.n})", flush=True)
            per_tool[tool].append(one_run(kube, server, tmp, tool, run, s))
    return {
        "n": s.n,
        "runs": s.runs,
        "interval_s": s.interval,
        "kustomizations": s.kustomizations,
        "flux_tuned_flags": " ".join(FLUX_TUNED_FLAGS),
        "runs_by_tool": per_tool,
        "summary": {t: summarize(rs) for t, rs in per_tool.items()},
        "floor_rolled_out_s": _median_spread(floors),
    }


def floor_rolled_out(kube: Kube, s: Settings) -> float:
    """A reference for ``cold_sync_s``: the floor's writes (the fewest a cold sync needs,
    from a bare client as fast as it can: bench/floor.py) and the rollout they start,
    timed to the tools' end point (every MyApp's Deployment Available). The rollout is
    the controller manager's, the scheduler's and kwok's work whoever wrote the objects,
    so no tool is far below it (one that writes more slowly lets the rollout begin
    while it writes, and may end a little under it). Its namespace is gone before the
    next tool starts: the deletion of 1000 Deployments and Pods would slow that tool."""
    ns = namespace(kube, "vs-floor")
    names = [f"app-{i:04d}" for i in range(s.n)]
    with Observer(kube, ns) as obs:
        t0 = time.perf_counter()
        floorlib.write(kube, ns, names, floorlib.WORKERS[-1])
        wait("the floor rolled out", lambda: obs.all_available(names), s.timeout, every=0.05)
        took = time.perf_counter() - t0
    sh(*_kubectl(), "delete", "namespace", ns, "--wait=true", timeout=s.timeout)
    return took


FIGURES: dict[str, Callable[[Results], float]] = {
    "cold_sync_s": lambda r: float(r["cold_sync_s"]),
    "requests_per_interval": lambda r: float(r["steady"]["client_requests_per_interval_total"]),
    "cpu_s_per_interval": lambda r: float(r["steady"]["cpu_s_per_interval"]),
    "rss_mib": lambda r: float(r["steady"]["rss_mib"]),
    "push_to_applied_s": lambda r: float(r["push_to_applied_s"]["all"]),
    "drift_reverted_p50_s": lambda r: float(r["drift"]["reverted_s"]["p50"]),
    "prune_s": lambda r: float(r["prune_s"]["all"]),
    "diff_nothing_changed_s": lambda r: float(r["diff"]["s"]),
}


def summarize(runs: list[Results]) -> dict[str, dict[str, float]]:
    """Median and spread (min, max) of each figure over the runs."""
    return {name: _median_spread([get(r) for r in runs]) for name, get in FIGURES.items()}


def _median_spread(values: list[float]) -> dict[str, float]:
    return {
        "median": round(statistics.median(values), 3),
        "min": round(min(values), 3),
        "max": round(max(values), 3),
    }
