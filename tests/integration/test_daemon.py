"""The daemon: polling, the push webhook, probes and metrics, over real HTTP."""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from gitsync.daemon.daemon import Daemon, DaemonOptions
from gitsync.kube.client import Kube
from gitsync.reconcile.controller import Controller, ControllerConfig
from tests.gitserver import Upstream, free_port
from tests.integration.test_sync import syncer
from tests.support import app_yaml, get, sample, wait_until

SECRET = b"hook-secret-for-tests"


class Running:
    def __init__(self, daemon: Daemon, port: int) -> None:
        self.daemon = daemon
        self.base = f"http://127.0.0.1:{port}"

    def http(self, method: str, path: str, body: bytes = b"", **headers: str) -> tuple[int, str]:
        req = urllib.request.Request(self.base + path, data=body or None, method=method)
        for k, v in headers.items():
            req.add_header(k.replace("_", "-"), v)
        try:
            with urllib.request.urlopen(req, timeout=10) as resp:
                return int(resp.status), resp.read().decode()
        except urllib.error.HTTPError as e:
            return int(e.code), e.read().decode()


@contextlib.contextmanager
def running_daemon(daemon: Daemon, port: int) -> Iterator[Running]:
    """``daemon`` run on a thread until the block ends, ready (``/readyz``) before it
    starts; it must then shut down within 30 s."""
    thread = threading.Thread(target=daemon.run, daemon=True)
    thread.start()
    running = Running(daemon, port)
    wait_until(lambda: running.http("GET", "/readyz")[0] == 200, timeout=60, what="readiness")
    yield running
    daemon.stop()
    thread.join(30)
    assert not thread.is_alive(), "the daemon did not shut down"


def start_daemon(
    kube: Kube,
    namespace: str,
    upstream: Upstream,
    cache: Path,
    interval: float,
    sharding: bool = False,
) -> Iterator[Running]:
    controller = Controller(kube, ControllerConfig(namespace=namespace, workers=2))
    s = syncer(controller, upstream.file_url, cache, namespace)
    port = free_port()
    options = DaemonOptions(
        listen=f"127.0.0.1:{port}",
        interval=interval,
        jitter=0,
        leader_elect=True,
        lease_namespace=namespace,
        watch_namespace=namespace,
        webhook_secret=SECRET,
        sharding=sharding,
    )
    with running_daemon(Daemon(controller, s, options), port) as running:
        yield running


@pytest.fixture(params=[False, True], ids=["one-leader", "sharded"])
def webhook_daemon(
    kube: Kube,
    crd: str,
    namespace: str,
    upstream: Upstream,
    cache_dir: Path,
    request: pytest.FixtureRequest,
) -> Iterator[Running]:
    """One replica, and (sharded) the same as the one member of a sharded instance:
    it must behave exactly as the leader alone does."""
    upstream.commit({"apps/first.yaml": app_yaml(namespace, "first")})
    # a long interval: only the webhook can bring a new commit in quickly
    sharding = bool(request.param)
    for running in start_daemon(
        kube, namespace, upstream, cache_dir, interval=3600, sharding=sharding
    ):
        # the first sync (as soon as it leads) is done: later commits need a trigger
        wait_until(lambda: get(kube, "MyApp", namespace, "first"), timeout=30, what="first")
        yield running


def sign(body: bytes) -> str:
    return "sha256=" + hmac.new(SECRET, body, hashlib.sha256).hexdigest()


def test_webhook_with_valid_signature_syncs_now(
    kube: Kube, namespace: str, upstream: Upstream, webhook_daemon: Running
) -> None:
    assert get(kube, "MyApp", namespace, "first") is not None
    upstream.commit({"apps/hooked.yaml": app_yaml(namespace, "hooked")})
    body = b'{"ref": "refs/heads/main"}'
    start = time.monotonic()
    code, _ = webhook_daemon.http("POST", "/hooks/git", body, X_Hub_Signature_256=sign(body))
    assert code == 202
    wait_until(lambda: get(kube, "MyApp", namespace, "hooked"), timeout=30, what="hooked")
    print(f"webhook to applied: {time.monotonic() - start:.2f}s")
    _, metrics = webhook_daemon.http("GET", "/metrics")
    assert 'gitsync_webhook_requests_total{result="accepted"} 1' in metrics
    assert (sample(metrics, 'gitsync_sync_total{result="success"}') or 0) >= 1
    assert "gitsync_leader 1" in metrics
    # what the process holds, read at the scrape: the caches' shared nodes among it
    assert (sample(metrics, 'gitsync_malloc_bytes{state="in_use"}') or 0) > 0
    assert (sample(metrics, "gitsync_shared_nodes") or 0) > 0
    assert (sample(metrics, "gitsync_python_blocks") or 0) > 0


def test_webhook_with_bad_signature_is_refused_and_runs_nothing(
    kube: Kube, namespace: str, upstream: Upstream, webhook_daemon: Running
) -> None:
    upstream.commit({"apps/sneaky.yaml": app_yaml(namespace, "sneaky")})
    body = b'{"ref": "refs/heads/main"}'
    bad = "sha256=" + hmac.new(b"wrong", body, hashlib.sha256).hexdigest()
    assert webhook_daemon.http("POST", "/hooks/git", body, X_Hub_Signature_256=bad)[0] == 401
    assert webhook_daemon.http("POST", "/hooks/git", body)[0] == 401
    assert webhook_daemon.http("POST", "/hooks/git", body, X_Gitlab_Token="nope")[0] == 401
    time.sleep(3)
    assert get(kube, "MyApp", namespace, "sneaky") is None
    _, metrics = webhook_daemon.http("GET", "/metrics")
    assert 'gitsync_webhook_requests_total{result="unauthorized"} 3' in metrics
    # a length that cannot be trusted is refused before anything is read
    assert webhook_daemon.http("POST", "/hooks/git", b"", Content_Length="-1")[0] == 411
    ok = webhook_daemon.http("POST", "/hooks/git", body, X_Gitlab_Token=SECRET.decode())
    assert ok[0] == 202
    wait_until(lambda: get(kube, "MyApp", namespace, "sneaky"), timeout=30, what="sneaky")


def test_a_replayed_delivery_is_acknowledged_and_applies_nothing(
    kube: Kube, namespace: str, upstream: Upstream, webhook_daemon: Running
) -> None:
    upstream.commit({"apps/second.yaml": app_yaml(namespace, "second")})
    body = b'{"ref": "refs/heads/main", "after": "second"}'
    delivery = {"X_Hub_Signature_256": sign(body), "X_GitHub_Delivery": "72d3162e-1"}
    assert webhook_daemon.http("POST", "/hooks/git", body, **delivery)[0] == 202
    wait_until(lambda: get(kube, "MyApp", namespace, "second"), timeout=30, what="second")
    # two passes: the first one (as it came to lead) and the one the delivery asked for
    two = 'gitsync_sync_total{result="success"} 2.0\n'
    wait_until(lambda: two in webhook_daemon.http("GET", "/metrics")[1], timeout=30, what="2")
    # a new commit, then the old delivery again (GitHub's redelivery, or a replay)
    upstream.commit({"apps/replayed.yaml": app_yaml(namespace, "replayed")})
    code, text = webhook_daemon.http("POST", "/hooks/git", body, **delivery)
    assert (code, text) == (200, "duplicate delivery: already handled\n")
    time.sleep(3)
    assert get(kube, "MyApp", namespace, "replayed") is None
    _, metrics = webhook_daemon.http("GET", "/metrics")
    assert two in metrics  # no pass since
    assert 'gitsync_webhook_requests_total{result="duplicate"} 1' in metrics
    # a real new push goes through
    new = b'{"ref": "refs/heads/main", "after": "replayed"}'
    assert webhook_daemon.http("POST", "/hooks/git", new, X_Hub_Signature_256=sign(new))[0] == 202
    wait_until(lambda: get(kube, "MyApp", namespace, "replayed"), timeout=30, what="replayed")


def test_polling_applies_a_push_within_an_interval(
    kube: Kube, crd: str, namespace: str, upstream: Upstream, cache_dir: Path
) -> None:
    upstream.commit({"apps/one.yaml": app_yaml(namespace, "one")})
    for running in start_daemon(kube, namespace, upstream, cache_dir, interval=2):
        assert running.http("GET", "/healthz")[0] == 200
        upstream.commit({"apps/two.yaml": app_yaml(namespace, "two")})
        start = time.monotonic()
        wait_until(lambda: get(kube, "MyApp", namespace, "two"), timeout=30, what="the poll")
        print(f"push to applied by polling: {time.monotonic() - start:.2f}s")
