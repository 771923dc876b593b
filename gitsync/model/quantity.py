"""Kubernetes resource quantities (``500m``, ``1.5Gi``, ``2e3``) as the API server keeps them.

The API server parses every quantity of a built-in type (container resources) and
stores the string ``resource.Quantity.String()`` returns. gitsync renders that exact
string (checked against kube-apiserver by tests/integration/test_quantity_oracle.py),
so that desired == stored with plain ``==`` and nothing looks drifted.

This module mirrors ``k8s.io/apimachinery/pkg/api/resource`` (read, not copied):

- the value is kept to nano precision; finer non-zero values round away from zero;
  a binary-suffixed value is capped at 2**63-1;
- the input's *format* family is kept: ``Ki``..``Ei`` is BinarySI, ``n``..``E`` and no
  suffix is DecimalSI, ``e<n>`` is DecimalExponent;
- canonical form: the largest suffix that needs no fraction (``1024Mi`` -> ``1Gi``,
  ``1.5`` -> ``1500m``); BinarySI below 1024 or with a fraction falls back to DecimalSI;
- an input already in canonical form whose digits fit an int64 is kept *as written*
  (the parser caches the input string), which is why ``+1`` and ``0100m`` survive;
- in a ResourceList (container requests and limits), core/v1's defaulting then rounds
  the value up to a whole milli, dropping the input string if that changes it:
  :func:`resource_quantity`, which is what gitsync renders and compares.

Why not ``kubernetes.utils.parse_quantity``/``format_quantity``: they give a value and
format one with the suffix the caller picks, but not the string the API server stores
(its choice of suffix and format family, nano rounding, the kept input), which is what
gitsync must produce for desired == stored.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from typing import Final, Literal

Format = Literal["DecimalSI", "BinarySI", "DecimalExponent"]

_DECIMAL_SUFFIXES: Final = {
    "n": -9,
    "u": -6,
    "m": -3,
    "": 0,
    "k": 3,
    "M": 6,
    "G": 9,
    "T": 12,
    "P": 15,
    "E": 18,
}
_BINARY_SUFFIXES: Final = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL_BY_EXPONENT: Final = {e: s for s, e in _DECIMAL_SUFFIXES.items()}
_BINARY_BY_POWER: Final = {e // 10: s for s, e in _BINARY_SUFFIXES.items()}

# The same split as the Go scanner: sign, leading zeros, integer digits, optional
# fraction, then suffix letters, an optional sign and digits.
_SCAN: Final = re.compile(
    r"(?P<sign>[+-]?)0*(?P<num>[0-9]*)(?:\.(?P<denom>[0-9]*))?"
    r"(?P<suffix>[eEinumkKMGTP]*[+-]?[0-9]*)"
)
_EXPONENT: Final = re.compile(r"[eE](?P<exp>[+-]?[0-9]+)")

_NANO: Final = -9
_MAX_INT64: Final = 2**63 - 1
_MAX_INT64_DIGITS: Final = 18  # digits that always fit an int64 (the parser's fast path)
# Far beyond any real quantity; keeps a hostile "1e999999999" from building a huge integer.
_MAX_EXPONENT: Final = 1000
#: what the server trims around a quantity (Go's unicode.IsSpace, in
#: Quantity.UnmarshalJSON); not Python's whitespace, which also holds U+001C..U+001F
_GO_SPACE: Final = (
    "\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006"
    "\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)
_HINT: Final = "expected e.g. 500m, 1.5, 128Mi, 2Gi or 1e3"


@dataclass(frozen=True, slots=True)
class _Parsed:
    value: Fraction
    format: Format
    #: the input string when the parser keeps it as the serialised form
    cached: str | None


def parse_quantity(value: str | int | float) -> Fraction:
    """The exact value the API server holds for a quantity (nano-rounded, binary-capped).

    Raises ValueError with a clear message when ``value`` is not a quantity.
    """
    return _parse(_as_text(value)).value


def canonical_quantity(value: str | int | float) -> str:
    """The string the API server stores after it round-trips ``value``."""
    return _canonical_text(_as_text(value))


def resource_quantity(value: str | int | float) -> str:
    """The string the API server stores for ``value`` in a ResourceList (the requests and
    limits of a container, a quota): the quantity rounded up to a whole milli first.

    core/v1's defaulting does this to every ResourceList (``SetDefaults_ResourceList``);
    a value that changes drops the input string, so ``2n`` is stored as ``1m`` and
    ``1.4727`` as ``1473m``. Rendering anything else would look drifted for ever.
    """
    return _resource_text(_as_text(value))


def quantities_equal(a: str | int | float, b: str | int | float) -> bool:
    """Equal as quantities (``1000m`` == ``1``, ``1Gi`` == ``1024Mi``).

    Values that are not quantities are equal only when they are identical, so that a
    broken value is never hidden behind a valid one.
    """
    try:
        return parse_quantity(a) == parse_quantity(b)
    except ValueError:
        return a == b


def _as_text(value: object) -> str:
    # JSON carries ints and floats as numbers; the API server parses their text.
    if isinstance(value, bool):
        raise ValueError(f"invalid quantity {value!r}: a boolean is not a quantity")
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"invalid quantity {value!r}: not a finite number")
        return repr(value)  # the text json.dumps sends
    if isinstance(value, str):
        return value.strip(_GO_SPACE)  # the server trims surrounding whitespace too
    raise ValueError(f"invalid quantity {value!r}: must be a string or a number")


@lru_cache(maxsize=4096)
def _canonical_text(text: str) -> str:
    # Cached: the drift fast path canonicalises the same few strings every cycle.
    parsed = _parse(text)
    if parsed.cached is not None:
        return parsed.cached
    return _format(parsed.value, parsed.format)


@lru_cache(maxsize=4096)
def _resource_text(text: str) -> str:
    parsed = _parse(text)
    milli = parsed.value * 1000
    if milli.denominator == 1:
        return parsed.cached if parsed.cached is not None else _format(parsed.value, parsed.format)
    # away from zero, as inf.Dec's RoundUp and int64Amount's AsScale round
    whole = math.ceil(abs(milli))
    rounded = Fraction(-whole if milli < 0 else whole, 1000)
    return _format(rounded, parsed.format)


def _parse(text: str) -> _Parsed:
    if not text:
        raise ValueError(f"invalid quantity {text!r}: empty ({_HINT})")
    if text == "0":
        return _Parsed(Fraction(0), "DecimalSI", "0")
    m = _SCAN.fullmatch(text)
    if m is None:
        raise ValueError(f"invalid quantity {text!r}: not a number with a unit ({_HINT})")
    negative = m["sign"] == "-"
    num = m["num"] or "0"
    denom = m["denom"] or ""
    base, exponent, fmt = _interpret(text, m["suffix"])
    fast = _parse_fast(text, negative, num, denom, exponent, fmt)
    if fast is not None:
        return fast
    return _parse_slow(negative, num, denom, base, exponent, fmt)


def _interpret(text: str, suffix: str) -> tuple[int, int, Format]:
    if suffix in _DECIMAL_SUFFIXES:
        return 10, _DECIMAL_SUFFIXES[suffix], "DecimalSI"
    if suffix in _BINARY_SUFFIXES:
        return 2, _BINARY_SUFFIXES[suffix], "BinarySI"
    m = _EXPONENT.fullmatch(suffix)
    if m is None:
        raise ValueError(
            f"invalid quantity {text!r}: unknown suffix {suffix!r} "
            "(use n, u, m, k, M, G, T, P, E, Ki, Mi, Gi, Ti, Pi, Ei or e<exponent>)"
        )
    exponent = int(m["exp"])
    if abs(exponent) > _MAX_EXPONENT:
        raise ValueError(f"invalid quantity {text!r}: exponent {exponent} out of range")
    return 10, exponent, "DecimalExponent"


def _parse_fast(
    text: str, negative: bool, num: str, denom: str, exponent: int, fmt: Format
) -> _Parsed | None:
    """The parser's int64 path: the only one that keeps the input string."""
    if fmt == "BinarySI":
        if denom:
            return None
        scale, mantissa = 0, 1 << exponent
        precision = 15 - len(num) - exponent * 3 // 10 - 1
    else:
        scale, mantissa = exponent, 1
        precision = _MAX_INT64_DIGITS - len(num) - len(denom)
    scale -= len(denom)
    if precision < 0 or scale < _NANO:
        return None
    shifted = num + denom
    digits = int(shifted)
    result = digits * mantissa
    if result > _MAX_INT64:
        return None
    if negative:
        result = -result
    value = Fraction(result) * Fraction(10) ** scale
    if fmt == "BinarySI":
        keep = digits & 0x07 != 0
    else:
        keep = scale % 3 == 0 and not shifted.endswith("000") and shifted[0] != "0"
    return _Parsed(value, fmt, text if keep else None)


def _parse_slow(
    negative: bool, num: str, denom: str, base: int, exponent: int, fmt: Format
) -> _Parsed:
    amount = Fraction(int(num + denom), 10 ** len(denom)) * Fraction(base) ** exponent
    if amount:
        # round away from zero to nano: "if you want some resources, you get some"
        amount = Fraction(math.ceil(amount * 10**9), 10**9)
    if fmt == "BinarySI" and amount > _MAX_INT64:
        amount = Fraction(_MAX_INT64)
    if fmt == "BinarySI" and 0 < amount < 1:
        fmt = "DecimalSI"
    return _Parsed(-amount if negative else amount, fmt, None)


def _format(value: Fraction, fmt: Format) -> str:
    if value == 0:
        return "0"
    sign = "-" if value < 0 else ""
    magnitude = abs(value)
    if fmt == "BinarySI" and magnitude >= 1024 and magnitude.denominator == 1:
        number, power = _remove_factors(magnitude.numerator, 1024)
        return f"{sign}{number}{_BINARY_BY_POWER.get(power, '')}"
    if fmt == "BinarySI":
        fmt = "DecimalSI"  # below 1024 or fractional: binary would round
    number, exponent = _decimal_mantissa(magnitude)
    if fmt == "DecimalSI" and exponent in _DECIMAL_BY_EXPONENT:
        return f"{sign}{number}{_DECIMAL_BY_EXPONENT[exponent]}"
    # DecimalExponent, or DecimalSI beyond "E" (no suffix exists, so "e21")
    return f"{sign}{number}e{exponent}" if exponent else f"{sign}{number}"


def _decimal_mantissa(magnitude: Fraction) -> tuple[int, int]:
    """``magnitude`` as number * 10**exponent, exponent a multiple of 3, as large as exact."""
    number, exponent = magnitude.numerator, 0
    if magnitude.denominator != 1:
        # parsed values are multiples of 1n, so 10**9 clears any denominator
        number, exponent = int(magnitude * 10**9), _NANO
    number, times = _remove_factors(number, 10)
    exponent += times
    shift = exponent % 3
    return number * 10**shift, exponent - shift


def _remove_factors(number: int, base: int) -> tuple[int, int]:
    times = 0
    while number >= base and number % base == 0:
        number //= base
        times += 1
    return number, times
