"""The Git cache directory full, or read-only: a clear error that says so, exit code 1 (a
failed sync), no Python traceback, and no prune."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gitsync.kube.client import Kube
from tests.faults.harness import DeletionWatch, PrivateControlPlane, apps_files, report
from tests.gitserver import Upstream
from tests.support import get

pytestmark = [pytest.mark.faults, pytest.mark.integration]

GITSYNC = str(Path(sys.executable).parent / "gitsync")


def mounts_allowed() -> bool:
    """A tmpfs in a mount namespace of its own (root, or CAP_SYS_ADMIN): the only honest
    way to make a directory full or read-only for root, whom permissions do not stop."""
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(
        ["unshare", "-m", "sh", "-c", "mount -t tmpfs -o size=64k tmpfs /mnt"],
        capture_output=True,
    )
    return probe.returncode == 0


def sync(
    cp: PrivateControlPlane, ns: str, repo: str, cache: Path, setup: str = ""
) -> subprocess.CompletedProcess[str]:
    """`gitsync sync`, with ``setup`` run first in a private mount namespace (so that a
    tmpfs over the cache disappears with the process, whatever happens)."""
    argv = [
        GITSYNC,
        "sync",
        "--repo",
        repo,
        "--path",
        "apps",
        "--allowed-namespaces",
        ns,
        "--status-namespace",
        ns,
        "--cache-dir",
        str(cache),
        "--instance-name",
        "faults",
    ]
    env = {**os.environ, "KUBECONFIG": str(cp.kubeconfig)}
    if not setup:
        return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
    script = f'{setup} && exec "$@"'
    return subprocess.run(
        ["unshare", "-m", "sh", "-c", script, "sh", *argv],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.skipif(not mounts_allowed(), reason="needs mount namespaces (root or CAP_SYS_ADMIN)")
@pytest.mark.parametrize("fault", ["full", "read-only"])
def test_cache_full_or_read_only(
    fault: str,
    private_cp: PrivateControlPlane,
    pkube: Kube,
    pns: str,
    upstream: Upstream,
    work: Path,
) -> None:
    images = {f"app-{i}": "nginx:1.27" for i in range(4)}
    upstream.commit(apps_files(pns, images), "four MyApps")
    good = work / "cache"
    first = sync(private_cp, pns, upstream.file_url, good)
    assert first.returncode == 0, first.stderr
    # the next commit removes a MyApp and brings a file too big for what is left
    upstream.commit(
        {"apps/app-3.yaml": None, "blob.bin": os.urandom(1 << 20).hex()}, "app-3 leaves"
    )
    cache = work / "faulty-cache"
    cache.mkdir(mode=0o700)
    fill = f"cp -a {good}/. {cache}/ && "
    if fault == "full":
        setup = (
            f"mount -t tmpfs -o size=16m,mode=0700 tmpfs {cache} && {fill}"
            f"(dd if=/dev/zero of={cache}/.fill bs=64k 2>/dev/null || true)"
        )
    else:
        setup = f"mount -t tmpfs -o size=16m,mode=0700 tmpfs {cache} && {fill}" + (
            f"mount -o remount,ro {cache}"
        )
    with DeletionWatch(pkube, pns) as deletions:
        broken = sync(private_cp, pns, upstream.file_url, cache, setup)
    print(f"cache {fault}: exit {broken.returncode}; stderr: {broken.stderr.strip()[-600:]}")
    assert broken.returncode == 1
    assert "Traceback" not in broken.stderr + broken.stdout
    cause = "No space left on device" if fault == "full" else "Read-only file system"
    assert f"error: git fetch {upstream.file_url}" in broken.stderr
    assert cause in broken.stderr
    assert "prune skipped: the fetch failed" in broken.stderr
    assert deletions.deleted == []
    assert get(pkube, "MyApp", pns, "app-3") is not None, "nothing may be pruned"
    report(
        f"cache directory {fault}",
        runs=1,
        clean_error=1,
        tracebacks=0,
        wrong_prunes=len(deletions.deleted),
    )
