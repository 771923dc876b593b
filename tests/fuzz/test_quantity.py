"""Quantity canonicalisation (gitsync.model.quantity) as properties.

resource.Quantity's rules, as the module mirrors them: the canonical string holds the
parsed value exactly (nano precision, binary values capped); canonicalising is idempotent;
two canonical strings are equal exactly when value and format family are; an input is kept
as written only when it is already canonical.
"""

from __future__ import annotations

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


@given(st.text(max_size=40))
@example("1e999999999")
@example("٣")
def test_anything_else_is_a_value_error(text: str) -> None:
    try:
        canonical_quantity(text)
    except ValueError as e:
        assert "invalid quantity" in str(e)
