"""The one rule for a value at a field the API types ``integer`` (``replicas``, ``port``).

What the API server accepts there (tests/integration/test_integers.py asks it):

- a JSON integer; a boolean never (YAML's ``true`` is not 1);
- for a MyApp (a CRD, validated by its OpenAPI schema) also a number with no
  fraction: ``3.0`` is stored as ``3``; ``3.5`` is refused. A built-in kind (a
  Deployment) refuses ``3.0`` outright, so gitsync always sends the integer;
- a string never, not even ``"3"``.

A manifest in Git is held to the server's rule: :mod:`gitsync.model.schema` refuses
``"3"`` (and ``!!str 3``), as the server refuses what kubectl would send for it. This
function still reads a quoted run of ASCII digits as that number, for the comparisons of
render and drift; no sign, no spaces, no other base, and not longer than any integer
field holds, so that ``int()`` never meets thousands of digits.
"""

from __future__ import annotations

from typing import Final

#: no integer field holds more digits than this (int64 has 19)
MAX_DIGITS: Final = 20


def as_integer(value: object) -> int | None:
    """The integer ``value`` stands for at an integer field, or None if it is none."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value) if value.is_integer() else None
    if (
        isinstance(value, str)
        and value.isascii()
        and value.isdigit()
        and len(value.lstrip("0")) <= MAX_DIGITS
    ):
        return int(value)
    return None
