"""Kubernetes resource quantities (``500m``, ``1Gi``, ``2``, ``1e3``): parse exactly, add, compare, format."""

from __future__ import annotations

import re
from fractions import Fraction

# The regular expression the real server quotes when a quantity does not parse.
QUANTITY_RE = r"^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"
_PATTERN = re.compile(
    r"^([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][-+]?[0-9]+)?$"
)

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}


class QuantityError(ValueError):
    pass


def parse(value: object) -> Fraction:
    """Exact value of a quantity given as a JSON string or number."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise QuantityError(f"quantities must match the regular expression '{QUANTITY_RE}'")
    text = str(value) if not isinstance(value, str) else value.strip()
    match = _PATTERN.match(text)
    if not match:
        raise QuantityError(f"quantities must match the regular expression '{QUANTITY_RE}'")
    number, suffix = Fraction(match.group(1)), match.group(2) or ""
    if suffix in _BINARY:
        return number * _BINARY[suffix]
    if suffix in _DECIMAL:
        return number * _DECIMAL[suffix]
    return number * Fraction(10) ** int(suffix[1:])


def is_binary(value: object) -> bool:
    return isinstance(value, str) and value.strip()[-2:] in _BINARY


def format_quantity(value: Fraction, binary: bool = False) -> str:
    """Canonical-ish form: the largest suffix that keeps an integer mantissa (``1Gi``, ``1500m``, ``3``)."""
    if value == 0:
        return "0"
    sign = "-" if value < 0 else ""
    magnitude = abs(value)
    if magnitude.denominator == 1:
        if binary:
            for suffix, binary_factor in reversed(list(_BINARY.items())):
                if magnitude % binary_factor == 0:
                    return f"{sign}{magnitude // binary_factor}{suffix}"
        for suffix in ("E", "P", "T", "G", "M", "k"):
            if magnitude % _DECIMAL[suffix] == 0:
                return f"{sign}{magnitude // _DECIMAL[suffix]}{suffix}"
        return f"{sign}{magnitude}"
    for suffix in ("m", "u", "n"):
        scaled = magnitude / _DECIMAL[suffix]
        if scaled.denominator == 1:
            return f"{sign}{scaled}{suffix}"
    # Kubernetes rounds sub-nano amounts up to the next nano unit.
    return f"{sign}{-(-magnitude.numerator * 10**9 // magnitude.denominator)}n"
