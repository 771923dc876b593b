"""The image the Dockerfile builds (testenv.image: buildah, a Debian stand-in for the
Python base), run here: what it holds, and its ``gitsync run`` syncing a repository into
the local control plane as UID 65532, the user deploy/ runs it as.

The container runs chroot-isolated on the host's network: the API server and a
``git daemon`` on loopback are reached as a Pod reaches its Service addresses; the
kubeconfig is mounted read-only, as the Pod's ServiceAccount token is.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import re
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from gitsync import __version__
from gitsync.kube.client import Kube, path_of
from testenv import image
from testenv.build import BuildError
from tests.gitserver import Upstream, free_port
from tests.support import app_yaml, get, wait_until

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def built() -> str:
    try:
        return image.build()
    except BuildError as e:
        pytest.fail(f"the image could not be built: {e}", pytrace=False)


@pytest.fixture
def container(built: str) -> Iterator[image.Container]:
    c = image.Container(built)
    yield c
    c.remove()


def ok(container: image.Container, *args: str) -> str:
    done = container.run(*args)
    assert done.returncode == 0, f"{args}: {done.stderr[-2000:]}"
    return done.stdout + done.stderr


def test_the_image_runs_gitsync_as_65532_with_git_ssh_and_gpg(
    container: image.Container,
) -> None:
    assert ok(container, "id", "-u").strip() == str(image.UID)
    assert ok(container, "gitsync", "version").strip() == f"gitsync {__version__}"
    assert ok(container, "git", "--version").startswith("git version")
    assert "OpenSSH" in ok(container, "ssh", "-V")
    key = ok(container, "sh", "-c", "ssh-keygen -q -t ed25519 -N '' -f /tmp/k && cat /tmp/k.pub")
    assert key.startswith("ssh-ed25519 ")
    assert "gpg (GnuPG)" in ok(container, "gpg", "--version")
    # the Pod runs it read-only but for HOME, TMPDIR and the cache: each is 65532's
    owned = ok(container, "stat", "-c", "%u %a", "/home/gitsync", "/var/cache/gitsync")
    assert owned.split() == [str(image.UID), "700"] * 2


def test_the_image_has_no_compiler_and_exactly_the_locked_versions(
    container: image.Container,
) -> None:
    found = container.run("sh", "-c", "command -v gcc cc c++ clang make")
    assert found.returncode != 0 and found.stdout == "", found.stdout
    assert "No broken requirements found" in ok(container, "pip", "check")
    locked = dict(
        re.findall(
            r"^([A-Za-z0-9_.-]+)==([^\s;\\]+)", (ROOT / "requirements.lock").read_text(), re.M
        )
    )
    assert locked, "requirements.lock pins nothing"
    listed = json.loads(
        ok(
            container,
            "pip",
            "list",
            "--format",
            "json",
            "--path",
            "/usr/local/lib/python3.11/dist-packages",
        )
    )
    installed = {p["name"].lower().replace("_", "-"): p["version"] for p in listed}
    want = {n.lower().replace("_", "-"): v for n, v in locked.items()}
    want["gitsync"] = __version__
    # everything pip installed is locked, at the locked version, and nothing else
    assert installed == want


def embedded_kubeconfig(kubeconfig: str, path: Path) -> Path:
    """The admin kubeconfig with its files' contents inside: one file to mount."""
    config = yaml.safe_load(Path(kubeconfig).read_text())
    cluster = config["clusters"][0]["cluster"]
    ca = cluster.pop("certificate-authority")
    cluster["certificate-authority-data"] = base64.b64encode(Path(ca).read_bytes()).decode()
    user = config["users"][0]["user"]
    for field in ("client-certificate", "client-key"):
        user[f"{field}-data"] = base64.b64encode(Path(user.pop(field)).read_bytes()).decode()
    path.write_text(json.dumps(config))
    path.chmod(0o644)  # read by 65532 through the mount
    return path


def uid_of(port: int) -> int | None:
    """The UID of the process serving ``port``'s ``gitsync run`` (seen from the host)."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        if b"run" in argv and f"127.0.0.1:{port}".encode() in argv and b"buildah" not in argv[0]:
            uid = next(ln for ln in status.splitlines() if ln.startswith("Uid:"))
            return int(uid.split()[1])
    return None


def test_the_images_gitsync_run_syncs_a_repository(
    container: image.Container,
    kube: Kube,
    kubeconfig: str,
    crd: str,
    namespace: str,
    upstream: Upstream,
    git_daemon: str,
    tmp_path: Path,
) -> None:
    upstream.commit({f"apps/{n}.yaml": app_yaml(namespace, n) for n in ("web", "api")})
    mount = tmp_path / "kube"
    mount.mkdir(mode=0o755)
    mount.chmod(0o755)
    embedded_kubeconfig(kubeconfig, mount / "config")
    port = free_port()
    argv = container.argv(
        *("gitsync", "run", "--repo", git_daemon, "--path", "apps", "--interval", "5"),
        "--allow-insecure-git",  # git:// on loopback
        *("--allowed-namespaces", namespace, "--watch-namespace", namespace),
        *("--status-namespace", namespace, "--listen", f"127.0.0.1:{port}"),
        mounts=(f"{mount}:/etc/kube:ro",),
        env=("KUBECONFIG=/etc/kube/config",),
    )
    log = tmp_path / "gitsync.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:

        def synced() -> bool:
            if proc.poll() is not None:
                pytest.fail(f"the image's gitsync exited:\n{log.read_text()[-3000:]}")
            return all(get(kube, "Deployment", namespace, n) for n in ("web", "api"))

        wait_until(synced, timeout=120, what="the image's gitsync to sync the repository")
        assert uid_of(port) == image.UID
        for name in ("web", "api"):
            app = kube.get(path_of("MyApp", namespace, name))
            managers = {m["manager"] for m in app["metadata"]["managedFields"]}
            assert "gitsync" in managers, managers
    finally:
        with contextlib.suppress(ProcessLookupError):  # it may have exited
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
    assert "Traceback" not in log.read_text()
