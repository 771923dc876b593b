"""What the loader refuses never reaches the API server: checked on what it holds."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from gitsync.gitops.sync import Syncer, SyncOptions, identity_of
from gitsync.gitops.sync_state import StateWriter
from gitsync.kube.client import Kube, resource_path
from gitsync.reconcile.controller import Controller
from gitsync.source.checkout import open_source
from tests.gitserver import Upstream
from tests.support import app_yaml, create_namespace, get

GITSYNC = str(Path(sys.executable).parent / "gitsync")


@pytest.fixture
def other_namespace(kube: Kube) -> Iterator[str]:
    ns = create_namespace(kube, "unwatched")
    yield ns
    kube.delete(resource_path("v1", "namespaces", name=ns))


def test_myapps_outside_the_watched_namespace_are_refused_not_created(
    kube: Kube,
    namespace: str,
    other_namespace: str,
    controller: Controller,
    upstream: Upstream,
    cache_dir: Path,
) -> None:
    # the controller fixture watches `namespace` only, as `gitsync run --watch-namespace`
    assert controller.config.namespace == namespace
    upstream.commit(
        {
            "apps/seen.yaml": app_yaml(namespace, "seen"),
            "apps/unseen.yaml": app_yaml(other_namespace, "unseen"),
        }
    )
    source = open_source(upstream.file_url, "main", cache_dir, timeout=10, allow_insecure=True)
    opts = SyncOptions(
        repo=upstream.file_url,
        path="apps",
        allowed_namespaces=frozenset({namespace, other_namespace}),
        watch_namespace=namespace,
    )
    state = StateWriter(kube, namespace, identity_of(opts).name)
    syncer = Syncer(controller, source, opts, state)
    for _ in range(2):
        result = syncer.run()
        assert [o.subject.rsplit("/", 1)[-1] for o in result.changes] == ["seen"]
        assert len(result.errors) == 1
        assert "apps/unseen.yaml:5:3 (document 0): metadata.namespace:" in result.errors[0]
        assert "outside the namespace gitsync watches" in result.errors[0]
        assert result.prune_skipped is None  # nothing of ours would go
    assert get(kube, "MyApp", namespace, "seen") is not None
    assert get(kube, "MyApp", other_namespace, "unseen") is None
    recorded = state.read()
    assert recorded["result"] == "Failed" and "apps/unseen.yaml" in recorded["lastError"]


def test_a_pass_with_hostile_files_applies_the_good_ones(
    kube: Kube, namespace: str, controller: Controller, upstream: Upstream, cache_dir: Path
) -> None:
    flood = app_yaml(namespace, "flood") + "  env: [" + "0," * 4999 + "0]\n"
    upstream.commit(
        {
            "apps/good.yaml": app_yaml(namespace, "good"),
            "apps/port.yaml": app_yaml(namespace, "port") + "  port: 1:20\n",
            "apps/hex.yaml": app_yaml(namespace, "hex", replicas="x").replace(
                "replicas: 'x'", "replicas: 0x" + "f" * 5000
            ),
            "apps/flood.yaml": flood,
        }
    )
    source = open_source(upstream.file_url, "main", cache_dir, timeout=10, allow_insecure=True)
    opts = SyncOptions(
        repo=upstream.file_url, path="apps", allowed_namespaces=frozenset({namespace})
    )
    state = StateWriter(kube, namespace, identity_of(opts).name)
    result = Syncer(controller, source, opts, state).run()
    assert [o.subject.rsplit("/", 1)[-1] for o in result.changes] == ["good"]
    assert [e.split(":", 1)[0] for e in result.errors] == [
        *["apps/flood.yaml"] * 21,
        "apps/hex.yaml",
        "apps/port.yaml",
    ]
    assert result.errors[20] == "apps/flood.yaml: … and 4980 more errors in this file"
    assert "found string '1:20'" in result.errors[-1]  # not port 80
    assert get(kube, "MyApp", namespace, "good") is not None
    assert all(get(kube, "MyApp", namespace, n) is None for n in ("port", "hex", "flood"))


def test_diff_exits_2_on_hostile_manifests_and_still_plans_the_good_ones(
    kubeconfig: str, crd: str, namespace: str, tmp_path: Path
) -> None:
    apps = tmp_path / "apps"
    apps.mkdir()
    (apps / "good.yaml").write_text(app_yaml(namespace, "good"))
    (apps / "sexagesimal.yaml").write_text(
        app_yaml(namespace, "s") + "  port: " + ":".join(["1"] * 100_000) + "\n"
    )
    (apps / "hex.yaml").write_text(
        app_yaml(namespace, "h").replace("replicas: 1", "replicas: 0x" + "f" * 5000)
    )
    (apps / "loop.yaml").symlink_to("loop.yaml")
    env = {**os.environ, "KUBECONFIG": kubeconfig}
    args = ["--repo", str(tmp_path), "--path", "apps", "--allowed-namespaces", namespace]
    proc = subprocess.run(
        [GITSYNC, "diff", *args, "--no-color"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    errors = sorted(line for line in proc.stderr.splitlines() if line.startswith("error: "))
    assert [e.split(":", 2)[1].strip() for e in errors] == [
        "apps/hex.yaml",
        "apps/loop.yaml",
        "apps/sexagesimal.yaml",
    ]
    # the good MyApp and its Deployment: the broken files stop nothing else
    assert proc.stdout.splitlines()[-1].startswith("local: 2 created, 0 configured")
    assert f"{namespace}/good" in proc.stdout


def test_diff_with_the_daemons_watch_namespace_previews_the_refusal(
    kubeconfig: str, crd: str, namespace: str, other_namespace: str, tmp_path: Path
) -> None:
    apps = tmp_path / "apps"
    apps.mkdir()
    (apps / "seen.yaml").write_text(app_yaml(namespace, "seen"))
    (apps / "unseen.yaml").write_text(app_yaml(other_namespace, "unseen"))
    env = {**os.environ, "KUBECONFIG": kubeconfig}
    allowed = f"{namespace},{other_namespace}"
    args = ["--repo", str(tmp_path), "--path", "apps", "--allowed-namespaces", allowed]
    proc = subprocess.run(
        [GITSYNC, "diff", *args, "--watch-namespace", namespace, "--no-color"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.splitlines() == [
        f"error: apps/unseen.yaml:5:3 (document 0): metadata.namespace: '{other_namespace}'"
        f" is outside the namespace gitsync watches (--watch-namespace {namespace})"
    ]
    assert f"{namespace}/seen" in proc.stdout and other_namespace not in proc.stdout
