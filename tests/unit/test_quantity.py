"""Kubernetes quantities against apimachinery's own cases: the tables of k8s.io/apimachinery
pkg/api/resource/quantity_test.go (commit eed236ce, 2026-07-23) ported as (input, exact value, format) and
(input, what the API server serialises). ``dec(i, e)`` is the tests' ``decQuantity(i, e, _)``: i x 10^e."""

from __future__ import annotations

from fractions import Fraction

import pytest

from jobs.core.quantity import Format, canonical, format_quantity, parse_quantity, quantity

DSI: Format = "DecimalSI"
BSI: Format = "BinarySI"
DEX: Format = "DecimalExponent"
MAX_INT64 = 2**63 - 1


def dec(i: int | float, exponent: int) -> Fraction:
    return Fraction(i) * Fraction(10) ** exponent


# TestQuantityParse: the table, every row also with a leading "-" and "+".
PARSE: list[tuple[str, Fraction, Format]] = [
    ("0", dec(0, 0), DSI),
    ("0n", dec(0, 0), DSI),
    ("0u", dec(0, 0), DSI),
    ("0m", dec(0, 0), DSI),
    ("0Ki", dec(0, 0), BSI),
    ("0k", dec(0, 0), DSI),
    ("0Mi", dec(0, 0), BSI),
    ("0M", dec(0, 0), DSI),
    ("0Gi", dec(0, 0), BSI),
    ("0G", dec(0, 0), DSI),
    ("0Ti", dec(0, 0), BSI),
    ("0T", dec(0, 0), DSI),
    # Quantity less numbers are allowed
    ("1", dec(1, 0), DSI),
    # Binary suffixes
    ("1Ki", dec(1024, 0), BSI),
    ("8Ki", dec(8 * 1024, 0), BSI),
    ("7Mi", dec(7 * 1024**2, 0), BSI),
    ("6Gi", dec(6 * 1024**3, 0), BSI),
    ("5Ti", dec(5 * 1024**4, 0), BSI),
    ("4Pi", dec(4 * 1024**5, 0), BSI),
    ("3Ei", dec(3 * 1024**6, 0), BSI),
    ("10Ti", dec(10 * 1024**4, 0), BSI),
    ("100Ti", dec(100 * 1024**4, 0), BSI),
    # Decimal suffixes
    ("5n", dec(5, -9), DSI),
    ("4u", dec(4, -6), DSI),
    ("3m", dec(3, -3), DSI),
    ("9", dec(9, 0), DSI),
    ("8k", dec(8, 3), DSI),
    ("50k", dec(5, 4), DSI),
    ("7M", dec(7, 6), DSI),
    ("6G", dec(6, 9), DSI),
    ("5T", dec(5, 12), DSI),
    ("40T", dec(4, 13), DSI),
    ("300T", dec(3, 14), DSI),
    ("2P", dec(2, 15), DSI),
    ("1E", dec(1, 18), DSI),
    # Decimal exponents
    ("1E-3", dec(1, -3), DEX),
    ("1e3", dec(1, 3), DEX),
    ("1E6", dec(1, 6), DEX),
    ("1e9", dec(1, 9), DEX),
    ("1E12", dec(1, 12), DEX),
    ("1e15", dec(1, 15), DEX),
    ("1E18", dec(1, 18), DEX),
    # Nonstandard but still parsable
    ("1e14", dec(1, 14), DEX),
    ("1e13", dec(1, 13), DEX),
    ("100.035k", dec(100035, 0), DSI),
    # Things that look like floating point
    ("0.001", dec(1, -3), DSI),
    ("0.0005k", dec(5, -1), DSI),
    ("0.005", dec(5, -3), DSI),
    ("0.05", dec(5, -2), DSI),
    ("0.5", dec(5, -1), DSI),
    ("0.00050k", dec(5, -1), DSI),
    ("0.00500", dec(5, -3), DSI),
    ("0.05000", dec(5, -2), DSI),
    ("0.50000", dec(5, -1), DSI),
    ("0.5e0", dec(5, -1), DEX),
    ("0.5e-1", dec(5, -2), DEX),
    ("0.5e-2", dec(5, -3), DEX),
    ("10.035M", dec(10035, 3), DSI),
    ("1.2e3", dec(12, 2), DEX),
    ("1.3E+6", dec(13, 5), DEX),
    ("1.40e9", dec(14, 8), DEX),
    ("1.53E12", dec(153, 10), DEX),
    ("1.6e15", dec(16, 14), DEX),
    ("1.7E18", dec(17, 17), DEX),
    ("9.01", dec(901, -2), DSI),
    ("8.1k", dec(81, 2), DSI),
    ("7.123456M", dec(7123456, 0), DSI),
    ("6.987654321G", dec(6987654321, 0), DSI),
    ("5.444T", dec(5444, 9), DSI),
    ("40.1T", dec(401, 11), DSI),
    ("300.2T", dec(3002, 11), DSI),
    ("2.5P", dec(25, 14), DSI),
    ("1.01E", dec(101, 16), DSI),
    # Things that saturate/round
    ("3.001n", dec(4, -9), DSI),
    ("1.1E-9", dec(2, -9), DEX),
    ("0.0000000001", dec(1, -9), DSI),
    ("0.0000000005", dec(1, -9), DSI),
    ("0.00000000050", dec(1, -9), DSI),
    ("0.5e-9", dec(1, -9), DEX),
    ("0.9n", dec(1, -9), DSI),
    ("0.00000012345", dec(124, -9), DSI),
    ("0.00000012354", dec(124, -9), DSI),
    ("9Ei", Fraction(MAX_INT64), BSI),
    ("9223372036854775807Ki", Fraction(MAX_INT64), BSI),
    ("12E", dec(12, 18), DSI),
    # We'll accept fractional binary stuff, too.
    ("100.035Ki", dec(10243584, -2), BSI),
    ("0.5Mi", dec(0.5 * 1024 * 1024, 0), BSI),
    ("0.05Gi", dec(536870912, -1), BSI),
    ("0.025Ti", dec(274877906944, -1), BSI),
    # Things written by trolls
    ("0.000000000001Ki", dec(2, -9), DSI),  # rounds up, changes format
    (".001", dec(1, -3), DSI),
    (".0001k", dec(100, -3), DSI),
    ("1.", dec(1, 0), DSI),
    ("1.G", dec(1, 9), DSI),
]


@pytest.mark.parametrize(("text", "value", "fmt"), PARSE)
@pytest.mark.parametrize("sign", ["", "-", "+"])
def test_apimachinery_parse_table(text: str, value: Fraction, fmt: Format, sign: str) -> None:
    parsed = quantity(sign + text)
    assert (parsed.amount, parsed.format) == (-value if sign == "-" else value, fmt)


# TestQuantityParse's invalid list (trailing whitespace is forbidden), the empty string, TestQuantityParseNonNumeric,
# and suffixes that only look like one: K is not kilo, a lone e is no exponent.
INVALID = ["1.1.M", "1+1.0M", "0.1mi", "0.1am", "aoeu", ".5i", "1i", "-3.01i", "-3.01e-", " 1", "1 ", ""]
INVALID += ["Non-Numeric", "12XB", "1K", "1KiB", "1e", "1e3.5", "1Eii", "1kk", "++1", "1e+-3"]


@pytest.mark.parametrize("text", INVALID)
def test_apimachinery_invalid_quantities(text: str) -> None:
    with pytest.raises(ValueError, match="is not a quantity"):
        parse_quantity(text)


def test_the_scanner_reads_a_lone_point_as_zero() -> None:
    """TestParseQuantityString: ``.`` and ``-.`` are a numerator of 0 with an empty fraction."""
    assert parse_quantity(".") == parse_quantity("-.") == 0


# What the issue measured: a pod's ``cpu: 100u`` in status.used; 1Ei and 2E (exa) taken for exponents.
@pytest.mark.parametrize(
    ("text", "value"),
    [("100u", dec(1, -4)), ("100n", dec(1, -7)), ("1Ei", Fraction(2**60)), ("2E", dec(2, 18)), (7, Fraction(7))],
)
def test_the_quantities_that_crashed_a_cluster(text: str | int, value: Fraction) -> None:
    assert parse_quantity(text) == value


# TestQuantityString: (value, format) -> String(), and the alternate spelling that canonicalises to it.
STRING: list[tuple[Fraction, Format, str, str]] = [
    (dec(1024**3, 0), BSI, "1Gi", "1024Mi"),
    (dec(300 * 1024**2, 0), BSI, "300Mi", "307200Ki"),
    (dec(6 * 1024, 0), BSI, "6Ki", ""),
    (dec(1001 * 1024**3, 0), BSI, "1001Gi", "1025024Mi"),
    (dec(1024**4, 0), BSI, "1Ti", "1024Gi"),
    (dec(5, 0), BSI, "5", "5000m"),
    (dec(500, -3), BSI, "500m", "0.5"),
    (dec(1, 9), DSI, "1G", "1000M"),
    (dec(1000, 6), DSI, "1G", "0.001T"),
    (dec(1000000, 3), DSI, "1G", ""),
    (dec(1000000000, 0), DSI, "1G", ""),
    (dec(1, -3), DSI, "1m", "1000u"),
    (dec(80, -3), DSI, "80m", ""),
    (dec(1080, -3), DSI, "1080m", "1.08"),
    (dec(108, -2), DSI, "1080m", "1080000000n"),
    (dec(10800, -4), DSI, "1080m", ""),
    (dec(300, 6), DSI, "300M", ""),
    (dec(1, 12), DSI, "1T", ""),
    (dec(1234567, 6), DSI, "1234567M", ""),
    (dec(1234567, -3), BSI, "1234567m", ""),
    (dec(3, 3), DSI, "3k", ""),
    (dec(1025, 0), BSI, "1025", ""),
    (dec(0, 0), DSI, "0", ""),
    (dec(0, 0), BSI, "0", ""),
    (dec(1, 9), DEX, "1e9", ".001e12"),
    (dec(1, -3), DEX, "1e-3", "0.001e0"),
    (dec(1, -9), DEX, "1e-9", "1000e-12"),
    (dec(80, -3), DEX, "80e-3", ""),
    (dec(300, 6), DEX, "300e6", ""),
    (dec(1, 12), DEX, "1e12", ""),
    (dec(1, 3), DEX, "1e3", ""),
    (dec(3, 3), DEX, "3e3", ""),
    (dec(0, 0), DEX, "0", "00"),
    (dec(1, -9), DSI, "1n", ""),
    (dec(80, -9), DSI, "80n", ""),
    (dec(1080, -9), DSI, "1080n", ""),
    (dec(108, -8), DSI, "1080n", ""),
    (dec(10800, -10), DSI, "1080n", ""),
    (dec(1, -6), DSI, "1u", ""),
    (dec(80, -6), DSI, "80u", ""),
    (dec(1080, -6), DSI, "1080u", ""),
]


@pytest.mark.parametrize(("value", "fmt", "expect", "alternate"), STRING)
def test_apimachinery_string_table(value: Fraction, fmt: Format, expect: str, alternate: str) -> None:
    assert format_quantity(value, fmt) == expect
    if value:
        assert format_quantity(-value, fmt) == "-" + expect
    parsed = quantity(expect)
    assert (parsed.amount, parsed.kept) == (value, expect)  # a canonical text is kept as it is
    if alternate:
        assert quantity(alternate).kept is None
        assert canonical(alternate) == expect


# TestQuantityParseEmit
@pytest.mark.parametrize(
    ("text", "expect"),
    [
        ("1Ki", "1Ki"),
        ("1Mi", "1Mi"),
        ("1Gi", "1Gi"),
        ("1024Mi", "1Gi"),
        ("1000M", "1G"),
        (".001Ki", "1024m"),
        (".000001Ki", "1024u"),
        (".000000001Ki", "1024n"),
        (".000000000001Ki", "2n"),
    ],
)
def test_apimachinery_parse_emit(text: str, expect: str) -> None:
    assert canonical(text) == expect
    assert canonical("-" + text) == "-" + expect


# TestParseQuantity: the int64 boundaries, as (input, exact value, serialised form when not the input itself).
NINES18, NINES19 = 999999999999999999, 9999999999999999999
EXA, INT64 = 10**18, 2**63
BOUNDARIES: list[tuple[str, Fraction, str]] = [
    ("999999999999999999", Fraction(NINES18), ""),
    ("999999999999999999.0", Fraction(NINES18), "999999999999999999"),
    ("999999999999999999.1", NINES18 + Fraction(1, 10), "999999999999999999100m"),
    ("9999999999999999999", Fraction(NINES19), ""),
    ("1E", Fraction(EXA), ""),
    ("1000000000000000000", Fraction(EXA), "1E"),
    ("9999999999999999999.0", Fraction(NINES19), "9999999999999999999"),
    ("1.0E", Fraction(EXA), "1E"),
    ("1000000000000000000.0", Fraction(EXA), "1E"),
    ("9999999999999999999000m", Fraction(NINES19), "9999999999999999999"),
    ("9999999999999999999.1", NINES19 + Fraction(1, 10), "9999999999999999999100m"),
    ("1.0000000000000000001E", EXA + Fraction(1, 10), "1000000000000000000100m"),
    ("1000000000000000000.1", EXA + Fraction(1, 10), "1000000000000000000100m"),
    ("1.000000000000000001E", Fraction(EXA + 1), "1000000000000000001"),
    ("1000000000000000001", Fraction(EXA + 1), ""),
    ("10E", Fraction(10 * EXA), ""),
    ("10000000000000000000", Fraction(10 * EXA), "10E"),
    ("10.0E", Fraction(10 * EXA), "10E"),
    ("10000000000000000000.0", Fraction(10 * EXA), "10E"),
    ("10000000000000000000000m", Fraction(10 * EXA), "10E"),
    ("10.0000000000000000001E", 10 * EXA + Fraction(1, 10), "10000000000000000000100m"),
    ("10000000000000000000.1", 10 * EXA + Fraction(1, 10), "10000000000000000000100m"),
    ("10.000000000000000001E", Fraction(10 * EXA + 1), "10000000000000000001"),
    ("10000000000000000001", Fraction(10 * EXA + 1), ""),
    ("9223372036854775806", Fraction(INT64 - 2), ""),
    ("9223372036854775806.0", Fraction(INT64 - 2), "9223372036854775806"),
    ("9223372036854775806000m", Fraction(INT64 - 2), "9223372036854775806"),
    ("9223372036854775806.1", INT64 - 2 + Fraction(1, 10), "9223372036854775806100m"),
    ("9223372036854775807", Fraction(INT64 - 1), ""),
    ("9223372036854775807.0", Fraction(INT64 - 1), "9223372036854775807"),
    ("9223372036854775807000m", Fraction(INT64 - 1), "9223372036854775807"),
    ("9223372036854775807.1", INT64 - 1 + Fraction(1, 10), "9223372036854775807100m"),
    ("9223372036854775808", Fraction(INT64), ""),
    ("9223372036854775808.0", Fraction(INT64), "9223372036854775808"),
    ("9223372036854775808000m", Fraction(INT64), "9223372036854775808"),
    ("9223372036854775808.1", INT64 + Fraction(1, 10), "9223372036854775808100m"),
    ("9223372036854775809", Fraction(INT64 + 1), ""),
]


@pytest.mark.parametrize(("text", "value", "serialised"), BOUNDARIES)
@pytest.mark.parametrize("sign", ["", "-"])
def test_apimachinery_int64_boundaries(text: str, value: Fraction, serialised: str, sign: str) -> None:
    assert parse_quantity(sign + text) == (-value if sign else value)
    assert canonical(sign + text) == sign + (serialised or text)


def test_text_the_fast_path_judges_canonical_is_echoed_as_written() -> None:
    """``010`` and ``+1`` come back as sent (the numerator's zeros are stripped before the check); ``0`` is 0."""
    assert (canonical("010"), canonical("+1"), canonical("0"), canonical("-0")) == ("010", "+1", "0", "0")
    assert (canonical("0.5"), canonical("1.5Gi"), canonical("7Ei")) == ("500m", "1536Mi", "7Ei")
