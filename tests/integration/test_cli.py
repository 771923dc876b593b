"""The CLI as users run it: sync, diff and drift in subprocesses, exit codes, and
proof that diff writes nothing: it runs as a user the API server lets read only."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gitsync.kube.client import Kube
from gitsync.reconcile.controller import Controller
from tests.integration.test_drift import kubectl
from tests.support import app_yaml, wait_until

GITSYNC = str(Path(sys.executable).parent / "gitsync")


def gitsync(kubeconfig: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KUBECONFIG": kubeconfig, "GITSYNC_LOG_FORMAT": "text"}
    return subprocess.run([GITSYNC, *args], capture_output=True, text=True, timeout=120, env=env)


@pytest.fixture
def repo(tmp_path: Path, namespace: str) -> Path:
    apps = tmp_path / "repo" / "apps"
    apps.mkdir(parents=True)
    (apps / "web.yaml").write_text(app_yaml(namespace, "web", replicas=2, port=8080))
    (apps / "api.yaml").write_text(app_yaml(namespace, "api"))
    return tmp_path / "repo"


def common(repo: Path, namespace: str) -> list[str]:
    return ["--repo", str(repo), "--path", "apps", "--allowed-namespaces", namespace]


@pytest.fixture
def synced(kubeconfig: str, crd: str, namespace: str, repo: Path) -> Path:
    proc = gitsync(kubeconfig, "sync", *common(repo, namespace), "--status-namespace", namespace)
    assert proc.returncode == 0, proc.stderr
    assert "2 created" in proc.stdout
    return repo


def test_diff_after_sync_is_clean_then_shows_exactly_the_git_change(
    reader_kubeconfig: str, namespace: str, synced: Path
) -> None:
    # every diff here runs as a user who may only read: a write, even a dry-run, fails it
    kubeconfig = reader_kubeconfig
    clean = gitsync(kubeconfig, "diff", *common(synced, namespace))
    assert clean.returncode == 0, clean.stderr
    assert clean.stdout.strip().splitlines() == [
        "local: 0 created, 0 configured, 4 unchanged, 0 pruned"
    ]

    (synced / "apps" / "web.yaml").write_text(
        app_yaml(namespace, "web", image="nginx:1.28", replicas=2, port=8080)
    )
    text = gitsync(kubeconfig, "diff", *common(synced, namespace), "--no-color")
    assert text.returncode == 1, text.stderr
    assert f"--- live/MyApp/{namespace}/web" in text.stdout
    assert "+  image: nginx:1.28" in text.stdout or "+    image: nginx:1.28" in text.stdout
    assert "\x1b[" not in text.stdout

    out = gitsync(kubeconfig, "diff", *common(synced, namespace), "-o", "json")
    assert out.returncode == 1
    doc = json.loads(out.stdout)
    assert doc["summary"] == "0 created, 2 configured, 2 unchanged, 0 pruned"
    changes = {o["object"]: o["changes"] for o in doc["objects"]}
    assert changes == {
        f"MyApp/{namespace}/web": [
            {"path": "spec.image", "live": "nginx:1.27", "git": "nginx:1.28"}
        ],
        f"Deployment/{namespace}/web": [
            {
                "path": "spec.template.spec.containers[name=app].image",
                "live": "nginx:1.27",
                "git": "nginx:1.28",
            }
        ],
    }


def test_diff_previews_prunes_and_errors_exit_2(
    kubeconfig: str, namespace: str, synced: Path
) -> None:
    (synced / "apps" / "api.yaml").unlink()
    # one of two is half, which the default --prune-max-fraction refuses
    args = (*common(synced, namespace), "--prune-max-fraction", "0.75")
    out = gitsync(kubeconfig, "diff", *args, "-o", "json")
    assert out.returncode == 1
    doc = json.loads(out.stdout)
    assert {
        "object": f"MyApp/{namespace}/api",
        "action": "pruned",
        "changes": [],
        "reason": "removed from Git",
    } in doc["objects"]
    missing = gitsync(kubeconfig, "diff", "--repo", str(synced / "nope"), "--path", "apps")
    assert missing.returncode == 2
    assert "Traceback" not in missing.stderr
    usage = gitsync(kubeconfig, "diff", "--bogus-flag")
    assert usage.returncode == 2
    # one broken file among unchanged ones is still an error: CI must not pass it
    (synced / "apps" / "broken.yaml").write_text("kind: [\n")
    broken = gitsync(kubeconfig, "diff", *common(synced, namespace))
    assert broken.returncode == 2
    assert "apps/broken.yaml" in broken.stderr and "Traceback" not in broken.stderr


def test_drift_report_exit_codes_and_json(
    kube: Kube,
    kubeconfig: str,
    kubectl_bin: str,
    namespace: str,
    tmp_path: Path,
    crd: str,
    controller: Controller,
) -> None:
    repo = tmp_path / "r"
    (repo / "apps").mkdir(parents=True)
    (repo / "apps" / "d.yaml").write_text(
        app_yaml(namespace, "d", replicas=1, driftPolicy="report")
    )
    sync = gitsync(kubeconfig, "sync", *common(repo, namespace), "--status-namespace", namespace)
    assert sync.returncode == 0, sync.stderr
    assert controller.wait_idle(30)
    clean = gitsync(kubeconfig, "drift", "-n", namespace, "--status-namespace", namespace)
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert clean.stdout.splitlines()[0].split() == [
        "NAMESPACE",
        "NAME",
        "SYNCED",
        "DRIFTED",
        "PATHS",
        "CHANGED",
        "BY",
        "SINCE",
    ]
    assert "result Succeeded" in clean.stdout

    kubectl(kubectl_bin, kubeconfig, "-n", namespace, "scale", "deployment/d", "--replicas=3")

    def drifted() -> subprocess.CompletedProcess[str] | None:
        proc = gitsync(
            kubeconfig, "drift", "-n", namespace, "-o", "json", "--status-namespace", namespace
        )
        return proc if proc.returncode == 1 else None

    proc = wait_until(drifted, timeout=30, what="drift exit code 1")
    doc = json.loads(proc.stdout)
    assert doc["sync"]["result"] == "Succeeded"
    [row] = doc["apps"]
    assert (row["namespace"], row["name"], row["drifted"]) == (namespace, "d", True)
    assert row["paths"] == ["Deployment/d spec.replicas"]
    assert row["changedBy"] == ["kubectl"]
    assert row["drift"][0]["desired"] == 1 and row["drift"][0]["live"] == 3
    bad = gitsync("/nonexistent/kubeconfig", "drift")
    assert bad.returncode == 2 and "Traceback" not in bad.stderr


def test_drift_with_no_myapps_says_so_like_kubectl(
    kubeconfig: str, namespace: str, crd: str
) -> None:
    proc = gitsync(kubeconfig, "drift", "-n", namespace, "--status-namespace", namespace)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stderr == f"No MyApps found in namespace {namespace}.\n"
    assert "NAMESPACE" not in proc.stdout  # no empty table


@pytest.mark.parametrize("fmt", ["json", "yaml"])
def test_every_command_prints_data_alone_on_stdout_as_its_output_format_says(
    kubeconfig: str, namespace: str, synced: Path, tmp_path: Path, fmt: str
) -> None:
    """Errors and logs go to stderr, data to stdout: each command's stdout parses as
    the -o it was given, whether it found something to say or failed on a MyApp."""
    import yaml

    parse = json.loads if fmt == "json" else yaml.safe_load
    status = ("--status-namespace", namespace)
    (synced / "apps" / "web.yaml").write_text(app_yaml(namespace, "web", replicas=3, port=8080))
    (synced / "apps" / "bad.yaml").write_text(app_yaml("kube-system", "bad"))  # refused
    runs = {
        "diff": gitsync(kubeconfig, "diff", *common(synced, namespace), *status, "-o", fmt),
        "drift": gitsync(kubeconfig, "drift", "-n", namespace, *status, "-o", fmt),
        "blame": gitsync(kubeconfig, "blame", f"MyApp/{namespace}/web", "-o", fmt),
        "sync": gitsync(kubeconfig, "sync", *common(synced, namespace), *status, "-o", fmt),
    }
    for name, proc in runs.items():
        assert proc.returncode in (0, 1, 2), (name, proc.stderr)
        doc = parse(proc.stdout)
        assert isinstance(doc, dict) and doc, (name, proc.stdout[:200])
        assert "Traceback" not in proc.stderr, name
    # the refused MyApp is said on stderr or in the data, never as stray lines on stdout
    assert "kube-system" in runs["sync"].stdout + runs["sync"].stderr
