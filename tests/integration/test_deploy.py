"""deploy/ against the real control plane: the kustomization dry-runs on the server,
the daemon runs as the ``gitsync`` ServiceAccount with exactly deploy/'s RBAC (and
every single verb of it is needed), two replicas hand the Lease over, and an
in-cluster configuration follows a rotated service-account token.

The Deployment itself cannot run (no images here), so gitsync runs as a local
subprocess with a kubeconfig holding a TokenRequest token of the ServiceAccount.
deploy/'s RBAC is installed into a namespace of its own per test run
(``gitsync-system-<random>``, ClusterRole ``gitsync-<random>``) so that runs and
a real install cannot disturb each other; everything cluster-wide is deleted at
the end.
"""

from __future__ import annotations

import contextlib
import copy
import datetime as dt
import functools
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

import pytest
import yaml
from kubernetes import client as k8s_client
from kubernetes.config.incluster_config import InClusterConfigLoader

from gitsync.errors import APIClientError, APIForbiddenError, APINotFoundError
from gitsync.kube.client import Kube, resource_path
from gitsync.kube.event_correlator import SIMILAR_MAX
from gitsync.kube.members import HELD_ANNOTATION, MEMBER_OF_LABEL
from tests.support import app_yaml, get, sample, wait_until

ROOT = Path(__file__).resolve().parents[2]
GITSYNC = str(Path(sys.executable).parent / "gitsync")
TEST_MANAGER = "gitsync-tests"
# the instance deploy/ names, as the Pod gets it from the gitsync-config ConfigMap
INSTANCE = yaml.safe_load((ROOT / "deploy" / "config.yaml").read_text())["data"][
    "GITSYNC_INSTANCE_NAME"
]
LEASE = f"gitsync-leader-{INSTANCE}"
STATUS_CM = f"gitsync-status-{INSTANCE}"
LEASE_DURATION = 15.0  # gitsync.kube.leader's default

Doc = dict[str, Any]


# --- helpers -----------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def kubectl(
    kubectl_bin: str, kubeconfig: str, *args: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [kubectl_bin, *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "KUBECONFIG": kubeconfig},
    )


def built(kubectl_bin: str, kubeconfig: str) -> list[Doc]:
    """deploy/ as kustomize renders it."""
    proc = kubectl(kubectl_bin, kubeconfig, "kustomize", str(ROOT / "deploy"))
    assert proc.returncode == 0, proc.stderr
    return [d for d in yaml.safe_load_all(proc.stdout) if d]


def one(docs: list[Doc], kind: str) -> Doc:
    [doc] = [d for d in docs if d["kind"] == kind]
    return doc


def gitsync_env(kubeconfig: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GITSYNC_")}
    return env | {
        "KUBECONFIG": str(kubeconfig),
        "GITSYNC_LOG_FORMAT": "json",
        "GITSYNC_INSTANCE_NAME": INSTANCE,
    }


def lease_path(ns: str) -> str:
    return resource_path("coordination.k8s.io/v1", "leases", ns, LEASE)


def holder(kube: Kube, ns: str) -> str:
    try:
        return str(kube.get(lease_path(ns)).get("spec", {}).get("holderIdentity") or "")
    except APINotFoundError:
        return ""


def delete_quietly(kube: Kube, path: str) -> None:
    with contextlib.suppress(APINotFoundError):
        kube.delete(path)


class Daemon:
    """``gitsync run`` as a subprocess; output goes to a file (a full pipe would block it)."""

    def __init__(self, args: list[str], env: dict[str, str], log: Path, port: int) -> None:
        self.port = port
        self.log = log
        self._out = log.open("w")
        self.proc = subprocess.Popen(
            [GITSYNC, "run", "--listen", f"127.0.0.1:{port}", *args],
            stdout=self._out,
            stderr=subprocess.STDOUT,
            env=env,
        )
        # the Lease identity gitsync uses: hostname_pid (the console script is the process)
        self.identity = f"{socket.gethostname()}_{self.proc.pid}"

    def output(self) -> str:
        return self.log.read_text()

    def get(self, path: str) -> tuple[int, str]:
        try:
            url = f"http://127.0.0.1:{self.port}{path}"
            with urllib.request.urlopen(url, timeout=5) as resp:
                return int(resp.status), resp.read().decode()
        except urllib.error.HTTPError as e:
            return int(e.code), e.read().decode()
        except OSError:
            return 0, ""

    def ready(self, timeout: float = 60) -> None:
        wait_until(lambda: self.get("/readyz")[0] == 200, timeout, what=f"{self.identity} ready")

    def wait_log(self, pattern: str, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if re.search(pattern, self.output()):
                return True
            if self.proc.poll() is not None:
                return bool(re.search(pattern, self.output()))
            time.sleep(0.1)
        return False

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = self.proc.wait(10)
        self._out.close()
        return rc


# --- the installation --------------------------------------------------------------------


@dataclass
class Install:
    """deploy/'s Namespace, ServiceAccount and RBAC, applied for real under unique names."""

    namespace: str
    docs: list[Doc]
    kubeconfig: Path  # the ServiceAccount's token, the admin kubeconfig's server and CA
    kube: Kube  # admin
    runs: int = 0

    @property
    def user(self) -> str:
        return f"system:serviceaccount:{self.namespace}:gitsync"

    def role(self, kind: str) -> Doc:
        return one(self.docs, kind)

    def role_path(self, kind: str) -> str:
        doc = self.role(kind)
        if kind == "ClusterRole":
            return resource_path(
                "rbac.authorization.k8s.io/v1", "clusterroles", None, doc_name(doc)
            )
        return resource_path("rbac.authorization.k8s.io/v1", "roles", self.namespace, doc_name(doc))

    def put_rules(self, kind: str, rules: list[Doc]) -> None:
        body = copy.deepcopy(self.role(kind)) | {"rules": rules}
        self.kube.apply(self.role_path(kind), body, field_manager=TEST_MANAGER, force=True)

    def allowed(self, rule: Doc, verb: str) -> bool:
        """Whether the API server's authorizer lets the ServiceAccount do ``verb`` on the
        first resource of ``rule`` now (a role change takes a moment to reach it)."""
        group, resource = rule["apiGroups"][0], rule["resources"][0]
        resource, _, sub = resource.partition("/")
        attrs = {"verb": verb, "group": group, "resource": resource, "subresource": sub}
        if rule.get("resourceNames"):
            attrs["name"] = rule["resourceNames"][0]
        attrs["namespace"] = self.namespace
        review = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {
                "user": self.user,
                "groups": [
                    "system:serviceaccounts",
                    f"system:serviceaccounts:{self.namespace}",
                    "system:authenticated",
                ],
                "resourceAttributes": attrs,
            },
        }
        path = resource_path("authorization.k8s.io/v1", "subjectaccessreviews")
        return bool(self.kube.create(path, review).get("status", {}).get("allowed"))


def doc_name(doc: Doc) -> str:
    return str(doc["metadata"]["name"])


def isolate(docs: list[Doc], namespace: str, suffix: str) -> list[Doc]:
    """deploy/'s objects renamed into a namespace and cluster-wide names of their own."""
    out: list[Doc] = []
    for original in docs:
        doc = copy.deepcopy(original)
        meta = doc["metadata"]
        if doc["kind"] == "Namespace":
            meta["name"] = namespace
        if doc["kind"] in ("ClusterRole", "ClusterRoleBinding"):
            meta["name"] = f"{meta['name']}-{suffix}"
        if doc["kind"] == "ClusterRoleBinding":
            doc["roleRef"]["name"] = f"{doc['roleRef']['name']}-{suffix}"
        if "namespace" in meta:
            meta["namespace"] = namespace
        for subject in doc.get("subjects", []):
            if "namespace" in subject:
                subject["namespace"] = namespace
        out.append(doc)
    return out


def sa_kubeconfig(kube: Kube, admin_kubeconfig: str, namespace: str, path: Path) -> Path:
    """A kubeconfig for the ``gitsync`` ServiceAccount: a TokenRequest token, and the
    admin kubeconfig's server and CA."""
    request = {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": {"expirationSeconds": 3600},
    }
    reply = kube.create(
        resource_path("v1", "serviceaccounts", namespace, "gitsync", "token"), request
    )
    admin = yaml.safe_load(Path(admin_kubeconfig).read_text())
    cluster = admin["clusters"][0]["cluster"]
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "testenv", "cluster": cluster}],
        "users": [{"name": "gitsync", "user": {"token": reply["status"]["token"]}}],
        "contexts": [{"name": "gitsync", "context": {"cluster": "testenv", "user": "gitsync"}}],
        "current-context": "gitsync",
    }
    path.write_text(json.dumps(config))
    path.chmod(0o600)
    return path


@pytest.fixture(scope="module")
def install(
    kube: Kube,
    kubeconfig: str,
    kubectl_bin: str,
    crd: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Install]:
    suffix = uuid.uuid4().hex[:6]
    namespace = f"gitsync-system-{suffix}"
    wanted = {"Namespace", "CustomResourceDefinition", "ServiceAccount"}
    wanted |= {"ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}
    docs = isolate(built(kubectl_bin, kubeconfig), namespace, suffix)
    real = [d for d in docs if d["kind"] in wanted]
    cluster_wide = [d for d in real if d["kind"] in ("ClusterRole", "ClusterRoleBinding")]
    try:
        proc = kubectl(
            kubectl_bin,
            kubeconfig,
            "apply",
            "--server-side",
            f"--field-manager={TEST_MANAGER}",
            "--force-conflicts",
            "-f",
            "-",
            stdin=yaml.safe_dump_all(real),
        )
        assert proc.returncode == 0, proc.stderr
        tmp = tmp_path_factory.mktemp("deploy")
        config = sa_kubeconfig(kube, kubeconfig, namespace, tmp / "gitsync.kubeconfig")
        yield Install(namespace, docs, config, kube)
    finally:
        for doc in cluster_wide:
            plural = "clusterroles" if doc["kind"] == "ClusterRole" else "clusterrolebindings"
            delete_quietly(
                kube, resource_path("rbac.authorization.k8s.io/v1", plural, None, doc_name(doc))
            )
        delete_quietly(kube, resource_path("v1", "namespaces", None, namespace))


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    (tmp_path / "repo" / "apps").mkdir(parents=True)
    return tmp_path / "repo"


def start(
    install: Install, tmp_path: Path, namespace: str, *args: str, name: str = "daemon"
) -> Daemon:
    install.runs += 1
    return Daemon(
        [
            "--status-namespace",
            install.namespace,
            "--watch-namespace",
            namespace,
            "--leader-elect",
            "--cache-dir",
            str(tmp_path / "cache"),
            *args,
        ],
        gitsync_env(install.kubeconfig),
        tmp_path / f"{name}-{install.runs}.log",
        free_port(),
    )


# --- 1. the kustomization as it is --------------------------------------------------------


def test_kustomization_dry_runs_on_the_server_and_passes_pod_security(
    kube: Kube, kubeconfig: str, kubectl_bin: str, crd: str
) -> None:
    docs = built(kubectl_bin, kubeconfig)
    namespace = one(docs, "Namespace")
    ns = doc_name(namespace)
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    assert {d["metadata"].get("namespace") for d in docs if d["kind"] != "Namespace"} <= {
        ns,
        None,
    }
    # a server-side dry run of a namespaced object needs its namespace to exist: create
    # the Namespace for real (deleted again below unless it was there before)
    ns_path = resource_path("v1", "namespaces", None, ns)
    existing = get_ns(kube, ns)
    if existing is not None and existing.get("metadata", {}).get("deletionTimestamp"):
        wait_until(lambda: get_ns(kube, ns) is None, timeout=60, what=f"{ns} to go away")
        existing = None
    if existing is None:
        kube.create(resource_path("v1", "namespaces"), namespace)
    try:
        deploy = str(ROOT / "deploy")
        proc = kubectl(kubectl_bin, kubeconfig, "apply", "--dry-run=server", "-k", deploy)
        assert proc.returncode == 0, proc.stderr
        assert "PodSecurity" not in proc.stderr, proc.stderr
        dry = [ln for ln in proc.stdout.splitlines() if ln.endswith("(server dry run)")]
        assert len(dry) == len(docs), proc.stdout
        for kind in ("deployment.apps/gitsync", "clusterrole.rbac", "role.rbac", "service/"):
            assert any(ln.startswith(kind) for ln in dry), proc.stdout

        # Pod Security is enforced on Pods (for Deployments it only warns): a Pod made
        # from the template must be admitted in the "restricted" namespace, one without
        # its securityContext must not
        pod_spec = copy.deepcopy(one(docs, "Deployment")["spec"]["template"]["spec"])
        pod_spec["serviceAccountName"] = "default"  # the dry run creates no ServiceAccount
        sa = resource_path("v1", "serviceaccounts", ns, "default")
        wait_until(lambda: get_or_none(kube, sa), timeout=30, what="the default ServiceAccount")
        pods = resource_path("v1", "pods", ns)
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"generateName": "gitsync-"}}
        dry_run = {"dryRun": "All"}
        kube.request("POST", pods, params=dry_run, body=pod | {"spec": pod_spec})
        weak = copy.deepcopy(pod_spec)
        del weak["securityContext"], weak["containers"][0]["securityContext"]
        with pytest.raises(APIForbiddenError, match="violates PodSecurity"):
            kube.request("POST", pods, params=dry_run, body=pod | {"spec": weak})
    finally:
        if existing is None:
            delete_quietly(kube, ns_path)


def get_ns(kube: Kube, name: str) -> Doc | None:
    return get_or_none(kube, resource_path("v1", "namespaces", None, name))


def get_or_none(kube: Kube, path: str) -> Doc | None:
    try:
        return kube.get(path)
    except APINotFoundError:
        return None


# --- 2. the daemon as the ServiceAccount ---------------------------------------------------


def events(kube: Kube, ns: str) -> list[Doc]:
    items = kube.list(resource_path("v1", "events", ns)).get("items", [])
    return [e for e in items if e.get("source", {}).get("component") == "gitsync"]


def test_daemon_runs_with_exactly_deploys_rbac(
    install: Install,
    kube: Kube,
    kubeconfig: str,
    kubectl_bin: str,
    namespace: str,
    repo: Path,
    tmp_path: Path,
) -> None:
    (repo / "apps" / "fixed.yaml").write_text(app_yaml(namespace, "fixed", replicas=2))
    (repo / "apps" / "watched.yaml").write_text(
        app_yaml(namespace, "watched", replicas=1, driftPolicy="report")
    )
    delete_quietly(kube, lease_path(install.namespace))
    daemon = start(
        install,
        tmp_path,
        namespace,
        *("--repo", str(repo), "--path", "apps", "--interval", "2", "--jitter", "0"),
        *("--allowed-namespaces", namespace),
    )
    try:
        daemon.ready()
        # a full sync: MyApps, their Deployments, status, and the sync status ConfigMap
        for name, replicas in (("fixed", 2), ("watched", 1)):

            def synced(name: str = name) -> Doc | None:
                app = get(kube, "MyApp", namespace, name)
                st = (app or {}).get("status", {})
                return app if st.get("source", {}).get("revision") == "local" else None

            app = wait_until(synced, timeout=30, what=f"status of MyApp {name}")
            assert app["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "gitsync"
            dep = get(kube, "Deployment", namespace, name)
            assert dep is not None, f"no Deployment {name}"
            assert dep["spec"]["replicas"] == replicas
        cm_path = resource_path("v1", "configmaps", install.namespace, STATUS_CM)
        state = wait_until(lambda: get_or_none(kube, cm_path), timeout=30, what=STATUS_CM)
        assert state["data"]["result"] == "Succeeded", state["data"]
        assert holder(kube, install.namespace) == daemon.identity

        # drift: corrected for the default policy, reported for driftPolicy: report
        scale = ("scale", "deployment", "--replicas=5", "-n", namespace)
        start_time = time.monotonic()
        proc = kubectl(kubectl_bin, kubeconfig, *scale, "fixed")
        assert proc.returncode == 0, proc.stderr
        proc = kubectl(kubectl_bin, kubeconfig, *scale, "watched")
        assert proc.returncode == 0, proc.stderr

        def corrected() -> bool:
            dep = get(kube, "Deployment", namespace, "fixed") or {}
            return bool(dep.get("spec", {}).get("replicas") == 2)

        wait_until(corrected, timeout=30, what="kubectl scale of fixed to be corrected")
        print(f"\ndrift corrected {time.monotonic() - start_time:.2f}s after kubectl scale")

        def reported() -> list[Doc]:
            app = get(kube, "MyApp", namespace, "watched") or {}
            drift = app.get("status", {}).get("drift") or []
            return [d for d in drift if d.get("path") == "spec.replicas"]

        [item] = wait_until(reported, timeout=30, what="drift of watched in its status")
        assert (item["desired"], item["live"], item["manager"]) == (1, 5, "kubectl")
        watched = get(kube, "Deployment", namespace, "watched") or {}
        assert watched["spec"]["replicas"] == 5, "policy report must leave the change alone"

        def reasons(ns: str) -> set[str]:
            return {e["reason"] for e in events(kube, ns)}

        wait_until(lambda: {"Created", "Drifted"} <= reasons(namespace), what="MyApp Events")
        wait_until(lambda: "SyncSucceeded" in reasons(install.namespace), what="SyncSucceeded")
        code, metrics = daemon.get("/metrics")
        assert code == 200 and sample(metrics, "gitsync_leader") == 1.0
        assert (sample(metrics, 'gitsync_sync_total{result="success"}') or 0) >= 1
    finally:
        rc = daemon.stop()
    output = daemon.output()
    assert rc == 0, output
    assert holder(kube, install.namespace) == "", "the Lease was not released on SIGTERM"
    # every 403 of the API server says "forbidden"; "403" alone also matches a timestamp
    assert "forbidden" not in output.lower(), output
    for line in output.splitlines():
        json.loads(line)  # logs are JSON lines


# --- 3. every verb is needed -------------------------------------------------------------

Op = Literal["sync", "run", "drift"]


@dataclass
class Case:
    op: Op
    prepare: Callable[[Scenario], None] = lambda _s: None
    #: what the API server says when the verb is missing, where it is not the
    #: authorizer's "cannot <verb> resource" (an admission plugin's own words)
    forbidden: str | None = None


@dataclass
class Scenario:
    """A Git repository of MyApps in ``namespace`` that the cases change step by step."""

    install: Install
    namespace: str
    repo: Path
    tmp_path: Path
    step: int = 0

    def write(self, name: str, **kw: Any) -> None:
        (self.repo / "apps" / f"{name}.yaml").write_text(app_yaml(self.namespace, name, **kw))

    def new_app(self) -> None:
        self.step += 1
        self.write(f"new{self.step}")

    def new_apps(self) -> None:
        """More new MyApps than are recorded one Event each: the rest are counted on an
        aggregate Event, a PATCH."""
        self.step += 1
        for i in range(SIMILAR_MAX + 2):
            self.write(f"new{self.step}-{i}")

    def new_app_alone(self) -> None:
        """A new MyApp while every other one has its Deployment: the one Deployment to
        create is checked with a GET (with two or more missing, a sync lists the
        namespace instead). Earlier cases may have left MyApps without one."""
        kube = self.install.kube
        for file in sorted((self.repo / "apps").glob("*.yaml")):
            if get(kube, "Deployment", self.namespace, file.stem) is None:
                file.unlink()
                myapp = resource_path("apps.example.com/v1", "myapps", self.namespace, file.stem)
                delete_quietly(kube, myapp)
        wait_until(
            lambda: (
                all(
                    get(kube, "MyApp", self.namespace, f.stem) is not None
                    for f in (self.repo / "apps").glob("*.yaml")
                )
                and len(
                    kube.list(resource_path("apps.example.com/v1", "myapps", self.namespace))[
                        "items"
                    ]
                )
                == len(list((self.repo / "apps").glob("*.yaml")))
            ),
            what="MyApps without a Deployment gone",
        )
        self.new_app()

    def change_image(self) -> None:
        self.step += 1
        self.write("a", image=f"nginx:1.{30 + self.step}")

    def change_replicas(self) -> None:
        self.step += 1
        self.write("b", replicas=2 + self.step % 2)

    def remove_app(self) -> None:
        """Take a MyApp out of Git that gitsync created: prune must delete it."""
        for file in sorted((self.repo / "apps").glob("*.yaml"), reverse=True):
            if get(self.install.kube, "MyApp", self.namespace, file.stem) is not None:
                file.unlink()
                return

    def delete_status(self) -> None:
        ns = self.install.namespace
        delete_quietly(self.install.kube, resource_path("v1", "configmaps", ns, STATUS_CM))

    def delete_lease(self) -> None:
        delete_quietly(self.install.kube, lease_path(self.install.namespace))

    def free_lease(self) -> None:
        """A Lease nobody holds: taking it is an update."""
        now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        body = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": LEASE, "namespace": self.install.namespace},
            "spec": {"holderIdentity": "", "leaseDurationSeconds": 1, "renewTime": now},
        }
        path = lease_path(self.install.namespace)
        self.install.kube.apply(path, body, field_manager=TEST_MANAGER, force=True)

    def sync_args(self) -> list[str]:
        return [
            *("--repo", str(self.repo), "--path", "apps"),
            *("--allowed-namespaces", self.namespace),
            *("--status-namespace", self.install.namespace),
            *("--cache-dir", str(self.tmp_path / "cache")),
        ]

    def run(self, op: Op, pattern: str) -> tuple[int | None, str]:
        """Run the operation as the ServiceAccount: (exit code or None if stopped, evidence)."""
        env = gitsync_env(self.install.kubeconfig)
        if op == "run":
            daemon = start(self.install, self.tmp_path, self.namespace)
            daemon.wait_log(pattern, timeout=20)
            daemon.stop()
            return None, daemon.output()
        if op == "drift":
            args = ["drift", "-n", self.namespace, "--status-namespace", self.install.namespace]
        else:
            args = ["sync", *self.sync_args()]
        proc = subprocess.run(
            [GITSYNC, *args], capture_output=True, text=True, timeout=120, env=env
        )
        # a Deployment that cannot be applied is reported in its MyApp's status
        apps = self.install.kube.list(
            resource_path("apps.example.com/v1", "myapps", self.namespace)
        )
        return proc.returncode, proc.stdout + proc.stderr + json.dumps(apps)


CASES: dict[tuple[str, str, str], Case] = {
    ("apps.example.com", "myapps", "list"): Case("run"),
    ("apps.example.com", "myapps", "watch"): Case("run"),
    ("apps.example.com", "myapps", "create"): Case("sync", Scenario.new_app),
    ("apps.example.com", "myapps", "patch"): Case("sync", Scenario.change_image),
    ("apps.example.com", "myapps", "delete"): Case("sync", Scenario.remove_app),
    ("apps.example.com", "myapps/status", "patch"): Case("sync", Scenario.change_replicas),
    # OwnerReferencesPermissionEnforcement, on blockOwnerDeletion of the Deployment
    ("apps.example.com", "myapps/finalizers", "update"): Case(
        "sync", Scenario.new_app, forbidden="cannot set blockOwnerDeletion"
    ),
    ("apps", "deployments", "get"): Case("sync", Scenario.new_app_alone),
    ("apps", "deployments", "list"): Case("run"),
    ("apps", "deployments", "watch"): Case("run"),
    ("apps", "deployments", "create"): Case("sync", Scenario.new_app),
    ("apps", "deployments", "patch"): Case("sync", Scenario.change_image),
    ("", "events", "create"): Case("sync", Scenario.new_app),
    ("", "events", "patch"): Case("sync", Scenario.new_apps),
    # the namespace of a MyApp about to be created is looked up
    ("", "namespaces", "get"): Case("sync", Scenario.new_app),
    ("coordination.k8s.io", "leases", "create"): Case("run", Scenario.delete_lease),
    ("coordination.k8s.io", "leases", "get"): Case("run"),
    ("coordination.k8s.io", "leases", "update"): Case("run", Scenario.free_lease),
    ("", "configmaps", "create"): Case("sync", Scenario.delete_status),
    ("", "configmaps", "get"): Case("drift"),
    ("", "configmaps", "patch"): Case("sync"),
}


def without_one_verb(
    s: Scenario, kind: str, rules: list[Doc], i: int, verb: str, case: Case
) -> str:
    """Take ``verb`` out of rule ``i``, run the case's operation, put the verb back.
    Returns what went wrong, or "" when the operation failed with "forbidden"."""
    rule = rules[i]
    reduced = copy.deepcopy(rules)
    reduced[i]["verbs"] = [v for v in rule["verbs"] if v != verb]
    if not reduced[i]["verbs"]:
        del reduced[i]
    resource = rule["resources"][0]
    # the API server's message, also inside JSON log lines (quotes escaped)
    pattern = case.forbidden or f'cannot {verb} resource \\\\?"{resource}\\\\?"'
    s.install.put_rules(kind, reduced)
    try:
        wait_until(lambda: not s.install.allowed(rule, verb), timeout=10, what="RBAC to deny")
        case.prepare(s)
        rc, evidence = s.run(case.op, pattern)
    finally:
        s.install.put_rules(kind, rules)
        wait_until(lambda: s.install.allowed(rule, verb), timeout=10, what="RBAC to allow")
    found = re.search(pattern, evidence) is not None
    print(f"without {verb:6} on {resource:14} gitsync {case.op:5} exit {rc}: forbidden={found}")
    return "" if found else f"{case.op} did not fail:\n{evidence[-3000:]}"


def test_every_verb_of_the_roles_is_needed(
    install: Install, kube: Kube, namespace: str, repo: Path, tmp_path: Path
) -> None:
    s = Scenario(install, namespace, repo, tmp_path)
    for name in "abcd":
        s.write(name)
    proc = subprocess.run(
        [GITSYNC, "sync", *s.sync_args()],
        capture_output=True,
        text=True,
        timeout=120,
        env=gitsync_env(install.kubeconfig),
    )
    # RBAC's refusal ("cannot VERB resource"), not any "forbidden": the tests of this
    # module share one instance, so this sync may prune an earlier test's MyApps, whose
    # Pruned Event a namespace still terminating refuses
    assert proc.returncode == 0 and not re.search(r"cannot \w+ resource", proc.stderr), proc.stderr

    covered: set[tuple[str, str, str]] = set()
    failures: list[str] = []
    for kind in ("ClusterRole", "Role"):
        rules = install.role(kind)["rules"]
        for i, rule in enumerate(rules):
            for verb in rule["verbs"]:
                key = (rule["apiGroups"][0], rule["resources"][0], verb)
                assert key in CASES, f"no operation shows that {kind} needs {key}: remove it?"
                covered.add(key)
                failure = without_one_verb(s, kind, rules, i, verb, CASES[key])
                if failure:
                    failures.append(f"{kind} {key}: {failure}")
    assert covered == set(CASES), f"cases for verbs the roles do not have: {set(CASES) - covered}"
    assert not failures, "\n".join(failures)


def with_create_namespace(kubectl_bin: str, kubeconfig: str, tmp_path: Path) -> list[Doc]:
    """deploy/ with the optional components/create-namespace, from an overlay."""
    return with_component(kubectl_bin, kubeconfig, tmp_path, "create-namespace")


def with_component(kubectl_bin: str, kubeconfig: str, tmp_path: Path, name: str) -> list[Doc]:
    """deploy/ with the optional components/NAME, from an overlay."""
    overlay = tmp_path / "overlay"
    overlay.mkdir()
    deploy = Path(os.path.relpath(ROOT / "deploy", overlay))
    (overlay / "kustomization.yaml").write_text(
        yaml.safe_dump(
            {
                "resources": [str(deploy)],
                "components": [str(deploy / "components" / name)],
            }
        )
    )
    proc = kubectl(kubectl_bin, kubeconfig, "kustomize", str(overlay))
    assert proc.returncode == 0, proc.stderr
    return [d for d in yaml.safe_load_all(proc.stdout) if d]


def namespace_writes(rules: list[Doc]) -> set[str]:
    return {
        v
        for r in rules
        if "" in r["apiGroups"] and "namespaces" in r["resources"]
        for v in r["verbs"]
        if v not in ("get", "list", "watch")
    }


def test_create_namespace_needs_the_component_and_each_of_its_verbs(
    install: Install, kube: Kube, kubeconfig: str, kubectl_bin: str, tmp_path: Path
) -> None:
    base = install.role("ClusterRole")["rules"]
    docs = with_create_namespace(kubectl_bin, kubeconfig, tmp_path)
    assert one(docs, "ConfigMap")["data"]["GITSYNC_CREATE_NAMESPACE"] == "true"
    extended = one(docs, "ClusterRole")["rules"]
    # off by default: the base role may not write namespaces; the component adds exactly this
    assert namespace_writes(base) == set()
    assert namespace_writes(extended) == {"create", "patch"}
    assert [r for r in extended if r not in base] == [
        {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["create", "patch"]}
    ]
    target = f"{install.namespace[:50]}-made"
    (tmp_path / "apps").mkdir()
    (tmp_path / "apps" / "a.yaml").write_text(app_yaml(target, "a"))
    args = [
        *("sync", "--repo", str(tmp_path), "--path", "apps", "--create-namespace"),
        *("--allowed-namespaces", target, "--status-namespace", install.namespace),
        *("--cache-dir", str(tmp_path / "cache")),
    ]

    def sync() -> subprocess.CompletedProcess[str]:
        env = gitsync_env(install.kubeconfig)
        return subprocess.run(
            [GITSYNC, *args], capture_output=True, text=True, timeout=120, env=env
        )

    rule = {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["create", "patch"]}

    def denied(verb: str) -> bool:
        return not install.allowed(rule, verb)

    try:
        # deploy/ as it is: --create-namespace is refused, the namespace not made
        proc = sync()
        assert proc.returncode == 1 and 'cannot patch resource "namespaces"' in proc.stdout, (
            proc.stdout + proc.stderr
        )
        for verb in ("patch", "create"):
            reduced = [*base, {**rule, "verbs": [v for v in rule["verbs"] if v != verb]}]
            install.put_rules("ClusterRole", reduced)
            wait_until(functools.partial(denied, verb), timeout=10, what="RBAC to deny")
            proc = sync()
            assert proc.returncode == 1, proc.stdout + proc.stderr
            assert f'cannot {verb} resource "namespaces"' in proc.stdout, proc.stdout
            assert get_ns(kube, target) is None
        install.put_rules("ClusterRole", extended)
        wait_until(lambda: install.allowed(rule, "create"), timeout=10, what="allow")
        proc = sync()
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert get_ns(kube, target) is not None
        assert get(kube, "MyApp", target, "a") is not None
    finally:
        install.put_rules("ClusterRole", base)
        delete_quietly(kube, resource_path("v1", "namespaces", None, target))


def test_sharding_needs_the_component_and_each_of_its_verbs(
    install: Install,
    kube: Kube,
    kubeconfig: str,
    kubectl_bin: str,
    namespace: str,
    repo: Path,
    tmp_path: Path,
) -> None:
    base = install.role("Role")["rules"]
    docs = with_component(kubectl_bin, kubeconfig, tmp_path, "sharding")
    assert one(docs, "ConfigMap")["data"]["GITSYNC_SHARDING"] == "true"
    assert one(docs, "Deployment")["spec"]["replicas"] == 3
    rule = {
        "apiGroups": ["coordination.k8s.io"],
        "resources": ["leases"],
        "verbs": ["list", "update", "delete"],
    }
    assert [r for r in one(docs, "Role")["rules"] if r not in base] == [rule]
    (repo / "apps" / "one.yaml").write_text(app_yaml(namespace, "one"))
    args = ("--sharding", "--repo", str(repo), "--path", "apps", "--allowed-namespaces", namespace)
    runs = 0

    def member(rules: list[Doc]) -> Daemon:
        nonlocal runs
        runs += 1
        install.put_rules("Role", rules)
        verbs = set(rules[-1]["verbs"]) if rules[-1].get("resources") == ["leases"] else set()
        for verb in rule["verbs"]:
            wait_until(
                lambda v=verb: install.allowed(rule, v) == (v in verbs),  # type: ignore[misc]
                timeout=10,
                what=f"RBAC to settle on {verb}",
            )
        (tmp_path / f"m{runs}").mkdir()
        return start(install, tmp_path / f"m{runs}", namespace, *args, name=f"member-{runs}")

    def leases() -> list[Doc]:
        path = resource_path("coordination.k8s.io/v1", "leases", install.namespace)
        found = kube.list(path, params={"labelSelector": MEMBER_OF_LABEL})["items"]
        return [x for x in found if x["spec"]["holderIdentity"] == d.identity]

    try:
        # with the component: the member serves every bucket (one replica), applies, and
        # deletes its Lease on SIGTERM
        d = member([*base, rule])
        wait_until(
            lambda: (get(kube, "MyApp", namespace, "one") or {}).get("status"),
            timeout=60,
            what="the MyApp applied, with status",
        )
        wait_until(
            lambda: leases() and leases()[0]["metadata"]["annotations"][HELD_ANNOTATION] == "0-255",
            timeout=30,
            what="every bucket held",
        )
        assert d.stop() == 0
        assert leases() == []
        assert "forbidden" not in d.output().lower(), d.output()
        # each verb taken away in turn: its own failure
        symptoms = {
            "list": "listing the member leases failed",
            "update": "renewing the member lease failed",
            "delete": "could not delete the member lease",
        }
        for verb, symptom in symptoms.items():
            d = member([*base, {**rule, "verbs": [v for v in rule["verbs"] if v != verb]}])
            if verb == "delete":
                wait_until(leases, timeout=30, what="the member lease")
                d.stop()
            assert d.wait_log(symptom, timeout=30), (verb, d.output())
            assert re.search(f"cannot {verb} resource", d.output()), d.output()
            d.stop()
            if verb == "delete":
                kube.delete(
                    resource_path(
                        "coordination.k8s.io/v1", "leases", install.namespace, doc_name(leases()[0])
                    )
                )
    finally:
        install.put_rules("Role", base)


# --- 4. two replicas -------------------------------------------------------------------


def test_standby_takes_over_on_sigkill_and_fast_on_sigterm(
    install: Install, kube: Kube, namespace: str, repo: Path, tmp_path: Path
) -> None:
    (repo / "apps" / "one.yaml").write_text(app_yaml(namespace, "one"))
    args = ("--repo", str(repo), "--path", "apps", "--allowed-namespaces", namespace)
    ns = install.namespace
    delete_quietly(kube, lease_path(ns))
    daemons: list[Daemon] = []

    def replica(name: str) -> Daemon:
        (tmp_path / name).mkdir()
        d = start(install, tmp_path / name, namespace, *args, name=name)
        daemons.append(d)
        return d

    def takeover(new: Daemon, since: float) -> float:
        wait_until(lambda: holder(kube, ns) == new.identity, timeout=30, interval=0.05)
        return time.monotonic() - since

    try:
        a = replica("a")
        wait_until(lambda: holder(kube, ns) == a.identity, timeout=30, what="a to lead")
        b = replica("b")
        b.ready()  # a standby is ready: its caches are synced
        assert holder(kube, ns) == a.identity
        assert sample(b.get("/metrics")[1], "gitsync_leader") != 1.0

        a.proc.kill()  # SIGKILL: no release; b waits out the lease
        killed = time.monotonic()
        a.stop()
        after_kill = takeover(b, killed)
        c = replica("c")
        c.ready()
        assert holder(kube, ns) == b.identity

        b.proc.send_signal(signal.SIGTERM)  # b releases the Lease on its way out
        terminated = time.monotonic()
        after_term = takeover(c, terminated)
        assert b.stop() == 0
        print(
            f"\ntakeover after SIGKILL of the leader: {after_kill:.2f}s;"
            f" after SIGTERM: {after_term:.2f}s"
        )
        assert after_kill <= LEASE_DURATION + 2 + 3, after_kill  # + retry period + margin
        assert after_term < 5, after_term
        wait_until(lambda: sample(c.get("/metrics")[1], "gitsync_leader") == 1.0, timeout=10)
    finally:
        for d in daemons:
            d.stop()
    for d in daemons:
        assert "forbidden" not in d.output().lower(), d.output()


# --- 5. in-cluster token rotation --------------------------------------------------------


def test_incluster_configuration_rereads_a_rotated_token(
    kube: Kube, kubeconfig: str, namespace: str, tmp_path: Path
) -> None:
    """kubelet rewrites the projected token file before the token expires; Kube asks the
    configuration for the token on every request, and the in-cluster loader's refresh
    hook rereads the file once its cached copy is older than a minute."""
    sa, secrets = "rotating", resource_path("v1", "secrets", namespace)
    kube.create(
        resource_path("v1", "serviceaccounts", namespace),
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": sa}},
    )
    rbac = "rbac.authorization.k8s.io/v1"
    kube.create(
        resource_path(rbac, "roles", namespace),
        {
            "apiVersion": rbac,
            "kind": "Role",
            "metadata": {"name": "read-configmaps"},
            "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list"]}],
        },
    )
    kube.create(
        resource_path(rbac, "rolebindings", namespace),
        {
            "apiVersion": rbac,
            "kind": "RoleBinding",
            "metadata": {"name": "read-configmaps"},
            "roleRef": {"apiGroup": rbac.split("/")[0], "kind": "Role", "name": "read-configmaps"},
            "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": namespace}],
        },
    )

    def token(bound_to: str) -> str:
        """A short-lived token bound to a Secret: deleting the Secret revokes it at once."""
        secret = kube.create(
            secrets, {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": bound_to}}
        )
        request = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {
                "expirationSeconds": 600,  # the API server's minimum
                "boundObjectRef": {
                    "apiVersion": "v1",
                    "kind": "Secret",
                    "name": bound_to,
                    "uid": secret["metadata"]["uid"],
                },
            },
        }
        path = resource_path("v1", "serviceaccounts", namespace, sa, "token")
        return str(kube.create(path, request)["status"]["token"])

    server = urlsplit(kube.host)
    token_file = tmp_path / "token"
    token_file.write_text(token("first"))
    loader = InClusterConfigLoader(  # type: ignore[no-untyped-call]
        token_filename=str(token_file),
        cert_filename=str(kube.config.ssl_ca_cert),
        environ={
            "KUBERNETES_SERVICE_HOST": str(server.hostname),
            "KUBERNETES_SERVICE_PORT": str(server.port),
        },
    )
    config = k8s_client.Configuration()
    loader.load_and_set(config)  # type: ignore[no-untyped-call]
    # the cached copy is held for the wait below: on a loaded machine the wait can outlast
    # the loader's minute, and a reread before the first 401 would hide the refusal
    loader.token_expires_at = dt.datetime.now() + dt.timedelta(hours=1)
    sa_kube = Kube(config)
    configmaps = resource_path("v1", "configmaps", namespace)
    sa_kube.list(configmaps)

    # what kubelet does: write the new token next to the file and rename it over it
    second = token("second")
    (tmp_path / "token.new").write_text(second)
    (tmp_path / "token.new").replace(token_file)
    delete_quietly(kube, resource_path("v1", "secrets", namespace, "first"))

    def first_rejected() -> bool:
        try:
            sa_kube.list(configmaps)
        except APIClientError as e:
            return e.status == 401
        return False

    # the loader still holds the first token: revoked, it is refused until the reread
    wait_until(first_rejected, timeout=60, what="the first token to be refused")
    assert config.api_key["BearerToken"] != f"bearer {second}"
    # what a minute later looks like: the refresh hook rereads the file
    loader.token_expires_at = dt.datetime.now()
    sa_kube.list(configmaps)
    assert config.api_key["BearerToken"] == f"bearer {second}"
    sa_kube.close()
