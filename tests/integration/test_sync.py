"""The Git sync loop against the real API server and a real git server."""

from __future__ import annotations

import logging
import subprocess
from pathlib import Path
from typing import Any

import pytest

from gitsync.daemon.daemon import Daemon, DaemonOptions
from gitsync.engine import planner
from gitsync.engine.changeset import ChangeSet
from gitsync.gitops.sync import Syncer, SyncOptions, identity_of
from gitsync.gitops.sync_state import StateWriter
from gitsync.kube.client import Kube, path_of, resource_path
from gitsync.kube.records import Records
from gitsync.model import rollout
from gitsync.model.api import subject
from gitsync.model.render import inputs, render
from gitsync.reconcile.controller import Controller
from gitsync.source.checkout import GitSource, open_source
from gitsync.source.gitenv import Credentials
from tests.gitserver import HttpGit, Upstream
from tests.support import app_yaml, available, get, myapp, resource_version, wait_until


def syncer(
    controller: Controller,
    url: str,
    cache: Path,
    namespace: str,
    **options: Any,
) -> Syncer:
    creds = options.pop("credentials", Credentials())
    ref = options.pop("ref", "main")
    source = open_source(url, ref, cache, credentials=creds, timeout=10, allow_insecure=True)
    opts = SyncOptions(
        repo=url, path="apps", ref=ref, allowed_namespaces=frozenset({namespace}), **options
    )
    name = identity_of(opts).name
    state = StateWriter(controller.kube, namespace, name, events=controller.events)
    records = Records(controller.kube, namespace, state.name, name, rollout.RECORD_PREFIXES)
    return Syncer(controller, source, opts, state, records)


def state_of(s: Syncer) -> dict[str, str]:
    """The sync status ConfigMap of ``s``'s instance, as the API server holds it."""
    assert s.state is not None
    return StateWriter(s.controller.kube, s.state.namespace, s.identity.name).read()


def actions(result: ChangeSet) -> dict[str, str]:
    return {o.subject.split("/")[-1]: o.action for o in result.changes}


def exists(kube: Kube, kind: str, ns: str, name: str) -> bool:
    return get(kube, kind, ns, name) is not None


def test_sync_applies_skips_unchanged_and_prunes(
    kube: Kube, namespace: str, controller: Controller, upstream: Upstream, cache_dir: Path
) -> None:
    sha = upstream.commit({f"apps/{n}.yaml": app_yaml(namespace, n) for n in ("a", "b", "c")})
    s = syncer(controller, upstream.file_url, cache_dir, namespace)
    first = s.run()
    assert first.ok, first.errors
    assert actions(first) == {"a": "created", "b": "created", "c": "created"}
    assert first.revision == f"main@sha1:{sha}"
    # the status of a new MyApp is written by the operator's workers as it rolls out
    app = wait_until(
        lambda: (
            (get(kube, "MyApp", namespace, "a") or {}).get("status", {}).get("source")
            and get(kube, "MyApp", namespace, "a")
        ),
        what="MyApp a with its source in status",
    )
    assert app["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "gitsync"
    assert app["status"]["source"]["revision"] == f"main@sha1:{sha}"
    assert app["status"]["source"]["path"] == "apps/a.yaml"
    assert all(exists(kube, "Deployment", namespace, n) for n in "abc")

    for n in "abc":
        wait_until(lambda n=n: available(kube, namespace, n, 1), timeout=60, what=n)  # type: ignore[misc]
    assert controller.wait_idle(30)
    rvs = {n: resource_version(kube, "MyApp", namespace, n) for n in "abc"}
    writes = kube.requests["APPLY"]
    second = s.run()
    assert actions(second) == {"a": "unchanged", "b": "unchanged", "c": "unchanged"}
    assert kube.requests["APPLY"] == writes
    assert {n: resource_version(kube, "MyApp", namespace, n) for n in "abc"} == rvs

    upstream.commit(
        {"apps/a.yaml": app_yaml(namespace, "a", image="nginx:1.28"), "apps/c.yaml": None}
    )
    dry_runs = kube.requests["DRYRUN"]
    third = s.run()
    assert actions(third) == {"a": "configured", "b": "unchanged", "c": "pruned"}
    assert get(kube, "MyApp", namespace, "a")["spec"]["image"] == "nginx:1.28"  # type: ignore[index]
    wait_until(
        lambda: (
            get(kube, "Deployment", namespace, "a")["spec"]["template"]["spec"]["containers"][0][  # type: ignore[index]
                "image"
            ]
            == "nginx:1.28"
        ),
        what="the Deployment of a with Git's new image",
    )
    assert controller.wait_idle(30)
    # a change from Git moves the stamp: the MyApp and its Deployment are written
    # without a dry-run first
    assert kube.requests["DRYRUN"] == dry_runs
    assert not exists(kube, "MyApp", namespace, "c")
    wait_until(
        lambda: not exists(kube, "Deployment", namespace, "c"),
        timeout=60,
        what="the garbage collector to remove the pruned MyApp's Deployment",
    )


def test_broken_file_applies_the_good_ones_and_skips_prune(
    kube: Kube, namespace: str, controller: Controller, upstream: Upstream, cache_dir: Path
) -> None:
    upstream.commit({f"apps/{n}.yaml": app_yaml(namespace, n) for n in ("keep", "old")})
    s = syncer(controller, upstream.file_url, cache_dir, namespace)
    assert s.run().ok
    upstream.commit(
        {
            "apps/old.yaml": None,
            "apps/new.yaml": app_yaml(namespace, "new"),
            "apps/broken.yaml": app_yaml(namespace, "broken") + "  port: [oops\n",
        }
    )
    result = s.run()
    assert not result.ok
    assert actions(result) == {"keep": "unchanged", "new": "created"}
    assert any("apps/broken.yaml" in e and ":" in e for e in result.errors), result.errors
    assert result.prune_skipped is not None
    assert exists(kube, "MyApp", namespace, "old"), "nothing may be pruned while a file is broken"
    state = state_of(s)
    assert state["result"] == "Failed"
    assert "apps/broken.yaml" in state["lastError"]


def synced_condition(kube: Kube, ns: str, name: str) -> dict[str, Any]:
    app = get(kube, "MyApp", ns, name) or {}
    conditions = app.get("status", {}).get("conditions", [])
    return next((c for c in conditions if c["type"] == "Synced"), {})


def test_a_myapp_whose_file_no_longer_loads_says_so_and_is_left_as_it_was(
    kube: Kube, namespace: str, controller: Controller, upstream: Upstream, cache_dir: Path
) -> None:
    ns = namespace
    first = upstream.commit({f"apps/{n}.yaml": app_yaml(ns, n) for n in ("web", "worker")})
    s = syncer(controller, upstream.file_url, cache_dir, ns)
    assert s.run().ok
    wait_until(
        lambda: synced_condition(kube, ns, "worker").get("status") == "True",
        what="worker Synced",
    )
    before = get(kube, "MyApp", ns, "worker")
    assert before is not None
    typo = app_yaml(ns, "worker", image="nginx:1.28").replace("  image:", "  imgae:")
    broken = upstream.commit({"apps/worker.yaml": typo})
    result = s.run()
    assert not result.ok and result.prune_skipped is not None
    assert result.revision == f"main@sha1:{broken}"
    condition = wait_until(
        lambda: (c := synced_condition(kube, ns, "worker")).get("status") == "False" and c,
        what="worker's Synced to say its file does not load",
    )
    assert condition["reason"] == "LoadFailed", condition
    assert condition["message"].startswith(
        f"apps/worker.yaml does not load at main@sha1:{broken}, so nothing of it is applied"
        f" (the MyApp stays as main@sha1:{first} left it): apps/worker.yaml:7:3 (document 0):"
        " spec.imgae: unknown field"
    ), condition
    assert controller.wait_idle(30)
    after = get(kube, "MyApp", ns, "worker")
    assert after is not None, "a MyApp whose file is broken is never pruned"
    assert after["metadata"]["uid"] == before["metadata"]["uid"]
    assert after["spec"] == before["spec"] and after["metadata"]["generation"] == 1
    assert after["status"]["source"] == before["status"]["source"]
    assert synced_condition(kube, ns, "worker")["reason"] == "LoadFailed"  # the workers keep it
    assert synced_condition(kube, ns, "web")["status"] == "True"  # its file loads

    fixed = upstream.commit({"apps/worker.yaml": app_yaml(ns, "worker", image="nginx:1.28")})
    assert s.run().ok
    condition = wait_until(
        lambda: (c := synced_condition(kube, ns, "worker")).get("status") == "True" and c,
        what="worker Synced again",
    )
    assert condition["reason"] == "Applied"
    app = get(kube, "MyApp", ns, "worker")
    assert app is not None and app["spec"]["image"] == "nginx:1.28"
    assert app["status"]["source"]["revision"] == f"main@sha1:{fixed}"


def test_empty_desired_set_and_max_fraction_guard_prune(
    kube: Kube, namespace: str, controller: Controller, upstream: Upstream, cache_dir: Path
) -> None:
    names = ("p1", "p2", "p3", "p4")
    upstream.commit({f"apps/{n}.yaml": app_yaml(namespace, n) for n in names})
    s = syncer(controller, upstream.file_url, cache_dir, namespace)
    assert s.run().ok
    # three of four would go: more than half
    upstream.commit({f"apps/{n}.yaml": None for n in names[1:]})
    result = s.run()
    assert result.prune_skipped is not None and "3 of 4" in result.prune_skipped
    assert all(exists(kube, "MyApp", namespace, n) for n in names)
    # nothing at all: refused without --allow-empty
    upstream.commit({"apps/p1.yaml": None, "apps/README.md": "empty on purpose\n"})
    result = s.run()
    assert result.prune_skipped is not None
    assert all(exists(kube, "MyApp", namespace, n) for n in names)
    allowing = syncer(
        controller,
        upstream.file_url,
        cache_dir,
        namespace,
        allow_empty=True,
        prune_max_fraction=1.0,
    )
    result = allowing.run()
    assert sorted(o.action for o in result.changes) == ["pruned"] * 4
    assert not any(exists(kube, "MyApp", namespace, n) for n in names)


def test_myapp_without_tracking_labels_is_never_pruned(
    kube: Kube, namespace: str, controller: Controller, upstream: Upstream, cache_dir: Path
) -> None:
    kube.create(path_of("MyApp", namespace), myapp(namespace, "by-hand"))
    upstream.commit({"apps/git.yaml": app_yaml(namespace, "git")})
    s = syncer(controller, upstream.file_url, cache_dir, namespace, prune_max_fraction=1.0)
    assert s.run().ok
    upstream.commit({"apps/git.yaml": None, "apps/other.yaml": app_yaml(namespace, "other")})
    result = s.run()
    assert actions(result) == {"other": "created", "git": "pruned"}
    assert exists(kube, "MyApp", namespace, "by-hand")


def test_unreachable_remote_prunes_nothing_and_shows_the_failure(
    kube: Kube,
    namespace: str,
    controller: Controller,
    upstream: Upstream,
    cache_dir: Path,
    git_daemon: str,
) -> None:
    upstream.commit({f"apps/{n}.yaml": app_yaml(namespace, n) for n in ("x", "w", "z")})
    s = syncer(controller, git_daemon, cache_dir, namespace)
    assert s.run().ok
    upstream.commit({"apps/w.yaml": None})
    # the remote goes away: point the same source at a closed port
    assert isinstance(s.source, GitSource)
    closed = git_daemon.rsplit(":", 1)[0] + ":1/" + git_daemon.rsplit("/", 1)[1]
    s.source = open_source(closed, "main", cache_dir, timeout=5, allow_insecure=True)
    result = s.run()
    assert not result.ok and result.errors
    assert exists(kube, "MyApp", namespace, "w")
    state = state_of(s)
    assert state["result"] == "Failed" and state["lastError"]
    assert controller.events.flush(), "Events still queued"  # written in the background
    events = kube.list(resource_path("v1", "events", namespace))["items"]
    assert any(e["reason"] == "SyncFailed" for e in events)
    # the remote is back
    s.source = open_source(git_daemon, "main", cache_dir, timeout=10, allow_insecure=True)
    result = s.run()
    assert result.ok and actions(result) == {"x": "unchanged", "z": "unchanged", "w": "pruned"}
    assert state_of(s)["result"] == "Succeeded"


def test_a_string_port_from_git_is_refused_as_the_server_refuses_it(
    kube: Kube, namespace: str, controller: Controller, upstream: Upstream, cache_dir: Path
) -> None:
    # kubectl sends port: "80" as a string, which the API server refuses for a MyApp
    # (tests/integration/test_yaml_kubectl.py); gitsync refuses the file, naming the line
    upstream.commit({"apps/s.yaml": app_yaml(namespace, "s", replicas="2", port='"80"')})
    s = syncer(controller, upstream.file_url, cache_dir, namespace)
    result = s.run()
    assert not result.ok
    assert any(
        "apps/s.yaml:" in e and "spec.port: must be an integer" in e and "write 80 unquoted" in e
        for e in result.errors
    ), result.errors
    assert get(kube, "MyApp", namespace, "s") is None


def test_myapp_edited_by_hand_is_drift_from_git(
    kube: Kube,
    namespace: str,
    controller: Controller,
    upstream: Upstream,
    cache_dir: Path,
    kubectl_bin: str,
    kubeconfig: str,
) -> None:
    upstream.commit(
        {
            "apps/fix.yaml": app_yaml(namespace, "fix", replicas=2),
            "apps/keep.yaml": app_yaml(namespace, "keep", replicas=2, driftPolicy="report"),
        }
    )
    s = syncer(controller, upstream.file_url, cache_dir, namespace)
    assert s.run().ok
    for name in ("fix", "keep"):
        subprocess.run(
            [
                kubectl_bin,
                "--kubeconfig",
                kubeconfig,
                "-n",
                namespace,
                "patch",
                "myapp",
                name,
                "--type=merge",
                "-p",
                '{"spec":{"replicas":7}}',
            ],
            check=True,
            capture_output=True,
            timeout=30,
        )
    wait_until(
        lambda: get(kube, "MyApp", namespace, "fix")["spec"]["replicas"] == 2,  # type: ignore[index]
        what="the MyApp to be corrected back to Git",
    )

    def reported() -> list[Any]:
        return list(
            (get(kube, "MyApp", namespace, "keep") or {}).get("status", {}).get("drift") or []
        )

    drift = wait_until(reported, what="MyApp drift in status")
    mine = [d for d in drift if d["object"] == "MyApp/keep"]
    assert [(d["path"], d["desired"], d["live"], d["manager"]) for d in mine] == [
        ("spec.replicas", 2, 7, "kubectl-patch")
    ]
    assert get(kube, "MyApp", namespace, "keep")["spec"]["replicas"] == 7  # type: ignore[index]
    # a later sync pass honours the policy too
    assert actions(s.run()) == {"fix": "unchanged", "keep": "unchanged"}
    assert get(kube, "MyApp", namespace, "keep")["spec"]["replicas"] == 7  # type: ignore[index]


def test_a_rename_of_every_myapp_is_refused_by_the_prune_guard_in_every_pass(
    kube: Kube, namespace: str, controller: Controller, upstream: Upstream, cache_dir: Path
) -> None:
    upstream.commit({f"apps/{n}.yaml": app_yaml(namespace, n) for n in ("a", "b")})
    s = syncer(controller, upstream.file_url, cache_dir, namespace)
    assert s.run().ok
    # every app renamed: two new, two gone -- all of what was tracked would go
    upstream.commit(
        {
            "apps/a.yaml": None,
            "apps/b.yaml": None,
            "apps/a2.yaml": app_yaml(namespace, "a2"),
            "apps/b2.yaml": app_yaml(namespace, "b2"),
        }
    )
    # counted with the two this pass creates, as the next pass counts them: half
    result = s.run()
    assert actions(result) == {"a2": "created", "b2": "created"}
    assert result.prune_skipped is not None and "2 of 4" in result.prune_skipped
    again = s.run()
    assert again.prune_skipped == result.prune_skipped
    for name in ("a", "b", "a2", "b2"):
        assert exists(kube, "MyApp", namespace, name), name


def test_credentials_never_leak(
    kube: Kube,
    namespace: str,
    controller: Controller,
    upstream: Upstream,
    http_git: HttpGit,
    cache_dir: Path,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    upstream.commit({"apps/sec.yaml": app_yaml(namespace, "sec")})
    token_file = tmp_path / "token"
    token_file.write_text(http_git.token)
    caplog.set_level(logging.DEBUG)
    s = syncer(
        controller,
        http_git.url,
        cache_dir / "ok",
        namespace,
        credentials=Credentials(token_file=token_file),
    )
    assert s.run().ok
    wrong = tmp_path / "wrong"
    wrong.write_text("tok-wrong-" + http_git.token[::-1])
    bad = syncer(
        controller,
        http_git.url,
        cache_dir / "bad",
        namespace,
        credentials=Credentials(token_file=wrong),
    )
    result = bad.run()
    assert not result.ok
    # the same failing pass through the daemon, for its metrics
    daemon = Daemon(controller, bad, DaemonOptions(listen="127.0.0.1:0", leader_elect=False))
    daemon.sync_once()
    metrics = daemon.metrics.render()
    daemon.http.server_close()
    assert 'gitsync_sync_total{result="failure"} 1' in metrics
    secrets = (http_git.token, wrong.read_text())
    texts = [caplog.text, *result.errors, repr(result), metrics]
    texts.append(str(state_of(bad)))
    assert controller.events.flush(), "Events still queued"
    texts.append(str(kube.list(resource_path("v1", "events", namespace))))
    texts.append(str(get(kube, "MyApp", namespace, "sec")))
    for config in cache_dir.rglob("config"):
        texts.append(config.read_text())
    for text in texts:
        for secret in secrets:
            assert secret not in text


def test_a_repository_of_200_myapps(
    kube: Kube, namespace: str, controller: Controller, upstream: Upstream, cache_dir: Path
) -> None:
    files: dict[str, str | None] = {
        f"apps/team-{i % 7}/app-{i:03d}.yaml": app_yaml(namespace, f"app-{i:03d}")
        for i in range(200)
    }
    upstream.commit(files)
    s = syncer(controller, upstream.file_url, cache_dir, namespace)
    result = s.run()
    assert result.ok, result.errors[:3]
    assert result.count("created") == 200
    live = kube.list(path_of("MyApp", namespace))["items"]
    assert len(live) == 200
    wait_until(
        lambda: len(kube.list(path_of("Deployment", namespace))["items"]) == 200,
        what="200 Deployments",
    )
    again = s.run()
    assert again.count("unchanged") == 200


def test_a_cold_sync_lists_deployments_once_instead_of_a_get_per_new_myapp(
    kube: Kube,
    namespace: str,
    controller: Controller,
    upstream: Upstream,
    cache_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # "c" names a Deployment that is not ours: the LIST shows it, so it is still looked
    # at one by one, and still never taken over
    theirs = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "c", "namespace": namespace},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "theirs"}},
            "template": {
                "metadata": {"labels": {"app": "theirs"}},
                "spec": {"containers": [{"name": "theirs", "image": "busybox"}]},
            },
        },
    }
    kube.create(path_of("Deployment", namespace), theirs)
    upstream.commit({f"apps/{n}.yaml": app_yaml(namespace, n) for n in ("a", "b", "c")})
    s = syncer(controller, upstream.file_url, cache_dir, namespace)
    reads: list[tuple[str, str]] = []
    real_get, real_list = kube.get, kube.list

    def recorded_get(path: str, **kw: Any) -> dict[str, Any]:
        reads.append(("GET", path))
        return real_get(path, **kw)

    def recorded_list(path: str, **kw: Any) -> dict[str, Any]:
        reads.append(("LIST", path))
        return real_list(path, **kw)

    monkeypatch.setattr(kube, "get", recorded_get)
    monkeypatch.setattr(kube, "list", recorded_list)
    result = s.run()
    monkeypatch.undo()

    assert actions(result)["a"] == "created" and actions(result)["b"] == "created"
    deployments = [r for r in reads if "/deployments" in r[1]]
    theirs_path = path_of("Deployment", namespace, "c")
    # (the operator's workers retry "c" on their own, each time with a GET)
    assert [r for r in deployments if r[1] != theirs_path] == [
        ("LIST", path_of("Deployment", namespace))
    ]
    assert ("GET", theirs_path) in deployments
    dep = get(kube, "Deployment", namespace, "c")
    assert dep is not None and "ownerReferences" not in dep["metadata"]
    assert all(exists(kube, "Deployment", namespace, n) for n in "ab")


def test_the_planner_remembers_stamps_by_what_it_holds_anyway_not_by_copies(
    kube: Kube, namespace: str, controller: Controller, upstream: Upstream, cache_dir: Path
) -> None:
    # each object's stamp is remembered with what its desired state is made from: the
    # ledger's body of the MyApp, and the parts of the cached MyApp its Deployment is
    # rendered from (a copy of either desired state would cost about 0.7 KiB an object)
    upstream.commit({"apps/a.yaml": app_yaml(namespace, "a")})
    s = syncer(controller, upstream.file_url, cache_dir, namespace)
    assert s.run().ok
    key = f"{namespace}/a"

    def remembered(kind: str) -> Any:
        return planner._STAMPS[subject(kind, namespace, "a")][0]

    # rendered from the create's reply, remembered by the cache's copy of its spec
    cached = controller.myapps.get(key)
    assert cached is not None and remembered("Deployment")[3] is cached["spec"]
    wait_until(lambda: available(kube, namespace, "a", 1), timeout=60, what="a Available")

    def held() -> bool:
        # the Deployment was last rendered before the status write that made the MyApp
        # Available; the cache's new version holds the very spec it was rendered from
        cached = controller.myapps.get(key)
        kept = remembered("Deployment")
        return cached is not None and kept == inputs(cached) and kept[3] is cached["spec"]

    wait_until(held, timeout=30, what="the cached MyApp's spec remembered")
    assert s.run().ok  # a pass that writes nothing
    assert held()
    record = controller.ledger.get(key)
    assert record is not None and record.declared is not None
    assert remembered("MyApp") is record.declared.body
    # the rendered label maps come in the server's order: a rendering the memo keeps as
    # a compacted copy (a changed MyApp's, planned before its write) shares them with the
    # live Deployment
    live = get(kube, "Deployment", namespace, "a")
    assert live is not None
    desired = render(controller.myapps.get(key) or {})
    labels = (
        ("metadata", "labels"),
        ("spec", "selector", "matchLabels"),
        ("spec", "template", "metadata", "labels"),
    )
    for path in labels:
        assert list(dig(live, path)) == list(dig(desired, path)), path


def dig(obj: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        obj = obj[key]
    return obj
