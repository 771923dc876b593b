"""``as_integer``: the one integer rule, at its edges (the server's side of it is asked in
tests/integration/test_integers.py)."""

from __future__ import annotations

import pytest

from gitsync.model.integers import as_integer

#: int64, the widest integer type of the API, has 19 digits; 20 are read, 21 are not
WIDEST = 20


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (3, 3),
        (0, 0),
        (-1, -1),
        (3.0, 3),
        (3.5, None),
        (True, None),
        (False, None),
        ("3", 3),
        ("007", 7),
        ("9" * WIDEST, int("9" * WIDEST)),
        ("9" * (WIDEST + 1), None),
        # leading zeros are no digits of the number: any count of them is read
        ("0" * 50 + "1", 1),
        ("0" * 50 + "9" * WIDEST, int("9" * WIDEST)),
        ("-3", None),
        ("+3", None),
        (" 3", None),
        ("3 ", None),
        ("0x10", None),
        ("١٢", None),  # digits, but not ASCII ones
        ("", None),
        (None, None),
        ([3], None),
    ],
)
def test_as_integer(value: object, expected: int | None) -> None:
    got = as_integer(value)
    assert got == expected and type(got) is type(expected)
