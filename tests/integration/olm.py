"""OLM's olm-operator on the shared local control plane: its CRDs (from the pinned
operator-lifecycle-manager module, installed only when absent), its OLMConfig, and the
operator itself as a local process with the admin kubeconfig.

No catalog-operator runs (kwok Pods run no registry server, so no CatalogSource can be
served): a CSV is applied directly, and the ServiceAccount and RBAC an InstallPlan would
create come from OLM's own resolver (the olmsteps tool), not from a hand-written copy.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from gitsync.errors import APINotFoundError
from gitsync.kube.client import Kube, resource_path
from testenv import build, peers
from tests.support import create_namespace, wait_until

Doc = dict[str, Any]
CRDS = "apiextensions.k8s.io/v1"
OPERATORS = "operators.coreos.com"
OWNER_NAMESPACE = "olm.owner.namespace"  # label OLM puts on what it makes for a namespace's CSV
MANAGED = {"olm.managed": "true"}  # label OLM's caches select what it manages by


def tool(name: str) -> str:
    try:
        return str(peers.build(name))
    except build.BuildError as e:
        pytest.fail(f"{name} could not be built: {e}", pytrace=False)


def get_or_none(kube: Kube, path: str) -> Doc | None:
    with contextlib.suppress(APINotFoundError):
        return kube.get(path)
    return None


def crd_documents() -> list[Doc]:
    """OLM's CRDs as its module ships them (deploy/chart/crds), read from the module cache."""
    try:
        root = peers.module_dir("olm", peers.OLM_MODULE)
    except build.BuildError as e:
        pytest.fail(str(e), pytrace=False)
    paths = sorted((root / "deploy" / "chart" / "crds").glob("*.crd.yaml"))
    assert paths, f"no CRDs under deploy/chart/crds of {peers.OLM_MODULE}"
    return [yaml.safe_load(p.read_text()) for p in paths]


@contextlib.contextmanager
def crds_installed(kube: Kube) -> Iterator[list[str]]:
    """OLM's CRDs, established; each one created here is removed afterwards, and one that
    was already there (someone's OLM) is used and left alone."""
    created: list[str] = []
    names: list[str] = []
    try:
        for crd in crd_documents():
            name = crd["metadata"]["name"]
            names.append(name)
            path = resource_path(CRDS, "customresourcedefinitions", None, name)
            live = get_or_none(kube, path)
            if live is not None and "deletionTimestamp" in live["metadata"]:
                # an earlier run's, still being removed (slow when it was deleted soon
                # after it was created): creating it again must wait
                def gone(path: str = path) -> bool:
                    return get_or_none(kube, path) is None

                wait_until(gone, timeout=180, what=f"{name} of an earlier run to be removed")
            elif live is not None:
                continue
            kube.create(resource_path(CRDS, "customresourcedefinitions"), crd)
            created.append(path)

            def established(path: str = path) -> bool:
                conds = (get_or_none(kube, path) or {}).get("status", {}).get("conditions") or []
                return any(c["type"] == "Established" and c["status"] == "True" for c in conds)

            wait_until(established, timeout=30, what=f"OLM's CRD {name} established")
        yield names
    finally:
        for path in created:
            with contextlib.suppress(APINotFoundError):
                kube.delete(path)


@contextlib.contextmanager
def copied_csvs_disabled(kube: Kube) -> Iterator[None]:
    """OLM's switch (OLMConfig ``cluster``) that stops it from copying an AllNamespaces CSV
    into every namespace: the control plane is shared, and other tests' namespaces are
    none of this test's business. Created only when absent, removed only if created here."""
    path = resource_path(f"{OPERATORS}/v1", "olmconfigs", None, "cluster")
    if get_or_none(kube, path) is not None:
        yield
        return
    body = {
        "apiVersion": f"{OPERATORS}/v1",
        "kind": "OLMConfig",
        "metadata": {"name": "cluster"},
        "spec": {"features": {"disableCopiedCSVs": True}},
    }
    kube.create(resource_path(f"{OPERATORS}/v1", "olmconfigs"), body)
    try:
        yield
    finally:
        with contextlib.suppress(APINotFoundError):
            kube.delete(path)


class Operator:
    """olm-operator as a local process; its log goes to a file."""

    def __init__(self, binary: str, kubeconfig: str, namespace: str, log: Path) -> None:
        self.log = log
        self._out = log.open("w")
        # --namespace: where OLM runs its cleanup; --writeStatusName "": no OpenShift
        # ClusterOperator to report to. Its metrics server listens on :8080, hard-coded in
        # v0.33.0 (no flag); if that port is taken it logs an error and carries on.
        # --interval: the wake-up resync of every CSV, 5 minutes by default. A CSV whose sync
        # fails while OLM's caches lag (a replaced CSV waiting for its ClusterRoles to be
        # gone, a new one for its RBAC) is retried with a backoff that doubles from 5 ms on
        # every failure and reaches minutes when a loaded machine makes it fail many times in
        # a row; only the resync then wakes it. 30 s keeps that within a test's patience.
        self.proc = subprocess.Popen(
            [binary, "--namespace", namespace, "--writeStatusName", "", "--interval", "30s"],
            stdout=self._out,
            stderr=subprocess.STDOUT,
            env=dict(os.environ, KUBECONFIG=kubeconfig),
        )

    def output(self) -> str:
        return self.log.read_text()

    def alive(self) -> None:
        if self.proc.poll() is not None:
            tail = "\n".join(self.output().splitlines()[-20:])
            pytest.fail(f"olm-operator exited ({self.proc.returncode}):\n{tail}", pytrace=False)

    def stop(self, timeout: float = 30) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = self.proc.wait(10)
        self._out.close()
        return rc


def install_plan_objects(csv: Doc) -> list[Doc]:
    """What OLM's resolver makes of a live CSV (namespace and uid set): its ServiceAccounts,
    Roles, RoleBindings, ClusterRoles and ClusterRoleBindings, labelled as an InstallPlan
    labels them."""
    proc = subprocess.run(
        [tool("olmsteps")],
        input=json.dumps(csv),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    items: list[Doc] = json.loads(proc.stdout)["items"]
    return items


def managed(doc: Doc) -> Doc:
    """``doc`` with the label an InstallPlan puts on everything it creates."""
    meta = doc["metadata"]
    return doc | {"metadata": meta | {"labels": (meta.get("labels") or {}) | MANAGED}}


def bundle_object(doc: Doc, csv: Doc) -> Doc:
    """A bundle manifest other than the CSV as an InstallPlan creates it: labelled, and
    owned (without blocking its deletion) by the live CSV."""
    owner = {
        "apiVersion": csv["apiVersion"],
        "kind": "ClusterServiceVersion",
        "name": csv["metadata"]["name"],
        "uid": csv["metadata"]["uid"],
        "controller": False,
        "blockOwnerDeletion": False,
    }
    out = managed(doc)
    out["metadata"]["ownerReferences"] = [owner]
    return out


def delete_cluster_objects(kube: Kube, namespace: str) -> None:
    """Cluster-scoped objects OLM (or its resolver) made for the CSVs and OperatorGroups of
    ``namespace``: they do not go with the namespace."""
    rbac = "rbac.authorization.k8s.io/v1"
    selector = {"labelSelector": f"{OWNER_NAMESPACE}={namespace}"}
    for plural in ("clusterrolebindings", "clusterroles"):
        for item in kube.list(resource_path(rbac, plural), params=selector)["items"]:
            with contextlib.suppress(APINotFoundError):
                kube.delete(resource_path(rbac, plural, None, item["metadata"]["name"]))
    # OLM's aggregate Operator objects are named <package>.<namespace>
    operators = resource_path(f"{OPERATORS}/v1", "operators")
    with contextlib.suppress(APINotFoundError):
        for item in kube.list(operators)["items"]:
            name = item["metadata"]["name"]
            if name.endswith(f".{namespace}"):
                with contextlib.suppress(APINotFoundError):
                    kube.delete(f"{operators}/{name}")


CSVS = f"{OPERATORS}/v1alpha1"


def uninstall_csv(kube: Kube, path: str, operator: Operator) -> None:
    """Delete the CSV while olm-operator still runs, so that it removes its finalizer; if it
    cannot, the finalizer goes here, or the namespace would never finish terminating."""
    with contextlib.suppress(APINotFoundError):
        kube.delete(path)
    deadline = time.monotonic() + 30
    while get_or_none(kube, path) is not None:
        if time.monotonic() > deadline or operator.proc.poll() is not None:
            patch = {"metadata": {"finalizers": None}}
            with contextlib.suppress(APINotFoundError):
                kube.request("PATCH", path, body=patch, content_type="application/merge-patch+json")
            break
        time.sleep(0.5)


@dataclass
class Session:
    """A namespace of OLM's own, its olm-operator, and the CSVs to delete at the end."""

    namespace: str
    operator: Operator
    csvs: list[str] = field(default_factory=list)

    def csv_path(self, name: str) -> str:
        path = resource_path(CSVS, "clusterserviceversions", self.namespace, name)
        self.csvs.append(path)
        return path

    def wait_until(
        self,
        kube: Kube,
        fn: Callable[[], bool],
        *,
        timeout: float,
        interval: float,
        what: str,
        seen: Callable[[], str] = str,
    ) -> None:
        """``tests.support.wait_until`` with olm-operator checked alive on each poll; a
        timeout says what ``seen`` saw and what OLM holds (``describe``)."""

        def poll() -> bool:
            self.operator.alive()
            return fn()

        try:
            wait_until(poll, timeout=timeout, interval=interval, what=what)
        except pytest.fail.Exception as e:
            pytest.fail(f"{e}\n{seen()}\n{self.describe(kube)}", pytrace=False)

    def describe(self, kube: Kube) -> str:
        """What a timed-out wait should say: each CSV's phase, reason, message and
        conditions, the namespace's Deployments and Pods, and olm-operator's last lines."""
        lines = []
        for path in self.csvs:
            live = get_or_none(kube, path)
            if live is None:
                lines.append(f"{path}: (deleted)")
                continue
            status = live.get("status") or {}
            finalizers = live["metadata"].get("finalizers")
            deleting = live["metadata"].get("deletionTimestamp")
            lines.append(
                f"{path}: phase={status.get('phase')} reason={status.get('reason')} "
                f"message={status.get('message')!r} finalizers={finalizers} deleting={deleting}"
            )
            for cond in (status.get("conditions") or [])[-6:]:
                lines.append(f"  {cond.get('phase')} {cond.get('reason')}: {cond.get('message')}")
            for req in status.get("requirementStatus") or []:
                if req.get("status") != "Present":
                    lines.append(f"  requirement {req.get('kind')} {req.get('name')}: {req}")
        apps = kube.list(resource_path("apps/v1", "deployments", self.namespace))["items"]
        for dep in apps:
            conds = {c["type"]: c["status"] for c in dep.get("status", {}).get("conditions") or []}
            owners = [o["name"] for o in dep["metadata"].get("ownerReferences") or []]
            lines.append(f"deployment {dep['metadata']['name']}: owners={owners} {conds}")
        pods = kube.list(resource_path("v1", "pods", self.namespace))["items"]
        for pod in pods:
            status = pod.get("status") or {}
            ready = [c["status"] for c in status.get("conditions") or [] if c["type"] == "Ready"]
            lines.append(
                f"pod {pod['metadata']['name']}: node={pod['spec'].get('nodeName')} "
                f"phase={status.get('phase')} ready={ready}"
            )
        tail = self.operator.output().splitlines()[-40:]
        return "\n".join([*lines, "olm-operator's last lines:", *tail])


@contextlib.contextmanager
def session(kube: Kube, kubeconfig: str, base: str, tmp: Path) -> Iterator[Session]:
    """OLM's CRDs and switch, a namespace named after ``base`` with an AllNamespaces
    OperatorGroup (the CSV's one install mode), and olm-operator; all undone after."""
    binary = tool("olm")
    with crds_installed(kube), copied_csvs_disabled(kube):
        namespace = create_namespace(kube, base)
        operator = Operator(binary, kubeconfig, namespace, tmp / "olm-operator.log")
        olm = Session(namespace, operator)
        try:
            group = {
                "apiVersion": f"{OPERATORS}/v1",
                "kind": "OperatorGroup",
                "metadata": {"name": "gitsync"},
                "spec": {},  # no targetNamespaces: AllNamespaces
            }
            kube.create(resource_path(f"{OPERATORS}/v1", "operatorgroups", namespace), group)
            yield olm
        finally:
            for path in reversed(olm.csvs):
                uninstall_csv(kube, path, operator)
            operator.stop()
            delete_cluster_objects(kube, namespace)
            with contextlib.suppress(APINotFoundError):
                kube.delete(resource_path("v1", "namespaces", None, namespace))
