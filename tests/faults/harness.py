"""The fault tests' own world: a private control plane they may crash, a gitsync daemon
they may SIGKILL, and the checks that say whether gitsync converged and lost nothing.

The control plane is started through the launcher in a separate process with a state
directory of its own, so that killing kube-apiserver or etcd here never disturbs the
control plane that the other tests share.
"""

from __future__ import annotations

import json
import os
import random
import signal
import ssl
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gitsync.kube.client import Kube, path_of, resource_path
from tests.gitserver import free_port

ROOT = Path(__file__).resolve().parents[2]
GITSYNC = str(Path(sys.executable).parent / "gitsync")
MANAGED = "app.kubernetes.io/managed-by=gitsync"


def long_runs() -> bool:
    """`make faults` runs the full counts; `make test` a short version of each scenario."""
    return os.environ.get("GITSYNC_FAULTS", "") == "long"


def runs(short: int, full: int) -> int:
    return full if long_runs() else short


def seeded(name: str) -> random.Random:
    """A random source whose seed is printed, so that a failing run can be replayed
    with GITSYNC_FAULTS_SEED."""
    seed = int(os.environ.get("GITSYNC_FAULTS_SEED") or random.SystemRandom().randrange(10**9))
    print(f"{name}: seed {seed} (replay with GITSYNC_FAULTS_SEED={seed})")
    return random.Random(seed)  # noqa: S311 - fault timing, not secrets


class PrivateControlPlane:
    """A control plane of the fault tests' own, driven through `python -m testenv.cluster`."""

    def __init__(self, state: Path, *, apf: bool = False) -> None:
        self.state = state
        self.kubeconfig = state / "kubeconfig"
        self.env = {**os.environ, "GITSYNC_TESTENV_DIR": str(state)}
        if apf:
            self.env["GITSYNC_TESTENV_APF"] = "1"

    def _launcher(self, *args: str, timeout: float = 300) -> None:
        proc = subprocess.run(
            [sys.executable, "-m", "testenv.cluster", *args],
            cwd=ROOT,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if proc.returncode != 0:
            raise RuntimeError(f"testenv {' '.join(args)} failed: {proc.stderr[-2000:]}")

    def up(self) -> None:
        self._launcher("up")

    def down(self) -> None:
        self._launcher("down", timeout=60)

    def restart(self, name: str, downtime: float = 0.0, *, crash: bool = True) -> None:
        """SIGKILL (or stop) one component, wait ``downtime`` and start it again."""
        self._launcher("restart", name, str(downtime), *(["crash"] if crash else []))

    @property
    def server(self) -> str:
        state: dict[str, Any] = json.loads((self.state / "state.json").read_text())
        return str(state["server"])

    def ssl_context(self) -> ssl.SSLContext:
        pki = self.state / "pki"
        ctx = ssl.create_default_context(cafile=str(pki / "ca.crt"))
        ctx.load_cert_chain(str(pki / "admin.crt"), str(pki / "admin.key"))
        return ctx

    def apiserver_metrics(self) -> str:
        """kube-apiserver's own /metrics: the count of requests it really received."""
        url = self.server + "/metrics"
        with urllib.request.urlopen(url, context=self.ssl_context(), timeout=10) as resp:
            return str(resp.read().decode())


@dataclass
class Daemon:
    """`gitsync run` in a process of its own, which a test may SIGKILL and restart."""

    kubeconfig: Path
    namespace: str
    repo: str
    log: Path
    extra: tuple[str, ...] = ()
    interval: float = 2.0
    cache: Path | None = None
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None
    #: the gitsync to run (another release's, for an upgrade)
    binary: str = GITSYNC

    def argv(self) -> list[str]:
        cache = self.cache or self.log.parent / "cache"
        return [
            self.binary,
            "run",
            "--repo",
            self.repo,
            "--path",
            "apps",
            "--allowed-namespaces",
            self.namespace,
            "--watch-namespace",
            self.namespace,
            "--status-namespace",
            self.namespace,
            "--cache-dir",
            str(cache),
            "--interval",
            str(self.interval),
            "--jitter",
            "0",
            "--listen",
            f"127.0.0.1:{self.port}",
            *self.extra,
        ]

    def start(self) -> None:
        env = {**os.environ, "KUBECONFIG": str(self.kubeconfig), "GITSYNC_LOG_FORMAT": "json"}
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(self.argv(), env=env, stdout=out, stderr=subprocess.STDOUT)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(30)

    def stop(self) -> int | None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.kill()
        return None if self.proc is None else self.proc.returncode

    def metrics(self) -> str:
        url = f"http://127.0.0.1:{self.port}/metrics"
        with urllib.request.urlopen(url, timeout=5) as resp:
            return str(resp.read().decode())

    def metric(self, name: str, **labels: str) -> float:
        want = name + (
            "{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}" if labels else ""
        )
        try:
            text = self.metrics()
        except OSError:
            return -1.0
        for line in text.splitlines():
            if line.startswith(want + " "):
                return float(line.rsplit(" ", 1)[1])
        return 0.0

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")


@dataclass
class Verdict:
    """What the API server holds for a namespace, against the MyApps in Git."""

    lost: list[str]  # in Git, not in the cluster
    extra: list[str]  # Deployments or MyApps that Git does not name
    duplicates: list[str]  # a MyApp with more than one ReplicaSet or owner
    unowned: list[str]  # a Deployment not owned by its MyApp
    inconsistent: list[str]  # status that does not match the live Deployment

    @property
    def converged(self) -> bool:
        return not (self.lost or self.extra or self.duplicates or self.unowned or self.inconsistent)

    def __str__(self) -> str:
        parts = {k: v[:5] for k, v in self.__dict__.items() if v}
        return f"converged={self.converged} " + " ".join(f"{k}={v}" for k, v in parts.items())


def verdict(kube: Kube, ns: str, images: dict[str, str]) -> Verdict:
    """``images``: the image of each MyApp in Git, by name."""
    names = set(images)
    apps = {a["metadata"]["name"]: a for a in kube.list(path_of("MyApp", ns))["items"]}
    deps = {d["metadata"]["name"]: d for d in kube.list(path_of("Deployment", ns))["items"]}
    rsets = kube.list(resource_path("apps/v1", "replicasets", ns))["items"]
    per_owner: dict[str, int] = {}
    # old ReplicaSets stay after a rollout, scaled to 0; two with Pods is a doubled app
    for rs in (r for r in rsets if (r.get("spec") or {}).get("replicas")):
        for ref in rs["metadata"].get("ownerReferences") or []:
            per_owner[ref["name"]] = per_owner.get(ref["name"], 0) + 1
    lost = sorted(names - apps.keys())
    extra = sorted((apps.keys() | deps.keys()) - names)
    duplicates = sorted(n for n, count in per_owner.items() if count > 1)
    unowned, inconsistent = [], []
    for name in sorted(names & apps.keys()):
        app, dep = apps[name], deps.get(name)
        if dep is None:
            unowned.append(name)
            continue
        owners = dep["metadata"].get("ownerReferences") or []
        if [o.get("uid") for o in owners] != [app["metadata"]["uid"]]:
            unowned.append(name)
        st, dst = app.get("status") or {}, dep.get("status") or {}
        containers = dep["spec"]["template"]["spec"]["containers"]
        if (
            app["spec"].get("image") != images[name]
            or [c.get("image") for c in containers] != [images[name]]
            or dst.get("updatedReplicas", 0) != dst.get("replicas", 0)
            or st.get("observedGeneration") != app["metadata"]["generation"]
            or st.get("availableReplicas", 0) != dst.get("availableReplicas", 0)
            or st.get("phase") != "Available"
        ):
            inconsistent.append(name)
    return Verdict(lost, extra, duplicates, unowned, inconsistent)


class DeletionWatch:
    """Records every MyApp the API server deletes in a namespace: the proof of "no
    prune of a MyApp still in Git" that does not rely on gitsync's own account."""

    def __init__(self, kube: Kube, ns: str) -> None:
        self.kube, self.ns = kube, ns
        self.deleted: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> DeletionWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(70)

    def _run(self) -> None:
        rv = ""
        while not self._stop.is_set():
            try:
                if not rv:
                    rv = self.kube.list(path_of("MyApp", self.ns))["metadata"]["resourceVersion"]
                params = {"watch": "true", "resourceVersion": rv, "timeoutSeconds": "5"}
                for event in self.kube.stream(
                    path_of("MyApp", self.ns), params=params, read_timeout=15
                ):
                    obj = event.get("object") or {}
                    meta = obj.get("metadata") or {}
                    if event.get("type") == "DELETED":
                        self.deleted.append(str(meta.get("name")))
                    if meta.get("resourceVersion"):
                        rv = str(meta["resourceVersion"])
                    if self._stop.is_set():
                        return
            except Exception:  # the API server is down on purpose: try again
                # a 410 or an outage: relist; a MyApp deleted meanwhile is caught by
                # the final count of lost MyApps instead
                rv = ""
                time.sleep(0.5)


def wait_converged(
    kube: Kube, ns: str, images: dict[str, str], timeout: float, what: str
) -> tuple[float, Verdict]:
    """Seconds until the namespace converged, or the last verdict on timeout."""
    start = time.monotonic()
    last: Verdict | None = None
    while time.monotonic() - start < timeout:
        try:
            last = verdict(kube, ns, images)
        except Exception:  # the API server may still be coming back
            last = None
        if last is not None and last.converged:
            return time.monotonic() - start, last
        time.sleep(1.0)
    raise AssertionError(f"{what}: not converged after {timeout:.0f}s: {last}")


def apps_files(ns: str, images: dict[str, str]) -> dict[str, str | None]:
    from tests.support import app_yaml

    return {f"apps/{n}.yaml": app_yaml(ns, n, image=i) for n, i in images.items()}


def report(scenario: str, **figures: object) -> None:
    """One line per scenario that the promise table quotes."""
    print(f"FIGURES {scenario}: " + ", ".join(f"{k}={v}" for k, v in figures.items()))
