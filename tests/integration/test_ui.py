"""The drift page served by the daemon, against the real control plane: a ``kubectl
scale`` on the page within 2 s, values escaped, read-only, and no secret in it."""

from __future__ import annotations

import json
import threading
import time
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from gitsync.daemon import metrics as metricslib
from gitsync.daemon.daemon import Daemon, DaemonOptions
from gitsync.daemon.notify import Notifier, NotifyOptions
from gitsync.engine.fieldpaths import line_of
from gitsync.kube.client import Kube
from gitsync.reconcile.controller import Controller, ControllerConfig
from gitsync.source._yaml import Loader
from tests.gitserver import Upstream, free_port
from tests.integration.test_daemon import SECRET, Running, running_daemon, start_daemon
from tests.integration.test_drift import kubectl
from tests.integration.test_sync import syncer
from tests.support import app_yaml, get, wait_until
from tests.unit.test_notify import Receiver

EVIL = '"<script>alert(1)</script>"'


@pytest.fixture
def page_daemon(
    kube: Kube, crd: str, namespace: str, upstream: Upstream, cache_dir: Path
) -> Iterator[Running]:
    upstream.commit(
        {
            # report: the drift stays for the page to show (correct would undo it at once)
            "apps/web.yaml": app_yaml(namespace, "web", replicas=2, driftPolicy="report"),
            # the image: env values are never shown (see the test below)
            "apps/evil.yaml": app_yaml(namespace, "evil", image=EVIL, driftPolicy="report"),
        }
    )
    for running in start_daemon(kube, namespace, upstream, cache_dir, interval=3600):
        wait_until(lambda: get(kube, "MyApp", namespace, "evil"), timeout=30, what="synced")
        yield running


def _apps(running: Running) -> dict[str, Any]:
    code, text = running.http("GET", "/api/v1/apps")
    assert code == 200, text
    return dict(json.loads(text))


def _drift_on_page(running: Running, name: str) -> list[dict[str, Any]]:
    apps = {a["name"]: a for a in _apps(running)["apps"]}
    return list(apps.get(name, {}).get("drift") or [])


def test_page_shows_a_kubectl_scale_within_2s(
    page_daemon: Running, kubectl_bin: str, kubeconfig: str, namespace: str
) -> None:
    assert _drift_on_page(page_daemon, "web") == []
    kubectl(kubectl_bin, kubeconfig, "-n", namespace, "scale", "deployment/web", "--replicas=4")
    start = time.monotonic()
    drift = wait_until(
        lambda: _drift_on_page(page_daemon, "web"), timeout=10, interval=0.05, what="drift"
    )
    seconds = time.monotonic() - start
    print(f"kubectl scale to the page: {seconds:.2f}s")
    assert seconds < 2.0, f"drift reached the page after {seconds:.2f}s"
    assert drift[0]["path"] == "spec.replicas"
    assert (drift[0]["desired"], drift[0]["live"]) == (2, 4)
    assert drift[0]["manager"].startswith("kubectl")

    code, html = page_daemon.http("GET", "/")
    assert code == 200 and "spec.replicas" in html and "kubectl" in html
    code, body = page_daemon.http("GET", f"/api/v1/apps/{namespace}/web")
    assert code == 200
    rows = {(r["object"].split("/")[0], r["path"]): r for r in json.loads(body)["blame"]}
    scaled = rows[("Deployment", "spec.replicas")]
    assert scaled["drifted"] and scaled["live"] == 4 and scaled["origin"]["kind"] == "drift"
    image = rows[("MyApp", "spec.image")]
    # the daemon's checkout holds the applied revision: lines without commits
    assert image["origin"]["file"] == "apps/web.yaml" and image["origin"]["line"] == 7


def test_page_escapes_values_and_exposes_no_secret(
    page_daemon: Running, namespace: str, tmp_path: Path
) -> None:
    for path in ("/", f"/apps/{namespace}/evil"):
        code, html = page_daemon.http("GET", path)
        assert code == 200, path
        assert "<script>alert" not in html, path
    code, html = page_daemon.http("GET", f"/apps/{namespace}/evil")
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html  # shown, as text
    everything = "".join(
        page_daemon.http("GET", p)[1]
        for p in ("/", "/api/v1/apps", f"/apps/{namespace}/web", f"/api/v1/apps/{namespace}/web")
    )
    assert SECRET.decode() not in everything
    assert "managedFields" not in everything and "token" not in everything.lower()
    assert page_daemon.http("GET", f"/apps/{namespace}/nothing")[0] == 404
    assert page_daemon.http("GET", "/apps/../../etc/passwd")[0] == 404


def test_page_is_read_only(page_daemon: Running, namespace: str) -> None:
    """No request of any verb reaches the API server from the page's code, and it
    refuses every method but GET."""
    kube = page_daemon.daemon.controller.kube
    from_page: list[str] = []
    real = kube.request
    lock = threading.Lock()

    def spy(*args: Any, **kw: Any) -> Any:
        stack = traceback.extract_stack()
        if any(
            f.filename.endswith(("gitsync/daemon/ui.py", "gitsync/daemon/page.py")) for f in stack
        ):
            with lock:
                from_page.append(str(args[:2]))
        return real(*args, **kw)

    kube.request = spy  # type: ignore[method-assign]
    try:
        for _ in range(5):
            for p in (
                "/",
                "/api/v1/apps",
                f"/apps/{namespace}/web",
                f"/api/v1/apps/{namespace}/web",
            ):
                assert page_daemon.http("GET", p)[0] == 200
    finally:
        kube.request = real  # type: ignore[method-assign]
    assert from_page == []
    for method in ("POST", "PUT", "DELETE", "PATCH"):
        assert page_daemon.http(method, "/api/v1/apps", b"{}")[0] == 405, method


GIT_SECRET = "gs-Pa55w0rd-in-git-7f3a9c"
LIVE_SECRET = "gs-Pa55w0rd-set-by-hand-41d2e8"


def test_env_values_appear_nowhere_on_the_page_api_or_notifications(
    kube: Kube,
    crd: str,
    namespace: str,
    upstream: Upstream,
    cache_dir: Path,
    kubectl_bin: str,
    kubeconfig: str,
) -> None:
    """An env value that drifted (``kubectl set env``) is on the page, in its JSON API and
    in a notification of every format as a digest: where, who, and that it differs."""
    env = f"[{{name: DB_PASSWORD, value: {GIT_SECRET}}}]"
    upstream.commit(
        {"apps/vault.yaml": app_yaml(namespace, "vault", env=env, driftPolicy="report")}
    )
    receivers = {fmt: Receiver() for fmt in ("json", "slack", "teams")}
    urls = [receivers["json"].url] + [f"{f}+{receivers[f].url}" for f in ("slack", "teams")]
    controller = Controller(kube, ControllerConfig(namespace=namespace, workers=2))
    notifier = Notifier(urls, NotifyOptions(), metricslib.standard())
    controller.events.listeners.append(notifier.on_event)
    notifier.start()
    port = free_port()
    options = DaemonOptions(
        listen=f"127.0.0.1:{port}",
        interval=3600,
        jitter=0,
        lease_namespace=namespace,
        watch_namespace=namespace,
    )
    daemon = Daemon(
        controller, syncer(controller, upstream.file_url, cache_dir, namespace), options
    )
    try:
        with running_daemon(daemon, port) as running:
            wait_until(lambda: get(kube, "Deployment", namespace, "vault"), what="the Deployment")
            kubectl(
                kubectl_bin, kubeconfig, "-n", namespace,
                "set", "env", "deployment/vault", f"DB_PASSWORD={LIVE_SECRET}",
            )  # fmt: skip
            # the API server holds both values: Git's on the MyApp, the edit on the Deployment
            myapp, dep = (
                get(kube, "MyApp", namespace, "vault"),
                get(kube, "Deployment", namespace, "vault"),
            )
            assert myapp is not None and dep is not None
            assert myapp["spec"]["env"] == [{"name": "DB_PASSWORD", "value": GIT_SECRET}]
            container = dep["spec"]["template"]["spec"]["containers"][0]
            assert container["env"] == [{"name": "DB_PASSWORD", "value": LIVE_SECRET}]

            drift = wait_until(lambda: _drift_on_page(running, "vault"), what="drift on the page")
            (entry,) = drift
            assert "env[name=DB_PASSWORD]" in entry["path"]
            assert entry["manager"].startswith("kubectl")
            assert entry["desired"] != entry["live"]
            for fmt in receivers:
                wait_until(
                    lambda f=fmt: [  # type: ignore[misc]
                        b for _, b, _ in receivers[f].received if b"drift.detected" in b
                    ],
                    what=f"drift.detected in {fmt}",
                )
            pages = {
                p: running.http("GET", p)
                for p in (
                    "/",
                    "/api/v1/apps",
                    f"/apps/{namespace}/vault",
                    f"/api/v1/apps/{namespace}/vault",
                )
            }
            assert all(code == 200 for code, _ in pages.values()), pages
            blame = json.loads(pages[f"/api/v1/apps/{namespace}/vault"][1])["blame"]
            env_rows = [r for r in blame if "DB_PASSWORD].value" in r["path"]]
            assert {r["object"].split("/")[0] for r in env_rows} == {"MyApp", "Deployment"}
    finally:
        notifier.stop()
        for receiver in receivers.values():
            receiver.close()
    shown = "".join(text for _, text in pages.values()).encode()
    sent = {fmt: [body for _, body, _ in r.received] for fmt, r in receivers.items()}
    for secret in (GIT_SECRET.encode(), LIVE_SECRET.encode()):
        assert secret not in shown
        for fmt, bodies in sent.items():
            assert not [b for b in bodies if secret in b], fmt
    drifted = [json.loads(b) for b in sent["json"] if json.loads(b)["event"] == "drift.detected"]
    assert drifted and "DB_PASSWORD" in drifted[0]["details"]["drift"][0]["path"]


def _image_row(running: Running, namespace: str, name: str) -> dict[str, Any] | None:
    code, body = running.http("GET", f"/api/v1/apps/{namespace}/{name}")
    if code != 200:
        return None
    rows = {(r["object"].split("/")[0], r["path"]): r for r in json.loads(body)["blame"]}
    row = rows.get(("MyApp", "spec.image"))
    return row if row and row["origin"].get("line") else None


def _refuse_parsing(monkeypatch: pytest.MonkeyPatch, parsed: list[str]) -> None:
    """Every YAML parse in this process fails, and is recorded."""

    def refuse(name: str) -> Any:
        def refused(*_args: Any, **_kw: Any) -> Any:
            parsed.append(name)
            raise AssertionError(f"yaml.{name} called")

        return refused

    for name in ("compose", "compose_all", "load", "load_all", "safe_load", "safe_load_all"):
        monkeypatch.setattr(yaml, name, refuse(name))


def test_app_page_is_served_from_the_load_and_parses_no_file(
    kube: Kube,
    crd: str,
    namespace: str,
    upstream: Upstream,
    cache_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Many MyApps in one file: a MyApp's page costs that MyApp, not its file. The lines
    come from the sync loop's last load (what the loader parsed, within its limits);
    serving the page composes no YAML at all."""
    n = 30
    env = "[{name: MODE, value: fast}]"
    text = "---\n".join(app_yaml(namespace, f"app-{i}", env=env) for i in range(n))
    upstream.commit({"apps/all.yaml": text})
    last = f"app-{n - 1}"
    documents = list(yaml.compose_all(text, Loader=Loader))
    parsed: list[str] = []
    for running in start_daemon(kube, namespace, upstream, cache_dir, interval=3600):
        wait_until(lambda: get(kube, "MyApp", namespace, last), timeout=60, what="synced")
        # each MyApp's status names the commit it was applied from a little after the
        # pass; until then its page has no line to show
        wait_until(
            lambda: all(
                _image_row(running, namespace, f"app-{i}")  # noqa: B023 (used in the loop)
                for i in (0, 17, n - 1)
            ),
            timeout=30,
            what="the pages of app-0, app-17 and the last MyApp",
        )
        _refuse_parsing(monkeypatch, parsed)
        try:
            rows = {i: _image_row(running, namespace, f"app-{i}") for i in (0, 17, n - 1)}
            code, body = running.http("GET", f"/api/v1/apps/{namespace}/app-17")
        finally:
            monkeypatch.undo()
    assert code == 200, body
    assert parsed == []
    for i, row in rows.items():
        assert row is not None, f"app-{i}: no line on its page"
        assert row["origin"]["file"] == "apps/all.yaml"
        assert row["origin"]["line"] == line_of(documents[i], ("f:spec", "f:image"))
    blame = [r for r in json.loads(body)["blame"] if r["object"].startswith("MyApp/")]
    value = next(
        r for r in blame if r["path"].startswith("spec.env") and r["path"].endswith("value")
    )
    want = line_of(documents[17], ("f:spec", "f:env", 'k:{"name":"MODE"}', "f:value"))
    assert value["origin"]["line"] == want
    # what the page shows of Git is what the API server holds for that MyApp
    held = get(kube, "MyApp", namespace, "app-17")
    assert held is not None and held["spec"]["image"] == "nginx:1.27"
    assert rows[17] is not None and rows[17]["live"] == held["spec"]["image"]
