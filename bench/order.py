"""A chain of MyApps changed by one commit: how long dependsOn makes it take, and what
gitsync itself adds per link.

The repository holds a chain of N MyApps (GITSYNC_BENCH_CHAIN_N, default 10): link i
depends on link i-1. Once all are Available, one commit changes every link's image. The
daemon (one pass, then events alone: its poll interval is an hour) applies link 0, waits
for its rollout, then link 1, and so on.

Measured from one watch of the Deployments (the observer's, not gitsync's account):

- ``to_last_applied_s``: from the push to the last link's new template seen;
- ``to_last_available_s``: from the push to the last link Available on it;
- ``per_link_s``: for each link after the first, from its dependency seen Available on
  the new template to its own new template seen: gitsync's delay per link beyond the
  rollout itself (both seen by the same watch, so its latency cancels out).
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
from bench.rollback import deployment_available
from gitsync.kube.client import Kube

Results = dict[str, Any]
OLD, NEW = "nginx:1.27", "nginx:1.28"


@dataclass(frozen=True)
class Settings:
    n: int = int(os.environ.get("GITSYNC_BENCH_CHAIN_N", "10"))
    timeout: float = 300.0


@dataclass
class Watch:
    """When the watch first delivered each link's new template, and it Available."""

    applied: dict[str, float] = field(default_factory=dict)
    available: dict[str, float] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def arrived(self, _kind: str, dep: dict[str, Any]) -> None:
        now = time.perf_counter()
        name = dep["metadata"]["name"]
        if image_of(dep) != NEW:
            return
        with self.lock:
            self.applied.setdefault(name, now)
            if deployment_available(dep):
                self.available.setdefault(name, now)


def _write(repo: versus.Repo, i: int, image: str) -> None:
    app = repo.apps[i]
    extra = {"dependsOn": f"[{{name: {repo.apps[i - 1]}}}]"} if i else {}
    (repo.work / "apps" / f"{app}.yaml").write_text(app_yaml(repo.ns, app, image, **extra))


def _spread(values: list[float]) -> dict[str, float]:
    if not values:
        return {}
    return {
        "p50": round(statistics.median(values), 3),
        "max": round(max(values), 3),
    }


def chain(kube: Kube, tmp: Path, s: Settings | None = None) -> Results:
    s = s or Settings()
    with GitHttpServer(tmp) as server:
        ns = namespace(kube, "bench-chain")
        bare, work = tmp / "chain.git", tmp / "chain-work"
        subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(bare)], check=True)
        (work / "apps").mkdir(parents=True)
        subprocess.run([*versus.GIT, "init", "-q", "-b", "main", str(work)], check=True)
        apps = [f"link-{i:02d}" for i in range(s.n)]
        repo = versus.Repo(bare, work, server.url(bare.name), ns, apps)
        for i in range(s.n):
            _write(repo, i, OLD)
        repo.push("chain")
        running = versus.start_gitsync(repo, tmp, versus.Settings(n=s.n, interval=3600))
        out: Results = {"n": s.n}
        try:
            with versus.Observer(kube, ns) as obs:

                def settled() -> bool:
                    running.check()
                    return obs.all_available(apps)

                wait("chain: every link Available", settled, s.timeout)
                watch = Watch()
                obs.deployments.add_handler(watch.arrived)
                for i in range(s.n):
                    _write(repo, i, NEW)
                pushed = time.perf_counter()
                repo.push("new images")
                running.notify(1)

                def done() -> bool:
                    running.check()
                    with watch.lock:
                        return all(a in watch.available for a in apps)

                wait("chain: every link Available on the new image", done, s.timeout)
                with watch.lock:
                    applied, available = dict(watch.applied), dict(watch.available)
            links = [applied[apps[i]] - available[apps[i - 1]] for i in range(1, s.n)]
            # the order itself, from the same watch: no link before its dependency
            out["in_order"] = all(applied[apps[i]] >= available[apps[i - 1]] for i in range(1, s.n))
            out["to_last_applied_s"] = round(applied[apps[-1]] - pushed, 2)
            out["to_last_available_s"] = round(available[apps[-1]] - pushed, 2)
            out["per_link_s"] = _spread(links)
            out["rollout_per_link_s"] = _spread([available[a] - applied[a] for a in apps])
        finally:
            running.stop()
            sh(KUBECTL, "delete", "namespace", ns, "--wait=false", check=False)
        return out
