"""Notifications from the operator against the real control plane: a ``kubectl scale``
reaches a loopback receiver as drift (policy report) or as its correction (policy
correct), signed, each once."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gitsync.daemon import metrics as metricslib
from gitsync.daemon.notify import Notifier, NotifyOptions
from gitsync.kube.client import Kube
from gitsync.reconcile.controller import Controller
from tests.gitserver import Upstream
from tests.integration.test_drift import kubectl, start_app
from tests.integration.test_sync import syncer
from tests.support import app_yaml, wait_until
from tests.unit.test_notify import SECRET, Receiver


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


def test_prune_done_then_sync_failed_and_prune_skipped(
    kube: Kube,
    namespace: str,
    controller: Controller,
    notified: tuple[Receiver, Notifier],
    upstream: Upstream,
    cache_dir: Path,
) -> None:
    receiver, _ = notified
    upstream.commit({f"apps/{n}.yaml": app_yaml(namespace, n) for n in ("a", "b", "c")})
    s = syncer(controller, upstream.file_url, cache_dir, namespace)
    assert s.run().ok
    upstream.commit({"apps/c.yaml": None})
    assert s.run().count("pruned") == 1
    done = wait_until(lambda: [e for e in _all(receiver) if e["event"] == "prune.done"])
    assert done[0]["subject"] == f"MyApp/{namespace}/c"

    upstream.commit({"apps/b.yaml": None, "apps/broken.yaml": "kind: [\n"})
    result = s.run()
    assert not result.ok and result.prune_skipped
    events = wait_until(
        lambda: {e["event"] for e in _all(receiver)} >= {"sync.failed", "prune.skipped"} or None,
        what="sync.failed and prune.skipped",
    )
    assert events
    failed = next(e for e in _all(receiver) if e["event"] == "sync.failed")
    assert "broken.yaml" in failed["message"]


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
