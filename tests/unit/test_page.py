"""The drift page's documents and HTML without a cluster: every value escaped, nothing
secret or internal in the JSON, and the script never turning values into markup."""

from __future__ import annotations

import json
import re
from typing import Any

from gitsync.daemon import page
from gitsync.engine.blame import BlameRow, Origin

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
        "pinned": "",
    }
    text = json.dumps(doc)
    for hidden in ("hunter2", "TOKEN", "managedFields", "last-applied", "secret-ish"):
        assert hidden not in text


def test_html_escapes_every_value() -> None:
    sync = {"lastError": EVIL, "pruneSkipped": "<b>", "pinned": f"instance pinned: {EVIL}"}
    doc = page.apps_doc([_myapp()], {}, sync)
    out = page.index_html(doc)
    assert "<script>alert" not in out and "<b>" not in out
    assert "instance pinned: &lt;script&gt;" in out
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


def test_env_values_appear_nowhere_in_the_documents_or_html() -> None:
    secret, live = "Pa55-w0rd-from-git", "Pa55-w0rd-set-by-hand"
    env_path = "spec.template.spec.containers[name=app].env[name=DB_PASSWORD].value"
    entry = {
        "object": "Deployment/web",
        "path": env_path,
        "desired": secret,
        "live": live,
        "manager": "kubectl-set",
        "operation": "Update",
        "conflict": False,
    }
    myapp = _myapp(drift=[entry])
    myapp["spec"]["env"] = [{"name": "DB_PASSWORD", "value": secret}]
    rows = [
        BlameRow(
            "MyApp/shop/web", "spec.env[name=DB_PASSWORD].value", secret, secret, Origin("git")
        ),
        BlameRow("Deployment/shop/web", env_path, live, secret, Origin("drift"), drifted=True),
    ]
    index = page.apps_doc([myapp], {}, None)
    app = page.blame_doc(page.app_doc(myapp, None), rows)
    out = json.dumps(index) + page.index_html(index) + json.dumps(app) + page.app_html(app)
    assert secret not in out and live not in out
    # that it differs, where and who changed it: still there
    (shown,) = index["apps"][0]["drift"]
    assert shown["path"] == env_path and shown["manager"] == "kubectl-set"
    assert shown["desired"] != shown["live"]
    assert app["blame"][1]["drifted"] and app["blame"][1]["live"].startswith("hidden:")


def test_a_myapp_held_by_a_rollback_says_so_in_its_row_escaped() -> None:
    held = _myapp(
        drift=[],
        rollback={"from": "main@sha1:b", "to": "main@sha1:g", "reason": EVIL, "heldDigest": "d"},
    )
    doc = page.apps_doc([held, _myapp(drift=[])], {}, None)
    assert [a["held"] for a in doc["apps"]] == [
        f"rolled back from main@sha1:b to main@sha1:g ({EVIL})",
        "",
    ]
    out = page.index_html(doc)
    assert out.count('<li class="held">held: rolled back from main@sha1:b to main@sha1:g (') == 1
    assert out.count('<span class="ok">in sync</span>') == 1  # the other, not held
    assert "<script>alert" not in out


def test_a_myapp_whose_change_waits_says_for_what_in_its_row_escaped() -> None:
    why = f"waiting for MyApp/shop/{EVIL} (Progressing)"
    waiting = _myapp(
        drift=[],
        conditions=[
            {"type": "Waiting", "status": "True", "reason": "DependencyNotReady", "message": why}
        ],
    )
    doc = page.apps_doc([waiting], {}, None)
    assert [a["held"] for a in doc["apps"]] == [why]
    out = page.index_html(doc)
    assert out.count('<li class="held">held: waiting for MyApp/shop/') == 1
    assert "<script>alert" not in out


def test_with_sharding_each_row_names_its_replica_escaped() -> None:
    doc = page.apps_doc([_myapp(availableReplicas=2)], {}, None, lambda key: f"<{key}>")
    (app,) = doc["apps"]
    assert app["replica"] == "<shop/web>"
    # another replica's Deployment is not cached here: the status's figures stand in
    assert app["availableReplicas"] == 2
    html = page.index_html(doc)
    assert "<th>Replica</th>" in html and "<td>&lt;shop/web&gt;</td>" in html
    nobody = page.apps_doc([_myapp()], {}, None, lambda key: "")
    assert "<td>none</td>" in page.index_html(nobody)
    plain = page.apps_doc([_myapp()], {}, None)
    assert "replica" not in plain["apps"][0]
    assert "Replica" not in page.index_html(plain)
