"""The drift page's documents and HTML without a cluster: every value escaped, nothing
secret or internal in the JSON, and the script never turning values into markup."""

from __future__ import annotations

import json
import re
import threading
from types import SimpleNamespace
from typing import Any, cast

from gitsync.daemon import page
from gitsync.daemon.daemon import Daemon, DaemonOptions
from gitsync.daemon.httpproto import Request
from gitsync.engine.blame import BlameRow, Origin
from gitsync.reconcile.controller import Controller

EVIL = '<script>alert("x")</script>'


def _myapp(**status: Any) -> dict[str, Any]:
    return {
        "metadata": {
            "name": "web",
            "namespace": "shop",
            "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "secret-ish"},
            "managedFields": [{"manager": "gitsync"}],
        },
        "spec": {"image": EVIL, "replicas": 2, "env": [{"name": "TOKEN", "value": "hunter2"}]},
        "status": {
            "phase": "Available",
            "source": {"revision": "main@sha1:" + "a" * 40, "path": "apps/web.yaml"},
            "drift": [
                {
                    "object": "Deployment/web",
                    "path": "spec.replicas",
                    "desired": 2,
                    "live": 5,
                    "manager": "kubectl",
                    "operation": "Update",
                    "conflict": False,
                },
                {
                    "object": "Deployment/web",
                    "path": "spec.template.spec.containers[name=app].image",
                    "desired": EVIL,
                    "live": "x",
                    "manager": "other-operator",
                    "conflict": True,
                },
            ],
            **status,
        },
    }


def test_apps_doc_lists_drift_and_conflicts_and_leaves_the_rest_out() -> None:
    doc = page.apps_doc([_myapp()], {}, {"revision": "r", "result": "Succeeded", "x": "y"})
    (app,) = doc["apps"]
    assert [d["path"] for d in app["drift"]] == ["spec.replicas"]
    assert app["conflicts"][0]["manager"] == "other-operator"
    assert doc["drifted"] == 1
    assert doc["sync"] == {
        "revision": "r",
        "result": "Succeeded",
        "lastError": "",
        "lastChange": "",
        "pruneSkipped": "",
    }
    text = json.dumps(doc)
    for hidden in ("hunter2", "TOKEN", "managedFields", "last-applied", "secret-ish"):
        assert hidden not in text


def test_html_escapes_every_value() -> None:
    doc = page.apps_doc([_myapp()], {}, {"lastError": EVIL, "pruneSkipped": "<b>"})
    out = page.index_html(doc)
    assert "<script>alert" not in out and "<b>" not in out
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in out
    # the only script element is ours, from our own origin
    assert re.findall(r"<script[^>]*>", out) == ['<script src="/ui.js">']
    row = BlameRow("MyApp/shop/web", "spec.image", EVIL, EVIL, Origin("git", file=EVIL, line=7))
    app = page.blame_doc(page.app_doc(_myapp(), None), [row])
    out = page.app_html(app)
    assert "<script>alert" not in out
    assert out.count("&lt;script&gt;") >= 3  # the image, the live value, the file


def test_script_never_writes_markup() -> None:
    assert "innerHTML" not in page.SCRIPT and "outerHTML" not in page.SCRIPT
    assert "insertAdjacentHTML" not in page.SCRIPT and "document.write" not in page.SCRIPT
    assert "textContent" in page.SCRIPT


def test_security_headers_allow_no_inline_or_foreign_script() -> None:
    csp = dict(page.SECURITY_HEADERS)["Content-Security-Policy"]
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp
    assert "default-src 'none'" in csp


def _daemon(ui: bool) -> Daemon:
    fake = SimpleNamespace(
        myapps=SimpleNamespace(synced=threading.Event(), items=list),
        deployments=SimpleNamespace(items=list),
        kube=SimpleNamespace(requests={}),
        events=SimpleNamespace(dropped=0),
    )
    options = DaemonOptions(listen="127.0.0.1:0", leader_elect=False, ui=ui)
    return Daemon(cast(Controller, fake), None, options)


def test_no_ui_turns_the_page_off() -> None:
    on, off = _daemon(True), _daemon(False)
    try:
        for path in ("/", "/api/v1/apps", "/ui.js"):
            get = Request("GET", path, {}, b"", "127.0.0.1")
            assert on.handle(get).status == 200, path
            assert off.handle(get).status == 404, path
        assert on.handle(Request("GET", "/metrics", {}, b"", "127.0.0.1")).status == 200
        doc = json.loads(on.handle(Request("GET", "/api/v1/apps", {}, b"", "")).body)
        assert doc == {"sync": None, "apps": [], "drifted": 0}  # the operator alone
    finally:
        for d in (on, off):
            d.http.server_close()
