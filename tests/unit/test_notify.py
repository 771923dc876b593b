"""Notifications over real HTTP on loopback: signed like GitHub's webhooks, retried with
backoff when the receiver is down or failing, de-duplicated by id, and never blocking
the caller when the receiver is slow (the overflow is counted)."""

from __future__ import annotations

import hashlib
import hmac
import json
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from gitsync.daemon import metrics as metricslib
from gitsync.daemon import notification, notify
from gitsync.daemon.notification import (
    PASS_OBJECTS,
    Notification,
    Trigger,
    format_for,
    from_event,
    from_pass,
    markdown_escape,
    payload,
    slack_escape,
)
from gitsync.daemon.notify import Notifier, NotifyOptions
from gitsync.engine import differences
from gitsync.engine.changeset import Change, ChangeSet
from gitsync.errors import ConfigError
from gitsync.source.checkout import CommitInfo
from tests.support import wait_until

SECRET = b"notify-secret-for-tests"


class Receiver:
    """A webhook receiver on loopback; ``answers`` are the statuses of the next requests."""

    def __init__(self, answers: list[int] | None = None, delay: float = 0.0) -> None:
        self.received: list[tuple[dict[str, str], bytes, float]] = []
        self.answers = list(answers or [])
        self.delay = delay
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                receiver.received.append((dict(self.headers), body, time.monotonic()))
                time.sleep(receiver.delay)
                status = receiver.answers.pop(0) if receiver.answers else 200
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook?token=abc"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.close()


def _notification(n: int = 1, event: str = "drift.detected") -> Notification:
    return Notification(f"id-{n}", event, "MyApp/shop/web", f"message {n}", "2026-01-01T00:00:00Z")  # type: ignore[arg-type]


def _notifier(urls: list[str], **kw: Any) -> Notifier:
    options = NotifyOptions(secret=SECRET, **{"backoff": 0.05, "timeout": 2.0, **kw})
    notifier = Notifier(urls, options, metricslib.standard())
    notifier.start()
    return notifier


def test_delivery_is_signed_like_github(receiver: Receiver) -> None:
    notifier = _notifier([receiver.url])
    notifier.publish(_notification())
    wait_until(lambda: receiver.received, timeout=10, what="a delivery")
    notifier.stop()
    headers, body, _ = receiver.received[0]
    want = "sha256=" + hmac.new(SECRET, body, hashlib.sha256).hexdigest()
    assert hmac.compare_digest(headers["X-Hub-Signature-256"], want)
    assert headers["X-Gitsync-Delivery"] == "id-1"
    assert headers["X-Gitsync-Event"] == "drift.detected"
    assert json.loads(body)["subject"] == "MyApp/shop/web"
    assert notifier.metrics.get("gitsync_notifications_total", result="delivered") == 1


def test_failing_receiver_is_retried_with_growing_backoff_then_delivered() -> None:
    r = Receiver(answers=[500, 503, 429])
    try:
        notifier = _notifier([r.url])
        notifier.publish(_notification())
        wait_until(lambda: len(r.received) == 4, timeout=10, what="four attempts")
        wait_until(
            lambda: notifier.metrics.get("gitsync_notifications_total", result="delivered"),
            timeout=5,
        )
        notifier.stop()
    finally:
        r.close()
    times = [t for _, _, t in r.received]
    assert times[1] - times[0] >= 0.04  # the first backoff, 0.05 s ± 20%: not at once
    assert {h["X-Gitsync-Delivery"] for h, _, _ in r.received} == {"id-1"}  # one id: de-dup


def test_a_4xx_is_not_retried(receiver: Receiver) -> None:
    receiver.answers = [400]
    notifier = _notifier([receiver.url])
    notifier.publish(_notification())
    wait_until(
        lambda: notifier.metrics.get("gitsync_notifications_total", result="failed"), timeout=10
    )
    notifier.stop()
    assert len(receiver.received) == 1


def test_receiver_down_gives_up_after_bounded_attempts() -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    delays: list[float] = []

    def sleep(seconds: float) -> bool:
        delays.append(seconds)
        return False

    options = NotifyOptions(secret=SECRET, attempts=4, backoff=1.0, max_backoff=3.0)
    notifier = Notifier([f"http://127.0.0.1:{port}/"], options, metricslib.standard(), sleep=sleep)
    notifier.start()
    notifier.publish(_notification())
    wait_until(
        lambda: notifier.metrics.get("gitsync_notifications_total", result="failed"), timeout=10
    )
    notifier.stop()
    assert len(delays) == 3  # four attempts, three waits
    assert 0.8 <= delays[0] <= 1.2 and 1.6 <= delays[1] <= 2.4 and 2.4 <= delays[2] <= 3.6


def test_slow_receiver_never_blocks_and_overflow_is_counted() -> None:
    slow = Receiver(delay=1.0)
    fast = Receiver()
    try:
        notifier = _notifier([slow.url, fast.url], queue_size=3)
        start = time.monotonic()
        for n in range(20):
            notifier.publish(_notification(n))
        took = time.monotonic() - start
        assert took < 0.2, f"publishing 20 notifications took {took:.2f}s"
        # the fast receiver is not held up by the slow one
        wait_until(lambda: len(fast.received) >= 3, timeout=5, what="the fast receiver")
        dropped = notifier.metrics.get("gitsync_notifications_dropped_total")
        assert dropped >= 20 - 3 - 1 - 3  # at most queue + one in flight per target kept
        notifier.stop(timeout=3)
    finally:
        slow.close()
        fast.close()


class Trickler:
    """A receiver that reads the request, then answers 200 one byte at a time, each
    byte well within the per-read timeout; it records how much of the answer it sent
    before the sender hung up."""

    ANSWER = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"

    def __init__(self, gap: float) -> None:
        self.gap = gap
        self.sent = -1
        self.done = threading.Event()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}/hook"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        conn, _ = self.listener.accept()
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                data += conn.recv(4096)
            head, _, body = data.partition(b"\r\n\r\n")
            length = int(
                next(
                    v
                    for k, _, v in (h.partition(b": ") for h in head.split(b"\r\n"))
                    if k.lower() == b"content-length"
                )
            )
            while len(body) < length:
                body += conn.recv(4096)
            sent = 0
            try:
                for i in range(len(self.ANSWER)):
                    conn.sendall(self.ANSWER[i : i + 1])
                    sent += 1
                    time.sleep(self.gap)
            except OSError:
                pass
            self.sent = sent
        self.done.set()

    def close(self) -> None:
        self.listener.close()


def test_a_receiver_trickling_its_answer_is_cut_off_at_the_attempt_timeout() -> None:
    # 57 bytes 0.1 s apart: each read waits 0.1 s (far below the timeout), the answer
    # takes 6 s; the attempt as a whole may take 0.5 s
    r = Trickler(gap=0.1)
    try:
        notifier = _notifier([r.url], timeout=0.5, attempts=1)
        notifier.publish(_notification())
        assert r.done.wait(30), "the receiver never finished"
        wait_until(
            lambda: (
                notifier.metrics.get("gitsync_notifications_total", result="failed")
                or notifier.metrics.get("gitsync_notifications_total", result="delivered")
            ),
            timeout=10,
            what="the attempt's outcome",
        )
        notifier.stop()
    finally:
        r.close()
    assert 0 <= r.sent < len(Trickler.ANSWER), "the whole trickled answer was waited for"
    assert notifier.metrics.get("gitsync_notifications_total", result="failed") == 1
    assert notifier.metrics.get("gitsync_notifications_total", result="delivered") == 0


def test_the_same_id_is_queued_once(receiver: Receiver) -> None:
    notifier = _notifier([receiver.url])
    notifier.publish(_notification(1))
    notifier.publish(_notification(1))
    notifier.publish(_notification(2))
    wait_until(lambda: len(receiver.received) == 2, timeout=10, what="two deliveries")
    time.sleep(0.2)
    notifier.stop()
    assert [h["X-Gitsync-Delivery"] for h, _, _ in receiver.received] == ["id-1", "id-2"]
    assert notifier.metrics.get("gitsync_notifications_total", result="duplicate") == 1


def test_events_become_notifications_with_stable_ids() -> None:
    app = {"metadata": {"name": "web", "namespace": "shop", "uid": "u", "resourceVersion": "7"}}
    entries = [
        {"object": "Deployment/web", "path": "spec.replicas", "manager": "kubectl"},
        {"object": "Deployment/web", "path": "spec.x", "manager": "hpa", "conflict": True},
    ]
    first = from_event(app, "Drifted", "drift detected", "t1", {"drift": entries})
    assert [n.event for n in first] == ["drift.detected", "conflict"]
    assert first[0].subject == "MyApp/shop/web"
    assert "spec.x (by hpa)" in first[1].message
    again = from_event(app, "Drifted", "drift detected", "t2", {"drift": entries})
    assert [n.id for n in again] == [n.id for n in first]  # a re-emit is a duplicate
    later = {"metadata": {**app["metadata"], "resourceVersion": "9"}}
    assert (
        from_event(later, "Drifted", "drift detected", "t3", {"drift": entries})[0].id
        != first[0].id
    )
    assert from_event(app, "Updated", "x", "t") == []
    cm = {"kind": "ConfigMap", "metadata": {"name": "gitsync-status", "namespace": "gs"}}
    # a pass is one notification of its own (from_pass), not its Events'
    assert from_event(cm, "SyncFailed", "boom", "t") == []
    assert from_event(cm, "VerificationFailed", "refused", "t") == []
    assert [n.event for n in from_event(cm, "PruneSkipped", "why", "t")] == ["prune.skipped"]
    assert [n.event for n in from_event(app, "Pruned", "gone", "t")] == ["prune.done"]
    assert [n.event for n in from_event(app, "DriftCorrected", "x", "t")] == ["drift.corrected"]
    assert from_event(app, "ApplyFailed", "x", "t") == []
    assert [n.event for n in from_event(app, "OwnedByAnotherInstance", "x", "t")] == ["conflict"]
    assert [n.event for n in from_event(app, "RolloutFailed", "x", "t")] == ["rollout.failed"]
    assert [n.event for n in from_event(app, "RolledBack", "x", "t")] == ["rollout.rolledback"]
    assert from_event(app, "RollbackReleased", "x", "t") == []


def test_formats_by_scheme_host_or_flag() -> None:
    assert format_for("slack+https://example.com/x") == ("slack", "https://example.com/x")
    assert format_for("teams+https://example.com/x") == ("teams", "https://example.com/x")
    assert format_for("https://hooks.slack.com/services/T/B/C")[0] == "slack"
    assert format_for("https://acme.webhook.office.com/webhookb2/x")[0] == "teams"
    assert format_for("https://example.com/x")[0] == "json"
    assert format_for("https://example.com/x", "teams")[0] == "teams"
    n = _notification()
    assert "*gitsync: drift.detected MyApp/shop/web*" in json.loads(payload(n, "slack"))["text"]
    card = json.loads(payload(n, "teams"))
    assert card["@type"] == "MessageCard" and card["title"].endswith("MyApp/shop/web")
    assert json.loads(payload(n, "json"))["id"] == "id-1"


@pytest.mark.parametrize(
    "url",
    [
        "ftp://host/secret-token-path",
        "http://host:80a/secret-token-path",
        "https://host:99999/secret-token-path",
        "https://host:0/secret-token-path",
        "slack+https://[::1/secret-token-path",
    ],
)
def test_bad_urls_are_refused_without_echoing_the_path(url: str) -> None:
    with pytest.raises(ConfigError) as e:
        Notifier([url], NotifyOptions())
    assert str(e.value).startswith("--notify-url")
    assert "secret-token-path" not in str(e.value)


def test_env_values_appear_in_no_notification_format() -> None:
    secret, live = "xoxb-s3cr3t-from-git", "xoxb-s3cr3t-set-by-hand"
    app = {"metadata": {"name": "web", "namespace": "shop", "uid": "u", "resourceVersion": "7"}}
    path = "spec.template.spec.containers[name=app].env[name=TOKEN].value"
    entries = [
        {"object": "Deployment/web", "path": path, "desired": secret, "live": live},
        {"object": "MyApp/web", "path": "spec.env", "desired": [{"name": "T", "value": secret}]},
        {
            "object": "Deployment/web",
            "path": path,
            "desired": secret,
            "live": live,
            "conflict": True,
        },
    ]
    sent = from_event(app, "Drifted", f"drift detected: {path}", "t", {"drift": entries})
    assert [n.event for n in sent] == ["drift.detected", "conflict"]
    for n in sent:
        for fmt in ("json", "slack", "teams"):
            body = payload(n, fmt)
            assert secret.encode() not in body and live.encode() not in body, (n.event, fmt)
    shown = sent[0].details["drift"][0]
    assert shown["path"] == path and shown["desired"] != shown["live"]


COMMIT = CommitInfo("a" * 40, "Bump web to 1.28", "Ada <ada@example.com>")
REV = f"main@sha1:{'a' * 40}"


def test_a_pass_that_wrote_is_one_notification_saying_what_and_why() -> None:
    changes = ChangeSet(
        [
            Change("MyApp/shop/web", "configured", paths=("spec.image",)),
            Change("Deployment/shop/web", "configured", paths=("spec.template",)),
            Change("MyApp/shop/new", "created"),
            Change("MyApp/shop/old", "pruned"),
            Change("MyApp/shop/same", "unchanged"),
        ],
        revision=REV,
        seconds=1.234,
    )
    n = from_pass("apps", changes, COMMIT, Trigger("webhook", "d-42"), "t")
    assert n is not None and n.event == "sync.done" and n.subject == "instance/apps"
    assert n.message.splitlines() == [
        f"sync done at {REV} (webhook d-42, 1.2s): Bump web to 1.28 (Ada <ada@example.com>)",
        "1 created, 2 configured, 1 unchanged, 1 pruned",
    ]
    d = n.details
    assert d["schemaVersion"] == 1 and d["revision"] == REV and d["seconds"] == 1.234
    assert d["commit"] == {"sha": "a" * 40, "subject": "Bump web to 1.28", "author": COMMIT.author}
    assert d["trigger"] == {"reason": "webhook", "delivery": "d-42"}
    assert d["counts"] == {"created": 1, "configured": 2, "unchanged": 1, "pruned": 1, "failed": 0}
    assert d["objects"] == [
        {"object": "MyApp/shop/web", "action": "configured", "paths": ["spec.image"]},
        {"object": "Deployment/shop/web", "action": "configured", "paths": ["spec.template"]},
        {"object": "MyApp/shop/new", "action": "created", "paths": []},
        {"object": "MyApp/shop/old", "action": "pruned", "paths": []},
    ]
    assert (d["objectsNotListed"], d["failed"], d["errors"]) == (0, [], [])
    # json, Slack and Teams each carry it
    assert json.loads(payload(n, "json"))["details"]["trigger"]["delivery"] == "d-42"
    assert "Bump web to 1.28" in json.loads(payload(n, "slack"))["text"]
    assert json.loads(payload(n, "teams"))["themeColor"] == "2B8A3E"


HOSTILE = "<!channel> <https://evil.example|click> & **urgent** [docs](https://evil.example)"


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)
    elif isinstance(value, dict):
        for k, v in value.items():
            yield k
            yield from _strings(v)


@pytest.mark.parametrize(
    ("raw", "escaped"),
    [
        ("<!channel>", "&lt;!channel&gt;"),
        ("<!here|here> <@U123>", "&lt;!here|here&gt; &lt;@U123&gt;"),
        ("<https://evil.example|click>", "&lt;https://evil.example|click&gt;"),
        ("a &lt; b", "a &amp;lt; b"),  # an entity in the text stays text
        ("*bold* _it_ `code` ~s~", "*bold* _it_ `code` ~s~"),  # formatting, not harm
        ("plain text", "plain text"),
    ],
)
def test_slack_escape_leaves_no_control_sequence(raw: str, escaped: str) -> None:
    assert slack_escape(raw) == escaped
    assert slack_escape({"a": [raw, 1, None], "b": {"c": raw}}) == {
        "a": [escaped, 1, None],
        "b": {"c": escaped},
    }


@pytest.mark.parametrize(
    ("raw", "escaped"),
    [
        ("[click](https://evil.example)", "\\[click\\]\\(https://evil.example\\)"),
        ("![x](https://t.example/p.png)", "\\!\\[x\\]\\(https://t.example/p.png\\)"),
        ("<https://evil.example>", "&lt;https://evil.example&gt;"),
        (
            '<a href="https://evil.example">docs</a>',
            '&lt;a href="https://evil.example"&gt;docs&lt;/a&gt;',
        ),
        ("**urgent** _x_ `y` ~~z~~", "\\*\\*urgent\\*\\* \\_x\\_ \\`y\\` \\~\\~z\\~\\~"),
        ("# title | cell", "\\# title \\| cell"),
        ("a\\*b & c", "a\\\\\\*b &amp; c"),  # a backslash cannot undo the next escape
        ("MyApp/shop/web-1.2", "MyApp/shop/web-1.2"),  # a name is its own escape
    ],
)
def test_markdown_escape_leaves_no_markup(raw: str, escaped: str) -> None:
    assert markdown_escape(raw) == escaped


def test_a_hostile_commit_reaches_slack_and_teams_escaped_and_json_as_it_is() -> None:
    changes = ChangeSet(
        [
            Change("MyApp/shop/web", "configured"),
            Change("MyApp/shop/db", "failed", reason="<https://evil.example|see here>"),
        ],
        revision=REV,
    )
    commit = CommitInfo("b" * 40, HOSTILE, "<!everyone> <mailto:x@evil.example|Ada>")
    n = from_pass("apps", changes, commit, Trigger("poll"), "t")
    assert n is not None
    slack = json.loads(payload(n, "slack"))
    # not a "<" nor a ">" anywhere: no mention, no link, in Slack's text or its copies
    assert not [s for s in _strings(slack) if "<" in s or ">" in s]
    text = slack["text"]
    assert "&lt;!channel&gt; &lt;https://evil.example|click&gt; &amp; **urgent**" in text
    assert "(&lt;!everyone&gt; &lt;mailto:x@evil.example|Ada&gt;)" in text
    assert "&lt;https://evil.example|see here&gt;" in text
    assert slack["details"]["commit"]["subject"] == slack_escape(HOSTILE)
    card = json.loads(payload(n, "teams"))
    assert "<" not in card["text"] and "](" not in card["text"] and "**" not in card["text"]
    assert markdown_escape(HOSTILE) in card["text"]
    # gitsync's own JSON is data, not markup: exactly what was committed
    raw = json.loads(payload(n, "json"))
    assert raw["details"]["commit"]["subject"] == HOSTILE and HOSTILE in raw["message"]


def test_a_quiet_pass_says_nothing_and_a_failed_one_is_told_once() -> None:
    quiet = ChangeSet([Change("MyApp/shop/a", "unchanged")], revision=REV)
    assert from_pass("apps", quiet, COMMIT, Trigger("poll"), "t") is None
    failed = ChangeSet(
        [Change("MyApp/shop/a", "failed", reason='namespace "shop" does not exist')],
        revision=REV,
    )
    n = from_pass("apps", failed, None, Trigger("poll"), "t")
    assert n is not None and n.event == "sync.failed"
    assert n.details["failed"] == [
        {"object": "MyApp/shop/a", "reason": 'namespace "shop" does not exist'}
    ]
    assert n.details["commit"] is None  # a directory, not a commit
    assert n.message.splitlines()[-1] == 'MyApp/shop/a: namespace "shop" does not exist'
    # the same failure at the next poll is the same notification (queued once)
    again = from_pass("apps", failed, None, Trigger("poll"), "t2")
    assert again is not None and again.id == n.id
    # a pass's own error (the fetch) fails it too, and says so first
    broken = ChangeSet([], revision=REV, errors=["fetch failed: connection refused"])
    b = from_pass("apps", broken, None, Trigger("signal"), "t")
    assert b is not None and b.event == "sync.failed" and b.id != n.id
    assert b.message.splitlines()[-1] == "fetch failed: connection refused"
    assert b.details["trigger"] == {"reason": "signal"}


def test_a_big_pass_lists_its_first_objects_and_counts_the_rest() -> None:
    many = [Change(f"MyApp/shop/a{i}", "created") for i in range(PASS_OBJECTS + 7)]
    n = from_pass("apps", ChangeSet(many, revision=REV), None, Trigger("poll"), "t")
    assert n is not None
    assert len(n.details["objects"]) == PASS_OBJECTS and n.details["objectsNotListed"] == 7
    assert len(json.dumps(n.details)) < 10_000


def test_a_pass_notification_carries_no_value_only_paths() -> None:
    secret = "s3cr3t-value"
    live = {"spec": {"env": [{"name": "TOKEN", "value": secret}]}}
    change = Change(
        "Deployment/shop/web",
        "configured",
        paths=("spec.template.spec.containers[0].env[0].value",),
        diff=(differences.Change("spec.template.spec.containers[0].env[0].value", "x", secret),),
        live=live,
        desired=live,
    )
    n = from_pass("apps", ChangeSet([change], revision=REV), None, Trigger("poll"), "t")
    assert n is not None
    for fmt in ("json", "slack", "teams"):
        assert secret not in payload(n, fmt).decode()


def test_a_shutdown_delivers_what_is_queued_within_its_bound() -> None:
    slow = Receiver(delay=0.2)
    try:
        notifier = _notifier([slow.url])
        for n in range(5):
            notifier.publish(_notification(n))
        start = time.monotonic()
        notifier.stop(timeout=5)
        took = time.monotonic() - start
        # all five delivered before stop returned (they took 1 s), not dropped
        assert len(slow.received) == 5 and took < 3, (len(slow.received), took)
        assert notifier.metrics.get("gitsync_notifications_dropped_total") == 0
    finally:
        slow.close()


def test_a_shutdown_out_of_time_drops_the_rest_and_counts_them() -> None:
    stuck = Receiver(delay=1.0)
    try:
        notifier = _notifier([stuck.url])
        for n in range(6):
            notifier.publish(_notification(n))
        start = time.monotonic()
        notifier.stop(timeout=1.5)
        took = time.monotonic() - start
        assert took < 1.5 + 1.0 + 0.5, took  # the bound, and the delivery cut short
        delivered = notifier.metrics.get("gitsync_notifications_total", result="delivered")
        dropped = notifier.metrics.get("gitsync_notifications_dropped_total")
        assert 1 <= delivered <= 3 and dropped >= 2, (delivered, dropped)
    finally:
        stuck.close()


def test_a_crash_delivering_one_notification_does_not_stop_the_worker(
    receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = notification.payload

    def payload(n: Notification, fmt: Any) -> bytes:
        if n.id == "id-1":
            raise KeyError("a bug")
        return real(n, fmt)

    monkeypatch.setattr(notify, "payload", payload)
    notifier = _notifier([receiver.url])
    notifier.publish(_notification(1))
    notifier.publish(_notification(2))
    wait_until(lambda: receiver.received, timeout=10, what="the second delivery")
    notifier.stop()
    assert [h["X-Gitsync-Delivery"] for h, _, _ in receiver.received] == ["id-2"]
    assert notifier.metrics.get("gitsync_notifications_total", result="failed") == 1
