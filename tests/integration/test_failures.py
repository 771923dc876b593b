"""A pass with failed objects keeps its reason where a user looks: the status
ConfigMap, ``gitsync drift``, the MyApp's Synced=False condition, and the metric."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from gitsync.daemon.daemon import Daemon, DaemonOptions
from gitsync.daemon.notify import Notifier
from gitsync.errors import APIServerError
from gitsync.gitops.sync import Syncer
from gitsync.kube.client import Kube, path_of, resource_path
from gitsync.model.api import KIND
from gitsync.reconcile.controller import Controller
from gitsync.source import manifests
from gitsync.source._files import MAX_DEPTH
from testenv.cluster import AUDIT_LOG
from tests.gitserver import Upstream
from tests.integration.test_cli import gitsync
from tests.integration.test_notify import notified  # noqa: F401 (a fixture)
from tests.integration.test_sync import state_of, syncer
from tests.support import admission_webhook, app_yaml, get, wait_until
from tests.unit.test_notify import Receiver


def synced_condition(kube: Kube, ns: str, name: str) -> dict[str, str] | None:
    app = get(kube, "MyApp", ns, name) or {}
    conditions = (app.get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c["type"] == "Synced"), None)


def test_a_failed_pass_keeps_its_reason_in_configmap_drift_condition_and_metric(
    kube: Kube,
    kubeconfig: str,
    namespace: str,
    controller: Controller,
    tmp_path: Path,
) -> None:
    absent = f"{namespace[:50]}-gone"
    repo = tmp_path / "repo"
    (repo / "apps").mkdir(parents=True)
    for ns, name in ((namespace, "ok"), (namespace, "taken"), (absent, "lost")):
        (repo / "apps" / f"{name}.yaml").write_text(app_yaml(ns, name))
    # a Deployment of that name that is not the MyApp's: gitsync never takes it over
    kube.create(
        resource_path("apps/v1", "deployments", namespace),
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "taken"},
            "spec": {
                "selector": {"matchLabels": {"app": "taken"}},
                "template": {
                    "metadata": {"labels": {"app": "taken"}},
                    "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}]},
                },
            },
        },
    )
    s = syncer(controller, str(repo), tmp_path / "cache", namespace)
    # the helper allows this test's namespace only; the absent one must pass the loader
    s.options = dataclasses.replace(s.options, allowed_namespaces=None)
    daemon = Daemon(controller, s, DaemonOptions(listen="127.0.0.1:0", leader_elect=False))
    try:
        daemon.sync_once()
        metrics = daemon.metrics.render()
    finally:
        daemon.http.server_close()

    # the metric counts the failed objects
    assert 'gitsync_objects{action="failed"} 2' in metrics, metrics
    assert 'gitsync_sync_total{result="failure"} 1' in metrics

    # the ConfigMap: counts first, then why
    state = state_of(s)
    assert state["result"] == "Failed" and state["failed"] == "2", state
    last = state["lastError"]
    assert last.startswith("2 of 3 objects failed: "), last
    assert f'MyApp/{absent}/lost: namespace "{absent}" does not exist' in last
    assert f"Deployment/{namespace}/taken exists and is not owned by" in last

    # gitsync drift shows it
    proc = gitsync(
        kubeconfig,
        *("drift", "-n", namespace, "--status-namespace", namespace),
        *("--instance-name", s.identity.name),
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"result Failed, last error: {last}" in proc.stdout, proc.stdout

    # the MyApp that exists says why it is not synced
    wait_until(
        lambda: (synced_condition(kube, namespace, "taken") or {}).get("status") == "False",
        timeout=20,
        what="Synced=False on the MyApp",
    )
    synced = synced_condition(kube, namespace, "taken")
    assert synced is not None and synced["reason"] == "SyncFailed"
    assert "is not owned by MyApp" in synced["message"], synced


def events(kube: Kube, namespace: str, name: str) -> list[tuple[str, str]]:
    """(reason, message) of the Events about ConfigMap ``name``, as the API server holds them."""
    items = kube.list(resource_path("v1", "events", namespace))["items"]
    return [
        (e["reason"], e["message"])
        for e in items
        if e["involvedObject"]["kind"] == "ConfigMap" and e["involvedObject"]["name"] == name
    ]


def run_once(s: Syncer, controller: Controller, notifier: Notifier | None = None) -> str:
    """One pass of the daemon's sync job (told to ``notifier``, as ``gitsync run`` does);
    its metrics."""
    daemon = Daemon(controller, s, DaemonOptions(listen="127.0.0.1:0", leader_elect=False))
    if notifier is not None:
        daemon.pass_listeners.append(notifier.on_pass(s.identity.name, s.source))
    try:
        daemon.sync_once()
        return daemon.metrics.render()
    finally:
        daemon.http.server_close()


def push_deep(upstream: Upstream, namespace: str, depth: int) -> str:
    """Push a commit of apps/top.yaml and a MyApp ``depth`` directories below apps/, made
    with git fast-import: no work tree of that depth to make or remove. The sha."""
    deep = "apps/" + "d/" * depth + "deep.yaml"
    stream = ""
    for path, name in (("apps/top.yaml", "top"), (deep, "deep")):
        data = app_yaml(namespace, name).encode()
        stream += f"M 100644 inline {path}\ndata {len(data)}\n{data.decode()}\n"
    head = "commit refs/heads/main\ncommitter t <t@example.com> 0 +0000\ndata 4\ndeep\n"
    subprocess.run(
        ["git", "-C", str(upstream.bare), "fast-import", "--quiet"],
        input=head + stream,
        text=True,
        env=upstream.env,
        check=True,
        timeout=60,
    )
    return upstream.git("-C", str(upstream.bare), "rev-parse", "main")


def test_a_deep_directory_fails_alone_and_the_pass_is_recorded_as_failed(
    kube: Kube,
    namespace: str,
    controller: Controller,
    upstream: Upstream,
    cache_dir: Path,
) -> None:
    # git checks out 1100 nested directories; walked recursively they ended the pass in a
    # RecursionError: nothing applied, nothing recorded, the ConfigMap still "Succeeded"
    sha = push_deep(upstream, namespace, 1100)
    s = syncer(controller, upstream.file_url, cache_dir, namespace)
    try:
        metrics = run_once(s, controller)
    finally:
        # rm, not shutil.rmtree (pytest's cleanup too), which recurses per directory
        subprocess.run(["rm", "-rf", str(cache_dir)], check=True, timeout=120)

    assert 'gitsync_sync_total{result="failure"} 1' in metrics, metrics
    # the valid file is applied all the same
    assert get(kube, "MyApp", namespace, "top") is not None
    assert get(kube, "MyApp", namespace, "deep") is None
    state = state_of(s)
    assert state["revision"] == f"main@sha1:{sha}", state
    assert state["result"] == "Failed", state
    where = "apps/" + "/".join(["d"] * (MAX_DEPTH + 1))
    assert state["lastError"] == (
        f"1 error: {where}: directory nested more than {MAX_DEPTH} levels below the path; not read"
    ), state


def test_an_unexpected_exception_is_a_recorded_failure_not_a_silent_one(
    kube: Kube,
    namespace: str,
    controller: Controller,
    upstream: Upstream,
    cache_dir: Path,
    notified: tuple[Receiver, Notifier],  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    receiver, notifier = notified
    upstream.commit({"apps/a.yaml": app_yaml(namespace, "a")})
    s = syncer(controller, upstream.file_url, cache_dir, namespace)
    assert run_once(s, controller)
    assert state_of(s)["result"] == "Succeeded"

    # the next commit meets a bug: any exception no boundary maps stands for it
    sha = upstream.commit({"apps/b.yaml": app_yaml(namespace, "b")})

    def crash(*_args: object, **_kw: object) -> manifests.LoadResult:
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(manifests, "load", crash)
    metrics = run_once(s, controller, notifier)

    assert 'gitsync_sync_total{result="failure"} 1' in metrics, metrics
    state = state_of(s)
    assert state["revision"] == f"main@sha1:{sha}", state
    assert state["result"] == "Failed", state
    error = "internal error: RecursionError: maximum recursion depth exceeded"
    assert state["lastError"] == f"1 error: {error}", state
    assert state["pruneSkipped"] == "the sync failed unexpectedly; nothing is pruned"
    assert get(kube, "MyApp", namespace, "a") is not None  # nothing pruned
    cm = f"gitsync-status-{s.identity.name}"
    failed = wait_until(
        lambda: [m for r, m in events(kube, namespace, cm) if r == "SyncFailed"],
        timeout=20,
        what="a SyncFailed Event on the status ConfigMap",
    )
    assert failed == [f"sync failed at main@sha1:{sha}: 1 error: {error}"], failed
    notes = wait_until(
        lambda: [
            n
            for n in (json.loads(body) for _, body, _ in receiver.received)
            if n["event"] == "sync.failed"
        ],
        timeout=20,
        what="a sync.failed notification",
    )
    assert error in notes[0]["message"], notes


@contextlib.contextmanager
def unreachable_webhook(kube: Kube, namespace: str) -> Iterator[None]:
    """A validating webhook for this namespace's MyApps whose server is down (its port
    closed, ``failurePolicy: Fail``): the API server answers each create or update of
    one with a 500, as when an admission controller's Pods are restarting."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again before the webhook is called
    probe = yaml.safe_load(app_yaml(namespace, "probe"))

    def refused() -> bool:
        # the configuration reaches the API server's admission a moment after the create
        try:
            kube.apply(path_of(KIND, namespace, "probe"), probe, field_manager="t", dry_run=True)
        except APIServerError:
            return True
        return False

    with admission_webhook(
        kube,
        "ValidatingWebhookConfiguration",
        namespace,
        name="down.gitsync.test",
        client_config={"url": f"https://127.0.0.1:{port}/validate"},
        resource=("apps.example.com", "myapps"),
        timeout=5,
    ):
        wait_until(refused, what="the webhook in effect")
        yield


def test_a_create_the_server_failed_for_now_is_retried_by_the_workers_not_the_next_pass(
    kube: Kube,
    namespace: str,
    controller: Controller,
    upstream: Upstream,
    cache_dir: Path,
) -> None:
    upstream.commit({"apps/web.yaml": app_yaml(namespace, "web")})
    s = syncer(controller, upstream.file_url, cache_dir, namespace)
    key = f"{namespace}/web"
    since = AUDIT_LOG.stat().st_size
    with unreachable_webhook(kube, namespace):
        result = s.run()
        change = next(c for c in result.changes if c.subject == f"MyApp/{namespace}/web")
        assert change.action == "failed" and "failed calling webhook" in change.reason, change
        assert get(kube, "MyApp", namespace, "web") is None
        # the workers try it again with backoff while the webhook is down, and fail
        wait_until(lambda: controller.queue.failures(key) >= 3, what="the workers' retries")
        assert get(kube, "MyApp", namespace, "web") is None
    # no pass runs from here: the queue's next retry creates it, with the pass's revision
    wait_until(
        lambda: (synced_condition(kube, namespace, "web") or {}).get("status") == "True",
        timeout=60,
        what="the MyApp created and Synced by a retry",
    )
    app = get(kube, "MyApp", namespace, "web")
    assert app is not None and app["status"]["source"]["revision"] == result.revision, app
    wait_until(lambda: get(kube, "Deployment", namespace, "web"), what="its Deployment")
    # a success forgets the backoff
    wait_until(lambda: controller.queue.failures(key) == 0, what="the backoff forgotten")
    # what the API server was sent for the MyApp: the pass's apply and at least two
    # retries (3 failures counted), each refused by the webhook's 500, then the one that
    # created it, and nothing after
    sent = myapp_writes(namespace, "web", since)
    assert len(sent) >= 4 and {verb for verb, _ in sent} == {"patch"}, sent
    assert {code for _, code in sent[:-1]} == {500} and sent[-1][1] == 201, sent


def myapp_writes(namespace: str, name: str, since: int) -> list[tuple[str, int]]:
    """(verb, response code) of each write of MyApp ``name`` (not its status) in the API
    server's audit log after byte ``since``, in order."""
    found = []
    with AUDIT_LOG.open("rb") as f:
        f.seek(since)
        for line in f:
            e = json.loads(line)
            ref = e.get("objectRef") or {}
            if (ref.get("resource"), ref.get("namespace"), ref.get("name")) != (
                "myapps",
                namespace,
                name,
            ) or ref.get("subresource"):
                continue
            found.append((e["verb"], (e.get("responseStatus") or {}).get("code", 0)))
    return found
