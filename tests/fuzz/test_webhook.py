"""The push webhook verifier (gitsync.daemon.webhook.verify) as properties: only the right HMAC of
the exact body, or the exact GitLab token, is accepted; junk headers never raise."""

from __future__ import annotations

import hashlib
import hmac

from hypothesis import example, given
from hypothesis import strategies as st

from gitsync.daemon.webhook import MAX_BODY, Receiver, verify

SECRETS = st.binary(min_size=1, max_size=64)
BODIES = st.binary(max_size=512)
# header values as an HTTP server may hand them on: any text, surrogates included
JUNK = st.dictionaries(st.text(max_size=30), st.text(max_size=80), max_size=6)


def signature(secret: bytes, body: bytes) -> str:
    return "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()


def utf8(text: str) -> bytes | None:
    """What a header value is as bytes; a lone surrogate has none, and matches nothing."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return None


@given(SECRETS, BODIES, st.sampled_from(["X-Hub-Signature-256", "x-hub-signature-256"]))
def test_the_right_signature_is_accepted(secret: bytes, body: bytes, name: str) -> None:
    assert verify({name: signature(secret, body)}, body, secret)


@given(SECRETS, BODIES, BODIES)
def test_a_signature_of_another_body_is_refused(secret: bytes, body: bytes, other: bytes) -> None:
    assert verify({"X-Hub-Signature-256": signature(secret, other)}, body, secret) == (
        body == other
    )


@given(SECRETS, SECRETS, BODIES)
# found by make fuzz: HMAC pads a key shorter than its block (64 bytes) with zeros
# (RFC 2104), so b"k" and b"k\0" are one key; HMAC's own, and no way in without the key
@example(b"\xff\xfe", b"\xff\xfe\x00", b"")
def test_a_signature_with_another_secret_is_refused(
    secret: bytes, other: bytes, body: bytes
) -> None:
    headers = {"X-Hub-Signature-256": signature(other, body)}
    same_key = secret.rstrip(b"\0") == other.rstrip(b"\0")  # both at most 64 bytes
    assert verify(headers, body, secret) == same_key


@given(SECRETS, BODIES, st.integers(0, 70), st.sampled_from("0123456789abcdefABCDEF"))
def test_one_changed_character_is_refused(secret: bytes, body: bytes, at: int, char: str) -> None:
    good = signature(secret, body)
    at = at % len(good)
    bad = good[:at] + char + good[at + 1 :]
    assert verify({"X-Hub-Signature-256": bad}, body, secret) == (bad == good)


@given(JUNK, BODIES, SECRETS)
@example({"X-Hub-Signature-256": "sha256=\ud800"}, b"", b"s")
@example({"X-Gitlab-Token": "\ud800"}, b"", b"?")
@example({"X-Gitlab-Token": "s\udcff"}, b"", b"s?")
def test_junk_headers_never_raise_and_never_pass(
    headers: dict[str, str], body: bytes, secret: bytes
) -> None:
    # junk is refused unless it happens to carry the secret itself (a GitLab token)
    lowered = {k.lower(): v for k, v in headers.items()}
    carries = utf8(lowered.get("x-gitlab-token", "")) == secret or (
        lowered.get("x-hub-signature-256", "").strip() == signature(secret, body)
    )
    assert verify(headers, body, secret) == carries
    assert Receiver(secret, rate=1, burst=1).receive(headers, body).verdict in (
        ("now",) if carries else ("unauthorized",)
    )


@given(SECRETS, st.text(max_size=40))
def test_only_the_exact_gitlab_token_is_accepted(secret: bytes, token: str) -> None:
    expected = utf8(token) == secret
    assert verify({"X-Gitlab-Token": token}, b"{}", secret) == expected


@given(BODIES)
def test_an_empty_secret_accepts_nothing(body: bytes) -> None:
    assert not verify({"X-Hub-Signature-256": signature(b"", body)}, body, b"")
    assert not verify({"X-Gitlab-Token": ""}, body, b"")


def test_an_oversized_body_is_refused_even_when_signed() -> None:
    body = b"x" * (MAX_BODY + 1)
    assert not verify({"X-Hub-Signature-256": signature(b"s", body)}, body, b"s")
