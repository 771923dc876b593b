"""Problems found in a document: (field path, message) pairs, and the words they use.

Pure and shared by :mod:`gitsync.model.schema` (the document, its metadata) and
:mod:`gitsync.model.spec_schema` (its spec, as the CRD says); :mod:`gitsync.source.manifests`
turns each path into a file, line and field.
"""

from __future__ import annotations

import json

from gitsync.errors import plain_or_quote, quote

FieldPath = tuple[str | int, ...]


class Problems(list[tuple[FieldPath, str]]):
    """(field path, message) pairs, at most ``limit`` kept and the rest only counted: a
    list of half a million wrong items must not cost half a million messages."""

    def __init__(self, limit: int = 1_000_000) -> None:
        super().__init__()
        self.limit = limit
        self.dropped = 0

    def append(self, problem: tuple[FieldPath, str]) -> None:
        if len(self) < self.limit:
            super().append(problem)
        else:
            self.dropped += 1

    @property
    def found(self) -> int:
        """Problems found so far, kept or only counted."""
        return len(self) + self.dropped


def field_name(path: FieldPath) -> str:
    """``("spec", "env", 0, "name")`` as a user would write it: ``spec.env[0].name``.

    A key that is not a plain name is quoted, ``metadata.labels['a b']``: keys come from
    the file, and one holding a newline must not start a line of its own.
    """
    name = ""
    for seg in path:
        if isinstance(seg, int):
            name += f"[{seg}]"
        elif plain_or_quote(seg) != seg:
            name += f"[{quote(seg)}]"
        else:
            name += f".{seg}" if name else seg
    return name


def key_text(key: object) -> str:
    """A mapping key as a field path segment: a string as it is, a key YAML read as
    something else as it would be written (``~`` is ``null``, ``on`` is ``true``)."""
    if isinstance(key, str):
        return key
    if key is None or isinstance(key, bool):
        return json.dumps(key)
    return str(key)


def kind_of(value: object) -> str:
    """How an error message names a value the user wrote."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"boolean {str(value).lower()}"
    if isinstance(value, int | float):
        return f"number {value}"
    if isinstance(value, str):
        return f"string {quote(value)}{_non_ascii(value)}"
    if isinstance(value, list | dict):
        return "a list" if isinstance(value, list) else "a mapping"
    return f"a {type(value).__name__}"  # a date or timestamp, which YAML also knows


def _non_ascii(value: str) -> str:
    """Where a string leaves ASCII: a homoglyph (Cyrillic "\\u0435" for "e") looks like the
    letter it imitates even quoted, so the message names it."""
    if value.isascii():
        return ""
    at, char = next((i, c) for i, c in enumerate(value) if not c.isascii())
    return f" (character {at + 1} is U+{ord(char):04X}, not ASCII)"
