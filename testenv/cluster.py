"""Start and stop the local Kubernetes control plane.

    python -m testenv.cluster up      # start (or reuse) it; returns when it is ready
    python -m testenv.cluster down    # stop every process it started
    python -m testenv.cluster status  # exit 0 when it is up and healthy

Real components, no mocks: etcd, kube-apiserver (RBAC on, its own CA), the
controller manager (ReplicaSets, garbage collector, service-account tokens),
the scheduler, and kwok, which runs fake Nodes and makes the Pods bound to
them Running and Ready. Everything lives under one state directory,
``.testenv/`` at the repository root: certificates, etcd data, one log per
component, the admin kubeconfig and ``bin/`` (links to the cached binaries).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from testenv import build
from testenv.locks import exclusive

ROOT = build.HERE.parent
STATE = Path(os.environ.get("GITSYNC_TESTENV_DIR", ROOT / ".testenv"))
KUBECONFIG = STATE / "kubeconfig"
#: the API server's audit log: one JSON line per write of a MyApp, its status, a
#: Deployment or a Lease (metadata only: who, what, when, the answer)
AUDIT_LOG = STATE / "logs" / "audit.log"
AUDIT_POLICY = """\
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
  verbs: [create, update, patch, delete]
  resources:
  - group: apps
    resources: [deployments]
  - group: apps.example.com
    resources: [myapps, myapps/status]
  - group: coordination.k8s.io
    resources: [leases]
  - group: ""
    resources: [configmaps]
- level: None
"""
NODES = ("kwok-node-0", "kwok-node-1")
STOP_GRACE = 10.0
# API Priority and Fairness, off by default (the shared control plane serves many
# clients at once and must not throttle them); the fault tests of throttling turn it on
# in a private control plane, with inflight limits low enough that APF really queues.
APF = os.environ.get("GITSYNC_TESTENV_APF", "") == "1"


class ClusterError(Exception):
    pass


@dataclass
class Proc:
    name: str
    pid: int
    log: Path
    argv: list[str]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def log_tail(path: Path, lines: int = 15) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return "(no log)"
    return "\n".join("    " + line for line in text[-lines:])


# --- state ------------------------------------------------------------------


def _state_file() -> Path:
    return STATE / "state.json"


def _load_state() -> dict[str, Any]:
    try:
        data: dict[str, Any] = json.loads(_state_file().read_text())
        return data
    except (OSError, ValueError):
        return {}


def _save_state(state: dict[str, Any]) -> None:
    _state_file().write_text(json.dumps(state, indent=2))


def processes() -> dict[str, int]:
    """The running components of the control plane: name → pid (empty when down)."""
    return {p["name"]: p["pid"] for p in _load_state().get("procs", []) if _alive(p["pid"])}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a zombie is not alive; /proc tells us
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


# --- certificates ---------------------------------------------------------


def _openssl(*args: str) -> None:
    proc = subprocess.run(["openssl", *args], capture_output=True, text=True)
    if proc.returncode != 0:
        raise ClusterError(f"openssl {args[0]} failed: {proc.stderr.strip()[-400:]}")


def make_pki(pki: Path) -> None:
    """A CA, the apiserver's serving certificate, an admin client certificate in
    system:masters, and the service-account signing key pair."""
    if shutil.which("openssl") is None:
        raise ClusterError("openssl was not found on PATH; it generates the certificates")
    pki.mkdir(parents=True, exist_ok=True)
    ca_key, ca_crt = pki / "ca.key", pki / "ca.crt"
    _openssl(
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        str(ca_key),
        "-out",
        str(ca_crt),
        "-days",
        "3650",
        "-subj",
        "/CN=gitsync-testenv-ca",
    )
    ext = pki / "serving.ext"
    ext.write_text(
        "subjectAltName=IP:127.0.0.1,IP:10.0.0.1,DNS:localhost,DNS:kubernetes,"
        "DNS:kubernetes.default,DNS:kubernetes.default.svc\n"
        "extendedKeyUsage=serverAuth\n"
    )
    client_ext = pki / "client.ext"
    client_ext.write_text("extendedKeyUsage=clientAuth\n")
    for name, subj, extfile in (
        ("apiserver", "/CN=kube-apiserver", ext),
        ("admin", "/O=system:masters/CN=gitsync-testenv-admin", client_ext),
    ):
        key, csr, crt = pki / f"{name}.key", pki / f"{name}.csr", pki / f"{name}.crt"
        _openssl(
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            str(key),
            "-out",
            str(csr),
            "-subj",
            subj,
        )
        _openssl(
            "x509",
            "-req",
            "-in",
            str(csr),
            "-CA",
            str(ca_crt),
            "-CAkey",
            str(ca_key),
            "-CAcreateserial",
            "-out",
            str(crt),
            "-days",
            "3650",
            "-extfile",
            str(extfile),
        )
    _openssl("genrsa", "-out", str(pki / "sa.key"), "2048")
    _openssl("rsa", "-in", str(pki / "sa.key"), "-pubout", "-out", str(pki / "sa.pub"))


def write_kubeconfig(path: Path, server: str, pki: Path) -> None:
    path.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {
                        "name": "gitsync-testenv",
                        "cluster": {"server": server, "certificate-authority": str(pki / "ca.crt")},
                    }
                ],
                "users": [
                    {
                        "name": "admin",
                        "user": {
                            "client-certificate": str(pki / "admin.crt"),
                            "client-key": str(pki / "admin.key"),
                        },
                    }
                ],
                "contexts": [
                    {
                        "name": "gitsync-testenv",
                        "context": {"cluster": "gitsync-testenv", "user": "admin"},
                    }
                ],
                "current-context": "gitsync-testenv",
            },
            indent=2,
        )
    )


# --- talking to the apiserver --------------------------------------------------


def _ssl_context(pki: Path) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(pki / "ca.crt"))
    ctx.load_cert_chain(str(pki / "admin.crt"), str(pki / "admin.key"))
    return ctx


def api(
    server: str,
    pki: Path,
    method: str,
    path: str,
    body: Any = None,
    content_type: str = "application/json",
    timeout: float = 5.0,
) -> tuple[int, Any]:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(server + path, data=data, method=method)
    if data is not None:
        req.add_header("Content-Type", content_type)
    try:
        with urllib.request.urlopen(req, context=_ssl_context(pki), timeout=timeout) as resp:
            raw = resp.read()
            status = resp.status
    except urllib.error.HTTPError as e:
        raw, status = e.read(), e.code
    try:
        return status, json.loads(raw)
    except ValueError:
        return status, raw.decode(errors="replace")


def healthy(state: dict[str, Any]) -> bool:
    server = state.get("server")
    if not server or not KUBECONFIG.exists():
        return False
    if not all(_alive(p["pid"]) for p in state.get("procs", [])):
        return False
    try:
        status, _ = api(server, STATE / "pki", "GET", "/readyz", timeout=3)
    except OSError:
        return False
    return status == 200


# --- processes ------------------------------------------------------------------


def start(name: str, argv: list[str], procs: list[Proc]) -> Proc:
    log = STATE / "logs" / f"{name}.log"
    with log.open("ab") as out:
        # a session of its own: `down` stops the whole process group
        p = subprocess.Popen(
            argv,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            cwd=STATE,
        )
    proc = Proc(name, p.pid, log, argv)
    procs.append(proc)
    return proc


def wait_for(what: str, proc: Proc | None, check: Any, timeout: float) -> None:
    """Poll ``check()`` until true; fail fast with the component's log when it exits."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and not _alive(proc.pid):
            tail = log_tail(proc.log)
            msg = f"{proc.name} exited while waiting for {what}; log {proc.log}:\n{tail}"
            raise ClusterError(msg)
        with contextlib.suppress(OSError):
            if check():
                return
        time.sleep(0.3)
    where = f"; log {proc.log}:\n{log_tail(proc.log)}" if proc else ""
    raise ClusterError(f"timed out after {timeout:.0f}s waiting for {what}{where}")


def stop_all(state: dict[str, Any]) -> None:
    procs = state.get("procs", [])
    for p in reversed(procs):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(p["pid"], signal.SIGTERM)
    deadline = time.monotonic() + STOP_GRACE
    for p in reversed(procs):
        while _alive(p["pid"]) and time.monotonic() < deadline:
            time.sleep(0.1)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(p["pid"], signal.SIGKILL)


#: the image tag whose Pods start and never become Ready (testenv/kwok/pod-never-ready.yaml)
BROKEN_TAG = "broken"
_BROKEN = f'.spec.containers.[] | .image | endswith(":{BROKEN_TAG}")'


def _kwok_stages() -> str:
    """kwok's own default stages (node init, lease heartbeat, pod lifecycle), read
    from the pinned kwok module rather than kept as a copy here, and ours: Pods of an
    image tagged ``broken`` never become Ready, for rollouts that really fail and
    dependencies that really wait. kwok picks one of the stages that match a Pod, so
    its pod-ready stage is narrowed to leave those Pods alone."""
    import yaml

    proc = subprocess.run(
        ["go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/kwok"],
        cwd=build.HERE / "kwok",
        capture_output=True,
        text=True,
        env=dict(os.environ, GOTOOLCHAIN="local", GOFLAGS="-mod=readonly"),
    )
    if proc.returncode != 0 or not proc.stdout.strip():
        raise ClusterError(f"cannot locate the kwok module: {proc.stderr.strip()[-300:]}")
    stage = Path(proc.stdout.strip()) / "kustomize" / "stage"
    files = [
        stage / "node" / "fast" / "node-initialize.yaml",
        stage / "node" / "heartbeat-with-lease" / "node-heartbeat-with-lease.yaml",
        stage / "pod" / "fast" / "pod-ready.yaml",
        stage / "pod" / "fast" / "pod-complete.yaml",
        stage / "pod" / "fast" / "pod-delete.yaml",
        build.HERE / "kwok" / "pod-never-ready.yaml",
    ]
    stages = [yaml.safe_load(f.read_text()) for f in files]
    for s in stages:
        if s["metadata"]["name"] == "pod-ready":
            exprs = s["spec"]["selector"]["matchExpressions"]
            exprs.append({"key": _BROKEN, "operator": "NotIn", "values": ["true"]})
    return "\n---\n".join(yaml.safe_dump(s, sort_keys=False) for s in stages)


def _node(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
            "labels": {
                "type": "kwok",
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
            },
        },
        "status": {
            "allocatable": {"cpu": "1000", "memory": "4Ti", "pods": "5000"},
            "capacity": {"cpu": "1000", "memory": "4Ti", "pods": "5000"},
        },
    }


def up() -> None:
    # two test runs started together would otherwise each find no healthy control plane
    # and start one on the same etcd directory, the later state file orphaning the other
    with exclusive(STATE / "lock"):
        _up()


def _up() -> None:
    t0 = time.monotonic()
    state = _load_state()
    if healthy(state):
        _link_bins(build.bin_dir())
        print(f"testenv: control plane already running at {state['server']} ({KUBECONFIG})")
        return
    # leftovers of a crashed or half-started run: stop them and start clean
    stop_all(state)
    bins = build.build()
    for sub in ("etcd", "pki", "logs", "run"):
        shutil.rmtree(STATE / sub, ignore_errors=True)
    (STATE / "logs").mkdir(parents=True)
    (STATE / "run").mkdir()
    _link_bins(bins)
    pki = STATE / "pki"
    make_pki(pki)

    procs: list[Proc] = []
    state = {"procs": [], "server": None}
    try:
        _start_components(bins, pki, procs, state)
    except BaseException:
        state["procs"] = [p.__dict__ | {"log": str(p.log)} for p in procs]
        stop_all(state)
        _state_file().unlink(missing_ok=True)
        raise
    print(f"testenv: control plane ready at {state['server']} in {time.monotonic() - t0:.1f}s")
    print(f"testenv: export KUBECONFIG={KUBECONFIG}")


def _record(procs: list[Proc], state: dict[str, Any]) -> None:
    state["procs"] = [
        {"name": p.name, "pid": p.pid, "log": str(p.log), "argv": p.argv} for p in procs
    ]
    _save_state(state)


def _start_components(bins: Path, pki: Path, procs: list[Proc], state: dict[str, Any]) -> None:
    etcd_client, etcd_peer, api_port = free_port(), free_port(), free_port()
    etcd_url = f"http://127.0.0.1:{etcd_client}"
    etcd = start(
        "etcd",
        [
            str(bins / "etcd"),
            "--name=testenv",
            f"--data-dir={STATE / 'etcd'}",
            f"--listen-client-urls={etcd_url}",
            f"--advertise-client-urls={etcd_url}",
            f"--listen-peer-urls=http://127.0.0.1:{etcd_peer}",
            f"--initial-advertise-peer-urls=http://127.0.0.1:{etcd_peer}",
            f"--initial-cluster=testenv=http://127.0.0.1:{etcd_peer}",
            "--unsafe-no-fsync=true",
            "--quota-backend-bytes=8589934592",
            "--log-level=warn",
        ],
        procs,
    )
    _record(procs, state)

    def etcd_ok() -> bool:
        with urllib.request.urlopen(f"{etcd_url}/health", timeout=2) as r:
            return bool(json.loads(r.read()).get("health") == "true")

    wait_for("etcd health", etcd, etcd_ok, 30)

    server = f"https://127.0.0.1:{api_port}"
    state["server"] = server
    audit_policy = STATE / "run" / "audit-policy.yaml"
    audit_policy.write_text(AUDIT_POLICY)
    apiserver = start(
        "kube-apiserver",
        [
            str(bins / "kube-apiserver"),
            f"--etcd-servers={etcd_url}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            f"--secure-port={api_port}",
            f"--cert-dir={STATE / 'run'}",
            f"--tls-cert-file={pki / 'apiserver.crt'}",
            f"--tls-private-key-file={pki / 'apiserver.key'}",
            f"--client-ca-file={pki / 'ca.crt'}",
            "--authorization-mode=RBAC",
            # as on OpenShift: setting blockOwnerDeletion needs update on the
            # owner's finalizers, which the RBAC tests must prove gitsync has
            "--enable-admission-plugins=OwnerReferencesPermissionEnforcement",
            "--allow-privileged=true",
            "--service-cluster-ip-range=10.0.0.0/24",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={pki / 'sa.pub'}",
            f"--service-account-signing-key-file={pki / 'sa.key'}",
            *_flow_control_flags(),
            # what was really written, and by which process (tests read it: a
            # replica's writes, told apart by its User-Agent)
            f"--audit-policy-file={audit_policy}",
            f"--audit-log-path={AUDIT_LOG}",
            "--audit-log-format=json",
            "--audit-log-maxsize=200",
            "--audit-log-maxbackup=1",
            "--profiling=false",
            "--v=1",
        ],
        procs,
    )
    _record(procs, state)
    write_kubeconfig(KUBECONFIG, server, pki)

    def api_ready() -> bool:
        return api(server, pki, "GET", "/readyz", timeout=3)[0] == 200

    wait_for("kube-apiserver /readyz", apiserver, api_ready, 120)
    _install_crd(server, pki, apiserver)

    kcm = start(
        "kube-controller-manager",
        [
            str(bins / "kube-controller-manager"),
            f"--kubeconfig={KUBECONFIG}",
            f"--authentication-kubeconfig={KUBECONFIG}",
            f"--authorization-kubeconfig={KUBECONFIG}",
            "--bind-address=127.0.0.1",
            f"--secure-port={free_port()}",
            f"--cert-dir={STATE / 'run'}",
            "--leader-elect=false",
            "--controllers=*",
            f"--service-account-private-key-file={pki / 'sa.key'}",
            f"--root-ca-file={pki / 'ca.crt'}",
            "--use-service-account-credentials=false",
            "--kube-api-qps=500",
            "--kube-api-burst=1000",
            "--concurrent-deployment-syncs=20",
            "--concurrent-replicaset-syncs=20",
            "--concurrent-gc-syncs=40",
            "--v=1",
        ],
        procs,
    )
    sched_cfg = STATE / "run" / "scheduler.yaml"
    sched_cfg.write_text(
        json.dumps(
            {
                "apiVersion": "kubescheduler.config.k8s.io/v1",
                "kind": "KubeSchedulerConfiguration",
                "clientConnection": {"kubeconfig": str(KUBECONFIG), "qps": 500, "burst": 1000},
                "leaderElection": {"leaderElect": False},
            }
        )
    )
    sched = start(
        "kube-scheduler",
        [
            str(bins / "kube-scheduler"),
            f"--config={sched_cfg}",
            f"--authentication-kubeconfig={KUBECONFIG}",
            f"--authorization-kubeconfig={KUBECONFIG}",
            "--bind-address=127.0.0.1",
            f"--secure-port={free_port()}",
            f"--cert-dir={STATE / 'run'}",
            "--v=1",
        ],
        procs,
    )
    kwok_cfg = STATE / "run" / "kwok.yaml"
    kwok_cfg.write_text(_kwok_stages())
    kwok = start(
        "kwok",
        [
            str(bins / "kwok"),
            f"--kubeconfig={KUBECONFIG}",
            f"--config={kwok_cfg}",
            "--manage-all-nodes=true",
            "--cidr=10.128.0.1/12",
            "--node-ip=127.0.0.1",
            "--server-address=127.0.0.1:" + str(free_port()),
            "--node-lease-duration-seconds=40",
        ],
        procs,
    )
    _record(procs, state)

    for name in NODES:
        status, body = api(server, pki, "POST", "/api/v1/nodes", _node(name))
        if status not in (201, 409):
            raise ClusterError(f"creating Node {name} failed ({status}): {str(body)[:300]}")

    def nodes_ready() -> bool:
        status, body = api(server, pki, "GET", "/api/v1/nodes")
        if status != 200:
            return False
        ready = {
            n["metadata"]["name"]
            for n in body["items"]
            for c in n.get("status", {}).get("conditions", [])
            if c["type"] == "Ready" and c["status"] == "True"
        }
        return set(NODES) <= ready

    wait_for("the kwok Nodes to be Ready", kwok, nodes_ready, 60)

    def default_sa() -> bool:
        return (
            api(server, pki, "GET", "/api/v1/namespaces/default/serviceaccounts/default")[0] == 200
        )

    wait_for("the default ServiceAccount", kcm, default_sa, 60)
    for p in (sched, kcm, kwok, apiserver, etcd):
        if not _alive(p.pid):
            raise ClusterError(f"{p.name} exited; log {p.log}:\n{log_tail(p.log)}")


def _flow_control_flags() -> list[str]:
    if APF:
        return [
            "--enable-priority-and-fairness=true",
            "--max-requests-inflight=200",
            "--max-mutating-requests-inflight=100",
        ]
    return [
        "--enable-priority-and-fairness=false",
        "--max-requests-inflight=2000",
        "--max-mutating-requests-inflight=1000",
    ]


def _install_crd(server: str, pki: Path, apiserver: Proc) -> None:
    """The MyApp CRD, before the controller manager starts: its garbage collector
    learns resource types at start and then only every 30 s, and until it knows
    MyApps it does not delete the Deployments they own."""
    import yaml

    crd = yaml.safe_load((ROOT / "crds" / "myapps.apps.example.com.yaml").read_text())
    path = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
    status, body = api(server, pki, "POST", path, crd)
    if status not in (201, 409):
        raise ClusterError(f"installing the MyApp CRD failed ({status}): {str(body)[:300]}")

    def established() -> bool:
        _, live = api(server, pki, "GET", f"{path}/{crd['metadata']['name']}")
        conds = (live.get("status") or {}).get("conditions") or [] if isinstance(live, dict) else []
        return any(c["type"] == "Established" and c["status"] == "True" for c in conds)

    wait_for("the MyApp CRD to be established", apiserver, established, 30)


def _link_bins(bins: Path) -> None:
    link = STATE / "bin"
    if link.is_symlink() or link.exists():
        if link.is_symlink() and Path(os.readlink(link)) == bins:
            return
        if link.is_symlink() or link.is_file():
            link.unlink()
        else:
            shutil.rmtree(link)
    link.symlink_to(bins, target_is_directory=True)


def _entry(state: dict[str, Any], name: str) -> dict[str, Any]:
    entry: dict[str, Any] | None = next(
        (p for p in state.get("procs", []) if p["name"] == name), None
    )
    if entry is None or "argv" not in entry:
        raise ClusterError(f"{name} is not running under this launcher")
    return entry


def restart(name: str, downtime: float = 0.0, *, crash: bool = False) -> None:
    """Stop one component and start it again with the same flags (for outage tests).
    ``crash`` stops it with SIGKILL at once, as a crash or an OOM kill would."""
    state = _load_state()
    entry = _entry(state, name)
    if crash:
        kill(name)
    else:
        stop_all({"procs": [entry]})
    time.sleep(downtime)
    procs: list[Proc] = []
    proc = start(name, entry["argv"], procs)
    entry["pid"] = proc.pid
    _save_state(state)
    if name == "kube-apiserver":
        server, pki = state["server"], STATE / "pki"
        wait_for(
            "kube-apiserver /readyz",
            proc,
            lambda: api(server, pki, "GET", "/readyz", timeout=3)[0] == 200,
            120,
        )


def kill(name: str) -> None:
    """SIGKILL one component's process group and wait until it is gone."""
    entry = _entry(_load_state(), name)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(entry["pid"], signal.SIGKILL)
    deadline = time.monotonic() + STOP_GRACE
    while _alive(entry["pid"]) and time.monotonic() < deadline:
        time.sleep(0.05)


def down() -> None:
    with exclusive(STATE / "lock"):
        state = _load_state()
        stop_all(state)
        _state_file().unlink(missing_ok=True)
    print("testenv: control plane stopped")


def main(argv: list[str]) -> int:
    cmd = argv[1] if len(argv) > 1 else "up"
    try:
        if cmd == "up":
            up()
        elif cmd == "down":
            down()
        elif cmd == "restart" and len(argv) > 2:
            # restart NAME [DOWNTIME] [crash]: a private control plane's outage, driven
            # from another process (the fault tests)
            downtime = float(argv[3]) if len(argv) > 3 else 0.0
            restart(argv[2], downtime, crash="crash" in argv[4:])
        elif cmd == "status":
            ok = healthy(_load_state())
            print("up" if ok else "down")
            return 0 if ok else 1
        else:
            usage = "up|down|status|restart NAME [DOWNTIME] [crash]"
            print(f"usage: {argv[0]} {usage}", file=sys.stderr)
            return 2
    except (ClusterError, build.BuildError) as e:
        print(f"testenv: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
