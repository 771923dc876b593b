"""``gitsync blame`` against the real control plane and a real repository with history:
each field traced to the commit and line that set it, and a ``kubectl scale`` to its
field manager."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from gitsync.kube.client import Kube
from tests.gitserver import Upstream
from tests.integration.test_cli import gitsync
from tests.integration.test_drift import kubectl
from tests.support import app_yaml, get


def _commit_as(upstream: Upstream, author: str, files: dict[str, str | None], msg: str) -> str:
    upstream.env["GIT_AUTHOR_NAME"] = author
    return upstream.commit(files, msg)


def _fields(doc: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(f["object"].split("/")[0], f["path"]): f for f in doc["fields"]}


def test_blame_traces_fields_to_commits_and_lines_then_to_kubectl_scale(
    kube: Kube,
    kubeconfig: str,
    kubectl_bin: str,
    crd: str,
    namespace: str,
    upstream: Upstream,
    tmp_path: Path,
) -> None:
    first = _commit_as(
        upstream,
        "Alice",
        {"apps/web.yaml": app_yaml(namespace, "web", image="nginx:1.27", replicas=2, port=8080)},
        "add web",
    )
    _commit_as(upstream, "Bob", {"apps/other.txt": "not a manifest\n"}, "unrelated")
    bump = _commit_as(
        upstream,
        "Carol",
        {"apps/web.yaml": app_yaml(namespace, "web", image="nginx:1.28", replicas=2, port=8080)},
        "bump nginx",
    )
    sync = gitsync(
        kubeconfig,
        "sync",
        "--repo",
        upstream.file_url,
        "--path",
        "apps",
        "--cache-dir",
        str(tmp_path / "cache"),
        "--allowed-namespaces",
        namespace,
        "--status-namespace",
        namespace,
    )
    assert sync.returncode == 0, sync.stderr

    clean = gitsync(
        kubeconfig, "blame", f"MyApp/{namespace}/web", "--repo", str(upstream.work), "-o", "json"
    )
    assert clean.returncode == 0, clean.stderr
    doc = json.loads(clean.stdout)
    assert doc["revision"] == f"main@sha1:{bump}"
    assert doc["file"] == "apps/web.yaml"
    fields = _fields(doc)
    image = fields[("MyApp", "spec.image")]
    assert image["live"] == "nginx:1.28"
    assert image["origin"]["kind"] == "git"
    assert image["origin"]["line"] == 7  # app_yaml: "  image: ..." is the 7th line
    assert image["origin"]["commit"]["sha"] == bump
    assert image["origin"]["commit"]["author"] == "Carol"
    assert image["origin"]["commit"]["subject"] == "bump nginx"
    replicas = fields[("MyApp", "spec.replicas")]
    assert replicas["origin"]["line"] == 8
    assert replicas["origin"]["commit"]["sha"] == first  # untouched by the bump
    assert replicas["origin"]["commit"]["author"] == "Alice"
    rendered = fields[("Deployment", "spec.template.spec.containers[name=app].image")]
    assert rendered["live"] == "nginx:1.28"
    assert rendered["origin"]["via"] == "spec.image"
    assert rendered["origin"]["commit"]["subject"] == "bump nginx"
    port = fields[
        (
            "Deployment",
            "spec.template.spec.containers[name=app].ports[containerPort=8080,protocol=TCP]"
            ".containerPort",
        )
    ]
    assert port["origin"]["via"] == "spec.port"
    assert port["origin"]["line"] == 9
    assert not any(f["drifted"] for f in doc["fields"])

    kubectl(kubectl_bin, kubeconfig, "-n", namespace, "scale", "deployment/web", "--replicas=5")
    drifted = gitsync(kubeconfig, "blame", f"{namespace}/web", "--repo", str(upstream.work))
    assert drifted.returncode == 1, drifted.stderr
    line = next(
        ln
        for ln in drifted.stdout.splitlines()
        if ln.strip().startswith("spec.replicas  ") and "kubectl" in ln
    )
    assert (
        "5" in line
        and "drift: changed by kubectl" in line
        and "; Git says 2 ← spec.replicas ← apps/web.yaml:8" in line
    )
    image_line = next(
        ln for ln in drifted.stdout.splitlines() if "containers[name=app].image" in ln
    )
    assert f'← spec.image ← apps/web.yaml:7, {bump[:7]} "bump nginx" by Carol' in image_line

    as_yaml = gitsync(kubeconfig, "blame", "web", "-n", namespace, "-o", "yaml")
    assert as_yaml.returncode == 1, as_yaml.stderr
    fields = _fields(yaml.safe_load(as_yaml.stdout))
    scaled = fields[("Deployment", "spec.replicas")]
    assert scaled["live"] == 5 and scaled["desired"] == 2 and scaled["drifted"]
    assert scaled["origin"]["kind"] == "drift"
    assert scaled["origin"]["manager"].startswith("kubectl")
    assert scaled["origin"]["operation"] == "Update"
    # the API server records no time on an Update through /scale (checked on the real one)
    assert "time" not in scaled["origin"], scaled
    # without a clone: the file and revision, no line
    assert fields[("MyApp", "spec.image")]["origin"] == {
        "kind": "git",
        "file": "apps/web.yaml",
        "revision": f"main@sha1:{bump}",
    }


def test_blame_errors_exit_2_in_one_line(
    kubeconfig: str, crd: str, namespace: str, tmp_path: Path
) -> None:
    missing = gitsync(kubeconfig, "blame", f"MyApp/{namespace}/nothing")
    assert missing.returncode == 2
    assert missing.stderr.strip() == f"error: MyApp/{namespace}/nothing not found"
    bad = gitsync(kubeconfig, "blame", "a/b/c/d")
    assert bad.returncode == 2
    assert "Traceback" not in bad.stderr and "is not MyApp/namespace/name" in bad.stderr


OSC52 = "\x1b]52;c;aGFja2Vk\x07"  # "hacked" into the terminal's clipboard


def _here(kubeconfig: str, *args: str) -> subprocess.CompletedProcess[str]:
    """The CLI of this checkout (the console script may belong to another)."""
    env = {**os.environ, "KUBECONFIG": kubeconfig, "GITSYNC_LOG_FORMAT": "text"}
    return subprocess.run(
        [sys.executable, "-c", "from gitsync.cli import main; main()", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=Path(__file__).parents[2],
    )


def test_blame_text_escapes_commit_subjects_and_values(
    kube: Kube, kubeconfig: str, crd: str, namespace: str, upstream: Upstream, tmp_path: Path
) -> None:
    env = '[{name: X, value: "\\e]52;c;aGFja2Vk\\a"}]'  # YAML's escapes: ESC ... BEL
    sha = _commit_as(
        upstream, "Mallory", {"apps/web.yaml": app_yaml(namespace, "web", env=env)}, f"add{OSC52}"
    )
    sync = _here(
        kubeconfig,
        *("sync", "--repo", upstream.file_url, "--path", "apps"),
        *("--cache-dir", str(tmp_path / "cache"), "--allowed-namespaces", namespace),
        *("--status-namespace", namespace),
    )
    assert sync.returncode == 0, sync.stderr
    myapp = get(kube, "MyApp", namespace, "web")
    assert myapp is not None and myapp["spec"]["env"] == [{"name": "X", "value": OSC52}]
    assert OSC52 in upstream.wgit("log", "-1", "--format=%s", sha)  # git kept it too

    out = _here(kubeconfig, "blame", f"MyApp/{namespace}/web", "--repo", str(upstream.work))
    assert out.returncode == 0, out.stderr
    assert "\x1b" not in out.stdout and "\x07" not in out.stdout
    # the value and the subject, shown escaped
    assert out.stdout.count("\\x1b]52;c;aGFja2Vk\\x07") >= 3, out.stdout
