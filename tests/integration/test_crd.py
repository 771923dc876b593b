"""crds/ against the real API server: what the server stores is what the file says, and
``kubectl apply --server-side`` works over a CRD another manager created first.

The MyApp CRD is cluster-wide and shared by every test, so the tests that create, take
over or delete a CRD do it with a copy under a group of their own."""

from __future__ import annotations

import contextlib
import copy
import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from gitsync.errors import APINotFoundError
from gitsync.kube.client import Kube, resource_path
from tests.support import wait_until

ROOT = Path(__file__).resolve().parents[2]
CRD_FILE = ROOT / "crds" / "myapps.apps.example.com.yaml"
CRDS = resource_path("apiextensions.k8s.io/v1", "customresourcedefinitions")
#: what the API server adds to a CRD's spec when the file leaves it out (its defaulting)
SERVER_DEFAULTS: dict[str, Any] = {"conversion": {"strategy": "None"}}

Doc = dict[str, Any]


def kubectl(kubectl_bin: str, kubeconfig: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [kubectl_bin, *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "KUBECONFIG": kubeconfig},
    )


def the_file() -> Doc:
    doc: Doc = yaml.safe_load(CRD_FILE.read_text())
    return doc


def renamed(crd: Doc, group: str) -> Doc:
    """The same CRD under another group (so another name)."""
    out = copy.deepcopy(crd)
    out["spec"]["group"] = group
    out["metadata"]["name"] = f"{out['spec']['names']['plural']}.{group}"
    return out


def established(kube: Kube, name: str) -> Doc | None:
    live = kube.get(f"{CRDS}/{name}")
    conds = live.get("status", {}).get("conditions") or []
    ok = any(c["type"] == "Established" and c["status"] == "True" for c in conds)
    return live if ok else None


@pytest.fixture
def copy_of_crd(kube: Kube, tmp_path: Path) -> Iterator[tuple[Doc, Path]]:
    """crds/' CRD under a group of this test's own, as a document and a file; the
    CRD is deleted at the end if the test created it."""
    crd = renamed(the_file(), f"t{uuid.uuid4().hex[:8]}.example.com")
    path = tmp_path / "crd.yaml"
    path.write_text(yaml.safe_dump(crd))
    yield crd, path
    with contextlib.suppress(APINotFoundError):
        kube.delete(f"{CRDS}/{crd['metadata']['name']}")


def get_or_none(kube: Kube, path: str) -> Doc | None:
    try:
        return kube.get(path)
    except APINotFoundError:
        return None


def stored_spec(kube: Kube, name: str) -> Doc:
    live = wait_until(lambda: established(kube, name), timeout=30, what=f"CRD {name}")
    spec: Doc = live["spec"]
    return spec


def test_the_server_stores_the_crd_as_the_file_says(
    kube: Kube, copy_of_crd: tuple[Doc, Path]
) -> None:
    crd, _ = copy_of_crd
    name = crd["metadata"]["name"]
    kube.apply(f"{CRDS}/{name}", crd, field_manager="gitsync-tests")
    # every field of the file, exactly, and of the server's own only its defaults: a
    # field the server drops or rewrites would make every other manager's apply of
    # the file a change of .spec.versions (an atomic list), so a conflict
    assert stored_spec(kube, name) == {**crd["spec"], **SERVER_DEFAULTS}


@pytest.mark.parametrize(
    "first",
    [
        ["apply", "--server-side", "--field-manager=other-installer"],
        ["create"],
        ["apply"],  # client-side apply: a last-applied-configuration annotation
    ],
    ids=["server-side-apply", "create", "client-side-apply"],
)
def test_kubectl_server_side_apply_over_a_crd_another_manager_created(
    kube: Kube,
    kubeconfig: str,
    kubectl_bin: str,
    copy_of_crd: tuple[Doc, Path],
    first: list[str],
) -> None:
    crd, path = copy_of_crd
    name = crd["metadata"]["name"]
    proc = kubectl(kubectl_bin, kubeconfig, *first, "-f", str(path))
    assert proc.returncode == 0, proc.stderr
    stored_spec(kube, name)

    proc = kubectl(kubectl_bin, kubeconfig, "apply", "--server-side", "-f", str(path))
    assert proc.returncode == 0, proc.stderr
    live = kube.get(f"{CRDS}/{name}")
    assert live["spec"] == {**crd["spec"], **SERVER_DEFAULTS}
    appliers = {
        m["manager"] for m in live["metadata"]["managedFields"] if m["operation"] == "Apply"
    }
    assert "kubectl" in appliers


@pytest.mark.parametrize(
    ("first", "conflicts"),
    [
        (["apply"], False),
        (["apply", "--server-side"], False),
        (["apply", "--server-side", "--field-manager=other-installer"], True),
    ],
    ids=["kubectl-apply", "kubectl-apply-server-side", "another-tool"],
)
def test_upgrading_the_crd_with_kubectl_server_side_apply(
    kube: Kube,
    kubeconfig: str,
    kubectl_bin: str,
    copy_of_crd: tuple[Doc, Path],
    first: list[str],
    conflicts: bool,
) -> None:
    """What docs/operating.md says about upgrading: over an install by kubectl apply
    (whose client-side ownership kubectl carries over) a changed CRD applies; over
    another tool's, .spec.versions (one atomic list) conflicts until forced."""
    crd, path = copy_of_crd
    name = crd["metadata"]["name"]
    proc = kubectl(kubectl_bin, kubeconfig, *first, "-f", str(path))
    assert proc.returncode == 0, proc.stderr
    stored_spec(kube, name)
    newer = copy.deepcopy(crd)
    schema = newer["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    schema["description"] = "a newer release of the CRD"
    path.write_text(yaml.safe_dump(newer))

    proc = kubectl(kubectl_bin, kubeconfig, "apply", "--server-side", "-f", str(path))
    if conflicts:
        assert proc.returncode != 0
        assert "conflict" in proc.stderr.lower() and ".spec.versions" in proc.stderr, proc.stderr
        proc = kubectl(
            kubectl_bin, kubeconfig, "apply", "--server-side", "--force-conflicts", "-f", str(path)
        )
    assert proc.returncode == 0, proc.stderr
    assert kube.get(f"{CRDS}/{name}")["spec"] == {**newer["spec"], **SERVER_DEFAULTS}


def test_kubectl_server_side_apply_of_deploy_over_the_installed_crd(
    kube: Kube, kubeconfig: str, kubectl_bin: str, crd: str
) -> None:
    """deploy/ as docs/operating.md installs it, over the MyApp CRD that the test
    session applied first under its own manager. A server-side dry run: the shared
    CRD is not changed, but conflicts are found exactly as in a real apply."""
    live = kube.get(f"{CRDS}/{crd}")
    assert any(m["manager"] != "kubectl" for m in live["metadata"]["managedFields"])
    built = kubectl(kubectl_bin, kubeconfig, "kustomize", str(ROOT / "deploy"))
    assert built.returncode == 0, built.stderr
    docs = [d for d in yaml.safe_load_all(built.stdout) if d]
    [namespace] = [d["metadata"]["name"] for d in docs if d["kind"] == "Namespace"]
    # a dry run of a namespaced object needs its namespace: create it for real when
    # missing, and delete it again then
    ns_path = resource_path("v1", "namespaces", None, namespace)
    existing = get_or_none(kube, ns_path)
    if existing is not None and existing["metadata"].get("deletionTimestamp"):
        wait_until(lambda: get_or_none(kube, ns_path) is None, timeout=60, what="the namespace")
        existing = None
    created = existing is None
    if created:
        body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
        kube.create(resource_path("v1", "namespaces"), body)
    try:
        proc = kubectl(
            kubectl_bin,
            kubeconfig,
            "apply",
            "--server-side",
            "--dry-run=server",
            "-k",
            str(ROOT / "deploy"),
        )
        assert proc.returncode == 0, proc.stderr
        assert f"customresourcedefinition.apiextensions.k8s.io/{crd} serverside-applied" in (
            proc.stdout
        ), proc.stdout
    finally:
        if created:
            with contextlib.suppress(APINotFoundError):
                kube.delete(ns_path)
