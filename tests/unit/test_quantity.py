"""Quantities: the strings the API server stores, as its resource.Quantity computes them."""

from __future__ import annotations

from fractions import Fraction

import pytest

from gitsync.model.quantity import canonical_quantity, parse_quantity, quantities_equal


@pytest.mark.parametrize(
    ("given", "stored"),
    [
        # kept as written: already canonical
        ("100m", "100m"),
        ("1G", "1G"),
        ("1Gi", "1Gi"),
        ("128Mi", "128Mi"),
        ("1Ki", "1Ki"),
        ("250m", "250m"),
        ("2", "2"),
        ("0", "0"),
        ("-1", "-1"),
        ("1e9", "1e9"),
        ("1e3", "1e3"),  # the exponent format is kept: not "1k"
        ("80e-3", "80e-3"),
        ("1n", "1n"),
        ("1080n", "1080n"),
        ("1001Gi", "1001Gi"),
        # binary: the largest exact binary suffix
        ("1024Mi", "1Gi"),
        ("1048576Ki", "1Gi"),
        ("307200Ki", "300Mi"),
        ("1025024Mi", "1001Gi"),
        ("1024Gi", "1Ti"),
        ("8Ki", "8Ki"),
        ("2000Mi", "2000Mi"),
        ("1.5Gi", "1536Mi"),
        ("0.5Gi", "512Mi"),
        ("0.5Mi", "512Ki"),
        ("1.5Ki", "1536"),
        # binary below 1024 or with a fraction falls back to decimal
        ("0.5Ki", "512"),
        (".001Ki", "1024m"),
        (".000001Ki", "1024u"),
        (".000000001Ki", "1024n"),
        (".000000000001Ki", "2n"),
        ("100.035Ki", "102435840m"),
        ("0Ki", "0"),
        ("0Mi", "0"),
        # decimal: the largest exact suffix
        ("1000m", "1"),
        ("0.5", "500m"),
        (".5", "500m"),
        ("1.5", "1500m"),
        ("0.1", "100m"),
        ("1.08", "1080m"),
        ("1080000000n", "1080m"),
        ("5000m", "5"),
        ("1000", "1k"),
        ("1000M", "1G"),
        ("0.001T", "1G"),
        ("1000u", "1m"),
        ("2.5P", "2500T"),
        ("50k", "50k"),
        ("0.00050k", "500m"),
        ("0m", "0"),
        ("000", "0"),
        # exponent format: mantissa with an exponent that is a multiple of 3
        (".001e12", "1e9"),
        ("0.001e0", "1e-3"),
        ("1000e-12", "1e-9"),
        ("1E6", "1E6"),  # canonical digits: the capital E is kept as written
        ("1E7", "10e6"),
        ("1.3E+6", "1300e3"),
        ("1e14", "100e12"),
        ("1.5e-3", "1500e-6"),
        ("0e3", "0"),
        # nano precision: finer values round away from zero
        ("3.001n", "4n"),
        ("0.9n", "1n"),
        ("0.0000000001", "1n"),
        ("0.00000012345", "124n"),
        ("-0.5n", "-1n"),
        # limits: binary capped at 2**63-1; decimal beyond "E" uses an exponent
        ("9Ei", "9223372036854775807"),
        ("12E", "12E"),
        ("1000E", "1e21"),
        # negative values
        ("-1024Mi", "-1Gi"),
        ("-1.5", "-1500m"),
        # the parser keeps an input string it considers canonical, quirks included
        ("+1", "+1"),
        ("0100m", "0100m"),
        ("1.", "1."),
        # surrounding whitespace is trimmed, as in JSON decoding
        (" 1Gi ", "1Gi"),
    ],
)
def test_canonical_quantity_strings(given: str, stored: str) -> None:
    assert canonical_quantity(given) == stored


@pytest.mark.parametrize(
    ("given", "stored"),
    [
        (1, "1"),
        (0, "0"),
        (1000, "1k"),
        (1024, "1024"),  # an int is decimal, never binary
        (2048000, "2048k"),
        (0.5, "500m"),
        (1.0, "1"),
        (2.25, "2250m"),
        (1e16, "10e15"),  # json sends 1e+16: the exponent format
    ],
)
def test_canonical_quantity_numbers(given: int | float, stored: str) -> None:
    assert canonical_quantity(given) == stored


@pytest.mark.parametrize(
    ("given", "value"),
    [
        ("1Ki", Fraction(1024)),
        ("1.5Gi", Fraction(3 * 2**29)),
        ("100m", Fraction(1, 10)),
        ("1e3", Fraction(1000)),
        ("1E-3", Fraction(1, 1000)),
        ("3.001n", Fraction(4, 10**9)),
        ("9Ei", Fraction(2**63 - 1)),
        ("-2k", Fraction(-2000)),
        (7, Fraction(7)),
        (0.25, Fraction(1, 4)),
        ("e3", Fraction(0)),  # no digits at all reads as zero, as in Go
    ],
)
def test_parse_quantity(given: str | int | float, value: Fraction) -> None:
    assert parse_quantity(given) == value


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ("", "empty"),
        ("1.1.M", "not a number with a unit"),
        ("1+1.0M", "not a number with a unit"),
        ("aoeu", "not a number with a unit"),
        ("1 Gi", "not a number with a unit"),
        ("0.1mi", "unknown suffix 'mi'"),
        ("1i", "unknown suffix 'i'"),
        ("1K", "unknown suffix 'K'"),
        ("1KiB", "not a number with a unit"),
        ("1e", "unknown suffix 'e'"),
        ("-3.01e-", "unknown suffix 'e-'"),
        ("1e99999", "out of range"),
        (True, "boolean"),
        (float("nan"), "finite"),
    ],
)
def test_invalid_quantities(given: str | float, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        canonical_quantity(given)
    with pytest.raises(ValueError, match=message):
        parse_quantity(given)


@pytest.mark.parametrize(
    ("a", "b", "equal"),
    [
        ("1000m", "1", True),
        ("1Gi", "1024Mi", True),
        ("1k", 1000, True),
        ("0.5", "500m", True),
        ("1e3", "1k", True),
        ("0.9n", "1n", True),
        ("1G", "1Gi", False),
        ("100m", "0.01", False),
        ("1", 2, False),
        ("bogus", "bogus", True),  # identical non-quantities are not a difference
        ("bogus", "1", False),
    ],
)
def test_quantities_equal(a: str | int, b: str | int, equal: bool) -> None:
    assert quantities_equal(a, b) is equal
    assert quantities_equal(b, a) is equal
