"""Target namespaces on the real control plane: a MyApp whose namespace does not exist
is an error that diff predicts and sync reports the same way (diff == sync), with no
write; ``--create-namespace`` creates it with server-side apply, labelled as gitsync's."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from gitsync.errors import APINotFoundError
from gitsync.kube.client import Kube, resource_path
from gitsync.model.api import MANAGED_BY_LABEL
from gitsync.model.instance import INSTANCE_LABEL
from tests.integration.test_cli import gitsync
from tests.support import app_yaml


@pytest.fixture
def absent(kube: Kube, namespace: str) -> Iterator[str]:
    """A namespace name that does not exist yet; deleted afterwards if a test made it."""
    name = f"{namespace[:50]}-new"
    yield name
    with contextlib.suppress(APINotFoundError):
        kube.delete(resource_path("v1", "namespaces", name=name))


def get_ns(kube: Kube, name: str) -> dict[str, object] | None:
    try:
        return kube.get(resource_path("v1", "namespaces", name=name))
    except APINotFoundError:
        return None


def test_missing_namespace_is_an_error_in_diff_and_sync_until_created(
    kube: Kube,
    kubeconfig: str,
    reader_kubeconfig: str,
    crd: str,
    namespace: str,
    absent: str,
    tmp_path: Path,
) -> None:
    apps = tmp_path / "apps"
    apps.mkdir()
    (apps / "here.yaml").write_text(app_yaml(namespace, "here"))
    (apps / "there.yaml").write_text(app_yaml(absent, "there"))
    diff_args = [
        *("--repo", str(tmp_path), "--path", "apps"),
        *("--allowed-namespaces", f"{namespace},{absent}", "--instance-name", "ns-test"),
    ]
    args = [*diff_args, "--status-namespace", namespace]
    expected = f'namespace "{absent}" does not exist'

    # diff (a reader: it cannot write) predicts the failure: exit 2, naming the flag
    diff = gitsync(reader_kubeconfig, "diff", *diff_args, "-o", "json")
    assert diff.returncode == 2, diff.stdout + diff.stderr
    doc = json.loads(diff.stdout)
    assert [f["object"] for f in doc["failed"]] == [f"MyApp/{absent}/there"]
    assert expected in doc["failed"][0]["reason"]
    assert "--create-namespace" in doc["failed"][0]["reason"]
    announced = {(o["object"], o["action"]) for o in doc["objects"]}

    # sync fails that MyApp with the same message and applies the other one
    sync = gitsync(kubeconfig, "sync", *args)
    assert sync.returncode == 1, sync.stdout + sync.stderr
    assert f"MyApp/{absent}/there failed: {doc['failed'][0]['reason']}" in sync.stdout
    assert announced == {
        (f"MyApp/{namespace}/here", "created"),
        (f"Deployment/{namespace}/here", "created"),
    }
    assert get_ns(kube, absent) is None

    # with --create-namespace, diff announces the namespace and the MyApp behind it
    diff = gitsync(reader_kubeconfig, "diff", *diff_args, "--create-namespace", "-o", "json")
    assert diff.returncode == 1, diff.stdout + diff.stderr
    doc = json.loads(diff.stdout)
    assert doc["failed"] == []
    assert {(o["object"], o["action"]) for o in doc["objects"]} == {
        (f"Namespace/{absent}", "created"),
        (f"MyApp/{absent}/there", "created"),
        (f"Deployment/{absent}/there", "created"),
    }
    assert get_ns(kube, absent) is None  # the diff wrote nothing

    sync = gitsync(kubeconfig, "sync", *args, "--create-namespace")
    assert sync.returncode == 0, sync.stdout + sync.stderr
    assert f"Namespace/{absent} created" in sync.stdout
    created = get_ns(kube, absent)
    assert created is not None
    labels = created["metadata"]["labels"]  # type: ignore[index]
    assert labels[MANAGED_BY_LABEL] == "gitsync" and labels[INSTANCE_LABEL] == "ns-test"
    there = resource_path("apps.example.com/v1", "myapps", absent, "there")
    assert kube.get(there)["spec"]["image"] == "nginx:1.27"

    # converged: nothing left to write, and nothing looked up (the MyApp is live)
    again = gitsync(reader_kubeconfig, "diff", *diff_args, "--create-namespace")
    assert again.returncode == 0, again.stdout + again.stderr


def test_diff_says_a_missing_namespace_once_naming_its_myapps(
    kube: Kube, reader_kubeconfig: str, crd: str, namespace: str, absent: str, tmp_path: Path
) -> None:
    other = f"{namespace[:50]}-new2"  # a diff writes nothing: never made
    apps = tmp_path / "apps"
    apps.mkdir()
    (apps / "here.yaml").write_text(app_yaml(namespace, "here"))
    for ns, name in [(absent, "a"), (absent, "b"), (absent, "c"), (other, "d")]:
        (apps / f"{name}.yaml").write_text(app_yaml(ns, name))
    allowed = f"{namespace},{absent},{other}"
    diff = gitsync(
        reader_kubeconfig,
        "diff",
        *("--repo", str(tmp_path), "--path", "apps", "--allowed-namespaces", allowed),
        *("--instance-name", "ns-once"),
    )
    assert diff.returncode == 2, diff.stdout + diff.stderr
    fix = "create it first, or pass --create-namespace to have gitsync create it"
    assert [line for line in diff.stderr.splitlines() if line.startswith("error:")] == [
        f'error: MyApp/{absent}/a, MyApp/{absent}/b, MyApp/{absent}/c: namespace "{absent}" '
        f"does not exist: {fix}",
        f'error: MyApp/{other}/d: namespace "{other}" does not exist: {fix}',
    ]
    assert get_ns(kube, absent) is None and get_ns(kube, other) is None
