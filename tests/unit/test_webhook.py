from __future__ import annotations

import hashlib
import hmac

import pytest

from gitsync.daemon.webhook import (
    MAX_BODY,
    Deliveries,
    Receiver,
    SyncRateLimit,
    delivery_keys,
    verify,
)

SECRET = b"s3cret-hook"
BODY = b'{"ref":"refs/heads/main","after":"' + b"a" * 40 + b'"}'


def github(body: bytes, secret: bytes = SECRET) -> str:
    return "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()


@pytest.mark.parametrize(
    ("headers", "body", "secret", "ok"),
    [
        ({"X-Hub-Signature-256": github(BODY)}, BODY, SECRET, True),
        ({"x-hub-signature-256": github(BODY)}, BODY, SECRET, True),
        ({"X-HUB-SIGNATURE-256": github(BODY)}, BODY, SECRET, True),
        ({"X-Hub-Signature-256": github(BODY, b"other")}, BODY, SECRET, False),
        ({"X-Hub-Signature-256": github(BODY)}, BODY + b" ", SECRET, False),
        ({"X-Hub-Signature-256": github(BODY)[7:]}, BODY, SECRET, False),  # no "sha256="
        ({"X-Hub-Signature-256": "sha1=" + "0" * 40}, BODY, SECRET, False),
        ({"X-Hub-Signature-256": "sha256=ü" + "0" * 63}, BODY, SECRET, False),  # non-ASCII
        ({"X-Hub-Signature": "sha1=whatever"}, BODY, SECRET, False),  # sha1 is not accepted
        ({"X-Gitlab-Token": "s3cret-hook"}, BODY, SECRET, True),
        ({"x-gitlab-token": "s3cret-hook"}, b"", SECRET, True),
        ({"X-Gitlab-Token": "s3cret-hoo"}, BODY, SECRET, False),
        ({"X-Gitlab-Token": "s3cret-hook "}, BODY, SECRET, False),
        ({"X-Gitlab-Token": ""}, BODY, SECRET, False),
        ({}, BODY, SECRET, False),
        # an empty secret never verifies, whatever is sent
        ({"X-Gitlab-Token": ""}, BODY, b"", False),
        ({"X-Hub-Signature-256": github(BODY, b"")}, BODY, b"", False),
    ],
)
def test_verify(headers: dict[str, str], body: bytes, secret: bytes, ok: bool) -> None:
    assert verify(headers, body, secret) is ok


def test_body_too_large_never_verifies() -> None:
    big = b"x" * (MAX_BODY + 1)
    assert verify({"X-Hub-Signature-256": github(big)}, big, SECRET) is False
    fits = b"x" * MAX_BODY
    assert verify({"X-Hub-Signature-256": github(fits)}, fits, SECRET) is True


def test_http_message_headers() -> None:
    # what http.server hands a handler: an email.message.Message, not a dict
    from http.client import parse_headers
    from io import BytesIO

    raw = f"X-Hub-Signature-256: {github(BODY)}\r\n\r\n".encode()
    headers = parse_headers(BytesIO(raw))
    assert verify(headers, BODY, SECRET) is True  # type: ignore[arg-type]


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_delivery_keys_name_the_id_and_the_body() -> None:
    keys = delivery_keys({"X-GitHub-Delivery": " 72d3162e "}, BODY)
    assert keys[0] == "id:72d3162e" and keys[1].startswith("body:")
    assert delivery_keys({"X-Gitlab-Event-UUID": "u-1"}, BODY)[0] == "id:u-1"
    assert delivery_keys({"X-GitHub-Delivery": ""}, BODY) == keys[1:]
    assert delivery_keys({}, BODY + b" ") != keys[1:]


def test_deliveries_are_remembered_within_a_bound() -> None:
    memory = Deliveries(size=3)
    for n in range(5):
        memory.remember((f"k{n}",))
    assert len(memory) == 3
    assert not memory.seen(("k0",)) and not memory.seen(("k1",))
    assert memory.seen(("k2",)) and memory.seen(("zz", "k4"))
    memory.remember(("k2",))  # seen again: now the most recent
    memory.remember(("k5",))
    assert memory.seen(("k2",)) and not memory.seen(("k3",))
    memory.forget(("k2",))
    assert not memory.seen(("k2",))


def test_rate_limit_bursts_then_defers_one_sync_per_token() -> None:
    clock = Clock()
    limit = SyncRateLimit(rate=2.0, burst=3, clock=clock)
    assert [limit.admit().when for _ in range(3)] == ["now"] * 3
    later = limit.admit()
    assert later.when == "later" and later.delay == pytest.approx(0.5)
    clock.now += 0.2
    pending = limit.admit()
    assert pending.when == "pending" and pending.delay == pytest.approx(0.3)
    clock.now += 0.3  # the deferred sync has its token now
    assert limit.admit().when == "later"
    # over a long flood: at most burst + rate * t syncs, deferred ones included
    clock = Clock()
    limit = SyncRateLimit(rate=2.0, burst=3, clock=clock)
    syncs = 0
    for _ in range(1000):  # one delivery every 10 ms for 10 s
        syncs += limit.admit().when in ("now", "later")
        clock.now += 0.01
    assert syncs <= 3 + 2.0 * 10 + 1
    assert syncs >= 2.0 * 10
    with pytest.raises(ValueError):
        SyncRateLimit(rate=0, burst=1)


def test_receiver_verifies_then_ignores_repeats() -> None:
    clock = Clock()
    receiver = Receiver(SECRET, rate=1.0, burst=2, remembered=10, clock=clock)
    signed = {"X-Hub-Signature-256": github(BODY), "X-GitHub-Delivery": "d1"}
    assert receiver.receive({"X-GitHub-Delivery": "d1"}, BODY).verdict == "unauthorized"
    assert len(receiver.deliveries) == 0  # unsigned requests fill no memory
    first = receiver.receive(signed, BODY)
    assert first.verdict == "now"
    assert receiver.receive(signed, BODY).verdict == "duplicate"
    replayed = {"X-Hub-Signature-256": github(BODY), "X-GitHub-Delivery": "d-new"}
    assert receiver.receive(replayed, BODY).verdict == "duplicate"
    receiver.forget(first)
    assert receiver.receive(signed, BODY).verdict == "now"
    other = b'{"after":"' + b"b" * 40 + b'"}'
    assert receiver.receive({"X-Hub-Signature-256": github(other)}, other).verdict == "later"
