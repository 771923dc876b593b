"""Shared pieces of the benchmark: the cluster, API server metrics, generated repos."""

from __future__ import annotations

import os
import re
import resource
import ssl
import statistics
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gitsync.kube.client import Kube, path_of, resource_path
from gitsync.model.quantity import parse_quantity
from testenv import cluster

ROOT = Path(__file__).resolve().parent.parent
KUBECTL = str(cluster.STATE / "bin" / "kubectl")
GITSYNC = str(Path(sys.executable).parent / "gitsync")
WRITES = ("POST", "PUT", "PATCH", "DELETE", "APPLY")
# the bound on one step (a kubectl call, a wait): a bench on a slow or busy machine at
# N = 5000 takes many minutes for one `kubectl apply`; this only stops a hang
STEP_S = float(os.environ.get("GITSYNC_BENCH_STEP_TIMEOUT", "3600"))


def server_requests(
    kube: Kube, resources: tuple[str, ...] = ("myapps", "deployments")
) -> Counter[str]:
    """kube-apiserver's own count of requests, by ``verb`` (and ``verb/subresource``)."""
    ctx = ssl.create_default_context(cafile=kube.config.ssl_ca_cert)
    ctx.load_cert_chain(str(kube.config.cert_file), str(kube.config.key_file))
    with urllib.request.urlopen(kube.host + "/metrics", context=ctx, timeout=30) as resp:
        text = resp.read().decode()
    out: Counter[str] = Counter()
    for line in text.splitlines():
        if not line.startswith("apiserver_request_total{"):
            continue
        labels = dict(re.findall(r'(\w+)="([^"]*)"', line.split("}")[0]))
        if labels.get("resource") not in resources:
            continue
        verb = labels.get("verb", "")
        if labels.get("dry_run"):
            verb += "(dry-run)"
        if labels.get("subresource"):
            verb += "/" + labels["subresource"]
        out[verb] += int(float(line.rsplit(" ", 1)[1]))
    return out


def delta(after: Counter[str], before: Counter[str]) -> dict[str, int]:
    return {k: after[k] - before[k] for k in sorted(after) if after[k] - before[k]}


def writes(counts: dict[str, int]) -> int:
    return sum(n for verb, n in counts.items() if verb.split("/")[0] in WRITES)


def app_yaml(
    ns: str, name: str, image: str = "nginx:1.27", *, replicas: int | str = 1, **extra: object
) -> str:
    body = [
        "apiVersion: apps.example.com/v1",
        "kind: MyApp",
        "metadata:",
        f"  name: {name}",
        f"  namespace: {ns}",
        "spec:",
        f"  image: {image}",
        f"  replicas: {replicas}",
        "  port: 8080",
        "  env:",
        "    - name: MODE",
        "      value: bench",
        "  resources:",
        "    requests: {cpu: 100m, memory: 64Mi}",
        "    limits: {cpu: 500m, memory: 128Mi}",
    ]
    body += [f"  {k}: {v}" for k, v in extra.items()]
    return "\n".join(body) + "\n"


def write_repo(root: Path, ns: str, n: int, replicas: int = 1) -> Path:
    apps = root / "apps"
    apps.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        (apps / f"app-{i:04d}.yaml").write_text(app_yaml(ns, f"app-{i:04d}", replicas=replicas))
    (apps / ".keep").write_text("")  # with n = 0: an empty directory is no commit
    return root


def namespace(kube: Kube, name: str) -> str:
    sh(KUBECTL, "delete", "namespace", name, "--ignore-not-found", "--wait=true", timeout=600)
    kube.create(
        resource_path("v1", "namespaces"),
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}},
    )
    return name


POD_ROOM = 5000  # Pods per bench Node, as the control plane's own kwok Nodes


def ensure_nodes(kube: Kube, pods: int) -> None:
    """Add kwok Nodes until ``pods`` more Pods fit (kwok manages every Node it sees)."""
    have = kube.list(resource_path("v1", "nodes")).get("items", [])
    room = sum(
        int(parse_quantity((n.get("status") or {}).get("allocatable", {}).get("pods", 0)))
        for n in have
    )
    names = {n["metadata"]["name"] for n in have}
    i = 0
    while room < pods:
        name = f"kwok-bench-{i}"
        i += 1
        if name in names:
            continue
        kube.create(
            resource_path("v1", "nodes"),
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {
                    "name": name,
                    "annotations": {"kwok.x-k8s.io/node": "fake"},
                    "labels": {"type": "kwok", "kubernetes.io/hostname": name},
                },
                "status": {
                    "allocatable": {"cpu": "1000", "memory": "4Ti", "pods": str(POD_ROOM)},
                    "capacity": {"cpu": "1000", "memory": "4Ti", "pods": str(POD_ROOM)},
                },
            },
        )
        room += POD_ROOM


def sh(
    *argv: str, timeout: float | None = None, check: bool = True
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KUBECONFIG": str(cluster.KUBECONFIG)}
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout or STEP_S, env=env)
    if check and proc.returncode not in (0, 1):
        raise RuntimeError(f"{' '.join(argv[:3])} failed: {proc.stderr.strip()[-500:]}")
    return proc


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def wait(
    what: str, check: Callable[[], bool], timeout: float | None = None, every: float = 0.2
) -> float:
    start = time.perf_counter()
    while time.perf_counter() - start < (timeout or STEP_S):
        if check():
            return time.perf_counter() - start
        time.sleep(every)
    raise RuntimeError(f"timed out waiting for {what}")


def percentiles(values: list[float]) -> dict[str, float]:
    qs = statistics.quantiles(values, n=100, method="inclusive")
    return {"p50": round(qs[49], 3), "p99": round(qs[98], 3), "max": round(max(values), 3)}


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def proc_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def control_plane_cpu() -> dict[str, float]:
    """CPU seconds so far of each control-plane component (kube-apiserver, etcd,
    kube-controller-manager, kube-scheduler, kwok)."""
    return {name: proc_cpu_seconds(pid) for name, pid in cluster.processes().items()}


def cpu_delta(before: dict[str, float], wall_s: float) -> dict[str, Any]:
    """The control plane's CPU since ``before``, by component, and how many of the
    machine's cores it kept busy over ``wall_s`` seconds."""
    now = control_plane_cpu()
    by = {k: round(now[k] - v, 2) for k, v in before.items() if k in now}
    total = round(sum(by.values()), 2)
    return {"by_component": by, "total": total, "cores_busy": round(total / wall_s, 2)}


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


GIT = ["git", "-c", "user.name=bench", "-c", "user.email=bench@example.com"]


def image_of(dep: dict[str, Any]) -> str:
    """The image of a Deployment's (one) container."""
    return str(dep["spec"]["template"]["spec"]["containers"][0]["image"])


def git_repo(tmp: Path, name: str, ns: str, n: int, replicas: int = 1) -> tuple[Path, Path]:
    """A bare repository of n MyApps and the work tree that pushes to it."""
    bare, work = tmp / f"{name}.git", tmp / f"{name}-work"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(bare)], check=True)
    write_repo(work, ns, n, replicas)
    for args in (
        ["init", "-q", "-b", "main"],
        ["add", "."],
        ["commit", "-qm", "apps"],
        ["push", "-q", str(bare), "main"],
    ):
        subprocess.run([*GIT, "-C", str(work), *args], check=True)
    return bare, work


def kubectl_scale(kube: Kube, ns: str, name: str, replicas: int) -> float:
    """What ``kubectl scale`` sends (a PATCH of the scale subresource under the
    manager ``kubectl``), timed from just before the request leaves."""
    start = time.perf_counter()
    kube.request(
        "PATCH",
        path_of("Deployment", ns, name, "scale"),
        params={"fieldManager": "kubectl"},
        body={"spec": {"replicas": replicas}},
        content_type="application/merge-patch+json",
    )
    return start


def report_drift(kube: Kube, ns: str, names: list[str]) -> None:
    """Set these MyApps' drift policy to ``report`` (drift stays, shown in status)."""
    for name in names:
        kube.request(
            "PATCH",
            path_of("MyApp", ns, name),
            body={"spec": {"driftPolicy": "report"}},
            content_type="application/merge-patch+json",
        )


def drift_in_status(
    kube: Kube, myapps: Any, ns: str, names: list[str], edits: int, values: int, timeout: float
) -> list[float]:
    """Seconds from each ``kubectl scale`` of one of ``names`` (see :func:`report_drift`)
    to the drift in its status, as ``myapps`` (an informer cache) shows it; each edit
    changes its app's replicas from the value of its previous edit (one of ``values`` in
    turn)."""
    return [_scaled_until_seen(kube, myapps, ns, names, i, values, timeout) for i in range(edits)]


def _scaled_until_seen(
    kube: Kube, myapps: Any, ns: str, names: list[str], i: int, values: int, timeout: float
) -> float:
    name, value = names[i % len(names)], 2 + (i // len(names)) % values
    start = kubectl_scale(kube, ns, name, value)

    def seen() -> bool:
        app = myapps.get(f"{ns}/{name}") or {}
        return any(d.get("live") == value for d in (app.get("status") or {}).get("drift") or [])

    wait("drift in status", seen, timeout=timeout, every=0.01)
    return time.perf_counter() - start
