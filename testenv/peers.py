"""Build the peers (helm, actionlint, the OLM bundle checker, OLM's olm-operator, Flux's
controllers and CLI) from pinned Go modules.

A sibling of testenv.build: each tool is built from its own Go module under
testenv/peers/<module>/ (so their dependency graphs never constrain each other
nor the control plane's; olm-operator and olmsteps share OLM's pins, and Flux's
two controllers and its CLI share one module, as one release), and each
is cached on its own under the user cache directory, keyed by a hash of that
module's go.mod, go.sum, Go sources and build flags. A change of one pin
rebuilds the tools of that module alone, and the control plane's cache key
(which covers testenv/*/go.*) is not touched.

    python -m testenv.peers            # build (or reuse) all; print each binary
    python -m testenv.peers helm       # one tool
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from testenv.build import BuildError, _go, cache_root
from testenv.locks import exclusive

PEERS = Path(__file__).resolve().parent / "peers"


@dataclass(frozen=True)
class Peer:
    name: str  # the binary's name
    package: str  # Go import path of the main package
    ldflags: str
    module: str = ""  # directory under testenv/peers/ when it is not ``name``
    #: build inside this pinned dependency, as its own main module (see _main_module)
    main_module: str = ""
    #: Go build tags
    tags: str = ""

    @property
    def dir(self) -> Path:
        return PEERS / (self.module or self.name)


HELM_VERSION = "v4.3.2"
ACTIONLINT_VERSION = "v1.7.12"
OLM_MODULE = "github.com/operator-framework/operator-lifecycle-manager"
OLM_VERSION = "v0.33.0"  # the newest release whose zip the Go module proxy serves
FLUX_VERSION = "v2.9.5"  # the flux CLI; its controllers are pinned in testenv/peers/flux/go.mod
PROMETHEUS_MODULE = "github.com/prometheus/prometheus"
PROMETHEUS_VERSION = "v0.316.0"  # as testenv/peers/prometheus/go.mod pins it (Prometheus 3.16)
#: the version Prometheus reports, and service discovery left out but for static configs,
#: files and HTTP (no cloud SDKs: a build several times smaller and faster)
_PROMETHEUS_FLAGS = f"-s -w -X github.com/prometheus/common/version.Version={PROMETHEUS_VERSION}"

TOOLS = {
    p.name: p
    for p in (
        Peer(
            "helm",
            "helm.sh/helm/v4/cmd/helm",
            f"-s -w -X helm.sh/helm/v4/internal/version.version={HELM_VERSION}",
        ),
        Peer(
            "actionlint",
            "github.com/rhysd/actionlint/cmd/actionlint",
            f"-s -w -X github.com/rhysd/actionlint.version={ACTIONLINT_VERSION}",
        ),
        Peer("bundlecheck", ".", "-s -w"),
        Peer(
            "olm",
            f"{OLM_MODULE}/cmd/olm",
            f"-s -w -X {OLM_MODULE}/pkg/version.OLMVersion={OLM_VERSION}",
        ),
        # OLM's resolver printing the ServiceAccount and RBAC an InstallPlan would create
        Peer("olmsteps", ".", "-s -w", module="olm"),
        # Flux, next to gitsync in the benchmark
        Peer("source-controller", "github.com/fluxcd/source-controller", "-s -w", "flux"),
        Peer("kustomize-controller", "github.com/fluxcd/kustomize-controller", "-s -w", "flux"),
        Peer(
            "flux",
            "./cmd/flux",
            f"-s -w -X main.VERSION={FLUX_VERSION.removeprefix('v')}",
            "flux",
            main_module="github.com/fluxcd/flux2/v2",
        ),
        # the alert rules' checks and unit tests, and the server that evaluates them
        Peer(
            "promtool",
            f"{PROMETHEUS_MODULE}/cmd/promtool",
            _PROMETHEUS_FLAGS,
            "prometheus",
            tags="remove_all_sd",
        ),
        Peer(
            "prometheus",
            f"{PROMETHEUS_MODULE}/cmd/prometheus",
            _PROMETHEUS_FLAGS,
            tags="remove_all_sd",
        ),
    )
}


def cache_key(peer: Peer) -> str:
    h = hashlib.sha256()
    for path in sorted(peer.dir.glob("go.*")) + sorted(peer.dir.glob("*.go")):
        h.update(path.name.encode())
        h.update(path.read_bytes())
    h.update(f"{peer.package} {peer.ldflags}".encode())
    if peer.tags:  # (only then: the keys of the tools built without tags stay as they were)
        h.update(f" tags={peer.tags}".encode())
    return h.hexdigest()[:16]


def binary(name: str) -> Path:
    """Where the named tool is (or will be) cached; it may not be built yet."""
    peer = TOOLS[name]
    return cache_root() / "peers" / f"{peer.name}-{cache_key(peer)}" / peer.name


def build(name: str, verbose: bool = True) -> Path:
    """Return the path of the named tool, building it if it is not cached."""
    out = binary(name)
    if out.exists():
        return out
    # one builder at a time: a second (a test fixture, another run) waits, then finds it
    with exclusive(out.parent / "build.lock"):
        return out if out.exists() else _build(name, out, verbose)


def _build(name: str, out: Path, verbose: bool) -> Path:
    peer = TOOLS[name]
    partial = out.with_name(f"{peer.name}.partial")
    # GOFLAGS from the caller (e.g. -p=1 on a busy machine) are kept; go.sum is the pin.
    goflags = f"{os.environ.get('GOFLAGS', '')} -mod=readonly".strip()
    env = dict(os.environ, GOTOOLCHAIN="local", CGO_ENABLED="0", GOFLAGS=goflags)
    start = time.monotonic()
    if verbose:
        print(f"testenv: building {peer.name} ({peer.package}) ...", flush=True)
    cmd = [_go(), "build", "-trimpath", f"-ldflags={peer.ldflags}", "-o", str(partial)]
    if peer.tags:
        cmd.insert(2, f"-tags={peer.tags}")
    cwd = _main_module(peer) if peer.main_module else peer.dir
    proc = subprocess.run([*cmd, peer.package], cwd=cwd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = "\n".join(proc.stderr.strip().splitlines()[-20:])
        raise BuildError(f"building {peer.name} failed (exit {proc.returncode}):\n{tail}")
    os.replace(partial, out)
    if verbose:
        print(f"testenv: built {peer.name} in {time.monotonic() - start:.0f}s", flush=True)
    return out


def module_dir(name: str, module: str) -> Path:
    """The module cache directory of ``module`` as the named tool's go.mod pins it (files a
    tool's module ships, e.g. OLM's CRDs, are read from there, never copied)."""
    peer = TOOLS[name]
    env = dict(os.environ, GOTOOLCHAIN="local", GOFLAGS="-mod=readonly")
    proc = subprocess.run(
        [_go(), "list", "-m", "-f", "{{.Dir}}", module],
        cwd=peer.dir,
        env=env,
        capture_output=True,
        text=True,
    )
    found = Path(proc.stdout.strip())
    if proc.returncode != 0 or not proc.stdout.strip() or not found.is_dir():
        raise BuildError(
            f"{module} is not in the module cache as testenv/peers/{peer.dir.name}/go.mod "
            f"pins it (run `python -m testenv.peers {name}`): {proc.stderr.strip()}"
        )
    return found


def _main_module(peer: Peer) -> Path:
    """A writable copy of the pinned ``peer.main_module`` (version and checksum from
    our go.sum), to build in as the main module, with its own go.sum and replaces.

    For the flux CLI: cmd/flux embeds manifests/*.yaml, which flux2's Makefile
    generates at release time and its module zip lacks, so ``go build`` of it as a
    dependency stops at the embed pattern (and -overlay may not touch the module
    cache). Those files serve ``flux install`` only; one placeholder lets the rest
    (``flux diff``, what the benchmark runs) build."""
    env = dict(os.environ, GOTOOLCHAIN="local", GOFLAGS="-mod=readonly")
    # nothing built here imports it, so it may not be in the module cache yet
    got = subprocess.run(
        [_go(), "mod", "download", peer.main_module],
        cwd=peer.dir,
        env=env,
        capture_output=True,
        text=True,
    )
    if got.returncode != 0:
        raise BuildError(f"cannot fetch {peer.main_module}: {got.stderr.strip()[-300:]}")
    src = binary(peer.name).parent / "src"
    shutil.rmtree(src, ignore_errors=True)
    shutil.copytree(module_dir(peer.name, peer.main_module), src)
    for path in [src, *src.rglob("*")]:
        path.chmod(path.stat().st_mode | stat.S_IWUSR)  # the module cache is read-only
    manifests = src / "cmd" / "flux" / "manifests"
    manifests.mkdir(exist_ok=True)
    (manifests / "placeholder.yaml").write_text("# not generated: flux install is not built\n")
    return src


def main(argv: list[str]) -> int:
    names = argv or list(TOOLS)
    unknown = [n for n in names if n not in TOOLS]
    if unknown:
        print(f"testenv: no such tool {unknown[0]!r} (known: {', '.join(TOOLS)})", file=sys.stderr)
        return 2
    try:
        for name in names:
            print(build(name))
    except BuildError as e:
        print(f"testenv: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
