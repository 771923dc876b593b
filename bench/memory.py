"""The daemon's memory per MyApp: RSS at N MyApps above the idle daemon's.

For each size a fresh ``gitsync run`` (sync loop, operator, webhook, page) syncs a
repository of N MyApps; its RSS (``process_resident_memory_bytes``, as a Prometheus
scraping it would see) is read once every MyApp is Available and the caches have
settled. The idle daemon is the same with a repository that declares none.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from bench.common import GITSYNC, git_repo, namespace, wait
from gitsync.kube.client import Kube, path_of
from testenv import cluster

Results = dict[str, Any]
#: after the last MyApp is Available: status writes and watch events die down
SETTLE_S = 10.0


def _rss_mib(port: int) -> float | None:
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
            text = resp.read().decode()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("process_resident_memory_bytes "):
            return float(line.split()[1]) / 2**20
    return None


def _available(kube: Kube, ns: str) -> int:
    items = kube.list(path_of("MyApp", ns)).get("items", [])
    return sum(1 for a in items if (a.get("status") or {}).get("phase") == "Available")


def daemon_rss(kube: Kube, tmp: Path, n: int) -> Results:
    """RSS of a daemon holding n MyApps, and how long it took to hold them."""
    ns = namespace(kube, f"bench-memory-{n}")
    bare, _work = git_repo(tmp, f"memory-{n}", ns, n)
    port = cluster.free_port()
    env = {**os.environ, "KUBECONFIG": str(cluster.KUBECONFIG), "GITSYNC_LOG_FORMAT": "json"}
    argv = [
        GITSYNC, "run", "--repo", f"file://{bare}", "--path", "apps", "--interval", "300",
        "--watch-namespace", ns, "--status-namespace", ns, "--no-leader-elect",
        "--listen", f"127.0.0.1:{port}", "--cache-dir", str(tmp / f"memory-{n}-cache"),
    ]  # fmt: skip
    log = cluster.STATE / "logs" / f"bench-memory-{n}.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT)
    start = time.perf_counter()
    try:
        wait("the daemon's metrics", lambda: _rss_mib(port) is not None, 60, every=0.2)
        if n:
            wait("every MyApp Available", lambda: _available(kube, ns) >= n, 1800, every=1.0)
        synced_s = time.perf_counter() - start
        time.sleep(SETTLE_S)
        rss = _rss_mib(port)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
        subprocess.run(
            [str(cluster.STATE / "bin" / "kubectl"), "delete", "namespace", ns, "--wait=false"],
            env=env,
            capture_output=True,
            check=False,
        )
    return {"rss_mib": round(rss or 0.0, 1), "all_available_s": round(synced_s, 1)}


def memory(kube: Kube, tmp: Path, sizes: list[int]) -> Results:
    """The idle daemon's RSS, then at each size its RSS and KiB per MyApp above idle."""
    idle = daemon_rss(kube, tmp, 0)["rss_mib"]
    out: Results = {"idle_rss_mib": idle, "sizes": {}}
    for n in sizes:
        r = daemon_rss(kube, tmp, n)
        r["kib_per_myapp"] = round((r["rss_mib"] - idle) * 1024 / n, 1)
        out["sizes"][str(n)] = r
    return out
