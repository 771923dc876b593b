"""Flux's source-controller and kustomize-controller as local processes on the control plane.

The binaries come from testenv/peers/flux (pinned Go modules, cached like the
control plane); their CRDs from the same pinned modules' ``config/crd/bases`` in
the Go module cache, so what runs and what is installed are one release. Both
controllers run as the admin of the local API server, watch every namespace,
keep leader election off (as gitsync's daemon is run here), bind metrics and
health to free loopback ports, and log into the control plane's state
directory like its own components.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import time
import urllib.request
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from testenv import cluster, peers

CONTROLLERS = ("source-controller", "kustomize-controller")
CRD_MODULES = ("github.com/fluxcd/source-controller", "github.com/fluxcd/kustomize-controller")


class FluxError(Exception):
    pass


def crd_files() -> list[Path]:
    """Every CRD the two controllers serve: source-controller reconciles all its source
    kinds and does not start while one of them is missing."""
    files: list[Path] = []
    for module in CRD_MODULES:
        bases = peers.module_dir("source-controller", module) / "config" / "crd" / "bases"
        files += sorted(bases.glob("*.yaml"))
    if not files:
        raise FluxError("no CRDs found under config/crd/bases of the pinned Flux modules")
    return files


def version(module: str) -> str:
    """The pinned version of a Flux module, read from our go.mod."""
    text = (peers.PEERS / "flux" / "go.mod").read_text()
    found = re.search(rf"^\s*{re.escape(module)} (v\S+)", text, re.MULTILINE)
    return found.group(1) if found else "unknown"


@dataclass
class Controller:
    name: str
    proc: subprocess.Popen[bytes]
    metrics_port: int
    health_port: int
    log: Path


@dataclass
class Flux:
    """The two running controllers; ``stop()`` ends them (their process groups)."""

    controllers: list[Controller] = field(default_factory=list)

    @property
    def pids(self) -> list[int]:
        return [c.proc.pid for c in self.controllers]

    def ready(self) -> bool:
        for c in self.controllers:
            if c.proc.poll() is not None:
                raise FluxError(f"{c.name} exited ({c.proc.returncode}); log {c.log}")
            try:
                with urllib.request.urlopen(
                    f"http://127.0.0.1:{c.health_port}/readyz", timeout=2
                ) as r:
                    if r.status != 200:
                        return False
            except OSError:
                return False
        return True

    def requests(self) -> Counter[str]:
        """API requests the two controllers sent (client-go's own count), by HTTP method."""
        out: Counter[str] = Counter()
        for c in self.controllers:
            with urllib.request.urlopen(
                f"http://127.0.0.1:{c.metrics_port}/metrics", timeout=10
            ) as r:
                text = r.read().decode()
            for line in text.splitlines():
                if line.startswith("rest_client_requests_total{"):
                    method = re.search(r'method="([^"]*)"', line)
                    if method:
                        out[method.group(1)] += int(float(line.rsplit(" ", 1)[1]))
        return out

    def stop(self) -> None:
        for c in self.controllers:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(c.proc.pid, signal.SIGTERM)
        for c in self.controllers:
            try:
                c.proc.wait(cluster.STOP_GRACE)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(c.proc.pid, signal.SIGKILL)
                c.proc.wait(5)
        self.controllers.clear()


def start(run_dir: Path, flags: Iterable[str] = ()) -> Flux:
    """Start both controllers, each with ``flags`` besides its own; ``run_dir`` holds
    source-controller's artifact storage."""
    flux = Flux()
    logs = cluster.STATE / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    storage_port = cluster.free_port()
    env = {
        **os.environ,
        "KUBECONFIG": str(cluster.KUBECONFIG),
        # where events and leases would go; with neither in use, a name is enough
        "RUNTIME_NAMESPACE": "flux-system",
    }
    try:
        for name in CONTROLLERS:
            binary = peers.build(name, verbose=False)
            metrics, health = cluster.free_port(), cluster.free_port()
            argv = [
                str(binary),
                "--watch-all-namespaces",
                "--log-level=info",
                "--log-encoding=json",
                f"--metrics-addr=127.0.0.1:{metrics}",
                f"--health-addr=127.0.0.1:{health}",
                *flags,
            ]
            if name == "source-controller":
                storage = run_dir / "flux-storage"
                storage.mkdir(parents=True, exist_ok=True)
                argv += [
                    f"--storage-path={storage}",
                    f"--storage-addr=127.0.0.1:{storage_port}",
                    f"--storage-adv-addr=127.0.0.1:{storage_port}",
                ]
            log = logs / f"{name}.log"
            with log.open("ab") as out:
                proc = subprocess.Popen(
                    argv,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    env=env,
                    cwd=run_dir,
                    start_new_session=True,  # stop() ends its whole process group
                )
            flux.controllers.append(Controller(name, proc, metrics, health, log))
    except BaseException:
        flux.stop()
        raise
    return flux


def wait_ready(flux: Flux, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if flux.ready():
            return
        time.sleep(0.2)
    raise FluxError(f"Flux controllers not ready after {timeout:.0f}s; logs in {cluster.STATE}")


def git_repository(ns: str, url: str, interval: str) -> dict[str, object]:
    return {
        "apiVersion": "source.toolkit.fluxcd.io/v1",
        "kind": "GitRepository",
        "metadata": {"name": "bench", "namespace": ns},
        "spec": {"url": url, "ref": {"branch": "main"}, "interval": interval, "timeout": "60s"},
    }


def kustomization(
    ns: str, interval: str, name: str = "bench", path: str = "./apps"
) -> dict[str, object]:
    """Plain manifests under ``path`` (kustomize-controller generates the kustomization,
    taking every manifest below it), pruned when they leave Git, no health checks
    (gitsync waits for none either)."""
    return {
        "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
        "kind": "Kustomization",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "interval": interval,
            "path": path,
            "prune": True,
            "wait": False,
            "timeout": "5m",
            "sourceRef": {"kind": "GitRepository", "name": "bench"},
        },
    }
