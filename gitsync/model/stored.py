"""How large a value is as the API server stores it, and how to shorten one to a size.

The API server keeps objects as JSON, and etcd refuses a write larger than ~1.5 MiB
("request is too large"). JSON escapes what a YAML file writes in one byte: a control
character is six (``\\u0001``), and Go's encoder escapes ``<``, ``>``, ``&``, U+2028 and
U+2029 alike. So a bound meant to keep an object writable measures this size, never the
length of the text or of the YAML it came from.
"""

from __future__ import annotations

import json
from typing import Any

#: characters Go's encoding/json escapes as \\uXXXX beyond what Python's does
_GO_ESCAPED = frozenset("<>&\u2028\u2029")


def size(value: Any) -> int:
    """Bytes of ``value`` as JSON the way the API server writes it (an upper bound)."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    extra = 0 if text.isascii() and not _GO_ESCAPED & set(text) else _extra(text)
    return len(text.encode()) + extra


def _extra(text: str) -> int:
    # Python writes these bare (1 byte, or 3 for U+2028/9); Go writes six
    return sum(5 if c in "<>&" else 3 for c in text if c in _GO_ESCAPED)


def shorten(value: Any, limit: int) -> tuple[Any, bool]:
    """``value`` if it takes at most ``limit`` bytes stored; else a string of its start
    (a string's own text, any other value's JSON) saying how much was cut, within
    ``limit``; and whether it was cut."""
    if size(value) <= limit:
        return value, False
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    room = max(0, limit - 40)  # for the quotes and the note
    kept, used = [], 2
    for c in text:
        cost = size(c) - 2
        if used + cost > room:
            break
        kept.append(c)
        used += cost
    head = "".join(kept)
    return f"{head}… ({len(text) - len(head)} characters cut)", True
