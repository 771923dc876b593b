"""``make demo``: gitsync end to end against the local control plane.

A git server (``git daemon`` on loopback) serves a repository made from
examples/repo; ``gitsync run --create-namespace`` syncs it, creating the namespaces
its MyApps name; the demo pushes an image bump and a removal, triggers the push
webhook, and shows both applied and pruned; a ``kubectl scale`` shows drift being
corrected; then a commit sets one MyApp to ``driftPolicy: report``, a ``kubectl
scale`` of its Deployment is left standing, and ``gitsync drift`` and the MyApp's
``status.drift`` show which field, which values and who changed it. Then everything
it started is stopped and the namespaces are deleted. Exits 0 on success, 1 when a
step does not happen in time.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import yaml

from testenv import cluster

ROOT = Path(__file__).resolve().parent.parent
KUBECTL = str(cluster.STATE / "bin" / "kubectl")
GITSYNC = str(Path(sys.executable).parent / "gitsync")
SECRET = "demo-webhook-secret"
NAMESPACES = ("shop", "blog")
#: names the demo's Lease and status ConfigMap (in STATUS_NAMESPACE), deleted at the end
INSTANCE = "gitsync-demo"
STATUS_NAMESPACE = "default"


def step(text: str) -> None:
    print(f"\n\033[1m==> {text}\033[0m", flush=True)


def sh(*argv: str, cwd: Path | None = None, check: bool = True) -> str:
    env = {**os.environ, "KUBECONFIG": str(cluster.KUBECONFIG)}
    proc = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=120, env=env)
    if check and proc.returncode != 0:
        raise SystemExit(f"demo: {' '.join(argv[:3])} failed: {proc.stderr.strip()}")
    return proc.stdout


def kubectl(*args: str) -> str:
    return sh(KUBECTL, *args)


def wait(what: str, check: Callable[[], bool], timeout: float = 60) -> float:
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if check():
            took = time.monotonic() - start
            print(f"    {what}: {took:.1f}s")
            return took
        time.sleep(0.2)
    raise SystemExit(f"demo: timed out waiting for {what}")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def process(argv: list[str], log: Path) -> Iterator[subprocess.Popen[bytes]]:
    env = {**os.environ, "KUBECONFIG": str(cluster.KUBECONFIG)}
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env)
    try:
        yield proc
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()


def git(work: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "demo",
        "GIT_AUTHOR_EMAIL": "demo@example.com",
        "GIT_COMMITTER_NAME": "demo",
        "GIT_COMMITTER_EMAIL": "demo@example.com",
        "GIT_CONFIG_GLOBAL": os.devnull,
    }
    proc = subprocess.run(["git", "-C", str(work), *args], capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise SystemExit(f"demo: git {args[0]} failed: {proc.stderr.strip()}")
    return proc.stdout.strip()


def make_repo(tmp: Path) -> tuple[Path, Path]:
    bare, work = tmp / "srv" / "apps.git", tmp / "work"
    bare.parent.mkdir()
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(bare)], check=True)
    shutil.copytree(ROOT / "examples" / "repo", work)
    git(work, "init", "-q", "-b", "main")
    git(work, "add", ".")
    git(work, "commit", "-q", "-m", "Initial apps")
    git(work, "push", "-q", str(bare), "main")
    return bare, work


def push(work: Path, bare: Path, message: str) -> str:
    git(work, "add", "--all")
    git(work, "commit", "-q", "-m", message)
    git(work, "push", "-q", str(bare), "main")
    return git(work, "rev-parse", "HEAD")


def webhook(port: int, sha: str) -> int:
    """A push event as GitHub sends it: the body names the new commit, so two pushes
    are two deliveries (gitsync drops a repeated body as a redelivery)."""
    body = json.dumps({"ref": "refs/heads/main", "after": sha}).encode()
    sig = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/hooks/git", data=body, method="POST")
    req.add_header("X-Hub-Signature-256", sig)
    with urllib.request.urlopen(req, timeout=10) as resp:
        return int(resp.status)


def deploy_field(ns: str, name: str, jsonpath: str) -> str:
    """One field of a Deployment ("" while it does not exist)."""
    return sh(KUBECTL, "-n", ns, "get", "deploy", name, "-o", f"jsonpath={jsonpath}", check=False)


def run_demo(tmp: Path) -> None:
    step("Installing the MyApp CRD")
    kubectl("apply", "--server-side", "--force-conflicts", "-k", str(ROOT / "crds"))
    kubectl("wait", "--for=condition=Established", "crd/myapps.apps.example.com")
    # a clean slate: what an earlier run left is removed first
    sh(
        KUBECTL,
        "delete",
        "namespace",
        *NAMESPACES,
        "--ignore-not-found",
        "--wait=true",
        check=False,
    )

    step("Serving a Git repository made from examples/repo with git daemon")
    bare, work = make_repo(tmp)
    port = free_port()
    daemon_argv = [
        "git",
        "daemon",
        "--reuseaddr",
        "--export-all",
        f"--base-path={bare.parent}",
        "--listen=127.0.0.1",
        f"--port={port}",
        str(bare.parent),
    ]
    repo_url = f"git://127.0.0.1:{port}/apps.git"
    print(f"    {repo_url}")
    secret_file = tmp / "webhook-secret"
    secret_file.write_text(SECRET)
    http_port = free_port()
    with (
        process(daemon_argv, tmp / "git-daemon.log"),
        process(
            [
                GITSYNC,
                "--log-format=text",
                "run",
                "--repo",
                repo_url,
                "--allow-insecure-git",
                "--path",
                "apps",
                "--instance-name",
                INSTANCE,
                "--status-namespace",
                STATUS_NAMESPACE,
                # the namespaces of examples/repo do not exist yet: gitsync makes them,
                # and these only (a shared cluster may hold others)
                "--create-namespace",
                "--allowed-namespaces",
                ",".join(NAMESPACES),
                "--interval",
                "30",
                "--listen",
                f"127.0.0.1:{http_port}",
                "--webhook-secret-file",
                str(secret_file),
                "--cache-dir",
                str(tmp / "cache"),
            ],
            tmp / "gitsync.log",
        ) as gitsync,
    ):
        step(
            "gitsync run: the first sync creates the namespaces and applies every MyApp;"
            " the operator renders Deployments"
        )
        wait("all 6 MyApps Available", lambda: _available() == 6, timeout=90)
        print(kubectl("get", "namespaces", "-l", "app.kubernetes.io/managed-by=gitsync"))
        print(kubectl("get", "myapps", "-A"))

        step("git push: bump the frontend image and remove the blog's comments app")
        front = work / "apps" / "shop" / "frontend.yaml"
        front.write_text(front.read_text().replace("nginx:1.27", "nginx:1.28"))
        (work / "apps" / "blog" / "comments.yaml").unlink()
        sha = push(work, bare, "Bump frontend, retire comments")
        print(f"    pushed {sha[:7]}; webhook -> HTTP {webhook(http_port, sha)}")
        wait(
            "image bump applied to the Deployment",
            lambda: (
                deploy_field("shop", "frontend", "{.spec.template.spec.containers[0].image}")
                == "nginx:1.28"
            ),
        )
        wait(
            "comments pruned (MyApp and, by the garbage collector, its Deployment)",
            lambda: (
                "comments"
                not in sh(KUBECTL, "-n", "blog", "get", "deploy", "-o", "name", check=False)
            ),
        )
        print(kubectl("get", "myapps", "-A"))

        step("kubectl scale: drift by hand is recorded and corrected (policy correct)")
        kubectl("-n", "shop", "scale", "deployment/frontend", "--replicas=5")
        wait(
            "replicas back to 2",
            lambda: deploy_field("shop", "frontend", "{.spec.replicas}") == "2",
        )
        step("git push: cart's drift is only reported from now on (driftPolicy: report)")
        cart = work / "apps" / "shop" / "cart.yaml"
        cart.write_text(cart.read_text().replace("spec:\n", "spec:\n  driftPolicy: report\n", 1))
        sha = push(work, bare, "cart: report drift, do not correct it")
        print(f"    pushed {sha[:7]}; webhook -> HTTP {webhook(http_port, sha)}")
        wait(
            "driftPolicy report applied",
            lambda: (
                sh(
                    KUBECTL,
                    "-n",
                    "shop",
                    "get",
                    "myapp",
                    "cart",
                    "-o",
                    "jsonpath={.spec.driftPolicy}",
                    check=False,
                )
                == "report"
            ),
        )
        kubectl("-n", "shop", "scale", "deployment/cart", "--replicas=5")
        wait("the drift recorded in cart's status", lambda: bool(_drift("shop", "cart")))
        step("gitsync drift: which field, its desired and live values, and who changed it")
        drift = (GITSYNC, "drift", "-n", "shop", "--instance-name", INSTANCE)
        print(sh(*drift, "--status-namespace", STATUS_NAMESPACE, check=False))
        step("kubectl get myapp cart -o yaml: the same, in status.drift")
        print(yaml.safe_dump({"status": {"drift": _drift("shop", "cart")}}, sort_keys=False))
        print(
            f"    the Deployment still runs {deploy_field('shop', 'cart', '{.spec.replicas}')}"
            " replicas: reported, not corrected"
        )
        step("gitsync diff: nothing to write; the drift left by policy report is shown as such")
        clone = tmp / "clone"
        subprocess.run(["git", "clone", "-q", str(bare), str(clone)], check=True)
        print(
            sh(
                GITSYNC,
                "diff",
                "--repo",
                str(clone),
                "--instance-name",
                INSTANCE,
                "--path",
                "apps",
                check=False,
            )
        )
        if gitsync.poll() is not None:
            raise SystemExit("demo: gitsync exited early")
    step("Stopped gitsync and the git server")


def _drift(ns: str, name: str) -> list[dict[str, object]]:
    """``status.drift`` of a MyApp, as ``kubectl get -o yaml`` shows it."""
    out = sh(KUBECTL, "-n", ns, "get", "myapp", name, "-o", "yaml", check=False)
    doc = yaml.safe_load(out) if out else None
    return list(((doc or {}).get("status") or {}).get("drift") or [])


def _available() -> int:
    """Available MyApps in the demo's namespaces (a shared control plane may hold others)."""
    phases = 'jsonpath={range .items[*]}{.status.phase}{"\\n"}{end}'
    outs = [sh(KUBECTL, "-n", ns, "get", "myapps", "-o", phases, check=False) for ns in NAMESPACES]
    return sum(1 for out in outs for line in out.splitlines() if line == "Available")


def main() -> int:
    was_running = cluster.healthy(cluster._load_state())
    cluster.up()
    tmp = Path(tempfile.mkdtemp(prefix="gitsync-demo-"))
    try:
        try:
            run_demo(tmp)
        except SystemExit:
            log = tmp / "gitsync.log"
            if log.exists():
                print("--- last lines of the gitsync log ---", file=sys.stderr)
                print("\n".join(log.read_text().splitlines()[-30:]), file=sys.stderr)
            raise
    finally:
        # what the demo made: gitsync's namespaces (never deleted by gitsync), its
        # status ConfigMap and Lease
        sh(KUBECTL, "delete", "namespace", *NAMESPACES, "--wait=false", check=False)
        ns = ("-n", STATUS_NAMESPACE, "--ignore-not-found")
        sh(KUBECTL, "delete", *ns, "configmap", f"gitsync-status-{INSTANCE}", check=False)
        sh(KUBECTL, "delete", *ns, "lease", f"gitsync-leader-{INSTANCE}", check=False)
        shutil.rmtree(tmp, ignore_errors=True)
        if not was_running:
            cluster.down()
    print("\ndemo: done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
