"""Build the packaging tools (helm, actionlint, the OLM bundle checker) from pinned Go modules.

A sibling of testenv.build: each tool is its own Go module under
testenv/peers/<name>/ (so their dependency graphs never constrain each other
nor the control plane's), and each is cached on its own under the user cache
directory, keyed by a hash of that module's go.mod, go.sum, Go sources and
build flags. A change of one pin rebuilds that tool alone, and the control
plane's cache key (which covers testenv/*/go.*) is not touched.

    python -m testenv.peers            # build (or reuse) all; print each binary
    python -m testenv.peers helm       # one tool
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from testenv.build import BuildError, _go, cache_root

PEERS = Path(__file__).resolve().parent / "peers"


@dataclass(frozen=True)
class Peer:
    name: str  # directory under testenv/peers/, and the binary's name
    package: str  # Go import path of the main package
    ldflags: str


HELM_VERSION = "v4.3.2"
ACTIONLINT_VERSION = "v1.7.12"

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
    )
}


def cache_key(peer: Peer) -> str:
    h = hashlib.sha256()
    module = PEERS / peer.name
    for path in sorted(module.glob("go.*")) + sorted(module.glob("*.go")):
        h.update(path.name.encode())
        h.update(path.read_bytes())
    h.update(f"{peer.package} {peer.ldflags}".encode())
    return h.hexdigest()[:16]


def binary(name: str) -> Path:
    """Where the named tool is (or will be) cached; it may not be built yet."""
    peer = TOOLS[name]
    return cache_root() / "peers" / f"{peer.name}-{cache_key(peer)}" / peer.name


def build(name: str, verbose: bool = True) -> Path:
    """Return the path of the named tool, building it if it is not cached."""
    peer = TOOLS[name]
    out = binary(name)
    if out.exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(f"{peer.name}.partial")
    # GOFLAGS from the caller (e.g. -p=1 on a busy machine) are kept; go.sum is the pin.
    goflags = f"{os.environ.get('GOFLAGS', '')} -mod=readonly".strip()
    env = dict(os.environ, GOTOOLCHAIN="local", CGO_ENABLED="0", GOFLAGS=goflags)
    start = time.monotonic()
    if verbose:
        print(f"testenv: building {peer.name} ({peer.package}) ...", flush=True)
    cmd = [_go(), "build", "-trimpath", f"-ldflags={peer.ldflags}", "-o", str(partial)]
    proc = subprocess.run(
        [*cmd, peer.package], cwd=PEERS / peer.name, env=env, capture_output=True, text=True
    )
    if proc.returncode != 0:
        tail = "\n".join(proc.stderr.strip().splitlines()[-20:])
        raise BuildError(f"building {peer.name} failed (exit {proc.returncode}):\n{tail}")
    os.replace(partial, out)
    if verbose:
        print(f"testenv: built {peer.name} in {time.monotonic() - start:.0f}s", flush=True)
    return out


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
