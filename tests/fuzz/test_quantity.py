"""Quantity canonicalisation (gitsync.model.quantity) as properties.

resource.Quantity's rules, as the module mirrors them: the canonical string holds the
parsed value exactly (nano precision, binary values capped); canonicalising is idempotent;
two canonical strings are equal exactly when value and format family are; an input is kept
as written only when it is already canonical.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

from hypothesis import example, given
from hypothesis import strategies as st

from gitsync.model.quantity import (
    _format,  # the encoder, checked on its own
    _parse,
    canonical_quantity,
    parse_quantity,
    quantities_equal,
    resource_quantity,
)

DECIMAL = ["n", "u", "m", "", "k", "M", "G", "T", "P", "E"]
BINARY = ["Ki", "Mi", "Gi", "Ti", "Pi", "Ei"]


@st.composite
def quantity_text(draw: st.DrawFn) -> str:
    sign = draw(st.sampled_from(["", "", "+", "-"]))
    whole = draw(st.from_regex(r"0{0,3}[0-9]{0,22}", fullmatch=True))
    fraction = draw(st.one_of(st.just(""), st.from_regex(r"\.[0-9]{0,12}", fullmatch=True)))
    if not (whole + fraction).strip("."):
        whole = "1"
    suffix = draw(
        st.one_of(
            st.sampled_from(DECIMAL + BINARY),
            st.builds(lambda e: f"e{e}", st.integers(-30, 30)),
            st.builds(lambda e: f"E{e:+d}", st.integers(-30, 30)),
        )
    )
    return f"{sign}{whole}{fraction}{suffix}"


@given(quantity_text())
@example("1.5Gi")
@example("0.5Ki")
@example("-0.0001n")
@example("9" * 22 + "Ei")
@example("+1")
@example("0100m")
def test_canonical_form_holds_the_value_and_is_a_fixed_point(text: str) -> None:
    value = parse_quantity(text)
    canonical = canonical_quantity(text)
    assert parse_quantity(canonical) == value
    assert canonical_quantity(canonical) == canonical
    assert quantities_equal(text, canonical)
    # nano precision: every parsed value is a whole number of nanos
    assert (value * 10**9).denominator == 1


@given(quantity_text(), quantity_text())
def test_equal_canonical_forms_are_equal_values(a: str, b: str) -> None:
    if canonical_quantity(a) == canonical_quantity(b):
        assert parse_quantity(a) == parse_quantity(b)
    assert quantities_equal(a, b) == (parse_quantity(a) == parse_quantity(b))
    assert quantities_equal(a, b) == quantities_equal(b, a)


@given(quantity_text())
@example("2n")
@example("1.4727")
@example("009802E-9")
@example("216.3004Ki")
def test_a_resource_list_holds_whole_millis(text: str) -> None:
    value = parse_quantity(text)
    stored = resource_quantity(text)
    held = parse_quantity(stored)
    # rounded away from zero to a whole milli, and never further
    assert (held * 1000).denominator == 1
    assert abs(held) >= abs(value) and abs(held - value) < Fraction(1, 1000)
    assert resource_quantity(stored) == stored
    if (value * 1000).denominator == 1:
        assert stored == canonical_quantity(text)


NANOS = st.integers(-(10**30), 10**30)
FORMATS = st.sampled_from(["DecimalSI", "BinarySI", "DecimalExponent"])


@given(NANOS, FORMATS)
@example(1024 * 10**9, "BinarySI")
@example(1, "BinarySI")
@example(10**27, "DecimalSI")
def test_format_then_parse_is_the_value(nanos: int, fmt: str) -> None:
    value = Fraction(nanos, 10**9)
    if fmt == "BinarySI" and value.denominator == 1 and abs(value) > 2**63 - 1:
        return  # beyond the binary cap: the parser caps it (checked below)
    text = _format(value, fmt)  # type: ignore[arg-type]
    assert parse_quantity(text) == value, text


@given(NANOS, NANOS, FORMATS)
def test_one_format_one_string_per_value(a: int, b: int, fmt: str) -> None:
    x, y = Fraction(a, 10**9), Fraction(b, 10**9)
    fa, fb = _format(x, fmt), _format(y, fmt)  # type: ignore[arg-type]
    assert (fa == fb) == (x == y)


@given(st.integers(0, 2**70))
def test_binary_values_are_capped_at_int64(n: int) -> None:
    parsed = _parse(f"{n}Ki")
    assert parsed.value == min(Fraction(n * 1024), Fraction(2**63 - 1))


#: resource.Quantity's grammar, written out on its own: a sign, digits with at most one
#: point (the Go scanner takes none at all as 0), then one SI or binary suffix or an
#: exponent; ASCII only, nothing around it
GRAMMAR = re.compile(
    r"(?P<sign>[+-]?)(?P<whole>[0-9]*)(?:\.(?P<fraction>[0-9]*))?"
    r"(?:(?P<si>[numkMGTPE])|(?P<binary>[KMGTPE])i|[eE](?P<exp>[+-]?[0-9]+))?"
)
SI = {"n": -9, "u": -6, "m": -3, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}


#: what Go's strings.TrimSpace trims (unicode.IsSpace), as Quantity.UnmarshalJSON does
#: before parsing; Python's str.strip also trims U+001C..U+001F, which Go does not
GO_SPACE = (
    "\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007"
    "\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)


def server_value(m: re.Match[str]) -> Fraction:
    """The value the API server parses from a text of the grammar: nano precision,
    finer values rounded away from zero, binary values capped at 2**63-1."""
    fraction = m["fraction"] or ""
    value = Fraction(int(m["whole"] or "0")) + Fraction(int(fraction or "0"), 10 ** len(fraction))
    if m["binary"]:
        value *= 2 ** (10 * ("KMGTPE".index(m["binary"]) + 1))
    else:
        value *= Fraction(10) ** (SI[m["si"]] if m["si"] else int(m["exp"] or 0))
    value = Fraction(math.ceil(value * 10**9), 10**9)
    if m["binary"] and value > 2**63 - 1:
        value = Fraction(2**63 - 1)
    return -value if m["sign"] == "-" else value


@given(st.one_of(st.text(max_size=40), quantity_text()))
@example("1e999999999")
@example("٣")
@example("1 Gi")
@example(" 1Gi\n")
@example("1\x1f")
@example("\u30001\u2003")
@example("1e")
@example("1.5.5")
@example("0x10")
@example("1K")
@example("1ki")
@example("1.5Gi")
@example("-0.0001n")
def test_anything_else_is_a_value_error(text: str) -> None:
    trimmed = text.strip(GO_SPACE)
    m = GRAMMAR.fullmatch(trimmed) if trimmed else None  # nothing at all is no zero
    exponent = int(m["exp"]) if m is not None and m["exp"] else 0
    try:
        canonical = canonical_quantity(text)
    except ValueError as e:
        assert "invalid quantity" in str(e)
        # refused: not of the grammar, or an exponent the module keeps out of reach
        assert m is None or abs(exponent) > 1000, f"{text!r} is a quantity, refused: {e}"
        return
    # accepted: only what the API server accepts, holding the value it parses, and
    # canonical as it stores it (a fixed point that reads back as the same value)
    assert m is not None, f"{text!r} is no quantity, accepted as {canonical!r}"
    value = server_value(m)
    assert parse_quantity(text) == value
    assert parse_quantity(canonical) == value
    assert canonical_quantity(canonical) == canonical
    assert quantities_equal(text, canonical)
    assert quantities_equal(text, _format(value, "DecimalSI"))
