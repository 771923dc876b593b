"""Drift notifications: which Events are worth a message, their id, and their payloads.

Pure: an Event that gitsync records (reason, object, message) becomes a
:class:`Notification`, rendered as gitsync's own JSON, a Slack message or a Microsoft
Teams card, and signed like GitHub's webhooks. Delivery is :mod:`gitsync.daemon.notify`.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal
from urllib.parse import urlsplit

from gitsync.engine import redact
from gitsync.engine.changeset import OBJECT_ACTIONS, WRITES, ChangeSet
from gitsync.model.api import KIND, Obj
from gitsync.source.checkout import CommitInfo

EventKind = Literal[
    "sync.done",
    "drift.detected",
    "drift.corrected",
    "conflict",
    "sync.failed",
    "prune.skipped",
    "prune.done",
    "rollout.failed",
    "rollout.rolledback",
]
Format = Literal["json", "slack", "teams"]
FORMATS: Final = ("auto", "json", "slack", "teams")
#: Event reasons (see :mod:`gitsync.kube.events` callers) and the notification each becomes
#: (a pass, failed or not, is one notification of its own: :func:`from_pass`)
REASONS: Final[Mapping[str, EventKind]] = {
    "Drifted": "drift.detected",
    "DriftCorrected": "drift.corrected",
    # another gitsync instance holds the MyApp: never fought over, like another controller
    "OwnedByAnotherInstance": "conflict",
    "PruneSkipped": "prune.skipped",
    "Pruned": "prune.done",
    # a rollout past its progress deadline: left as it is (rollback off), or rolled back
    "RolloutFailed": "rollout.failed",
    "RolledBack": "rollout.rolledback",
}
_COLOURS: Final[Mapping[str, str]] = {
    "sync.done": "2B8A3E",
    "drift.detected": "E8A317",
    "drift.corrected": "2B8A3E",
    "conflict": "A4161A",
    "sync.failed": "A4161A",
    "prune.skipped": "E8A317",
    "prune.done": "2B8A3E",
    "rollout.failed": "A4161A",
    "rollout.rolledback": "E8A317",
}


@dataclass(frozen=True)
class Notification:
    id: str
    event: EventKind
    subject: str  # MyApp/ns/name, or the object the Event is about
    message: str
    time: str
    details: Obj = field(default_factory=dict)

    def to_json(self) -> Obj:
        return {
            "id": self.id,
            "event": self.event,
            "subject": self.subject,
            "message": self.message,
            "time": self.time,
            "details": self.details,
        }


def from_event(
    obj: Obj, reason: str, message: str, time: str, details: Obj | None = None
) -> list[Notification]:
    """The notifications an Event stands for (none for most).

    A drift whose paths another controller owns is a conflict, told apart from drift
    by a one-off tool; one Event may carry both.
    """
    kind = REASONS.get(reason)
    if kind is None:
        return []
    meta = obj.get("metadata") or {}
    # objects from the informer caches carry no kind; those Events are about MyApps
    who = f"{obj.get('kind') or KIND}/{meta.get('namespace', '')}/{meta.get('name', '')}"
    details = dict(details or {})
    if kind != "drift.detected" or "drift" not in details:
        return [_make(kind, who, message, time, details, meta)]
    entries = [e for e in details["drift"] if isinstance(e, dict)]
    out = []
    drift = [e for e in entries if not e.get("conflict")]
    conflicts = [e for e in entries if e.get("conflict")]
    if drift or not conflicts:
        out.append(_make("drift.detected", who, message, time, {"drift": drift}, meta))
    if conflicts:
        text = "owned by another controller: " + ", ".join(
            f"{e.get('object')} {e.get('path')} (by {e.get('manager') or 'unknown'})"
            for e in conflicts[:5]
        )
        out.append(_make("conflict", who, text, time, {"conflicts": conflicts}, meta))
    return out


#: the version of a pass notification's ``details`` (docs/operating.md, Notifications):
#: fields are only ever added within a version
PASS_SCHEMA: Final = 1
#: objects listed by name in one pass notification; the rest are counted
PASS_OBJECTS: Final = 50


@dataclass(frozen=True)
class Trigger:
    """Why a pass ran: ``poll`` (the interval), ``webhook`` (with the delivery's id when
    the Git host sent one), ``signal`` (SIGHUP), ``leading`` (this replica became the
    leader), ``buckets`` (a sharded replica's buckets changed), ``member`` (another
    member received a push), ``window`` (a sync window opened or closed)."""

    reason: str
    delivery: str = ""

    def to_json(self) -> Obj:
        return {"reason": self.reason, **({"delivery": self.delivery} if self.delivery else {})}


def from_pass(
    instance: str, changes: ChangeSet, commit: CommitInfo | None, trigger: Trigger, time: str
) -> Notification | None:
    """The one notification of a pass of ``instance`` (its subject, ``instance/NAME``):
    ``sync.done`` when it wrote something,
    ``sync.failed`` when it failed; None for a pass that found everything as Git says.
    Field paths only, never their values (an env value stays in the cluster)."""
    counts = changes.counts()
    failed = not changes.ok
    if not failed and not any(counts[a] for a in WRITES):
        return None
    written = [c for c in changes.changes if c.writes]
    failures = [
        {"object": c.subject, "reason": c.reason} for c in changes.changes if c.action == "failed"
    ]
    details: Obj = {
        "schemaVersion": PASS_SCHEMA,
        "revision": changes.revision,
        "commit": {"sha": commit.sha, "subject": commit.subject, "author": commit.author}
        if commit
        else None,
        "trigger": trigger.to_json(),
        "seconds": round(changes.seconds, 3),
        "counts": {a: counts[a] for a in (*OBJECT_ACTIONS, "failed")},
        "objects": [
            {"object": c.subject, "action": c.action, "paths": list(c.paths)}
            for c in written[:PASS_OBJECTS]
        ],
        "objectsNotListed": max(0, len(written) - PASS_OBJECTS),
        "failed": failures[:PASS_OBJECTS],
        "errors": list(changes.errors),
    }
    if changes.prune_skipped:
        details["pruneSkipped"] = changes.prune_skipped
    if changes.verification:
        details["verification"] = changes.verification
    kind: EventKind = "sync.failed" if failed else "sync.done"
    at = changes.revision or "no revision"
    why = trigger.reason + (f" {trigger.delivery}" if trigger.delivery else "")
    head = f"sync {'failed' if failed else 'done'} at {at} ({why}, {changes.seconds:.1f}s)"
    if commit is not None:
        head += f": {commit.subject} ({commit.author})"
    message = f"{head}\n{changes.summary()}"
    if changes.errors or failures:
        first = (changes.errors or [f"{failures[0]['object']}: {failures[0]['reason']}"])[0]
        message += f"\n{first}"
    # the same pass result at the same revision is the same notification (a failing
    # pass repeated every poll is told once); a new write is a new one
    basis = json.dumps(
        [
            kind,
            instance,
            changes.revision,
            [c.to_json() for c in written],
            failures,
            changes.errors,
        ],
        sort_keys=True,
        default=str,
    )
    nid = hashlib.sha256(basis.encode()).hexdigest()[:32]
    return Notification(nid, kind, f"instance/{instance}", message, time, details)


def _make(
    kind: EventKind, who: str, message: str, time: str, details: Obj, meta: Obj
) -> Notification:
    # the same Event about the same state of the object is the same notification: its
    # resourceVersion changes with every write, so a drift that comes back is a new one
    basis = json.dumps(
        [kind, who, meta.get("uid"), meta.get("resourceVersion"), message, details],
        sort_keys=True,
        default=str,
    )
    nid = hashlib.sha256(basis.encode()).hexdigest()[:32]
    # env values never leave the cluster (the id above is over the real ones: a digest
    # of what the receiver cannot see, so it does not change with the daemon's key)
    shown = {
        k: redact.drift_entries(v) if k in ("drift", "conflicts") and isinstance(v, list) else v
        for k, v in details.items()
    }
    return Notification(nid, kind, who, message, time, shown)


def format_for(url: str, configured: str = "auto") -> tuple[Format, str]:
    """(payload format, URL to POST to) for a ``--notify-url``.

    ``slack+https://…`` and ``teams+https://…`` name the format in the scheme; else
    ``--notify-format``; else, with ``auto``, Slack's and Teams' webhook hosts are known.
    """
    scheme, sep, rest = url.partition("+")
    if sep and scheme in ("slack", "teams", "json") and "://" in rest:
        return scheme, rest  # type: ignore[return-value]
    if configured != "auto":
        return configured, url  # type: ignore[return-value]
    host = (urlsplit(url).hostname or "").lower()
    if host == "hooks.slack.com":
        return "slack", url
    if host.endswith((".webhook.office.com", ".logic.azure.com")):
        return "teams", url
    return "json", url


def payload(n: Notification, fmt: Format) -> bytes:
    """The body POSTed for ``n`` in ``fmt``.

    A commit's subject and author, an error, an object's name are written by whoever
    can push or create objects: in Slack's and Teams' markup they are escaped, so that
    none can mention a channel, post a link under other words or fake a heading.
    """
    title = f"gitsync: {n.event} {n.subject}"
    doc: Any
    if fmt == "slack":
        # Slack reads only ``text``; the copies of gitsync's own fields are escaped as
        # well, for a Slack workflow that puts them in a message of its own
        doc = slack_escape({"text": f"*{title}*\n{n.message}", **n.to_json()})
    elif fmt == "teams":
        # the MessageCard shape Teams' incoming webhooks (and Workflows) accept; a
        # name escapes to itself (a DNS label), so the title reads the same whether a
        # client takes it as Markdown or as plain text
        doc = {
            "@type": "MessageCard",
            "@context": "https://schema.org/extensions",
            "summary": markdown_escape(title),
            "themeColor": _COLOURS[n.event],
            "title": markdown_escape(title),
            "text": markdown_escape(n.message),
            "sections": [
                {"facts": [{"name": "id", "value": n.id}, {"name": "time", "value": n.time}]}
            ],
        }
    else:
        doc = n.to_json()
    return json.dumps(doc, sort_keys=True, default=str).encode()


_SLACK: Final = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;"})
# HTML's three as entities (a connector card's text takes some HTML, and an autolink is
# <…>), then every character that starts Markdown: emphasis, code, links and images,
# headings, tables, strike-through
_MARKDOWN: Final = str.maketrans(
    {
        "&": "&amp;",
        "<": "&lt;",
        ">": "&gt;",
        **{c: "\\" + c for c in "\\`*_[]()!#|~"},
    }
)


def slack_escape(value: Any) -> Any:
    """``value`` with ``&``, ``<`` and ``>`` as Slack requires in every string, in
    lists and dict values too: ``<!channel>`` and ``<url|words>`` are then plain text."""
    if isinstance(value, str):
        return value.translate(_SLACK)
    if isinstance(value, list):
        return [slack_escape(v) for v in value]
    if isinstance(value, dict):
        return {k: slack_escape(v) for k, v in value.items()}
    return value


def markdown_escape(text: str) -> str:
    """``text`` as plain text in Markdown (Teams): no link, image, emphasis or tag."""
    return text.translate(_MARKDOWN)


def signature(secret: bytes, body: bytes) -> str:
    """``X-Hub-Signature-256``, as GitHub computes it: HMAC-SHA256 of the body, hex."""
    return "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()
