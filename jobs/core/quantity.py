"""Kubernetes resource quantities (``4``, ``500m``, ``100u``, ``256Gi``, ``1e3``, ``2E``) as exact numbers, and the
resource names a namespace quota may limit. The grammar and the values are apimachinery's (``resource.ParseQuantity``
in k8s.io/apimachinery/pkg/api/resource): decimal SI suffixes ``n u m k M G T P E``, binary ``Ki``..``Ei``, decimal
exponents ``e3``/``E-3`` (a bare ``E`` is exa, not an exponent), signs, fractions (``0.5``, ``.5``, ``1.``), amounts
rounded up to whole nano units and binary amounts capped at the largest int64. The API server re-emits quantities in
canonical form (``4000m`` comes back as ``4``, ``1024Mi`` as ``1Gi``), so quantities are compared by value, never as
text."""

from __future__ import annotations

import re
from fractions import Fraction
from functools import lru_cache
from typing import Literal, NamedTuple

Format = Literal["DecimalSI", "BinarySI", "DecimalExponent"]

_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL_SUFFIX = {exponent: suffix for suffix, exponent in _DECIMAL.items()}
_BINARY_SUFFIX = {exponent: suffix for suffix, exponent in _BINARY.items()}
_NANO = Fraction(1, 10**9)
_MAX_INT64 = 2**63 - 1
# ParseQuantity's scanner (parseQuantityString): a sign, digits with at most one point, then suffix letters from this
# set, one optional sign and digits. Which letters make a suffix is decided after the scan (interpret).
_SCAN = re.compile(r"([+-]?)(0*)([0-9]*)(?:\.([0-9]*))?([eEinumkKMGTP]*[+-]?[0-9]*)")
_EXPONENT = re.compile(r"[eE]([+-]?[0-9]+)")
# An exponent beyond this is no resource anyone has; refusing it keeps the exact arithmetic small.
_MAX_EXPONENT = 1000


class Quantity(NamedTuple):
    amount: Fraction  # exact, as the API server holds it (rounded up to nano units)
    format: Format  # the family the API server serialises it in
    kept: str | None  # the input text, where the API server keeps it as its serialised form


def _invalid(text: object) -> ValueError:
    return ValueError(f"{text!r} is not a quantity (e.g. 4, 500m, 256Gi)")


def _suffix(suffix: str) -> tuple[int, int, Format] | None:
    """``(base, exponent, format)`` of a suffix, as apimachinery's suffixer interprets it."""
    if suffix in _DECIMAL:
        return 10, _DECIMAL[suffix], "DecimalSI"
    if suffix in _BINARY:
        return 2, _BINARY[suffix], "BinarySI"
    exponent = _EXPONENT.fullmatch(suffix)
    if exponent is not None and abs(int(exponent[1])) <= _MAX_EXPONENT:
        return 10, int(exponent[1]), "DecimalExponent"
    return None


def _round_up_to_nano(value: Fraction) -> Fraction:
    """A non-zero amount is rounded away from zero to the next nano unit ("you asked for some, you get some")."""
    scaled = value / _NANO
    if scaled.denominator == 1:
        return value
    magnitude = -(-abs(scaled.numerator) // scaled.denominator) * _NANO
    return magnitude if value > 0 else -magnitude


def quantity(value: str | int) -> Quantity:
    """A quantity as the API server parses it; ValueError when it is not one (``12XB``, ``1K``, ``1 ``)."""
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise _invalid(value)
    return _parse(str(value))


@lru_cache(maxsize=4096)  # a cluster's quotas repeat a few texts thousands of times
def _parse(text: str) -> Quantity:
    if text == "0":
        return Quantity(Fraction(0), "DecimalSI", text)
    match = _SCAN.fullmatch(text)
    interpreted = _suffix(match[5]) if match else None
    if match is None or interpreted is None or not text:
        raise _invalid(text)
    sign, num, denom = match[1], match[3] or "0", match[4] or ""
    base, exponent, fmt = interpreted
    digits = int(num + denom)
    amount = Fraction(digits, 10 ** len(denom)) * Fraction(base) ** exponent
    kept = _kept(text, num + denom, len(num), len(denom), base, exponent, digits)
    amount = _round_up_to_nano(amount)
    if fmt == "BinarySI":
        amount = min(amount, Fraction(_MAX_INT64))
        if 0 < amount < 1:
            fmt = "DecimalSI"  # a fraction of a byte prints in decimal, to avoid rounding
    return Quantity(-amount if sign == "-" else amount, fmt, kept)


def _kept(text: str, shifted: str, num: int, denom: int, base: int, exponent: int, digits: int) -> str | None:
    """ParseQuantity's int64 fast path reuses the input text when it judges it canonical (leading zeros and a ``+``
    included: ``010`` is echoed as ``010``); the slow path never does."""
    if base == 2:
        precision = 15 - num - int(exponent * 3 / 10) - 1
        if denom or precision < 0 or digits << exponent > _MAX_INT64:
            return None
        return text if digits & 0x07 else None
    scale = exponent - denom
    if 18 - len(shifted) < 0 or scale < -9:
        return None
    if scale % 3 == 0 and not shifted.endswith("000") and shifted[0] != "0":
        return text
    return None


def parse_quantity(value: str | int) -> Fraction:
    """The exact value of a quantity; ValueError when it is not one."""
    return quantity(value).amount


def canonical(value: str | int) -> str:
    """What the API server serialises for a quantity it was sent: ``4000m`` -> ``4``, ``1024Mi`` -> ``1Gi``."""
    parsed = quantity(value)
    return parsed.kept if parsed.kept is not None else format_quantity(parsed.amount, parsed.format)


def format_quantity(value: Fraction, fmt: Format = "DecimalSI") -> str:
    """``Quantity.String()`` of an amount in a format family (apimachinery's ``CanonicalizeBytes``). Above 999E,
    where apimachinery has no suffix and prints the mantissa alone (a quirk that loses the exponent), this prints the
    value (``1000E``)."""
    value = _round_up_to_nano(value)
    if value == 0:
        return "0"
    sign = "-" if value < 0 else ""
    magnitude = abs(value)
    if fmt == "BinarySI" and (magnitude < 1024 or magnitude.denominator != 1):
        fmt = "DecimalSI"  # small or fractional binary amounts print as DecimalSI, to avoid rounding
    if fmt == "BinarySI":
        mantissa, exponent = int(magnitude), 0
        while mantissa % 1024 == 0:
            mantissa, exponent = mantissa // 1024, exponent + 10
        # No suffix above Ei: apimachinery then prints the number bare.
        return f"{sign}{mantissa}{_BINARY_SUFFIX.get(exponent, '')}"
    mantissa, exponent = int(magnitude / _NANO), -9
    while mantissa % 10 == 0:
        mantissa, exponent = mantissa // 10, exponent + 1
    while exponent % 3 != 0:  # an SI exponent: digits move back into the mantissa
        mantissa, exponent = mantissa * 10, exponent - 1
    if fmt == "DecimalExponent":
        return f"{sign}{mantissa}{f'e{exponent}' if exponent else ''}"
    if exponent > 18:  # no SI suffix above E: the mantissa is printed with its zeros
        mantissa, exponent = mantissa * 10 ** (exponent - 18), 18
    return f"{sign}{mantissa}{_DECIMAL_SUFFIX[exponent]}"


#: Quota keys Kubernetes manages itself: compute and storage resources and object counts.
STANDARD_RESOURCES = frozenset(
    {"cpu", "memory", "ephemeral-storage", "storage", "pods", "services", "configmaps", "secrets"}
    | {"persistentvolumeclaims", "replicationcontrollers", "resourcequotas", "services.loadbalancers"}
    | {"services.nodeports"}
)
#: Extended resources GPU device plugins advertise.
_GPU_RESOURCE = re.compile(r"nvidia\.com/gpu(\.shared)?|nvidia\.com/mig-\d+g\.\d+gb|amd\.com/gpu")
_EXTENDED = re.compile(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")


def is_gpu_resource(name: str) -> bool:
    return _GPU_RESOURCE.fullmatch(name) is not None


def is_extended_resource(name: str) -> bool:
    """A resource advertised by a device plugin (``vendor.example/thing``), not one of Kubernetes' own."""
    return _EXTENDED.fullmatch(name) is not None and not name.startswith(("kubernetes.io/", "requests.", "limits."))


def quota_key(name: str) -> str:
    """The key a ResourceQuota enforces for a resource: extended resources only as ``requests.<name>``."""
    return f"requests.{name}" if is_extended_resource(name) else name
