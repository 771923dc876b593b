"""Build the control-plane binaries from the pinned Go modules, with a cache.

The binaries are built once per set of pins: the cache key is a hash of every
go.mod/go.sum under testenv/ and of the build flags, and the cache lives in the
user cache directory (outside the repository), so a fresh clone on a warm
machine reuses them and a change of pins rebuilds them.

    python -m testenv.build           # build (or reuse) and print the bin dir
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from testenv.locks import exclusive

HERE = Path(__file__).resolve().parent
KUBE_VERSION = "v1.35.4"
KWOK_VERSION = "0.8.0"
BUILD_TAGS = "selinux,notest"


@dataclass(frozen=True)
class Target:
    module: str  # directory under testenv/
    package: str  # Go import path of the main package
    binary: str


TARGETS = (
    Target("etcd", ".", "etcd"),
    Target("kube", "k8s.io/kubernetes/cmd/kube-apiserver", "kube-apiserver"),
    Target("kube", "k8s.io/kubernetes/cmd/kube-controller-manager", "kube-controller-manager"),
    Target("kube", "k8s.io/kubernetes/cmd/kube-scheduler", "kube-scheduler"),
    Target("kube", "k8s.io/kubernetes/cmd/kubectl", "kubectl"),
    Target("kwok", "sigs.k8s.io/kwok/cmd/kwok", "kwok"),
)


class BuildError(Exception):
    pass


def _ldflags(module: str) -> str:
    flags = ["-s", "-w"]
    if module == "kube":
        minor = KUBE_VERSION.split(".")[1]
        for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
            flags += [
                f"-X {pkg}.gitVersion={KUBE_VERSION}",
                f"-X {pkg}.gitMajor=1",
                f"-X {pkg}.gitMinor={minor}",
                f"-X {pkg}.gitTreeState=clean",
                f"-X {pkg}.buildDate=1970-01-01T00:00:00Z",
            ]
    elif module == "kwok":
        flags.append(f"-X sigs.k8s.io/kwok/pkg/consts.Version={KWOK_VERSION}")
    return " ".join(flags)


def cache_key() -> str:
    h = hashlib.sha256()
    for path in sorted(HERE.glob("*/go.*")) + sorted(HERE.glob("*/*.go")):
        h.update(path.relative_to(HERE).as_posix().encode())
        h.update(path.read_bytes())
    for t in TARGETS:
        h.update(f"{t.module} {t.package} {_ldflags(t.module)} {BUILD_TAGS}".encode())
    return h.hexdigest()[:16]


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "gitsync-testenv"


def bin_dir() -> Path:
    return cache_root() / cache_key() / "bin"


def _go() -> str:
    go = shutil.which("go")
    if go is None:
        raise BuildError(
            "the Go toolchain was not found on PATH; the control plane is built from Go "
            "modules (install Go >= 1.26 and run again)"
        )
    return go


def build(verbose: bool = True) -> Path:
    """Return the directory holding every binary, building what is missing (one
    builder at a time: a second waits, then finds them built)."""
    out = bin_dir()
    if all((out / t.binary).exists() for t in TARGETS):
        return out
    with exclusive(out.parent / "build.lock"):
        return _build(out, verbose)


def _build(out: Path, verbose: bool) -> Path:
    missing = [t for t in TARGETS if not (out / t.binary).exists()]
    if not missing:
        return out
    go = _go()
    tmp = out.parent / "bin.partial"
    tmp.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, GOTOOLCHAIN="local", CGO_ENABLED="0", GOFLAGS="-mod=readonly")
    for t in missing:
        start = time.monotonic()
        if verbose:
            print(
                f"testenv: building {t.binary} ({t.package} in testenv/{t.module}) ...", flush=True
            )
        cmd = [
            go,
            "build",
            "-trimpath",
            f"-tags={BUILD_TAGS}",
            f"-ldflags={_ldflags(t.module)}",
            "-o",
            str(tmp / t.binary),
            t.package,
        ]
        proc = subprocess.run(cmd, cwd=HERE / t.module, env=env, capture_output=True, text=True)
        if proc.returncode != 0:
            tail = "\n".join(proc.stderr.strip().splitlines()[-20:])
            raise BuildError(f"building {t.binary} failed (exit {proc.returncode}):\n{tail}")
        if verbose:
            print(f"testenv: built {t.binary} in {time.monotonic() - start:.0f}s", flush=True)
    out.mkdir(parents=True, exist_ok=True)
    for t in missing:
        os.replace(tmp / t.binary, out / t.binary)
    shutil.rmtree(tmp, ignore_errors=True)
    return out


def main() -> int:
    try:
        print(build())
    except BuildError as e:
        print(f"testenv: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
