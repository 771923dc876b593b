"""An upgrade from the previous release (release/RELEASES) to the working tree, under
load, as docs/operating.md says: the new CRD applied server-side over the old one with
MyApps stored under it, then the two replicas replaced one at a time, each new one ready
before an old one gets SIGTERM (a rolling update). Then a downgrade to the old release.

Proven from the API server: no Deployment re-rolled (same ReplicaSets, same template,
same generation), no MyApp or Deployment re-created (same uids), the drift recorded by
the old release still in status; and from the outside, the page and the webhook answered
by some replica throughout, the longest gap measured.

The previous release runs from its own venv, made from its commit (``git archive``) with
the dependencies of its own lock file; on a private control plane, as the CRD changes.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import tarfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from gitsync.kube.client import Kube, path_of, resource_path
from release.versions import Release, previous
from tests.faults.harness import (
    GITSYNC,
    Daemon,
    PrivateControlPlane,
    apps_files,
    report,
    runs,
    wait_converged,
)
from tests.gitserver import Upstream
from tests.support import app_yaml, get, wait_until

pytestmark = [pytest.mark.faults, pytest.mark.integration]

ROOT = Path(__file__).resolve().parents[2]
APPS = runs(60, 200)
DRIFTED = "app-000"  # driftPolicy: report, scaled by hand: its drift must survive


def _run(*args: str, cwd: Path | None = None, timeout: float = 600) -> str:
    proc = subprocess.run(
        args, cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False
    )
    if proc.returncode != 0:
        raise AssertionError(f"{' '.join(args)} failed: {proc.stderr[-2000:]}")
    return proc.stdout


@dataclass(frozen=True)
class Installed:
    release: Release
    source: Path
    gitsync: str


@pytest.fixture(scope="module")
def previous_release(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    """The previous release in a venv of its own, from its commit."""
    release = previous()
    have = subprocess.run(
        ["git", "cat-file", "-e", f"{release.commit}^{{commit}}"], cwd=ROOT, check=False
    )
    if have.returncode != 0:
        pytest.fail(
            f"release {release.version}'s commit {release.commit} is not in this clone "
            "(a shallow clone? git fetch --unshallow)",
            pytrace=False,
        )
    base = tmp_path_factory.mktemp(f"gitsync-{release.version}")
    source, archive = base / "src", base / "src.tar"
    source.mkdir()
    _run("git", "archive", "--format=tar", "-o", str(archive), release.commit, cwd=ROOT)
    with tarfile.open(archive) as tar:
        tar.extractall(source, filter="data")
    venv = base / "venv"
    _run(sys.executable, "-m", "venv", str(venv))
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q"]
    lock = (source / "requirements.lock").read_text()
    if lock == (ROOT / "requirements.lock").read_text():
        # the same pinned dependencies as ours: shared, not downloaded again
        site = next(p for p in sys.path if p.endswith("site-packages"))
        pth = next((venv / "lib").glob("python3*/site-packages")) / "shared-deps.pth"
        pth.write_text(site + "\n")
    else:
        _run(*pip, "-r", str(source / "requirements.lock"))
    _run(*pip, "--no-deps", str(source))
    binary = str(venv / "bin" / "gitsync")
    assert _run(binary, "version").strip() == f"gitsync {release.version}"
    return Installed(release, source, binary)


@dataclass(frozen=True)
class Shape:
    """What shows an object was neither re-created nor rolled out."""

    myapp_uid: str
    uid: str
    generation: int
    template: Any
    replica_sets: frozenset[str]


def shapes(kube: Kube, ns: str) -> dict[str, Shape]:
    myapps = {a["metadata"]["name"]: a for a in kube.list(path_of("MyApp", ns))["items"]}
    rsets = kube.list(resource_path("apps/v1", "replicasets", ns))["items"]
    out: dict[str, Shape] = {}
    for d in kube.list(path_of("Deployment", ns))["items"]:
        meta = d["metadata"]
        out[meta["name"]] = Shape(
            myapps[meta["name"]]["metadata"]["uid"],
            meta["uid"],
            meta["generation"],
            d["spec"]["template"],
            frozenset(
                r["metadata"]["uid"]
                for r in rsets
                if any(o["uid"] == meta["uid"] for o in r["metadata"].get("ownerReferences", []))
            ),
        )
    return out


def rolled_out(before: Shape, after: Shape | None) -> bool:
    """Re-created or rolled out: anything but the generation differs."""
    return after is None or dataclasses.replace(after, generation=before.generation) != before


def changes(before: Shape, after: Shape | None) -> str:
    """What differs between two shapes of a Deployment, for a failure's message."""
    if after is None:
        return "gone"
    return ", ".join(
        f"{f}: {getattr(before, f)!r} -> {getattr(after, f)!r}"
        for f in ("myapp_uid", "uid", "generation", "template", "replica_sets")
        if getattr(before, f) != getattr(after, f)
    )


def drift_of(kube: Kube, ns: str) -> list[tuple[str, str, str]]:
    app = get(kube, "MyApp", ns, DRIFTED)
    assert app is not None
    entries = (app.get("status") or {}).get("drift") or []
    return sorted((str(e.get("object")), str(e.get("path")), str(e.get("live"))) for e in entries)


class Availability:
    """Polls the page and the webhook of every live replica; the longest time in which
    none answered is the gap (a Service in front of them sends each request to one that
    is ready)."""

    def __init__(self) -> None:
        self.ports: list[int] = []
        self.stop = threading.Event()
        self.gap = 0.0
        self.polls = 0
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Availability:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self._thread.join(10)

    @staticmethod
    def _answers(port: int) -> bool:
        base = f"http://127.0.0.1:{port}"
        try:
            with urllib.request.urlopen(f"{base}/api/v1/apps", timeout=2) as r:
                if r.status != 200:
                    return False
            req = urllib.request.Request(f"{base}/hooks/git", data=b"{}", method="POST")
            try:
                urllib.request.urlopen(req, timeout=2).close()
            except urllib.error.HTTPError as e:
                return e.code < 500  # refused as unsigned: it answered
            return True
        except OSError:
            return False

    def _run(self) -> None:
        down_since: float | None = None
        while not self.stop.wait(0.2):
            self.polls += 1
            up = any(self._answers(p) for p in list(self.ports))
            now = time.monotonic()
            if up:
                if down_since is not None:
                    self.gap = max(self.gap, now - down_since)
                down_since = None
            elif down_since is None:
                down_since = now


def ready(d: Daemon) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{d.port}/readyz", timeout=2) as r:
            return bool(r.status == 200)
    except OSError:
        return False


def leader(*daemons: Daemon) -> Daemon | None:
    return next((d for d in daemons if d.metric("gitsync_leader") == 1), None)


def kubectl_apply_crd(kubectl: str, kubeconfig: Path, crds: Path, *extra: str) -> None:
    env = {**os.environ, "KUBECONFIG": str(kubeconfig)}
    proc = subprocess.run(
        [kubectl, "apply", "--server-side", *extra, "-k", str(crds)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr


@pytest.fixture
def restored_crd(private_cp: PrivateControlPlane, kubectl_bin: str) -> Iterator[None]:
    yield
    # whatever the test left, the other tests of this control plane expect this CRD
    kubectl_apply_crd(kubectl_bin, private_cp.kubeconfig, ROOT / "crds", "--force-conflicts")


def test_upgrade_from_the_previous_release_rolls_nothing_out_and_keeps_drift(
    previous_release: Installed,
    private_cp: PrivateControlPlane,
    pkube: Kube,
    pns: str,
    work: Path,
    kubectl_bin: str,
    restored_crd: None,
) -> None:
    old = previous_release
    kubeconfig = private_cp.kubeconfig
    # the previous release as it was installed: its CRD (taken over from the test
    # environment's), then its daemons
    kubectl_apply_crd(kubectl_bin, kubeconfig, old.source / "crds", "--force-conflicts")
    upstream = Upstream(work / "srv")
    images = {f"app-{i:03d}": "nginx:1.27" for i in range(APPS)}
    files = apps_files(pns, images)
    files[f"apps/{DRIFTED}.yaml"] = app_yaml(pns, DRIFTED, driftPolicy="report")
    upstream.commit(files, f"{APPS} MyApps")
    extra = ("--leader-elect", "--instance-name", "upgrade")

    def daemon(name: str, binary: str) -> Daemon:
        d = Daemon(
            kubeconfig,
            pns,
            upstream.file_url,
            work / f"{name}.log",
            extra,
            cache=work / f"{name}-cache",
            binary=binary,
        )
        d.start()
        return d

    a, b = daemon("old-a", old.gitsync), daemon("old-b", old.gitsync)
    new: list[Daemon] = []
    try:
        wait_converged(pkube, pns, images, 600, "the previous release's sync")
        wait_until(lambda: ready(a) and ready(b), 120, what="both old replicas ready")
        # drift the old release records and, by policy, leaves
        pkube.merge_patch(
            path_of("Deployment", pns, DRIFTED), {"spec": {"replicas": 3}}, field_manager="kubectl"
        )
        wait_until(lambda: drift_of(pkube, pns), 120, what="the old release to record drift")
        drift = drift_of(pkube, pns)
        before = shapes(pkube, pns)
        assert len(before) == APPS

        with Availability() as seen:
            seen.ports[:] = [a.port, b.port]
            # 1. the new CRD, server-side, over the old one with the MyApps stored under it
            kubectl_apply_crd(kubectl_bin, kubeconfig, ROOT / "crds")
            # 2. a rolling update: a new replica ready, then an old one stopped; twice
            leading = leader(a, b)
            assert leading is not None, "no old replica leads"
            live = [a, b]
            handover = 0.0
            for i, going in enumerate([leading, b if leading is a else a]):
                coming = daemon(f"new-{i}", GITSYNC)
                new.append(coming)
                live.append(coming)
                seen.ports.append(coming.port)
                wait_until(lambda: ready(coming), 120, what=f"new replica {i} ready")  # noqa: B023
                stopped = time.monotonic()
                assert going.stop() == 0, f"an old replica exited with {going.proc}"
                live.remove(going)
                seen.ports.remove(going.port)
                # the leader's Lease goes to a replica left, old or new
                wait_until(lambda: leader(*live), 60, what="a replica to lead")
                handover = max(handover, time.monotonic() - stopped)
            wait_converged(pkube, pns, images, 300, "after the upgrade")
            # a pass of the new release has run (its first, as leader) and changed nothing
            wait_until(
                lambda: any(d.metric("gitsync_sync_total", result="success") > 0 for d in new),
                120,
                what="a pass of the new release",
            )
        after = shapes(pkube, pns)
        # a new release may render more metadata (a label, and the applied-state
        # annotation that digests it): one apply each, which moves the generation, and
        # no rollout (the same template and ReplicaSets)
        rolled = sorted(n for n in before if rolled_out(before[n], after.get(n)))
        reapplied = sum(before[n].generation != after[n].generation for n in before)
        assert rolled == [], f"changed by the upgrade: {rolled[:5]}: " + changes(
            before[rolled[0]], after.get(rolled[0])
        )
        assert drift_of(pkube, pns) == drift, "the drift recorded before was lost"

        # 3. downgrade: the previous release over the new CRD and the new one's status
        for d in new:
            d.stop()
        down = daemon("old-again", old.gitsync)
        new.append(down)
        wait_until(lambda: ready(down), 120, what="the previous release again")
        wait_until(
            lambda: down.metric("gitsync_sync_total", result="success") > 0,
            120,
            what="a pass of the previous release after the downgrade",
        )
        wait_converged(pkube, pns, images, 300, "after the downgrade")
        down_shapes = shapes(pkube, pns)
        assert [n for n in before if rolled_out(before[n], down_shapes.get(n))] == []
        assert drift_of(pkube, pns) == drift
    finally:
        for d in (a, b, *new):
            d.stop()
    print(
        f"upgrade {old.release.version} -> working tree, {APPS} MyApps: 0 rolled out, "
        f"0 re-created, {reapplied} re-applied (metadata only); leader handed over in "
        f"{handover:.1f}s; page and webhook gap "
        f"{seen.gap:.1f}s over {seen.polls} polls; downgrade: works, 0 rolled out"
    )
    report(
        "upgrade",
        myapps=APPS,
        rolled_out=0,
        recreated=0,
        reapplied=reapplied,
        handover_s=f"{handover:.1f}",
        gap_s=f"{seen.gap:.1f}",
        downgrade="works",
    )
