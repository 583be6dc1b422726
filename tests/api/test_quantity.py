"""Quantity parsing matches upstream resource.ParseQuantity, formatting round-trips."""

from __future__ import annotations

import json
import math
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError
from troupe.api.objects import PodSpec
from troupe.api.quantity import (
    QuantityError,
    format_quantity,
    parse_nanos,
    parse_quantity,
    resource_to_int,
    to_int,
    to_milli,
)

NANO = Fraction(1, 10**9)
GI = 2**30
MAX_BINARY = 2**63 - 1

PARSES = [
    pytest.param("1", Fraction(1), id="a bare integer is whole units"),
    pytest.param("0", Fraction(0), id="zero is zero"),
    pytest.param("100m", Fraction(1, 10), id="m is thousandths"),
    pytest.param("5n", 5 * NANO, id="n is billionths"),
    pytest.param("4u", Fraction(4, 10**6), id="u is millionths"),
    pytest.param("8k", Fraction(8000), id="k is thousands"),
    pytest.param("7M", Fraction(7 * 10**6), id="M is millions"),
    pytest.param("6G", Fraction(6 * 10**9), id="G is billions"),
    pytest.param("5T", Fraction(5 * 10**12), id="T is 10^12"),
    pytest.param("2P", Fraction(2 * 10**15), id="P is 10^15"),
    pytest.param("1E", Fraction(10**18), id="E alone is exa"),
    pytest.param("1Ki", Fraction(1024), id="Ki is 2^10"),
    pytest.param("7Mi", Fraction(7 * 2**20), id="Mi is 2^20"),
    pytest.param("1.5Gi", Fraction(3 * 2**29), id="a fraction of Gi is exact"),
    pytest.param("5Ti", Fraction(5 * 2**40), id="Ti is 2^40"),
    pytest.param("4Pi", Fraction(4 * 2**50), id="Pi is 2^50"),
    pytest.param("3Ei", Fraction(3 * 2**60), id="Ei is 2^60"),
    pytest.param("100.035Ki", Fraction(10243584, 100), id="fractional binary is exact"),
    pytest.param("1e3", Fraction(1000), id="e3 is a decimal exponent"),
    pytest.param("12E-2", Fraction(12, 100), id="E followed by digits is an exponent"),
    pytest.param("1.3E+6", Fraction(1_300_000), id="an exponent may carry a plus sign"),
    pytest.param("0.5e-2", Fraction(5, 1000), id="a fraction with a negative exponent"),
    pytest.param(".5", Fraction(1, 2), id="a leading dot is allowed"),
    pytest.param("5.", Fraction(5), id="a trailing dot is allowed"),
    pytest.param("1.G", Fraction(10**9), id="a trailing dot before a suffix is allowed"),
    pytest.param("007", Fraction(7), id="leading zeros are ignored"),
    pytest.param("+5", Fraction(5), id="an explicit plus sign is allowed"),
    pytest.param("-1.5", Fraction(-3, 2), id="negative values parse"),
    pytest.param("0.0000000001", NANO, id="below one nano rounds up to one nano"),
    pytest.param("3.001n", 4 * NANO, id="a fraction of a nano rounds up"),
    pytest.param("1.1E-9", 2 * NANO, id="an exponent below nano rounds up"),
    pytest.param("0.000000000001Ki", 2 * NANO, id="a tiny binary value rounds up to 2n"),
    pytest.param("-0.1n", -NANO, id="negative sub-nano values round away from zero"),
    pytest.param("1e-2147483647", NANO, id="the smallest exponent still rounds up to 1n"),
    pytest.param("0e2147483647", Fraction(0), id="zero with the largest exponent is zero"),
    pytest.param("9Ei", Fraction(MAX_BINARY), id="binary values are capped at 2^63-1"),
    pytest.param("9223372036854775807Ki", Fraction(MAX_BINARY), id="a huge Ki is capped"),
    pytest.param(
        "9223372036854775808", Fraction(2**63), id="decimal values are not capped like binary"
    ),
    pytest.param("-", Fraction(0), id="a bare sign reads as zero like upstream"),
    pytest.param(".", Fraction(0), id="a bare dot reads as zero like upstream"),
    pytest.param("Ki", Fraction(0), id="a bare Ki reads as zero like upstream"),
]


@pytest.mark.parametrize(("text", "expected"), PARSES)
def test_parse_quantity(text: str, expected: Fraction) -> None:
    assert parse_quantity(text) == expected


INVALID = [
    pytest.param("", id="an empty string is rejected"),
    pytest.param(" 1", id="leading whitespace is rejected"),
    pytest.param("1 ", id="trailing whitespace is rejected"),
    pytest.param("1\n", id="a trailing newline is rejected"),
    pytest.param("12x", id="an unknown suffix letter is rejected"),
    pytest.param("1K", id="capital K is not a suffix"),
    pytest.param("0.1mi", id="mi is not a suffix"),
    pytest.param("1i", id="i alone is not a suffix"),
    pytest.param(".5i", id="i after a fraction is not a suffix"),
    pytest.param("5e", id="e without digits is not an exponent"),
    pytest.param("-3.01e-", id="e with only a sign is not an exponent"),
    pytest.param("1.1.M", id="two dots are rejected"),
    pytest.param("1+1.0M", id="a sign in the middle is rejected"),
    pytest.param("--1", id="two minus signs are rejected"),
    pytest.param("+-1", id="two different signs are rejected"),
    pytest.param("1e2147483648", id="an exponent past int32 is rejected"),
    pytest.param("1e4294967297", id="an exponent past int32 is not truncated"),
    pytest.param("Pi", id="a bare Pi fails upstream's slow path"),
    pytest.param("e-10", id="a bare sub-nano exponent fails upstream's slow path"),
    pytest.param("1e2000", id="an exponent past troupe's range is rejected"),
    pytest.param("1" * 1001, id="more than a thousand digits are rejected"),
    pytest.param("١", id="non-ASCII digits are rejected"),
]


@pytest.mark.parametrize("text", INVALID)
def test_invalid_quantity_is_rejected_naming_the_value(text: str) -> None:
    with pytest.raises(QuantityError) as caught:
        parse_quantity(text)
    assert f"invalid quantity {text!r}" in str(caught.value)
    assert caught.value.value == text


@pytest.mark.parametrize(
    ("text", "millis"),
    [
        pytest.param("100m", 100, id="100m is 100 millicores"),
        pytest.param("0.1", 100, id="0.1 is 100 millicores"),
        pytest.param("1", 1000, id="1 is 1000 millicores"),
        pytest.param("1n", 1, id="1n rounds up to one millicore"),
        pytest.param("1.0005", 1001, id="half a millicore rounds up"),
        pytest.param("2e-3", 2, id="an exponent gives exact millicores"),
    ],
)
def test_to_milli_rounds_up(text: str, millis: int) -> None:
    assert to_milli(text) == millis


@pytest.mark.parametrize(
    ("text", "units"),
    [
        pytest.param("1.5Gi", 3 * 2**29, id="1.5Gi is bytes"),
        pytest.param("1k", 1000, id="1k is a thousand"),
        pytest.param("0.5", 1, id="half a unit rounds up"),
        pytest.param("1n", 1, id="one nano rounds up to one unit"),
        pytest.param("-0.5", 0, id="negative halves round up towards zero"),
    ],
)
def test_to_int_rounds_up(text: str, units: int) -> None:
    assert to_int(text) == units


@pytest.mark.parametrize(
    ("resource", "text", "expected"),
    [
        pytest.param("cpu", "500m", 500, id="cpu is counted in millicores"),
        pytest.param("memory", "1Gi", GI, id="memory is counted in bytes"),
        pytest.param("pods", "110", 110, id="pods are counted in units"),
        pytest.param("nvidia.com/gpu", "2", 2, id="extended resources are counted in units"),
        pytest.param("ephemeral-storage", "10G", 10**10, id="ephemeral storage is bytes"),
        pytest.param("hugepages-2Mi", "4Mi", 4 * 2**20, id="hugepages are bytes"),
    ],
)
def test_resource_to_int(resource: str, text: str, expected: int) -> None:
    assert resource_to_int(resource, text) == expected


@pytest.mark.parametrize(
    ("value", "binary", "text"),
    [
        pytest.param(Fraction(0), False, "0", id="zero is 0"),
        pytest.param(Fraction(3, 2), False, "1500m", id="one and a half is 1500m"),
        pytest.param(Fraction(2000), False, "2k", id="two thousand is 2k"),
        pytest.param(Fraction(10**21), False, "1000E", id="beyond exa stays in E"),
        pytest.param(-NANO, False, "-1n", id="minus one nano is -1n"),
        pytest.param(Fraction(GI), True, "1Gi", id="a gibibyte is 1Gi"),
        pytest.param(Fraction(1536 * 2**20), True, "1536Mi", id="largest dividing suffix"),
        pytest.param(Fraction(1025), True, "1025", id="binary without a dividing suffix"),
        pytest.param(Fraction(1000), True, "1k", id="binary below 1024 is decimal"),
        pytest.param(Fraction(1, 2), True, "500m", id="binary fractions are decimal"),
        pytest.param(
            Fraction(2**63), True, "9223372036854775808", id="binary above the cap is decimal"
        ),
    ],
)
def test_format_quantity(value: Fraction, binary: bool, text: str) -> None:
    assert format_quantity(value, binary) == text
    assert parse_quantity(text) == value


def test_format_quantity_refuses_values_finer_than_a_nano() -> None:
    with pytest.raises(ValueError, match="nano"):
        format_quantity(Fraction(1, 3))


def test_repeated_quantities_are_served_from_the_cache() -> None:
    parse_nanos.cache_clear()
    to_milli("123m")
    resource_to_int("cpu", "123m")
    assert parse_nanos.cache_info().hits == 1


# --- properties ----------------------------------------------------------------------

_DIGITS = "0123456789"
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}


@st.composite
def _number_parts(draw: st.DrawFn) -> tuple[str, Fraction]:
    """An unsigned number with at least one digit, and its exact value."""
    whole = draw(st.text(_DIGITS, max_size=12))
    dot = draw(st.booleans())
    fraction = draw(st.text(_DIGITS, min_size=0 if whole else 1, max_size=12)) if dot else ""
    if not whole and not fraction:
        whole = "0"
    value = Fraction(int(whole or "0")) + Fraction(int(fraction or "0"), 10 ** len(fraction))
    return whole + ("." if dot else "") + fraction, value


@st.composite
def _suffixes(draw: st.DrawFn) -> tuple[str, Fraction, bool]:
    """A suffix, the factor it multiplies by, and whether it is binary."""
    kind = draw(st.sampled_from(["decimal", "binary", "exponent"]))
    if kind == "decimal":
        suffix = draw(st.sampled_from(sorted(_DECIMAL)))
        return suffix, Fraction(10) ** _DECIMAL[suffix], False
    if kind == "binary":
        suffix = draw(st.sampled_from(sorted(_BINARY)))
        return suffix, Fraction(2) ** _BINARY[suffix], True
    letter = draw(st.sampled_from("eE"))
    sign = draw(st.sampled_from(["", "+", "-"]))
    exponent = draw(st.integers(0, 25))
    factor = Fraction(10) ** (-exponent if sign == "-" else exponent)
    return f"{letter}{sign}{exponent}", factor, False


@st.composite
def valid_quantities(draw: st.DrawFn) -> tuple[str, Fraction]:
    """A valid quantity string and the value upstream gives it, computed independently."""
    sign = draw(st.sampled_from(["", "+", "-"]))
    number, magnitude = draw(_number_parts())
    suffix, factor, binary = draw(_suffixes())
    exact_nanos = magnitude * factor * 10**9
    nanos = math.ceil(exact_nanos)  # upstream rounds up to a whole nano
    if binary:
        nanos = min(nanos, MAX_BINARY * 10**9)
    value = Fraction(-nanos if sign == "-" else nanos, 10**9)
    return sign + number + suffix, value


@settings(max_examples=200)
@given(valid_quantities())
def test_generated_quantities_parse_to_their_value(case: tuple[str, Fraction]) -> None:
    text, value = case
    assert parse_quantity(text) == value


@settings(max_examples=200)
@given(valid_quantities())
def test_to_milli_and_to_int_are_ceilings(case: tuple[str, Fraction]) -> None:
    text, value = case
    assert to_milli(text) == math.ceil(value * 1000)
    assert to_int(text) == math.ceil(value)


@settings(max_examples=200)
@given(
    st.one_of(
        st.integers(-(10**30), 10**30),
        st.builds(
            lambda m, p: m * 1024**p * 10**9,
            st.integers(-(10**6), 10**6),
            st.integers(0, 6),
        ),
    ),
    st.booleans(),
)
def test_format_then_parse_is_identity(nanos: int, binary: bool) -> None:
    value = Fraction(nanos, 10**9)
    assert parse_quantity(format_quantity(value, binary)) == value


@st.composite
def invalid_quantities(draw: st.DrawFn) -> str:
    """A valid number spoiled in one of the ways upstream's scanner rejects."""
    number, _ = draw(_number_parts())
    suffix, _, _ = draw(_suffixes())
    spoil = draw(st.sampled_from(["space before", "space after", "junk", "signs", "suffix"]))
    if spoil == "space before":
        return " " + number + suffix
    if spoil == "space after":
        return number + suffix + draw(st.sampled_from([" ", "\t", "\n"]))
    if spoil == "junk":
        return number + suffix + draw(st.sampled_from(list("xyz#/_,;")))
    if spoil == "signs":
        return draw(st.sampled_from(["++", "+-", "-+", "--"])) + number + suffix
    return number + draw(st.sampled_from(["K", "mi", "Kb", "i", "ki", "KI", "e", "E+", "b"]))


@settings(max_examples=200)
@given(invalid_quantities())
def test_invalid_quantities_raise_naming_the_value(text: str) -> None:
    with pytest.raises(QuantityError, match="invalid quantity") as caught:
        parse_quantity(text)
    assert repr(text) in str(caught.value)


@pytest.mark.parametrize(
    ("written", "nanos"),
    [
        pytest.param("2", 2 * 10**9, id="an integer"),
        pytest.param("0.5", 5 * 10**8, id="a fraction"),
        pytest.param("1e3", 1000 * 10**9, id="an exponent"),
        pytest.param("1000.0", 1000 * 10**9, id="a float with a zero fraction"),
    ],
)
def test_a_request_written_as_a_bare_number_is_the_same_quantity_from_json_or_python(
    written: str, nanos: int
) -> None:
    text = '{"containers": [{"resources": {"requests": {"cpu": ' + written + "}}}]}"
    for spec in (PodSpec.model_validate_json(text), PodSpec.model_validate(json.loads(text))):
        assert parse_nanos(spec.containers[0].resources.requests["cpu"]) == nanos


def test_a_boolean_is_not_a_quantity() -> None:
    with pytest.raises(ValidationError):
        PodSpec.model_validate_json('{"containers": [{"resources": {"requests": {"cpu": true}}}]}')
