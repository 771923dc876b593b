"""Build gitsync's image from the real Dockerfile, without a Docker engine.

Debian's ``buildah`` builds it as root (storage driver ``vfs``, ``--isolation chroot``:
no overlay mounts, no OCI runtime). The Dockerfile's base, ``python:3.11-slim-bookworm``,
comes from a registry this machine does not reach, so a stand-in is made with
``mmdebstrap``: Debian bookworm (minbase) with Debian's python3 (3.11) and pip, given to
the Dockerfile through its ``PYTHON_IMAGE`` argument. Two things the stand-in needs that
the real base does not:

- the CA certificates this machine trusts: PyPI is reached through a TLS-intercepting
  proxy here, and the build stage's ``pip wheel`` would refuse its certificate. They go
  to /usr/local/share/ca-certificates, so that the bundle Debian builds (and rebuilds on
  every ``apt-get install`` of a package with certificates) keeps them;
- ``break-system-packages`` in /etc/pip.conf: Debian's Python is "externally managed"
  (PEP 668), and the Dockerfile installs gitsync system-wide as the real base allows.

Both are reused while their inputs are unchanged (the image: a hash of the Dockerfile
and of everything it copies; the stand-in: of this file and the CA bundle), in buildah's
own storage. Neither is ever pushed anywhere.

    python -m testenv.image          # build (or reuse); print the image's name
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from testenv.build import BuildError, cache_root
from testenv.locks import exclusive

ROOT = Path(__file__).resolve().parent.parent
SUITE = "bookworm"
MIRROR = "http://deb.debian.org/debian"
CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
#: what the Dockerfile COPYs, with the Dockerfile itself
INPUTS = ("Dockerfile", "requirements.lock", "pyproject.toml", "README.md", "gitsync")
BUILDAH = ("buildah", "--storage-driver", "vfs")
REPOSITORY = "localhost/gitsync"
STANDIN = "localhost/gitsync-python-standin"
#: the image's user (deploy/deployment.yaml runs it so)
UID = 65532


def _hash_tree(h: Any, path: Path) -> None:
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    for p in files:
        if "__pycache__" in p.parts:
            continue
        h.update(p.relative_to(ROOT).as_posix().encode() + b"\0")
        h.update(p.read_bytes())


def image_key() -> str:
    h = hashlib.sha256(standin_key().encode())
    for name in INPUTS:
        _hash_tree(h, ROOT / name)
    return h.hexdigest()[:16]


def standin_key() -> str:
    """Changes with what the stand-in is made of: its mmdebstrap command and the CAs."""
    h = hashlib.sha256("\0".join(_standin_args(Path("rootfs.tar"))).encode())
    if CA_BUNDLE.exists():
        h.update(CA_BUNDLE.read_bytes())
    return h.hexdigest()[:16]


def _standin_args(tarball: Path) -> list[str]:
    hooks = []
    if CA_BUNDLE.exists():
        hooks += [
            "--customize-hook=mkdir -p $1/usr/local/share/ca-certificates",
            f"--customize-hook=copy-in {CA_BUNDLE} /usr/local/share/ca-certificates/",
            "--customize-hook=cd $1/usr/local/share/ca-certificates && "
            "mv ca-certificates.crt machine.crt",
            "--customize-hook=chroot $1 update-ca-certificates",
        ]
    return [
        "mmdebstrap",
        "--variant=minbase",
        "--include=python3,python3-pip,ca-certificates",
        "--customize-hook=printf '[global]\\nbreak-system-packages = true\\n' > $1/etc/pip.conf",
        *hooks,
        # as python:3.11-slim: no package lists, no docs
        "--customize-hook=rm -rf $1/var/lib/apt/lists/* $1/var/cache/apt/*.bin",
        SUITE,
        str(tarball),
        MIRROR,
    ]


def _run(*args: str, timeout: float = 1800) -> str:
    proc = subprocess.run(args, capture_output=True, text=True, timeout=timeout, check=False)
    if proc.returncode != 0:
        what = " ".join(args[:4])
        raise BuildError(f"{what} ... failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return proc.stdout


def exists(name: str) -> bool:
    proc = subprocess.run(
        [*BUILDAH, "inspect", "--type", "image", name], capture_output=True, check=False
    )
    return proc.returncode == 0


def tools() -> None:
    """buildah and mmdebstrap, from Debian's packages (as root), when missing."""
    missing = [t for t in ("buildah", "mmdebstrap") if shutil.which(t) is None]
    if not missing:
        return
    if os.geteuid() != 0:
        raise BuildError(
            f"{' and '.join(missing)} not found; as root: apt-get install buildah mmdebstrap"
        )
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for args in (
        ["apt-get", "update", "-q"],
        ["apt-get", "install", "-y", "-q", "--no-install-recommends", "buildah", "mmdebstrap"],
    ):
        proc = subprocess.run(args, env=env, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise BuildError(f"{' '.join(args)} failed:\n{proc.stderr[-2000:]}")


def standin() -> str:
    """The stand-in for python:3.11-slim-bookworm, made when missing."""
    name = f"{STANDIN}:{SUITE}-{standin_key()}"
    if exists(name):
        return name
    with tempfile.TemporaryDirectory(prefix="gitsync-standin-") as tmp:
        tarball = Path(tmp) / "rootfs.tar"
        _run(*_standin_args(tarball))
        container = _run(*BUILDAH, "from", "scratch").strip()
        try:
            _run(*BUILDAH, "add", container, str(tarball), "/")
            _run(*BUILDAH, "config", "--cmd", "python3", "--env", "LANG=C.UTF-8", container)
            _run(*BUILDAH, "commit", "--quiet", container, name)
        finally:
            subprocess.run([*BUILDAH, "rm", container], capture_output=True, check=False)
    return name


def build(verbose: bool = True) -> str:
    """The image of the working tree (reused while its inputs are unchanged)."""
    tools()
    name = f"{REPOSITORY}:{image_key()}"
    with exclusive(cache_root() / "image.lock"):
        if exists(name):
            return name
        start = time.monotonic()
        base = standin()
        if verbose:
            print(f"image: the stand-in base {base} ready", file=sys.stderr)
        _run(
            *BUILDAH,
            "build",
            "--isolation",
            "chroot",
            "--layers",
            "--build-arg",
            f"PYTHON_IMAGE={base}",
            "--tag",
            name,
            "--file",
            str(ROOT / "Dockerfile"),
            str(ROOT),
        )
        if verbose:
            took = time.monotonic() - start
            print(f"image: built {name} in {took:.0f}s", file=sys.stderr)
        _prune(keep=name)
    return name


def _prune(keep: str) -> None:
    """Images of earlier working trees go (vfs stores every layer whole: about 0.5 GiB
    each), and the layers only they used; the stand-in base stays."""
    listed = _run(*BUILDAH, "images", "--noheading", "--format", "{{.Name}}:{{.Tag}}")
    for line in listed.split():
        if line.startswith(f"{REPOSITORY}:") and line != keep:
            subprocess.run([*BUILDAH, "rmi", line], capture_output=True, check=False)
    subprocess.run([*BUILDAH, "rmi", "--prune"], capture_output=True, check=False)


class Container:
    """A working container of an image: commands run in it as the image says (its USER,
    its environment), chroot-isolated, on the host's network."""

    def __init__(self, image: str) -> None:
        self.id = _run(*BUILDAH, "from", "--pull-never", "--quiet", image).strip()

    def argv(
        self, *args: str, user: str = "", mounts: tuple[str, ...] = (), env: tuple[str, ...] = ()
    ) -> list[str]:
        """The command line that runs ``args`` in it (``mounts``: ``HOST:PATH[:ro]``;
        ``env``: ``NAME=VALUE``; ``user``: ``UID[:GID]``, else the image's)."""
        flags = ["--isolation", "chroot"]
        flags += [f"--volume={m}" for m in mounts]
        flags += [f"--env={e}" for e in env]
        if user:
            flags += ["--user", user]
        return [*BUILDAH, "run", *flags, self.id, "--", *args]

    def run(self, *args: str, timeout: float = 300, **kw: Any) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self.argv(*args, **kw), capture_output=True, text=True, timeout=timeout, check=False
        )

    def remove(self) -> None:
        subprocess.run([*BUILDAH, "rm", self.id], capture_output=True, check=False)


def main() -> int:
    try:
        print(build())
    except BuildError as e:
        print(f"image: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
