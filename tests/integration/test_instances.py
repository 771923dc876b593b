"""Instances against the real API server: two instances on one repository keep to their
own MyApps, and a replica that stops leading during a pass deletes nothing more."""

from __future__ import annotations

import json
import os
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gitsync.kube.client import Kube, path_of, resource_path
from gitsync.model.api import SOURCE_LABEL
from gitsync.model.instance import legacy_label
from gitsync.reconcile.controller import Controller, ControllerConfig
from tests.gitserver import AUTHOR, Upstream
from tests.integration.test_cli import gitsync
from tests.integration.test_sync import actions, exists, state_of, syncer
from tests.support import app_yaml, available, get, wait_until


@pytest.fixture
def second(kube: Kube, crd: str, namespace: str) -> Iterator[Controller]:
    """The operator of a second gitsync instance, on the same cluster."""
    c = Controller(kube, ControllerConfig(namespace=namespace, workers=2))
    c.start()
    assert c.wait_synced(30)
    yield c
    c.stop()


def label(kube: Kube, namespace: str, name: str) -> str | None:
    app = get(kube, "MyApp", namespace, name)
    assert app is not None, f"MyApp {name} is gone"
    return (app["metadata"].get("labels") or {}).get(SOURCE_LABEL)


def push_branch(upstream: Upstream, branch: str, files: dict[str, str | None]) -> None:
    """Change the work tree by ``files``, commit, and push to ``branch`` alone."""
    for rel, text in files.items():
        p = upstream.work / rel
        if text is None:
            p.unlink()
        else:
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(text)
    upstream.wgit("add", "--all")
    upstream.wgit("commit", "--quiet", "-m", f"{branch} content")
    upstream.wgit("push", "--quiet", "--force", "origin", f"HEAD:refs/heads/{branch}")


def test_two_instances_on_one_repository_keep_to_their_own_myapps(
    kube: Kube,
    namespace: str,
    controller: Controller,
    second: Controller,
    upstream: Upstream,
    cache_dir: Path,
) -> None:
    # one repository and path, two refs: production follows main, staging its branch;
    # both declare "shared"
    push_branch(
        upstream,
        "staging",
        {
            **{f"apps/{n}.yaml": app_yaml(namespace, n) for n in ("s1", "s2", "s3")},
            "apps/shared.yaml": app_yaml(namespace, "shared", image="nginx:1.28"),
        },
    )
    upstream.commit(
        {
            **{f"apps/{n}.yaml": None for n in ("s1", "s2", "s3")},
            "apps/p1.yaml": app_yaml(namespace, "p1"),
            "apps/shared.yaml": app_yaml(namespace, "shared", image="nginx:1.27"),
        }
    )
    prod = syncer(controller, upstream.file_url, cache_dir / "prod", namespace)
    staging = syncer(second, upstream.file_url, cache_dir / "stg", namespace, ref="staging")
    assert prod.identity.name != staging.identity.name

    assert actions(prod.run()) == {"p1": "created", "shared": "created"}
    assert second.myapps.wait_synced(10)
    wait_until(lambda: second.myapps.get(f"{namespace}/shared"), what="the watch to see shared")
    first = staging.run()
    assert actions(first) == {s: "created" for s in ("s1", "s2", "s3")} | {"shared": "failed"}
    [refused] = [o.reason for o in first.changes if o.action == "failed"]
    assert f"MyApp/{namespace}/shared" in refused and repr(prod.identity.name) in refused
    assert state_of(prod)["result"] == "Succeeded"
    assert repr(prod.identity.name) in state_of(staging)["lastError"]

    # the API server holds each MyApp under its own instance's label; shared is untouched
    for name in ("p1", "shared"):
        assert label(kube, namespace, name) == prod.identity.label
    for name in ("s1", "s2", "s3"):
        assert label(kube, namespace, name) == staging.identity.label
    shared = get(kube, "MyApp", namespace, "shared")
    assert shared is not None and shared["spec"]["image"] == "nginx:1.27"
    assert shared["metadata"]["generation"] == 1, "the spec was written over"

    def refusals() -> list[dict[str, Any]]:
        events = kube.list(resource_path("v1", "events", namespace))["items"]
        return [
            e
            for e in events
            if e["reason"] == "OwnedByAnotherInstance" and e["involvedObject"]["name"] == "shared"
        ]

    [event] = wait_until(refusals, what="the OwnedByAnotherInstance Event")
    assert event["type"] == "Warning" and prod.identity.name in event["message"]

    # each instance runs again: neither prunes the other's MyApps (one of three, and
    # three of five, were below the old guard's "more than half")
    again = staging.run()
    assert actions(again) == {s: "unchanged" for s in ("s1", "s2", "s3")} | {"shared": "failed"}
    assert prod.run().ok
    for name in ("s1", "s2", "s3", "p1", "shared"):
        assert exists(kube, "MyApp", namespace, name), f"{name} was pruned"
    shared = get(kube, "MyApp", namespace, "shared")
    assert shared is not None and shared["metadata"]["generation"] == 1
    assert label(kube, namespace, "shared") == prod.identity.label
    # only one Event for a refusal that stands, not one per pass
    assert len(refusals()) == 1

    # shared is deleted by hand and staging re-creates it first: prod's operator, which
    # still holds shared to prod's Git, must not take it back (a flap between the two)
    key = f"{namespace}/shared"
    kube.delete(path_of("MyApp", namespace, "shared"))
    wait_until(
        lambda: not exists(kube, "Deployment", namespace, "shared"),
        timeout=60,
        what="the garbage collector to remove shared's Deployment",
    )
    wait_until(lambda: second.myapps.get(key) is None, what="staging's cache to lose shared")
    assert actions(staging.run())["shared"] == "created"

    def seen_by_prod() -> bool:
        labels = (controller.myapps.get(key) or {}).get("metadata", {}).get("labels") or {}
        return labels.get(SOURCE_LABEL) == staging.identity.label

    wait_until(seen_by_prod, what="prod's cache to see staging's shared")
    controller.reconcile(key)
    assert label(kube, namespace, "shared") == staging.identity.label
    shared = get(kube, "MyApp", namespace, "shared")
    assert shared is not None and shared["spec"]["image"] == "nginx:1.28"
    assert actions(prod.run())["shared"] == "failed"
    assert label(kube, namespace, "shared") == staging.identity.label


def test_myapps_labelled_before_instance_names_are_adopted_not_pruned(
    kube: Kube, namespace: str, controller: Controller, upstream: Upstream, cache_dir: Path
) -> None:
    upstream.commit({f"apps/{n}.yaml": app_yaml(namespace, n) for n in ("kept", "left", "x")})
    s = syncer(controller, upstream.file_url, cache_dir, namespace)
    old = legacy_label(upstream.file_url, "apps")
    for name in ("kept", "left"):
        body = {
            "apiVersion": "apps.example.com/v1",
            "kind": "MyApp",
            "metadata": {"name": name, "namespace": namespace, "labels": {SOURCE_LABEL: old}},
            "spec": {"image": "nginx:1.27"},
        }
        kube.apply(path_of("MyApp", namespace, name), body, field_manager="gitsync")
    wait_until(lambda: controller.myapps.get(f"{namespace}/left"), what="the cache")
    upstream.commit({"apps/left.yaml": None})
    result = s.run()
    assert result.ok, result.errors
    assert actions(result) == {"kept": "configured", "x": "created"}
    assert label(kube, namespace, "kept") == s.identity.label
    # shared by every ref of the repository: not proof enough that "left" was ours
    assert label(kube, namespace, "left") == old


def test_one_repository_over_another_transport_is_the_same_instance(
    kube: Kube, namespace: str, controller: Controller, upstream: Upstream, cache_dir: Path
) -> None:
    # a daemon syncing over https, and a sync naming the repository as ssh's scp form
    # (--instance-repo): one source, so one instance
    https = syncer(
        controller,
        upstream.file_url,
        cache_dir,
        namespace,
        instance="https://git.example.com/platform/apps.git",
    )
    scp = syncer(
        controller,
        upstream.file_url,
        cache_dir,
        namespace,
        instance="git@git.example.com:platform/apps.git",
        ref="refs/heads/main",
    )
    assert https.identity.name == "apps-main-47fb36e346"  # as every version has named it
    assert scp.identity.name == https.identity.name
    # that spelling (scp form, refs/heads/main) had a name of its own before: its MyApps
    # are adopted, not refused
    before = "apps-refs-heads-main-12b05467fc"
    upstream.commit({f"apps/{n}.yaml": app_yaml(namespace, n) for n in ("kept", "left", "new")})
    for name in ("kept", "left"):
        body = {
            "apiVersion": "apps.example.com/v1",
            "kind": "MyApp",
            "metadata": {"name": name, "namespace": namespace, "labels": {SOURCE_LABEL: before}},
            "spec": {"image": "nginx:1.27"},
        }
        kube.apply(path_of("MyApp", namespace, name), body, field_manager="gitsync")
    wait_until(lambda: controller.myapps.get(f"{namespace}/left"), what="the cache")
    upstream.commit({"apps/left.yaml": None})
    result = scp.run()
    assert result.ok, [(c.subject, c.reason) for c in result.changes if c.action == "failed"]
    assert actions(result) == {"kept": "configured", "new": "created"}
    assert label(kube, namespace, "kept") == https.identity.label
    # not pruned: a replica not yet upgraded may still lead under the old name
    assert label(kube, namespace, "left") == before
    # and the https instance sees the MyApps as its own
    assert actions(https.run()) == {"kept": "unchanged", "new": "unchanged"}


class Deposer:
    """Wraps a method of the reconciler (or of its applier): after ``calls`` calls the
    replica stops leading (or, with ``cancel``, the pass is cancelled). ``undo`` puts
    the method back."""

    def __init__(self, owner: Any, method: str, calls: int, stop: threading.Event) -> None:
        self.owner, self.method = owner, method
        self.real = getattr(owner, method)
        self.seen: list[tuple[Any, ...]] = []
        self._lock = threading.Lock()

        def wrapped(*args: Any, **kw: Any) -> Any:
            try:
                return self.real(*args, **kw)
            finally:
                with self._lock:
                    self.seen.append(args)
                    if len(self.seen) >= calls:
                        stop.set()

        setattr(owner, method, wrapped)

    def undo(self) -> None:
        setattr(self.owner, self.method, self.real)


def test_a_pass_that_loses_leadership_deletes_nothing_more(
    kube: Kube, namespace: str, controller: Controller, upstream: Upstream, cache_dir: Path
) -> None:
    names = ("a", "b", "c", "d", "e")
    upstream.commit({f"apps/{n}.yaml": app_yaml(namespace, n) for n in names})
    deposed = threading.Event()
    controller.is_leader = lambda: not deposed.is_set()
    s = syncer(controller, upstream.file_url, cache_dir, namespace)
    assert s.run().ok
    for n in names:
        wait_until(lambda n=n: available(kube, namespace, n, 1), timeout=60, what=n)  # type: ignore[misc]
    assert controller.wait_idle(30)
    # d and e leave Git: two of five, a prune the guard allows
    upstream.commit({"apps/d.yaml": None, "apps/e.yaml": None})

    # deposed once the apply phase is over, before the prune
    applies = Deposer(controller, "reconcile", 3, deposed)
    result = s.run()
    applies.undo()
    assert sorted(args[0] for args in applies.seen) == [f"{namespace}/{n}" for n in "abc"]
    assert result.count("pruned") == 0 and not result.ok
    assert exists(kube, "MyApp", namespace, "d") and exists(kube, "MyApp", namespace, "e")

    # deposed by the time the first delete returns: the second is never sent
    deposed.clear()
    deletes = Deposer(controller.applier, "delete", 1, deposed)
    result = s.run()
    deletes.undo()
    assert [args[1:3] for args in deletes.seen] == [(namespace, "d")]
    assert actions(result)["d"] == "pruned" and "e" not in actions(result)
    assert not exists(kube, "MyApp", namespace, "d")
    assert exists(kube, "MyApp", namespace, "e")

    # shutting down once the apply phase is over: nothing deleted either
    deposed.clear()
    cancels = Deposer(controller, "reconcile", 3, s.cancel)
    result = s.run()
    cancels.undo()
    assert result.count("pruned") == 0
    assert exists(kube, "MyApp", namespace, "e")

    # leading, and not stopping: the prune completes
    s.cancel.clear()
    final = s.run()
    assert final.ok, final.errors
    assert actions(final)["e"] == "pruned"
    assert not exists(kube, "MyApp", namespace, "e")


def test_the_cli_refuses_previews_and_reports_per_instance(
    kube: Kube, kubeconfig: str, crd: str, namespace: str, tmp_path: Path
) -> None:
    apps = tmp_path / "repo" / "apps"
    apps.mkdir(parents=True)
    for name in ("taken", "mine"):
        (apps / f"{name}.yaml").write_text(app_yaml(namespace, name))
    body = {
        "apiVersion": "apps.example.com/v1",
        "kind": "MyApp",
        "metadata": {"name": "taken", "namespace": namespace, "labels": {SOURCE_LABEL: "other"}},
        "spec": {"image": "nginx:1.26"},
    }
    kube.apply(path_of("MyApp", namespace, "taken"), body, field_manager="gitsync")
    common = ["--repo", str(tmp_path / "repo"), "--path", "apps", "--allowed-namespaces", namespace]
    named = [*common, "--instance-name", "mine"]

    # diff says what sync will do: the refusal is an error, and no change is shown for it
    preview = gitsync(kubeconfig, "diff", *named, "-o", "json")
    assert preview.returncode == 2, preview.stderr
    assert f"MyApp/{namespace}/taken belongs to gitsync instance 'other'" in preview.stderr
    objects = {o["object"] for o in json.loads(preview.stdout)["objects"]}
    assert f"MyApp/{namespace}/mine" in objects and f"MyApp/{namespace}/taken" not in objects

    done = gitsync(kubeconfig, "sync", *named, "--status-namespace", namespace)
    assert done.returncode == 1, done.stderr
    assert f"MyApp/{namespace}/taken failed: MyApp/{namespace}/taken belongs to" in done.stdout
    assert label(kube, namespace, "taken") == "other"
    taken = get(kube, "MyApp", namespace, "taken")
    assert taken is not None and taken["spec"]["image"] == "nginx:1.26"
    assert label(kube, namespace, "mine") == "mine"
    cm = kube.get(resource_path("v1", "configmaps", namespace, "gitsync-status-mine"))
    assert cm["metadata"]["labels"]["gitsync.apps.example.com/instance"] == "mine"

    # drift finds the instance's status by name, or every instance's without one
    report = gitsync(
        kubeconfig,
        "drift",
        "-n",
        namespace,
        "--status-namespace",
        namespace,
        "--instance-name",
        "mine",
        "-o",
        "json",
    )
    assert report.returncode == 0, report.stderr
    doc = json.loads(report.stdout)
    assert "belongs to gitsync instance 'other'" in doc["sync"]["lastError"]
    every = gitsync(kubeconfig, "drift", "-n", namespace, "--status-namespace", namespace)
    assert "sync of mine: revision local, result Failed" in every.stdout, every.stdout

    bad = gitsync(kubeconfig, "sync", *common, "--instance-name", "Not_A_Label")
    assert bad.returncode == 1
    assert "--instance-name 'Not_A_Label' is not a DNS-1123 label" in bad.stderr
    assert "Traceback" not in bad.stderr


def test_a_myapp_relabelled_during_the_pass_is_not_pruned(
    kube: Kube, namespace: str, controller: Controller, upstream: Upstream, cache_dir: Path
) -> None:
    names = ("a", "b", "c", "gone")
    upstream.commit({f"apps/{n}.yaml": app_yaml(namespace, n) for n in names})
    s = syncer(controller, upstream.file_url, cache_dir, namespace)
    assert s.run().ok
    upstream.commit({"apps/gone.yaml": None})

    # while the pass applies, another instance takes "gone" over
    def take_over() -> None:
        patch = {
            "apiVersion": "apps.example.com/v1",
            "kind": "MyApp",
            "metadata": {"name": "gone", "namespace": namespace, "labels": {SOURCE_LABEL: "other"}},
        }
        kube.apply(
            path_of("MyApp", namespace, "gone"), patch, field_manager="other-instance", force=True
        )

    real = controller.reconcile
    applied: list[str] = []
    lock = threading.Lock()

    def apply_then_take_over(*args: Any, **kw: Any) -> Any:
        try:
            return real(*args, **kw)
        finally:
            with lock:
                applied.append(str(args[0]))
                if len(applied) == 3:  # the apply phase is over, the prune is next
                    take_over()

    controller.reconcile = apply_then_take_over  # type: ignore[method-assign]
    result = s.run()
    controller.reconcile = real  # type: ignore[method-assign]
    assert "gone" not in actions(result)
    assert label(kube, namespace, "gone") == "other"


def test_diff_of_a_local_checkout_previews_the_instance_of_its_repository(
    kube: Kube, kubeconfig: str, crd: str, namespace: str, tmp_path: Path
) -> None:
    # README's path: sync from the repository's URL, then diff the same repository as a
    # local checkout; and a clone of it
    repo = tmp_path / "apps-repo"
    (repo / "apps").mkdir(parents=True)
    for name in ("web", "api"):
        (repo / "apps" / f"{name}.yaml").write_text(app_yaml(namespace, name))
    env = {**os.environ, **AUTHOR, "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull}

    def git(*args: str) -> None:
        subprocess.run(["git", *args], env=env, check=True, capture_output=True, timeout=30)

    git("-C", str(repo), "init", "--quiet", "--initial-branch=main")
    git("-C", str(repo), "add", "--all")
    git("-C", str(repo), "commit", "--quiet", "-m", "apps")
    git("clone", "--quiet", f"file://{repo}", str(tmp_path / "clone"))
    flags = ["--allowed-namespaces", namespace]
    status = ["--status-namespace", namespace]

    done = gitsync(
        kubeconfig, "sync", "--repo", f"file://{repo}", "--path", "apps", *flags, *status
    )
    assert done.returncode == 0, done.stderr
    synced = label(kube, namespace, "web")
    for where, path in [
        (repo, "apps"),
        (tmp_path / "clone", "apps"),
    ]:
        preview = gitsync(kubeconfig, "diff", "--repo", str(where), "--path", path, *flags)
        assert preview.returncode == 0, (where, preview.stdout, preview.stderr)
        assert "belongs to gitsync instance" not in preview.stderr
        # it says which instance it took the checkout for
        assert f"instance {synced}: named after the checkout" in preview.stderr, preview.stderr
    # a sync from the checkout is that instance too: it labels nothing anew
    again = gitsync(
        kubeconfig, "sync", "--repo", str(tmp_path / "clone"), "--path", "apps", *flags, *status
    )
    assert again.returncode == 0, again.stderr
    assert label(kube, namespace, "web") == label(kube, namespace, "api") == synced

    # --instance-name still names another instance, whose claim is refused as before
    other = gitsync(
        kubeconfig,
        "diff",
        "--repo",
        str(repo),
        "--path",
        "apps",
        *flags,
        "--instance-name",
        "other",
    )
    assert other.returncode == 2
    assert f"belongs to gitsync instance {synced!r}" in other.stderr


def test_a_ref_the_local_checkout_lacks_is_one_error_and_no_new_instance(
    kube: Kube, kubeconfig: str, crd: str, namespace: str, tmp_path: Path
) -> None:
    # `diff --repo . --ref master` on a checkout of trunk named an instance of master,
    # which refused every MyApp trunk's instance applied, one long error each; a sync
    # recorded that instance's failed pass in a status ConfigMap of its own
    repo = tmp_path / "apps-repo"
    (repo / "apps").mkdir(parents=True)
    for name in ("web", "api", "db"):
        (repo / "apps" / f"{name}.yaml").write_text(app_yaml(namespace, name))
    env = {**os.environ, **AUTHOR, "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull}
    for args in (["init", "--quiet", "--initial-branch=trunk"], ["add", "--all"],
                 ["commit", "--quiet", "-m", "apps"]):  # fmt: skip
        subprocess.run(["git", "-C", str(repo), *args], env=env, check=True, timeout=30)
    flags = ["--repo", str(repo), "--path", "apps", "--allowed-namespaces", namespace]
    status = ["--status-namespace", namespace]
    done = gitsync(kubeconfig, "sync", *flags, *status)
    assert done.returncode == 0, done.stderr
    synced = label(kube, namespace, "web")
    configmaps = resource_path("v1", "configmaps", namespace)
    before = {c["metadata"]["name"] for c in kube.list(configmaps)["items"]}
    assert f"gitsync-status-{synced}" in before

    expected = (
        f"error: --ref 'master': the checkout {repo} has no such branch, tag or commit "
        "(it is on trunk); leave --ref out to take its branch, or name the instance with "
        "--instance-repo or --instance-name\n"
    )
    preview = gitsync(kubeconfig, "diff", *flags, "--ref", "master")
    assert (preview.returncode, preview.stdout, preview.stderr) == (2, "", expected)
    sync = gitsync(kubeconfig, "sync", *flags, *status, "--ref", "master")
    assert (sync.returncode, sync.stdout, sync.stderr) == (1, "", expected)
    # nothing of another instance in the cluster: the MyApps are trunk's, no status
    # ConfigMap but trunk's
    assert {label(kube, namespace, n) for n in ("web", "api", "db")} == {synced}
    assert {c["metadata"]["name"] for c in kube.list(configmaps)["items"]} == before
    # the branch it is on, given as --ref, is the same instance
    same = gitsync(kubeconfig, "diff", *flags, "--ref", "trunk")
    assert same.returncode == 0, same.stdout + same.stderr
