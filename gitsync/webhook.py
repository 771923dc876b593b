"""Verification of Git push webhooks (GitHub and GitLab). Pure: no I/O."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping

#: bodies above this are refused unread by the HTTP layer, and never verify here
MAX_BODY = 1 << 20

_GITHUB = "x-hub-signature-256"
_GITLAB = "x-gitlab-token"


def verify(headers: Mapping[str, str], body: bytes, secret: bytes) -> bool:
    """True when the request proves knowledge of ``secret``.

    GitHub: ``X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of the body>``.
    GitLab: ``X-Gitlab-Token: <secret>``. Header names are matched case-insensitively.
    """
    # an empty secret would make every unsigned or empty-token request valid
    if not secret or len(body) > MAX_BODY:
        return False
    lowered = {name.lower(): value for name, value in headers.items()}
    signature = lowered.get(_GITHUB)
    if signature is not None and _github_ok(signature, body, secret):
        return True
    token = lowered.get(_GITLAB)
    # compare_digest: the time taken must not tell an attacker how much of a guess was right
    return token is not None and hmac.compare_digest(token.encode("utf-8", "replace"), secret)


def _github_ok(signature: str, body: bytes, secret: bytes) -> bool:
    expected = "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()
    # bytes, not str: compare_digest refuses non-ASCII str, and the header is attacker input
    return hmac.compare_digest(signature.strip().encode("utf-8", "replace"), expected.encode())
