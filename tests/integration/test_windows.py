"""Sync windows on the real control plane, through the CLI: a closed window holds a
change (diff says so first, exit 0), drift is still corrected unless corrections are
blocked, the one-shot annotation lets one change through and is removed (and is refused
when Git declares it), --ignore-windows applies and records it, and a prune waits for the
window. What was written is read from
the API server: the objects, gitsync's Apply entry in managedFields, status, Events."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

from gitsync.kube.client import Kube
from gitsync.model.window import OVERRIDE_ANNOTATION
from tests.integration.test_cli import common, gitsync
from tests.integration.test_drift import kubectl
from tests.integration.test_plan import main_entry, server_state
from tests.integration.test_status import condition, events
from tests.support import app_yaml, get, wait_until

#: closed at every instant (each minute starts a two-hour occurrence): it never opens
CLOSED = "deny * * * * * 2h name=freeze"
HELD = re.compile(r'held by window "freeze" until further notice')


class Repo:
    def __init__(self, root: Path, ns: str, kubeconfig: str) -> None:
        self.root, self.ns, self.kubeconfig = root, ns, kubeconfig
        (root / "apps").mkdir()

    def write(self, name: str, **spec: Any) -> None:
        (self.root / "apps" / f"{name}.yaml").write_text(app_yaml(self.ns, name, **spec))

    def run(self, command: str, *flags: str, code: int = 0) -> str:
        args = [command, *common(self.root, self.ns), *flags]
        if command == "sync":
            args += ["--status-namespace", self.ns]
        proc = gitsync(self.kubeconfig, *args)
        assert proc.returncode == code, proc.stdout + proc.stderr
        return proc.stdout


def image(kube: Kube, ns: str, name: str) -> str:
    return str((get(kube, "MyApp", ns, name) or {})["spec"]["image"])


def test_a_closed_window_holds_changes_and_prunes_and_says_until_when(
    kube: Kube, kubeconfig: str, crd: str, namespace: str, tmp_path: Path
) -> None:
    repo = Repo(tmp_path, namespace, kubeconfig)
    for name in ("web", "api", "worker"):
        repo.write(name)
    repo.run("sync")
    repo.write("web", image="nginx:1.28")
    (tmp_path / "apps" / "worker.yaml").unlink()
    # diff says what the sync will hold (a difference: exit 1), and has nothing to write
    doc = json.loads(repo.run("diff", "--sync-window", CLOSED, "-o", "json", code=1))
    held = {h["object"].split("/")[-1]: (h["hold"], h["reason"]) for h in doc["held"]}
    assert set(held) == {"web", "worker"} and doc["objects"] == []
    assert held["web"][0] == held["worker"][0] == "window"
    assert HELD.search(held["web"][1]) and HELD.search(held["worker"][1])
    before = server_state(kube, namespace)
    out = repo.run("sync", "--sync-window", CLOSED)
    lines = [line for line in out.splitlines() if line.startswith("held ")]
    assert len(lines) == 2 and all(HELD.search(line) for line in lines), out
    # nothing written but status: gitsync's Apply entries as they were, worker still there
    after = server_state(kube, namespace)
    assert {k: main_entry(v) for k, v in after.items()} == {
        k: main_entry(v) for k, v in before.items()
    }
    assert image(kube, namespace, "web") == "nginx:1.27"
    assert get(kube, "MyApp", namespace, "worker") is not None
    web = get(kube, "MyApp", namespace, "web") or {}
    mark = condition(web, "Waiting")
    assert (mark["status"], mark["reason"]) == ("True", "SyncWindow")
    assert HELD.fullmatch(mark["message"]), mark
    (event,) = events(kube, namespace, "web", "SyncWindow")
    assert HELD.fullmatch(event["message"])
    # the window gone (opened), the next sync applies and prunes
    repo.run("sync")
    assert image(kube, namespace, "web") == "nginx:1.28"
    wait_until(lambda: get(kube, "MyApp", namespace, "worker") is None, timeout=30, what="pruned")
    mark = condition(get(kube, "MyApp", namespace, "web") or {}, "Waiting")
    assert (mark["status"], mark["reason"]) == ("False", "Released")


def test_drift_is_corrected_in_a_closed_window_unless_blocked(
    kube: Kube, kubeconfig: str, kubectl_bin: str, crd: str, namespace: str, tmp_path: Path
) -> None:
    repo = Repo(tmp_path, namespace, kubeconfig)
    repo.write("web")
    repo.run("sync")
    scale = ("-n", namespace, "scale", "deployment/web", "--replicas=3")
    kubectl(kubectl_bin, kubeconfig, *scale)
    repo.run("sync", "--sync-window", CLOSED, "--windows-block-corrections")
    dep = get(kube, "Deployment", namespace, "web") or {}
    assert dep["spec"]["replicas"] == 3
    drift = (get(kube, "MyApp", namespace, "web") or {})["status"]["drift"]
    assert [(d["path"], d["live"]) for d in drift] == [("spec.replicas", 3)]
    repo.run("sync", "--sync-window", CLOSED)
    assert (get(kube, "Deployment", namespace, "web") or {})["spec"]["replicas"] == 1


def test_the_annotation_lets_one_change_through_and_ignore_windows_records_it(
    kube: Kube, kubeconfig: str, kubectl_bin: str, crd: str, namespace: str, tmp_path: Path
) -> None:
    repo = Repo(tmp_path, namespace, kubeconfig)
    repo.write("web")
    repo.run("sync")
    repo.write("web", image="nginx:1.28")
    kubectl(
        kubectl_bin,
        kubeconfig,
        *("-n", namespace, "annotate", "myapp/web", f"{OVERRIDE_ANNOTATION}=INC-42"),
    )
    # diff predicts it
    doc = json.loads(repo.run("diff", "--sync-window", CLOSED, "-o", "json", code=1))
    assert {o["object"].split("/")[-1] for o in doc["objects"]} == {"web"}
    repo.run("sync", "--sync-window", CLOSED)
    web = get(kube, "MyApp", namespace, "web") or {}
    assert web["spec"]["image"] == "nginx:1.28"
    assert OVERRIDE_ANNOTATION not in (web["metadata"].get("annotations") or {})
    (event,) = events(kube, namespace, "web", "SyncWindowOverridden")
    assert event["message"].endswith(f"{OVERRIDE_ANNOTATION}='INC-42'")
    assert HELD.search(event["message"])
    # once: the next change is held again
    repo.write("web", image="nginx:1.29")
    repo.run("sync", "--sync-window", CLOSED)
    assert image(kube, namespace, "web") == "nginx:1.28"
    # --ignore-windows applies it, and says so on the MyApp
    time.sleep(1.1)  # (Events of one reason and message are counted, not repeated)
    out = repo.run("sync", "--sync-window", CLOSED, "--ignore-windows")
    assert f"MyApp/{namespace}/web configured" in out
    assert image(kube, namespace, "web") == "nginx:1.29"
    found = events(kube, namespace, "web", "SyncWindowOverridden")
    assert any(e["message"].endswith(": --ignore-windows") for e in found), found


def test_an_override_declared_in_git_is_refused_and_the_window_still_holds(
    kube: Kube, kubeconfig: str, crd: str, namespace: str, tmp_path: Path
) -> None:
    # declared in Git, the one-shot override would be applied back after each use and
    # let every later change of the MyApp through a deny window
    repo = Repo(tmp_path, namespace, kubeconfig)
    repo.write("web")
    repo.run("sync")
    file = tmp_path / "apps" / "web.yaml"
    declared = app_yaml(namespace, "web", image="nginx:1.28").replace(
        "spec:\n", f"  annotations:\n    {OVERRIDE_ANNOTATION}: INC-7\nspec:\n"
    )
    file.write_text(declared)
    # refused while no window is closed, and inside one: nothing of it applied
    for flags in ((), ("--sync-window", CLOSED)):
        args = ("--status-namespace", namespace, *flags)
        proc = gitsync(kubeconfig, "sync", *common(tmp_path, namespace), *args)
        assert proc.returncode == 1, proc.stdout + proc.stderr
        assert f"apps/web.yaml:7:5 (document 0): metadata.annotations.{OVERRIDE_ANNOTATION}: " in (
            proc.stdout + proc.stderr
        )
        web = get(kube, "MyApp", namespace, "web") or {}
        assert web["spec"]["image"] == "nginx:1.27"
        assert OVERRIDE_ANNOTATION not in (web["metadata"].get("annotations") or {})
    proc = gitsync(kubeconfig, "validate", *common(tmp_path, namespace))
    assert proc.returncode == 1 and "apps/web.yaml:7:5" in proc.stdout + proc.stderr
    # the same change without it: the deny window holds it, then it is applied once open
    repo.write("web", image="nginx:1.28")
    out = repo.run("sync", "--sync-window", CLOSED)
    assert any(line.startswith("held ") and HELD.search(line) for line in out.splitlines())
    assert image(kube, namespace, "web") == "nginx:1.27"
    repo.run("sync")
    assert image(kube, namespace, "web") == "nginx:1.28"
