"""``make run``: the daemon in the foreground against the local control plane,
syncing examples/repo (a plain directory: edit a file, the next poll applies it)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from testenv import cluster

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    cluster.up()
    env = {**os.environ, "KUBECONFIG": str(cluster.KUBECONFIG)}
    kubectl = str(cluster.STATE / "bin" / "kubectl")
    crds = str(ROOT / "crds" / "myapps.apps.example.com.yaml")
    subprocess.run(
        [kubectl, "apply", "--server-side", "--force-conflicts", "-f", crds], env=env, check=True
    )
    for ns in ("shop", "blog"):
        subprocess.run([kubectl, "create", "namespace", ns], env=env, capture_output=True)
    gitsync = str(Path(sys.executable).parent / "gitsync")
    argv = [
        gitsync,
        "run",
        "--repo",
        str(ROOT / "examples" / "repo"),
        "--path",
        "apps",
        "--interval",
        "10",
        "--listen",
        "127.0.0.1:8080",
        *sys.argv[1:],
    ]
    print(f"gitsync: {' '.join(argv[1:])}  (Ctrl-C to stop)", flush=True)
    os.execve(gitsync, argv, env)


if __name__ == "__main__":
    sys.exit(main())
