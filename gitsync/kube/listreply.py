"""A LIST reply read one item at a time.

``json.loads`` of a page builds every item before the first can be looked at: a page
of 100 Deployments is about 2 MiB of dicts and strings, alive at once. A relist
brings back mostly what a cache holds already, so nearly all of that is garbage a
moment later, but while it is alive anything another thread allocates lands among
it, and keeps the allocator's arenas it lands in when the page is freed (CPython
returns an arena to the system only when it is wholly empty). ``read_list`` decodes
the reply's top-level object itself and hands each item to ``each`` as soon as it is
decoded, so at most one item of a page is alive unless ``each`` keeps it. ``each`` is
also given the list's other members read so far: a built-in list has ``kind`` and
``apiVersion`` before ``items`` (its items lack them), a custom resource's list sorts
its members (its items carry them).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Final

from gitsync.model.api import Obj

_DECODER: Final = json.JSONDecoder()
_SPACE: Final = " \t\n\r"


def read_list(reply: bytes | str, each: Callable[[Obj, Obj], None]) -> Obj:
    """The list in ``reply`` (a JSON object) without its ``items``; ``each`` is called
    with every item, in order, as it is decoded, and the list's members before it
    (``items`` may be ``null``: none).
    Raises ``ValueError`` (``json``'s ``JSONDecodeError``) for a reply that is not one
    JSON object, or whose ``items`` is not an array of objects."""
    text = reply.decode("utf-8") if isinstance(reply, bytes) else reply
    return _read(text, each)


def _read(text: str, each: Callable[[Obj, Obj], None]) -> Obj:
    head: Obj = {}
    i = _expect(text, _skip(text, 0), "{")
    if text.startswith("}", i):
        return _end(text, i + 1, head)
    while True:
        key, i = _DECODER.raw_decode(text, i)
        if not isinstance(key, str):
            raise json.JSONDecodeError("expected a member's name", text, i)
        i = _expect(text, _skip(text, i), ":")
        if key != "items":
            head[key], i = _DECODER.raw_decode(text, i)
        elif text.startswith("[", i):
            i = _items(text, _skip(text, i + 1), each, head)
        elif text.startswith("null", i):  # an empty list, as Go writes a nil slice
            i += len("null")
        else:
            raise json.JSONDecodeError("the list's items are not an array", text, i)
        i = _skip(text, i)
        if text.startswith("}", i):
            return _end(text, i + 1, head)
        i = _expect(text, i, ",")


def _items(text: str, i: int, each: Callable[[Obj, Obj], None], head: Obj) -> int:
    """Decodes the array's items from ``i`` (just past ``[``); the index past ``]``."""
    if text.startswith("]", i):
        return i + 1
    while True:
        item, end = _DECODER.raw_decode(text, i)
        if not isinstance(item, dict):
            raise json.JSONDecodeError("an item of the list is not an object", text, i)
        each(item, head)
        i = _skip(text, end)
        if text.startswith("]", i):
            return i + 1
        i = _expect(text, i, ",")


def _skip(text: str, i: int) -> int:
    while i < len(text) and text[i] in _SPACE:
        i += 1
    return i


def _expect(text: str, i: int, char: str) -> int:
    """The index past ``char`` (and the space after it), which must be at ``i``."""
    if i >= len(text):
        raise json.JSONDecodeError("the reply ends too soon", text, i)
    if text[i] != char:
        raise json.JSONDecodeError(f"expected {char!r}", text, i)
    return _skip(text, i + 1)


def _end(text: str, i: int, head: Obj) -> Obj:
    if _skip(text, i) != len(text):
        raise json.JSONDecodeError("extra data after the list", text, i)
    return head
