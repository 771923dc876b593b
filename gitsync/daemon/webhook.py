"""Push webhooks (GitHub and GitLab): who may trigger a sync, and how often. Pure: no I/O.

- :func:`verify` checks the shared secret (GitHub HMAC of the body, or GitLab token).
- :class:`Deliveries` remembers recent deliveries, so that a replay does nothing.
- :class:`SyncRateLimit` lets webhook-triggered syncs through at a bounded rate.
- :class:`Receiver` puts the three together and says what to do with one delivery.
"""

from __future__ import annotations

import hashlib
import hmac
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal

#: bodies above this are refused unread by the HTTP layer, and never verify here
MAX_BODY = 1 << 20
#: how many recent deliveries are remembered (a few hours of a busy repository)
REMEMBERED = 4096

_GITHUB = "x-hub-signature-256"
_GITLAB = "x-gitlab-token"
# the ids a Git host gives each delivery; a retry or redelivery of one repeats it
_DELIVERY_IDS = ("x-github-delivery", "x-gitlab-event-uuid")


def verify(headers: Mapping[str, str], body: bytes, secret: bytes) -> bool:
    """True when the request proves knowledge of ``secret``.

    GitHub: ``X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of the body>``.
    GitLab: ``X-Gitlab-Token: <secret>``. Header names are matched case-insensitively.
    """
    # an empty secret would make every unsigned or empty-token request valid
    if not secret or len(body) > MAX_BODY:
        return False
    lowered = _lower(headers)
    signature = lowered.get(_GITHUB)
    if signature is not None and _github_ok(signature, body, secret):
        return True
    token = _utf8(lowered.get(_GITLAB))
    # compare_digest: the time taken must not tell an attacker how much of a guess was right
    return token is not None and hmac.compare_digest(token, secret)


def _github_ok(signature: str, body: bytes, secret: bytes) -> bool:
    expected = "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()
    got = _utf8(signature.strip())
    # bytes, not str: compare_digest refuses non-ASCII str, and the header is attacker input
    return got is not None and hmac.compare_digest(got, expected.encode())


def _utf8(value: str | None) -> bytes | None:
    """A header value as bytes; None for one that has none (a lone surrogate). Not
    "replace": that would turn any unencodable character into "?", so a token of junk
    could match a secret holding a "?"."""
    try:
        return value.encode("utf-8") if value is not None else None
    except UnicodeEncodeError:
        return None


def _lower(headers: Mapping[str, str]) -> dict[str, str]:
    return {name.lower(): value for name, value in headers.items()}


def delivery_keys(headers: Mapping[str, str], body: bytes) -> tuple[str, ...]:
    """What identifies a delivery: the host's delivery id, and the body itself.

    The id alone is not enough: GitHub signs the body only, so a captured delivery
    replayed with a fresh ``X-GitHub-Delivery`` still verifies. Two real pushes never
    have the same body (it names the commits before and after), so a repeated body is
    a repeated delivery whatever its id.
    """
    lowered = _lower(headers)
    keys = [f"id:{lowered[h].strip()}" for h in _DELIVERY_IDS if lowered.get(h, "").strip()]
    keys.append("body:" + hashlib.sha256(body).hexdigest())
    return tuple(keys)


class Deliveries:
    """A bounded memory of recent deliveries (least recently seen forgotten first)."""

    def __init__(self, size: int = REMEMBERED) -> None:
        self._size = size
        self._seen: OrderedDict[str, None] = OrderedDict()

    def seen(self, keys: tuple[str, ...]) -> bool:
        return any(k in self._seen for k in keys)

    def remember(self, keys: tuple[str, ...]) -> None:
        for k in keys:
            self._seen[k] = None
            self._seen.move_to_end(k)
        while len(self._seen) > self._size:
            self._seen.popitem(last=False)

    def forget(self, keys: tuple[str, ...]) -> None:
        for k in keys:
            self._seen.pop(k, None)

    def __len__(self) -> int:
        return len(self._seen)


@dataclass(frozen=True)
class Admission:
    """When a sync may run: ``now``, after ``delay`` seconds, or ``pending`` (one already
    waits for the next token, and it will see this push too)."""

    when: Literal["now", "later", "pending"]
    delay: float = 0.0


class SyncRateLimit:
    """A token bucket: ``burst`` syncs at once, then ``rate`` per second.

    A delivery over the limit is not dropped: it reserves the next token and the sync runs
    when that comes (``later``); deliveries arriving meanwhile ride on that reserved sync
    (``pending``). So every push is applied, and no more than ``burst + rate * t`` syncs
    start in any ``t`` seconds.
    """

    def __init__(
        self, rate: float, burst: int, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if rate <= 0 or burst < 1:
            raise ValueError("the webhook rate must be positive and the burst at least 1")
        self.rate = rate
        self.burst = burst
        self._clock = clock
        self._tokens = float(burst)
        self._last = clock()
        self._pending_until = 0.0

    def admit(self) -> Admission:
        now = self._clock()
        self._tokens = min(self.burst, self._tokens + (now - self._last) * self.rate)
        self._last = now
        if now < self._pending_until:
            return Admission("pending", self._pending_until - now)
        if self._tokens >= 1:
            self._tokens -= 1
            return Admission("now")
        # borrow the next token now, so that the sync it pays for cannot be taken by another
        delay = (1 - self._tokens) / self.rate
        self._tokens -= 1
        self._pending_until = now + delay
        return Admission("later", delay)


Verdict = Literal["unauthorized", "duplicate", "now", "later", "pending"]


#: the longest delivery id kept for a pass's notification (GitHub's are 36 characters)
DELIVERY_ID_MAX = 100


def delivery_id(keys: tuple[str, ...]) -> str:
    """The Git host's id of a delivery, as :func:`delivery_keys` kept it ("" without one,
    or one that is not a short line of printable text)."""
    for key in keys:
        if key.startswith("id:"):
            value = key.removeprefix("id:")
            return value if len(value) <= DELIVERY_ID_MAX and value.isprintable() else ""
    return ""


@dataclass(frozen=True)
class Decision:
    verdict: Verdict
    delay: float = 0.0
    keys: tuple[str, ...] = ()


class Receiver:
    """Decides what one webhook delivery does. Thread-safe (HTTP workers share it)."""

    def __init__(
        self,
        secret: bytes,
        rate: float,
        burst: int,
        remembered: int = REMEMBERED,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._secret = secret
        self._lock = threading.Lock()
        self.deliveries = Deliveries(remembered)
        self.limit = SyncRateLimit(rate, burst, clock)

    def receive(self, headers: Mapping[str, str], body: bytes) -> Decision:
        # before anything is remembered: an unsigned request must not fill the memory
        if not verify(headers, body, self._secret):
            return Decision("unauthorized")
        keys = delivery_keys(headers, body)
        with self._lock:
            if self.deliveries.seen(keys):
                return Decision("duplicate", keys=keys)
            self.deliveries.remember(keys)
            admission = self.limit.admit()
        return Decision(admission.when, admission.delay, keys)

    def forget(self, decision: Decision) -> None:
        """The delivery could not be acted on: let the Git host's retry of it through."""
        with self._lock:
            self.deliveries.forget(decision.keys)
