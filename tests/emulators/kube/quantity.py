"""Kubernetes resource quantities (``500m``, ``1Gi``, ``2``, ``1e3``): parse exactly, add, compare, and serialise
as apimachinery's ``resource.Quantity`` does (k8s.io/apimachinery/pkg/api/resource: ``ParseQuantity``,
``CanonicalizeBytes``, ``AsCanonicalBytes``, ``AsCanonicalBase1024Bytes``)."""

from __future__ import annotations

import re
from fractions import Fraction

# The regular expression the real server quotes when a quantity does not parse.
QUANTITY_RE = r"^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"
_PATTERN = re.compile(r"^([+-]?)([0-9]*)(?:\.([0-9]*))?(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][-+]?[0-9]+)?$")

#: The three ``resource.Format`` families; the canonical form keeps the family of the parsed input.
DECIMAL_SI = "DecimalSI"
BINARY_SI = "BinarySI"
DECIMAL_EXPONENT = "DecimalExponent"

_BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_DECIMAL_SUFFIX = {exponent: suffix for suffix, exponent in _DECIMAL.items()}
_BINARY_SUFFIX = {exponent: suffix for suffix, exponent in _BINARY.items()}
_NANO = Fraction(1, 10**9)
#: ParseQuantity caps BinarySI amounts at the largest int64.
_MAX_BINARY = Fraction(2**63 - 1)


class QuantityError(ValueError):
    pass


def _error() -> QuantityError:
    return QuantityError(f"quantities must match the regular expression '{QUANTITY_RE}'")


def _text(value: object) -> str:
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise _error()
    # UnmarshalJSON trims whitespace; a JSON number arrives as its own text.
    return str(value) if not isinstance(value, str) else value.strip()


def _round_up_to_nano(value: Fraction) -> Fraction:
    """ParseQuantity rounds a non-zero amount away from zero to the next nano unit ("you asked for some")."""
    if (value / _NANO).denominator == 1:
        return value
    scaled = abs(value) / _NANO
    magnitude = Fraction(-(-scaled.numerator // scaled.denominator)) * _NANO
    return magnitude if value > 0 else -magnitude


def parse_quantity(value: object) -> tuple[Fraction, str, str | None]:
    """``(amount, format, kept)``: the exact amount, its format family, and the input text when ParseQuantity keeps
    it as the serialised form (it does so only for text that is already canonical, by its fast-path rules)."""
    text = _text(value)
    if text == "0":
        return Fraction(0), DECIMAL_SI, "0"
    match = _PATTERN.match(text)
    if not match or not (match.group(2) or match.group(3)):
        raise _error()
    sign, num, denom, suffix = match.group(1), match.group(2), match.group(3) or "", match.group(4) or ""
    digits = Fraction(int(num + denom or "0"), 10 ** len(denom))
    if suffix in _BINARY:
        fmt, amount = BINARY_SI, digits * 2 ** _BINARY[suffix]
    elif suffix in _DECIMAL:
        fmt, amount = DECIMAL_SI, digits * Fraction(10) ** _DECIMAL[suffix]
    else:
        fmt, amount = DECIMAL_EXPONENT, digits * Fraction(10) ** int(suffix[1:])
    kept = _kept_text(text, num, denom, suffix, fmt)
    amount = _round_up_to_nano(amount)
    if fmt == BINARY_SI:
        amount = min(amount, _MAX_BINARY)
        if 0 < amount < 1:
            fmt = DECIMAL_SI
    return (-amount if sign == "-" else amount), fmt, kept


def _kept_text(text: str, num: str, denom: str, suffix: str, fmt: str) -> str | None:
    """ParseQuantity's int64 fast path reuses the input string when it judges it canonical. Its numerator has the
    leading zeros stripped, so ``010`` (and ``+1``) are kept as written, as the real server echoes them."""
    num = num.lstrip("0") or "0"
    shifted = num + denom
    if fmt == BINARY_SI:
        # Only whole binary amounts take the fast path; a mantissa not divisible by 8 is kept as written.
        if denom or not shifted or 15 - len(num) - int(_BINARY[suffix] * 3 / 10) - 1 < 0:
            return None
        return text if int(shifted) & 0x07 != 0 else None
    if 18 - len(shifted) < 0:
        return None  # too many digits for int64: the slow path never keeps the text
    exponent = _DECIMAL[suffix] if fmt == DECIMAL_SI else int(suffix[1:])
    scale = exponent - len(denom)
    if scale < -9 or not shifted:
        return None
    if scale % 3 == 0 and not shifted.endswith("000") and shifted[0] != "0":
        return text
    return None


def parse(value: object) -> Fraction:
    """Exact value of a quantity given as a JSON string or number (rounded up to nano units, as the server does)."""
    return parse_quantity(value)[0]


def format_of(value: object) -> str:
    """The format family a quantity was written in (DecimalSI for anything that does not parse)."""
    try:
        return parse_quantity(value)[1]
    except QuantityError:
        return DECIMAL_SI


def canonical(value: object) -> str:
    """What the real server serialises for a quantity it was sent: ``4000m`` -> ``4``, ``1024Mi`` -> ``1Gi``."""
    amount, fmt, kept = parse_quantity(value)
    return kept if kept is not None else format_quantity(amount, fmt)


def format_quantity(value: Fraction, fmt: str = DECIMAL_SI) -> str:
    """``Quantity.String()`` of an amount in a format family (``CanonicalizeBytes``)."""
    value = _round_up_to_nano(value)
    if value == 0:
        return "0"
    sign = "-" if value < 0 else ""
    magnitude = abs(value)
    if fmt == BINARY_SI and (magnitude < 1024 or magnitude.denominator != 1):
        fmt = DECIMAL_SI  # small or fractional binary amounts print as DecimalSI, to avoid rounding
    if fmt == BINARY_SI:
        mantissa, exponent = int(magnitude), 0
        while mantissa % 1024 == 0:
            mantissa, exponent = mantissa // 1024, exponent + 10
        # No suffix above Ei: constructBytes fails and the number is printed bare, as apimachinery does.
        return f"{sign}{mantissa}{_BINARY_SUFFIX.get(exponent, '')}"
    mantissa, exponent = int(magnitude / _NANO), -9
    while mantissa % 10 == 0:
        mantissa, exponent = mantissa // 10, exponent + 1
    while exponent % 3 != 0:  # an SI exponent: move digits back into the mantissa
        mantissa, exponent = mantissa * 10, exponent - 1
    if fmt == DECIMAL_EXPONENT:
        return f"{sign}{mantissa}{f'e{exponent}' if exponent else ''}"
    # Above E there is no SI suffix; apimachinery then prints the mantissa bare (a known quirk), and so do we.
    return f"{sign}{mantissa}{_DECIMAL_SUFFIX.get(exponent, '')}"


def add_format(current: str | None, amount: Fraction, fmt: str) -> str | None:
    """``Quantity.Add`` onto a zero quantity takes the other operand's format; later additions keep it."""
    if current is None and amount != 0:
        return fmt
    return current
