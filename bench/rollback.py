"""A commit that breaks apps: gitsync with ``--rollback auto`` next to Flux, one run each.

The repository holds N MyApps (GITSYNC_BENCH_ROLLBACK_N, default 20), each with
``progressDeadlineSeconds`` D (GITSYNC_BENCH_DEADLINE, default 10). Once all are
Available (and, for gitsync, each has a last healthy spec), one commit gives B of them
(GITSYNC_BENCH_BROKEN, default 10) an image tagged ``broken``, whose Pods kwok never
makes Ready (testenv/kwok/pod-never-ready.yaml): the deployment controller itself
reports ``ProgressDeadlineExceeded``.

Measured per broken app, from a watch of the Deployments (one observer for both tools):

- ``to_available_s``: from the push to the Deployment Available again on the old image;
- ``added_s``: from the deadline condition seen to the old image seen back in the
  Deployment's template: the time gitsync itself adds past the deadline (both seen by
  the same watch, so its latency cancels out).

Flux (source-controller + kustomize-controller applying the same MyApps, and gitsync's
operator alone rendering their Deployments) has no rollback: the figure for it is how
many of the broken apps are still not Available when the run ends, at least
``GITSYNC_BENCH_ROLLBACK_WAIT`` (default 30) seconds past the last deadline seen.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench import versus
from bench.common import KUBECTL, app_yaml, image_of, namespace, sh, wait
from bench.gitserver import GitHttpServer
from gitsync.kube.client import Kube
from gitsync.model import rollout

Results = dict[str, Any]
GOOD, BROKEN = "nginx:1.27", "nginx:broken"


@dataclass(frozen=True)
class Settings:
    n: int = int(os.environ.get("GITSYNC_BENCH_ROLLBACK_N", "20"))
    broken: int = int(os.environ.get("GITSYNC_BENCH_BROKEN", "10"))
    deadline: int = int(os.environ.get("GITSYNC_BENCH_DEADLINE", "10"))
    #: how long past the last deadline Flux's apps are watched for a recovery
    wait: float = float(os.environ.get("GITSYNC_BENCH_ROLLBACK_WAIT", "30"))
    timeout: float = 300.0


def deployment_available(dep: dict[str, Any]) -> bool:
    st = dep.get("status") or {}
    want = dep["spec"].get("replicas", 1)
    return (
        st.get("observedGeneration") == dep["metadata"].get("generation")
        and st.get("updatedReplicas") == want
        and st.get("availableReplicas") == want
        and not st.get("unavailableReplicas")
    )


@dataclass
class Timeline:
    """When the watch first delivered each step of one broken app's Deployment."""

    broken: float | None = None
    deadline: float | None = None
    restored: float | None = None
    available: float | None = None


@dataclass
class Watch:
    """Per-app timelines from the observer's Deployment watch, from ``track`` on."""

    names: set[str]
    timelines: dict[str, Timeline] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def arrived(self, _kind: str, dep: dict[str, Any]) -> None:
        now = time.perf_counter()
        name = dep["metadata"]["name"]
        if name not in self.names:
            return
        with self.lock:
            t = self.timelines.setdefault(name, Timeline())
            image = image_of(dep)
            if image == BROKEN and t.broken is None:
                t.broken = now
            if t.broken is not None and t.deadline is None and rollout.failure(dep):
                t.deadline = now
            if t.deadline is not None and image == GOOD and t.restored is None:
                t.restored = now
            if t.restored is not None and t.available is None and deployment_available(dep):
                t.available = now


def _write(repo: versus.Repo, app: str, image: str, s: Settings) -> None:
    text = app_yaml(repo.ns, app, image, progressDeadlineSeconds=s.deadline)
    (repo.work / "apps" / f"{app}.yaml").write_text(text)


def _repo(root: Path, server: GitHttpServer, name: str, ns: str, s: Settings) -> versus.Repo:
    bare, work = root / f"{name}.git", root / f"{name}-work"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(bare)], check=True)
    (work / "apps").mkdir(parents=True)
    subprocess.run([*versus.GIT, "init", "-q", "-b", "main", str(work)], check=True)
    repo = versus.Repo(bare, work, server.url(bare.name), ns, [f"app-{i:03d}" for i in range(s.n)])
    for app in repo.apps:
        _write(repo, app, GOOD, s)
    repo.push("apps")
    return repo


def _since(start: float | None, end: float | None) -> float:
    assert start is not None and end is not None  # (waited for)
    return end - start


def _spread(values: list[float]) -> dict[str, float]:
    if not values:
        return {}
    return {"p50": round(statistics.median(values), 2), "max": round(max(values), 2)}


def one_tool(kube: Kube, tmp: Path, server: GitHttpServer, tool: str, s: Settings) -> Results:
    ns = namespace(kube, f"bench-rollback-{tool}")
    repo = _repo(tmp, server, f"rollback-{tool}", ns, s)
    vs = versus.Settings(n=s.n, interval=3600)
    running = (
        versus.start_gitsync(repo, tmp, vs, ("--rollback", "auto"))
        if tool == "gitsync"
        else versus.start_flux(kube, repo, tmp, vs)
    )
    out: Results = {"n": s.n, "broken": s.broken, "deadline_s": s.deadline}
    try:
        with versus.Observer(kube, ns) as obs:

            def settled() -> bool:
                running.check()
                if not obs.all_available(repo.apps):
                    return False
                # gitsync rolls back to the last healthy spec: wait until each has one
                return tool != "gitsync" or all(
                    (obs.myapp(a).get("status") or {}).get("lastHealthy") for a in repo.apps
                )

            wait(f"{tool}: every app Available", settled, s.timeout)
            broken = repo.apps[: s.broken]
            watch = Watch(set(broken))
            obs.deployments.add_handler(watch.arrived)
            for app in broken:
                _write(repo, app, BROKEN, s)
            pushed = time.perf_counter()
            repo.push("break")
            running.notify(1)

            def answered() -> bool:
                running.check()
                with watch.lock:
                    lines = [watch.timelines.get(a) for a in broken]
                if tool == "gitsync":
                    return all(t is not None and t.available for t in lines)
                deadlines = [t.deadline for t in lines if t is not None and t.deadline]
                return len(deadlines) == len(broken) and (
                    time.perf_counter() - max(deadlines) >= s.wait
                )

            wait(f"{tool}: the broken apps answered", answered, s.timeout)
            with watch.lock:
                lines = [watch.timelines[a] for a in broken]
            if tool == "gitsync":
                out["to_available_s"] = _spread([_since(pushed, t.available) for t in lines])
                out["added_s"] = _spread([_since(t.deadline, t.restored) for t in lines])
                out["deadline_after_push_s"] = _spread([_since(pushed, t.deadline) for t in lines])
            else:
                last = max(t.deadline for t in lines if t.deadline)
                out["watched_past_deadline_s"] = round(time.perf_counter() - last, 1)
                out["still_degraded"] = sum(
                    1
                    for a in broken
                    if not deployment_available(obs.deployments.get(f"{ns}/{a}") or {"spec": {}})
                    or image_of(obs.deployments.get(f"{ns}/{a}") or {}) == BROKEN
                )
    finally:
        running.stop()
        # its MyApps would stay Available (or Degraded) on the shared control plane
        sh(KUBECTL, "delete", "namespace", ns, "--wait=false", check=False)
    return out


def rollback(kube: Kube, tmp: Path, s: Settings | None = None) -> Results:
    s = s or Settings()
    versus.install_flux_crds()
    with GitHttpServer(tmp) as server:
        out: Results = {}
        for tool in versus.TOOLS:
            print(f"bench: rollback, {tool}", flush=True)
            out[tool] = one_tool(kube, tmp, server, tool, s)
        return out
