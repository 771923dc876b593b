"""Notifications from the operator against the real control plane: a ``kubectl scale``
reaches a loopback receiver as drift (policy report) or as its correction (policy
correct), signed, each once."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gitsync.daemon import metrics as metricslib
from gitsync.daemon.notification import markdown_escape, slack_escape
from gitsync.daemon.notify import Notifier, NotifyOptions
from gitsync.kube.client import Kube
from gitsync.reconcile.controller import Controller
from tests.gitserver import Upstream
from tests.integration.test_drift import kubectl, start_app
from tests.integration.test_ha import Replica
from tests.support import app_yaml, wait_until
from tests.unit.test_notify import HOSTILE, SECRET, Receiver


@pytest.fixture
def notified(controller: Controller) -> Iterator[tuple[Receiver, Notifier]]:
    receiver = Receiver()
    notifier = Notifier([receiver.url], NotifyOptions(secret=SECRET), metricslib.standard())
    controller.events.listeners.append(notifier.on_event)
    notifier.start()
    yield receiver, notifier
    notifier.stop()
    receiver.close()


def _events(receiver: Receiver, subject: str) -> list[dict[str, Any]]:
    out = []
    for headers, body, _ in receiver.received:
        want = "sha256=" + hmac.new(SECRET, body, hashlib.sha256).hexdigest()
        assert headers["X-Hub-Signature-256"] == want
        doc = json.loads(body)
        if doc["subject"] == subject:
            out.append(doc)
    return out


def test_kubectl_scale_is_notified_as_drift_or_as_its_correction(
    kube: Kube,
    namespace: str,
    notified: tuple[Receiver, Notifier],
    kubectl_bin: str,
    kubeconfig: str,
) -> None:
    receiver, _ = notified
    start_app(kube, namespace, "kept", replicas=2, driftPolicy="report")
    start_app(kube, namespace, "fixed", replicas=2)
    for name in ("kept", "fixed"):
        kubectl(
            kubectl_bin, kubeconfig, "-n", namespace, "scale", f"deployment/{name}", "--replicas=5"
        )

    kept = wait_until(
        lambda: [
            e
            for e in _events(receiver, f"MyApp/{namespace}/kept")
            if e["event"] == "drift.detected"
        ],
        what="drift.detected",
    )
    assert kept[0]["details"]["drift"][0]["path"] == "spec.replicas"
    assert kept[0]["details"]["drift"][0]["live"] == 5
    fixed = wait_until(
        lambda: [
            e
            for e in _events(receiver, f"MyApp/{namespace}/fixed")
            if e["event"] == "drift.corrected"
        ],
        what="drift.corrected",
    )
    assert "spec.replicas" in fixed[0]["message"] and "kubectl" in fixed[0]["message"]
    ids = [h["X-Gitsync-Delivery"] for h, _, _ in receiver.received]
    assert len(ids) == len(set(ids)), "a notification was delivered twice"


def test_each_pass_is_one_message_saying_what_changed_why_and_from_which_commit(
    kube: Kube, kubeconfig: str, crd: str, namespace: str, upstream: Upstream, tmp_path: Path
) -> None:
    """A real ``gitsync run`` and a receiver on loopback: the first pass (it leads), a
    push (its delivery id), a SIGHUP with a broken file: one message each, with the
    commit's subject and author, what was created, configured and pruned, and what
    failed; the failure is not told again at the next pass. A Slack and a Teams
    receiver get the same passes, a pusher's hostile subject in them escaped."""
    receiver, slack, teams = Receiver(), Receiver(), Receiver()
    hook_secret, notify_secret = tmp_path / "hook", tmp_path / "notify"
    hook_secret.write_text("s3cret")
    notify_secret.write_bytes(SECRET)
    upstream.commit(
        {f"apps/{n}.yaml": app_yaml(namespace, n) for n in ("a", "b", "c")}, "Three apps"
    )
    flags = (
        *("--repo", upstream.file_url, "--path", "apps", "--interval", "3600"),
        *("--webhook-secret-file", str(hook_secret), "--notify-url", receiver.url),
        *("--notify-secret-file", str(notify_secret)),
        *("--notify-url", f"slack+{slack.url}", "--notify-url", f"teams+{teams.url}"),
    )
    daemon = Replica(kubeconfig, namespace, tmp_path / "gitsync.log", flags)

    def passes() -> list[dict[str, Any]]:
        return [e for e in _all(receiver) if e["event"] in ("sync.done", "sync.failed")]

    try:
        first = wait_until(passes, timeout=60, what="the first pass told")[0]
        assert first["event"] == "sync.done" and first["subject"].startswith("instance/")
        d = first["details"]
        # (sharded, the pass its buckets bring)
        assert d["schemaVersion"] == 1 and d["trigger"]["reason"] in ("leading", "poll", "buckets")
        assert (d["commit"]["subject"], d["commit"]["author"]) == ("Three apps", "Test")
        assert d["counts"]["created"] >= 3
        created = {o["object"] for o in d["objects"] if o["action"] == "created"}
        assert {f"MyApp/{namespace}/{n}" for n in ("a", "b", "c")} <= created

        # a push: c removed, a's image changed
        sha = upstream.commit(
            {"apps/c.yaml": None, "apps/a.yaml": app_yaml(namespace, "a", image="web:2")},
            "Drop c, a to web:2",
        )
        body = json.dumps({"ref": "refs/heads/main", "after": sha}).encode()
        sig = "sha256=" + hmac.new(b"s3cret", body, hashlib.sha256).hexdigest()
        req = urllib.request.Request(
            f"http://127.0.0.1:{daemon.port}/hooks/git", data=body, method="POST"
        )
        req.add_header("X-Hub-Signature-256", sig)
        req.add_header("X-GitHub-Delivery", "d-77")
        with urllib.request.urlopen(req, timeout=10) as resp:
            assert resp.status == 202
        second = wait_until(lambda: passes()[1:], timeout=30, what="the push's pass told")[0]
        d = second["details"]
        assert d["trigger"] == {"reason": "webhook", "delivery": "d-77"}
        assert d["commit"] == {"sha": sha, "subject": "Drop c, a to web:2", "author": "Test"}
        actions = {(o["object"], o["action"]) for o in d["objects"]}
        assert (f"MyApp/{namespace}/c", "pruned") in actions
        a = next(o for o in d["objects"] if o["object"] == f"MyApp/{namespace}/a")
        assert a["action"] == "configured" and "spec.image" in a["paths"]
        assert "Drop c, a to web:2" in second["message"]

        # a broken file (and b removed) and SIGHUP: one sync.failed naming the file, and
        # the guard's skip of b's prune
        upstream.commit({"apps/b.yaml": None, "apps/broken.yaml": "kind: [\n"}, "Break it")
        daemon.proc.send_signal(signal.SIGHUP)
        third = wait_until(lambda: passes()[2:], timeout=30, what="the failed pass told")[0]
        assert third["event"] == "sync.failed"
        assert third["details"]["trigger"] == {"reason": "signal"}
        assert "broken.yaml" in third["message"]
        assert third["details"]["pruneSkipped"]
        wait_until(
            lambda: any(e["event"] == "prune.skipped" for e in _all(receiver)),
            timeout=20,
            what="prune.skipped",
        )
        # the same failure at the next pass is not told again
        daemon.proc.send_signal(signal.SIGHUP)
        time.sleep(3)
        assert len(passes()) == 3, [p["event"] for p in passes()]
        ids = [h["X-Gitsync-Delivery"] for h, _, _ in receiver.received]
        assert len(ids) == len(set(ids)), "a notification was delivered twice"

        # the fix and a's next image, pushed with a subject that would page a channel
        # and hide a link: the JSON carries it as it is, Slack and Teams as text
        sha = upstream.commit(
            {"apps/broken.yaml": None, "apps/a.yaml": app_yaml(namespace, "a", image="web:3")},
            HOSTILE,
        )
        daemon.proc.send_signal(signal.SIGHUP)
        fourth = wait_until(lambda: passes()[3:], timeout=30, what="the fix's pass told")[0]
        assert fourth["event"] == "sync.done" and fourth["details"]["commit"]["sha"] == sha
        assert fourth["details"]["commit"]["subject"] == HOSTILE

        def told(to: Receiver) -> list[dict[str, Any]]:
            return [d for d in _all(to) if sha in d["text"]]

        said = wait_until(lambda: told(slack), timeout=30, what="Slack told")[0]
        assert f"{slack_escape(HOSTILE)} (Test)" in said["text"]
        assert "&lt;!channel&gt; &lt;https://evil.example|click&gt;" in said["text"]
        assert said["details"]["commit"]["subject"] == slack_escape(HOSTILE)
        for doc in _all(slack):
            assert "<" not in json.dumps(doc), "a Slack payload carries a control sequence"
        card = wait_until(lambda: told(teams), timeout=30, what="Teams told")[0]
        assert markdown_escape(f"{HOSTILE} (Test)") in card["text"]
        assert "](" not in card["text"] and "**" not in card["text"]
    finally:
        daemon.stop(signal.SIGKILL)
        for r in (receiver, slack, teams):
            r.close()


def _all(receiver: Receiver) -> list[dict[str, Any]]:
    return [json.loads(body) for _, body, _ in receiver.received]


@pytest.mark.parametrize(
    "url",
    [
        "http://hooks.example.com:80a/services/T0/B0/SECRETPATH",
        "https://hooks.example.com:99999/SECRETPATH",
        "slack+https://[::1/SECRETPATH",
    ],
)
def test_a_bad_notify_url_is_a_usage_error_naming_the_flag(kubeconfig: str, url: str) -> None:
    """Refused as the flags are read, before anything starts: the port of a URL was only
    read by the notifier, after the cluster was reached, and ended in a traceback."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITSYNC_", "KUBE"))}
    args = ["run", "--kubeconfig", kubeconfig, "--no-leader-elect", "--notify-url", url]
    proc = subprocess.run(
        [sys.executable, "-c", "from gitsync.cli import main; main()", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        cwd=Path(__file__).parents[2],  # this checkout's gitsync
    )
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and "SECRETPATH" not in proc.stderr
    assert "Invalid value for '--notify-url'" in proc.stderr
