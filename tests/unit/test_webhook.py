from __future__ import annotations

import hashlib
import hmac

import pytest

from gitsync.webhook import MAX_BODY, verify

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
