"""The daemon's routes: over real HTTP on loopback (replays, the webhook rate limit), and
alone with a stand-in daemon (probes, metrics, what a push asks for, --no-ui).

No cluster: the daemon gets a stand-in controller, and its sync trigger is counted.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import json
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any, cast

import pytest

from gitsync import threads
from gitsync.daemon import daemon as daemon_module
from gitsync.daemon import metrics as metricslib
from gitsync.daemon.daemon import Daemon, DaemonOptions
from gitsync.daemon.httpproto import Request
from gitsync.daemon.routes import Routes, SyncRequest
from gitsync.daemon.ui import DriftPage
from gitsync.daemon.webhook import Receiver
from gitsync.model.window import Windows
from gitsync.reconcile.controller import Controller
from gitsync.reconcile.ledger import Ledger
from gitsync.threads import Threads

SECRET = b"hook-secret-for-tests"


class Served:
    def __init__(self, daemon: Daemon, monkeypatch: pytest.MonkeyPatch) -> None:
        self.daemon = daemon
        self.port = daemon.http.server_address[1]
        self.triggered: list[float] = []
        monkeypatch.setattr(
            daemon, "trigger", lambda *_why: self.triggered.append(time.monotonic())
        )

    def post(self, body: bytes, **headers: str) -> tuple[int, str, dict[str, str]]:
        req = urllib.request.Request(
            f"http://127.0.0.1:{self.port}/hooks/git", data=body, method="POST"
        )
        for k, v in headers.items():
            req.add_header(k.replace("_", "-"), v)
        try:
            with urllib.request.urlopen(req, timeout=10) as resp:
                return int(resp.status), resp.read().decode(), dict(resp.headers)
        except urllib.error.HTTPError as e:
            return int(e.code), e.read().decode(), dict(e.headers)

    def webhook(self, body: bytes, delivery: str) -> tuple[int, str]:
        code, text, _ = self.post(body, X_Hub_Signature_256=sign(body), X_GitHub_Delivery=delivery)
        return code, text


def test_a_failed_thread_fails_both_probes_of_the_daemon(
    served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    daemon = served.daemon
    daemon.controller.myapps.synced.set()
    assert daemon.alive() and daemon.ready()
    owner = Threads()
    monkeypatch.setattr(daemon_module, "THREADS", owner)
    monkeypatch.setattr(threads, "BACKOFF_FIRST", 0.001)
    monkeypatch.setattr(threads, "BACKOFF_CAP", 0.001)

    def crash() -> None:
        raise RuntimeError("boom")

    owner.start("events", crash).join(5)
    assert not daemon.alive() and not daemon.ready()
    assert 'gitsync_thread_crashes_total{thread="events"} 5.0\n' in daemon.metrics.render()


def sign(body: bytes) -> str:
    return "sha256=" + hmac.new(SECRET, body, hashlib.sha256).hexdigest()


def push(n: int) -> bytes:
    return json.dumps({"ref": "refs/heads/main", "after": f"{n:040x}"}).encode()


@pytest.fixture
def served(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[Served]:
    options: dict[str, Any] = getattr(request, "param", {})
    fake = SimpleNamespace(
        myapps=SimpleNamespace(synced=threading.Event(), items=list),
        kube=SimpleNamespace(requests={}),
        queue=[],
        sharded=False,
        ledger=Ledger(),
        gate=SimpleNamespace(windows=Windows(), now=lambda: dt.datetime.now(dt.UTC)),
        events=SimpleNamespace(dropped=0, listeners=[]),
        silences=dict,
        cache_sizes=dict,
        caches_behind=list,
    )
    daemon = Daemon(
        cast(Controller, fake),
        None,
        DaemonOptions(listen="127.0.0.1:0", leader_elect=False, webhook_secret=SECRET, **options),
    )
    thread = threading.Thread(target=daemon.http.serve_forever, daemon=True)
    thread.start()
    yield Served(daemon, monkeypatch)
    daemon.stop()
    daemon.http.shutdown()
    thread.join(10)


def metric(served: Served, result: str) -> float:
    return served.daemon.metrics.get("gitsync_webhook_requests_total", result=result)


def test_a_replayed_delivery_is_acknowledged_and_syncs_nothing(served: Served) -> None:
    assert served.webhook(push(1), "d-1") == (202, "sync triggered\n")
    # GitHub's own retry of a delivery, or someone replaying it: 2xx, no sync
    assert served.webhook(push(1), "d-1") == (200, "duplicate delivery: already handled\n")
    # GitHub signs the body only: a new delivery id on an old body is still a replay
    assert served.webhook(push(1), "d-forged")[0] == 200
    assert served.webhook(push(2), "d-2")[0] == 202  # a new push
    assert len(served.triggered) == 2
    assert metric(served, "duplicate") == 2 and metric(served, "accepted") == 2
    # an unauthenticated request is neither remembered nor triggers anything
    code, _, _ = served.post(push(3), X_Hub_Signature_256="sha256=" + "0" * 64)
    assert code == 401
    assert served.webhook(push(3), "d-3")[0] == 202
    assert len(served.triggered) == 3


def test_a_delivery_that_failed_can_be_retried(
    served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a standby that cannot reach the leader answers 503; the Git host's retry must count
    leader = SimpleNamespace(is_leader=lambda: False, request_sync=lambda: False)
    monkeypatch.setattr(served.daemon, "leader", leader)
    assert served.webhook(push(1), "d-1")[0] == 503
    leader.request_sync = lambda: True
    assert served.webhook(push(1), "d-1")[0] == 202
    assert metric(served, "failed") == 1 and metric(served, "forwarded") == 1


@pytest.mark.parametrize("served", [{"webhook_rate": 1.0, "webhook_burst": 3}], indirect=True)
def test_webhook_syncs_are_rate_limited_and_no_push_is_lost(served: Served) -> None:
    start = time.monotonic()
    answers = [served.webhook(push(n), f"d-{n}") for n in range(20)]
    sent = time.monotonic() - start
    assert sent < 0.9, "the flood should take well under the refill time"
    # every delivery is acknowledged (a 4xx/5xx would make the Git host retry it)
    assert {code for code, _ in answers} == {202}
    assert len(served.triggered) == 3  # the burst
    assert metric(served, "limited") == 17
    # the pushes over the limit are not lost: one more sync, when the next token comes
    time.sleep(1.5)
    assert len(served.triggered) == 4
    assert 0.9 <= served.triggered[3] - start <= 1.0 + sent + 0.4
    time.sleep(1.0)
    assert len(served.triggered) == 4  # and no more than that
    # after a quiet second, a token is there again
    assert served.webhook(push(99), "d-99")[0] == 202 and len(served.triggered) == 5


def test_routes_and_methods(served: Served) -> None:
    base = f"http://127.0.0.1:{served.port}"
    with urllib.request.urlopen(base + "/healthz", timeout=5) as resp:
        assert resp.read() == b"ok\n"
        assert resp.headers.get("Server") is None
    for method, path, code in [
        ("GET", "/hooks/git", 405),
        ("POST", "/healthz", 405),
        ("GET", "/nowhere", 404),
        ("GET", "/readyz", 503),  # the stand-in controller never syncs
    ]:
        req = urllib.request.Request(base + path, data=b"" if method == "POST" else None)
        req.method = method
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(req, timeout=5)
        assert err.value.code == code, (method, path)
        assert err.value.headers.get("Server") is None
    # a body over the cap is refused before it is read, and counted
    code, text, headers = served.post(b"", Content_Length=str((1 << 20) + 1))
    assert (code, text) == (413, f"body over {1 << 20} bytes\n")
    assert "Server" not in headers


# --- the routes alone, with a stand-in for the daemon: no socket, no scheduler ---------


class FakeHost:
    """What :class:`Routes` asks of the daemon, recorded."""

    def __init__(self, answer: SyncRequest = "accepted", ready: bool = False) -> None:
        self.metrics = metricslib.standard()
        self.answer: SyncRequest = answer
        self.is_ready = ready
        self.is_alive = True
        self.requested = 0
        self.later: list[float] = []
        #: the delivery id each request carried to the pass
        self.deliveries: list[str] = []

    def alive(self) -> bool:
        return self.is_alive

    def ready(self) -> bool:
        return self.is_ready

    def request_sync(self, delivery: str = "") -> SyncRequest:
        self.requested += 1
        self.deliveries.append(delivery)
        return self.answer

    def request_sync_later(self, delay: float, delivery: str = "") -> None:
        self.later.append(delay)
        self.deliveries.append(delivery)


def routes(host: FakeHost, rate: float = 100.0, burst: int = 100, ui: bool = False) -> Routes:
    fake = SimpleNamespace(
        myapps=SimpleNamespace(items=list, version=0),
        deployments=SimpleNamespace(items=list, version=0),
    )
    page = DriftPage(cast(Controller, fake), None) if ui else None
    return Routes(host, Receiver(SECRET, rate, burst), page)


def get(path: str, method: str = "GET", body: bytes = b"", **headers: str) -> Request:
    # a browser's Host on a port-forward, unless a test says otherwise
    sent = {"Host": "localhost:8080", **{k.replace("_", "-"): v for k, v in headers.items()}}
    return Request(method, path, sent, body, "")


def hook(n: int, delivery: str) -> Request:
    body = push(n)
    return get(
        "/hooks/git", "POST", body, X_Hub_Signature_256=sign(body), X_GitHub_Delivery=delivery
    )


def test_probes_follow_the_daemon() -> None:
    host = FakeHost(ready=False)
    r = routes(host)
    assert (r.handle(get("/healthz")).status, r.handle(get("/healthz")).body) == (200, "ok\n")
    not_ready = r.handle(get("/readyz"))
    assert (not_ready.status, not_ready.body) == (503, "not ready\n")
    host.is_ready = True
    assert r.handle(get("/readyz")).status == 200
    host.is_alive = False  # a thread crashed beyond its restarts
    dead = r.handle(get("/healthz"))
    assert (dead.status, dead.body) == (503, "a thread crashed\n")
    # probes are answered on the reading thread, a webhook never is
    assert Routes.inline(get("/readyz")) and Routes.inline(get("/healthz"))
    assert not Routes.inline(get("/hooks/git", "POST")) and not Routes.inline(get("/metrics"))
    # the webhook has a worker of its own; the page shares the pool
    assert Routes.urgent(get("/hooks/git", "POST"))
    assert not Routes.urgent(get("/api/v1/apps")) and not Routes.urgent(get("/"))


def test_metrics_are_the_daemons_in_prometheus_text() -> None:
    host = FakeHost()
    host.metrics.inc("gitsync_sync_total", result="success")
    answer = routes(host).handle(get("/metrics"))
    assert answer.status == 200 and answer.content_type == metricslib.CONTENT_TYPE
    assert 'gitsync_sync_total{result="success"} 1.0' in answer.body


@pytest.mark.parametrize(
    ("answer", "code", "text"),
    [
        ("accepted", 202, "sync triggered\n"),
        ("forwarded", 202, "sync requested from the leader\n"),
        ("failed", 503, "could not reach the leader\n"),
    ],
)
def test_a_signed_push_asks_the_daemon_for_a_sync(
    answer: SyncRequest, code: int, text: str
) -> None:
    host = FakeHost(answer)
    r = routes(host)
    reply = r.handle(hook(1, "d-1"))
    assert (reply.status, reply.body) == (code, text)
    assert host.requested == 1 and host.deliveries == ["d-1"]  # for the pass's notification
    assert host.metrics.get("gitsync_webhook_requests_total", result=answer) == 1
    # a delivery that could not be passed on is forgotten: the Git host's retry counts
    again = r.handle(hook(1, "d-1"))
    assert again.status == (code if answer == "failed" else 200)
    assert host.requested == (2 if answer == "failed" else 1)


def test_an_unsigned_push_is_refused_and_asks_for_nothing() -> None:
    host = FakeHost()
    reply = routes(host).handle(get("/hooks/git", "POST", push(1), X_GitHub_Delivery="d-1"))
    assert (reply.status, reply.body) == (401, "unauthorized\n")
    assert host.requested == 0 and host.later == []
    assert host.metrics.get("gitsync_webhook_requests_total", result="unauthorized") == 1


def test_a_push_over_the_rate_limit_is_deferred_to_the_daemon_not_dropped() -> None:
    host = FakeHost()
    r = routes(host, rate=0.5, burst=1)
    assert r.handle(hook(1, "d-1")).status == 202 and host.requested == 1
    later = r.handle(hook(2, "d-2"))
    assert later.status == 202 and later.body.startswith("sync in ")
    assert len(host.later) == 1 and 0 < host.later[0] <= 2.0
    assert host.deliveries == ["d-1", "d-2"]
    # while that one is due, another push is part of it
    pending = r.handle(hook(3, "d-3"))
    assert (pending.status, pending.body) == (
        202,
        "a sync is already due (rate limit); it includes this\n",
    )
    assert host.requested == 1 and len(host.later) == 1
    assert host.metrics.get("gitsync_webhook_requests_total", result="limited") == 2


def test_no_ui_turns_the_page_off() -> None:
    on, off = routes(FakeHost(), ui=True), routes(FakeHost(), ui=False)
    for path in ("/", "/api/v1/apps", "/ui.js", "/ui.css"):
        assert on.handle(get(path)).status == 200, path
        assert off.handle(get(path)).status == 404, path
    # the page is read-only; the probes and metrics stay whatever --ui says
    assert on.handle(get("/api/v1/apps", "POST")).status == 405
    for r in (on, off):
        assert r.handle(get("/metrics")).status == 200 and r.handle(get("/healthz")).status == 200
    doc = json.loads(on.handle(get("/api/v1/apps")).body)
    assert doc == {"sync": None, "apps": [], "drifted": 0, "history": []}  # the operator alone


@pytest.mark.parametrize("served", [{"ui_allowed_hosts": ("gitsync.example.com",)}], indirect=True)
def test_the_daemon_answers_the_page_under_ui_allowed_hosts_only(served: Served) -> None:
    def status(host: str) -> int:
        req = urllib.request.Request(f"http://127.0.0.1:{served.port}/ui.js")
        req.add_header("Host", host)
        try:
            with urllib.request.urlopen(req, timeout=10) as resp:
                return int(resp.status)
        except urllib.error.HTTPError as e:
            return int(e.code)

    assert status("gitsync.example.com:8080") == 200
    assert status(f"localhost:{served.port}") == 200
    assert status("rebound.attacker.example") == 421


def test_a_failed_rollout_is_counted_once_by_its_event(served: Served) -> None:
    app = {"metadata": {"namespace": "shop", "name": "web"}}
    (listener,) = cast(Any, served.daemon.controller.events).listeners
    for reason in ("RolledBack", "RolledBack", "RolloutFailed", "RollbackReleased", "Drifted"):
        listener(app, "Warning", reason, "m", None)
    m = served.daemon.metrics
    assert m.get("gitsync_rollouts_failed_total", result="rolled_back") == 2
    assert m.get("gitsync_rollouts_failed_total", result="left") == 1


def test_readyz_fails_while_a_cache_has_heard_nothing_from_the_server(served: Served) -> None:
    controller: Any = served.daemon.controller
    controller.myapps.synced.set()
    assert served.daemon.ready()
    controller.caches_behind = lambda: ["deployments"]
    assert not served.daemon.ready()
    controller.caches_behind = list
    assert served.daemon.ready()


def test_a_cache_behind_fails_readiness_and_is_said_once_per_episode(
    served: Served, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    daemon = served.daemon
    daemon.controller.myapps.synced.set()
    behind: list[str] = ["myapps"]
    monkeypatch.setattr(daemon.controller, "caches_behind", lambda: list(behind))
    with caplog.at_level("INFO", logger="gitsync.daemon.daemon"):
        assert [daemon.ready() for _ in range(3)] == [False, False, False]
        behind.clear()
        assert daemon.ready()
        behind.append("deployments")
        assert not daemon.ready()
    said = [r.getMessage() for r in caplog.records if "cache" in r.getMessage()]
    assert said == [
        "not ready: the myapps cache has heard nothing from the API server for over 85s",
        "the caches hear from the API server again",
        "not ready: the deployments cache has heard nothing from the API server for over 85s",
    ]
