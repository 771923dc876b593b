"""Why a sync pass failed, in one bounded line: what the status ConfigMap, its Event and
``gitsync drift`` show as the last error.

Counts come first and the "… and N more" tail is kept whatever the length of the
messages: cut at the end, a long first message (an API server's answer) would hide how
many objects failed, which is what someone reading the ConfigMap looks for first.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from gitsync.errors import printable

#: object errors shown; the rest are counted
SHOWN: Final = 3
#: the ConfigMap's lastError, and the Event message made from it, stay readable
LIMIT: Final = 2000


def summary(
    errors: Sequence[str],
    failed: Sequence[str],
    objects: int,
    *,
    shown: int = SHOWN,
    limit: int = LIMIT,
) -> str:
    """``errors``: the pass's own (fetch, manifests, interrupted); ``failed``: the
    messages of the objects that failed, of ``objects`` the pass handled. "" when none."""
    if not errors and not failed:
        return ""
    counts = []
    if failed:
        counts.append(f"{len(failed)} of {objects} objects failed")
    if errors:
        counts.append(f"{len(errors)} error{'s' if len(errors) > 1 else ''}")
    head = ", ".join(counts) + ": "
    messages = [*errors, *failed]
    first = messages[:shown]
    more = len(messages) - len(first)
    tail = f"; … and {more} more" if more else ""
    sep = "; "
    room = max(1, (limit - len(head) - len(tail) - len(sep) * (len(first) - 1)) // len(first))
    # escaped before cutting, so that an escape cannot make a message longer than its room
    text = head + sep.join(_cut(printable(m), room) for m in first) + tail
    return text if len(text) <= limit else _cut(text, limit)


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: max(0, limit - 1)] + "…"


def join(summaries: Sequence[str], *, limit: int = LIMIT) -> str:
    """The last errors of several sharded members' passes in one line, cut at the end,
    so that the first one's counts are read first (each is bounded alone, by
    :func:`summary`)."""
    text = " | ".join(s for s in summaries if s)
    return _cut(text, limit)
