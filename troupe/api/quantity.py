"""Exact parsing and formatting of Kubernetes resource quantities.

The API server sends quantities (``cpu: 250m``, ``memory: 1.5Gi``) as strings; the
pydantic models in ``troupe.api.objects`` keep them that way. This module is the one
place that turns them into numbers: ``troupe.api.resources`` (pod requests, node
allocatable), PodGroup ``minResources`` and the embedded cluster all call it.

The grammar and rounding follow upstream ``resource.ParseQuantity``
(``k8s.io/apimachinery/pkg/api/resource/quantity.go``):

* optional sign, digits, optional ``.`` and digits (``.5`` and ``5.`` are valid), then
  a suffix: decimal SI (``n u m k M G T P E``), binary SI (``Ki Mi Gi Ti Pi Ei``) or a
  decimal exponent (``e3``, ``E-2``, ``e+6``) within the int32 range;
* the exact value is rounded *up in magnitude* to a whole nano (``1e-12`` is ``1n``),
  because a Quantity cannot hold anything finer;
* binary-suffixed values are capped at ``2**63 - 1`` (upstream ``maxAllowed``).

A parsed value is therefore always a whole number of nano-units, which is how it is
cached and summed (``parse_nanos``): integer arithmetic is exact and fast, and the
single conversion to millicores or base units at the end rounds up like
``Quantity.MilliValue`` / ``Quantity.Value``.

What troupe *stores* is bounded (``MAX_AMOUNT``, docs/reliability.md): upstream's
``Value``/``MilliValue`` silently overflow int64 and their result is then undefined
("must not be used", ``quantity.go``), so there is no upstream behaviour worth
matching above that; troupe refuses a node or pending pod asking for more than
``MAX_AMOUNT`` of anything (``AmountTooLarge``) and counts an assigned pod's larger
request as ``MAX_AMOUNT``. The bound sits well below int64 so that every sum, free
amount and score troupe derives from stored amounts stays inside an int64 column.
"""

from __future__ import annotations

import re
from fractions import Fraction
from functools import lru_cache
from typing import Final

NANOS_PER_UNIT: Final = 10**9
NANOS_PER_MILLI: Final = 10**6

# Upstream caps binary-suffixed quantities here ("9Ei" parses as 2**63 - 1).
_MAX_BINARY: Final = 2**63 - 1
# Upstream rejects exponents outside [-MaxInt32, MaxInt32] rather than truncating them.
_MAX_EXPONENT_SUFFIX: Final = 2**31 - 1
# troupe limits (upstream has none): a value needs fewer than this many digits and a
# decimal scale below this, so that a hostile "1e2000000000" cannot make Python build
# a two-billion-digit integer. Real resources are nowhere near either bound.
_MAX_DIGITS: Final = 1000
_MAX_SCALE: Final = 1000

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
_DECIMAL_BY_EXPONENT: Final = {exp: suffix for suffix, exp in _DECIMAL_SUFFIXES.items()}
_BINARY_BY_POWER: Final = {exp // 10: suffix for suffix, exp in _BINARY_SUFFIXES.items()}

# The same split as upstream's scanner (parseQuantityString): sign, leading zeros,
# integer digits, optional fraction, then suffix letters, an optional sign and digits.
# ASCII digits only, as Go's scanner.
_QUANTITY_RE: Final = re.compile(
    r"([+-]?)(0*)([0-9]*)(?:\.([0-9]*))?([eEinumkKMGTP]*[+-]?[0-9]*)", re.ASCII
)
_EXPONENT_RE: Final = re.compile(r"[+-]?[0-9]+", re.ASCII)

MAX_AMOUNT: Final = 10**16
"""The most troupe stores of one resource on one node or for one pod, in its integer
unit: 10T cores of cpu (in millicores), 10P bytes of memory or storage, 10P devices.
A requested total on a node saturates here too. 512 times below int64's maximum, so a
node's requested plus a pod's request, times 100 for a score, cannot overflow."""

# Upstream's error texts, so a message reads the same as kubectl's.
_ERR_FORMAT: Final = (
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
)
_ERR_SUFFIX: Final = "unable to parse quantity's suffix"
_ERR_NUMERIC: Final = "unable to parse numeric part of quantity"


class QuantityError(ValueError):
    """A string that is not a valid Kubernetes quantity.

    ``field`` names where the value came from when the caller knows it
    (``pod default/p: spec.containers[0].resources.requests[cpu]``).
    """

    def __init__(self, value: str, reason: str, field: str = "") -> None:
        self.value = value
        self.reason = reason
        self.field = field
        prefix = f"{field}: " if field else ""
        super().__init__(f"{prefix}invalid quantity {value!r}: {reason}")


def max_amount_text(resource_name: str) -> str:
    """``MAX_AMOUNT`` of ``resource_name`` as a quantity (``10T`` cores, ``10P`` else)."""
    per_unit = NANOS_PER_MILLI if resource_name == "cpu" else NANOS_PER_UNIT
    return format_quantity(Fraction(MAX_AMOUNT * per_unit, NANOS_PER_UNIT))


class AmountTooLarge(QuantityError):
    """A quantity that parses but is more than troupe stores (``MAX_AMOUNT``)."""

    def __init__(self, value: str, resource_name: str, field: str = "") -> None:
        self.resource_name = resource_name
        reason = f"more than troupe can hold (at most {max_amount_text(resource_name)})"
        super().__init__(value, reason, field)


def _interpret_suffix(suffix: str) -> tuple[int, int] | None:
    """(base, exponent) of a suffix, or None when upstream's suffixer rejects it."""
    exponent = _DECIMAL_SUFFIXES.get(suffix)
    if exponent is not None:
        return 10, exponent
    exponent = _BINARY_SUFFIXES.get(suffix)
    if exponent is not None:
        return 2, exponent
    # "E" alone is exa (handled above); "E3", "e-2", "e+6" are decimal exponents.
    if len(suffix) > 1 and suffix[0] in "eE" and _EXPONENT_RE.fullmatch(suffix[1:]):
        exponent = int(suffix[1:])
        if -_MAX_EXPONENT_SUFFIX <= exponent <= _MAX_EXPONENT_SUFFIX:
            return 10, exponent
    return None


def _ceil_div(numerator: int, denominator: int) -> int:
    return -(-numerator // denominator)


@lru_cache(maxsize=8192)
def parse_nanos(text: str) -> int:
    """The quantity ``text`` in nano-units (``"1m"`` -> 1_000_000), exact.

    Cached on the string: pods repeat the same few quantities, and this runs for every
    pod the cache sees.
    """
    if not text:
        raise QuantityError(text, _ERR_FORMAT)
    match = _QUANTITY_RE.fullmatch(text)
    if match is None:
        raise QuantityError(text, _ERR_FORMAT)
    sign, zeros, num, denom, suffix = match.groups()
    denom = denom or ""
    interpreted = _interpret_suffix(suffix)
    if interpreted is None:
        raise QuantityError(text, _ERR_SUFFIX)
    base, exponent = interpreted

    if not (zeros or num or denom):
        # No digit at all ("-", ".", "Ki") reads as zero on upstream's int64 fast path;
        # only inputs that fall to its inf.Dec slow path fail there, with "no digits".
        # That happens for a decimal scale below nano and for binary suffixes whose
        # estimated precision is negative (Pi, Ei).
        if (base == 10 and exponent < -9) or (base == 2 and exponent >= 50):
            raise QuantityError(text, _ERR_NUMERIC)
        return 0

    digits = num + denom
    if len(digits) > _MAX_DIGITS:
        raise QuantityError(text, f"more than {_MAX_DIGITS} digits")
    mantissa = int(digits) if digits else 0
    if mantissa == 0:
        return 0

    if base == 2:
        # Exact value mantissa * 2**exponent / 10**len(denom), rounded up to a nano.
        nanos = _ceil_div(mantissa * (2**exponent) * NANOS_PER_UNIT, 10 ** len(denom))
        nanos = min(nanos, _MAX_BINARY * NANOS_PER_UNIT)
    else:
        scale = exponent - len(denom)  # value = mantissa * 10**scale
        if scale > _MAX_SCALE:
            raise QuantityError(text, f"exponent above {_MAX_SCALE} is out of range")
        shift = scale + 9
        if shift >= 0:
            nanos = mantissa * 10**shift
        elif -shift > len(digits):
            # Smaller than one nano: upstream rounds any non-zero amount up to 1n.
            nanos = 1
        else:
            nanos = _ceil_div(mantissa, 10**-shift)
    return -nanos if sign == "-" else nanos


def parse_quantity(text: str) -> Fraction:
    """The exact value of the quantity ``text`` (after upstream's rounding to a nano)."""
    return Fraction(parse_nanos(text), NANOS_PER_UNIT)


def to_milli(text: str) -> int:
    """``text`` in thousandths, rounded up (``Quantity.MilliValue``): CPU millicores."""
    return _ceil_div(parse_nanos(text), NANOS_PER_MILLI)


def to_int(text: str) -> int:
    """``text`` in whole units, rounded up (``Quantity.Value``): bytes, pods, GPUs."""
    return _ceil_div(parse_nanos(text), NANOS_PER_UNIT)


def nanos_to_resource_int(resource_name: str, nanos: int) -> int:
    """Convert a nano-unit amount of ``resource_name`` to troupe's integer unit.

    CPU is counted in millicores, everything else in base units, as the scheduler's
    ``framework.Resource`` does (``MilliCPU``, ``Memory``, scalar resources).
    """
    if resource_name == "cpu":
        return _ceil_div(nanos, NANOS_PER_MILLI)
    return _ceil_div(nanos, NANOS_PER_UNIT)


def resource_to_int(resource_name: str, text: str) -> int:
    """The quantity ``text`` of ``resource_name`` as an integer: cpu in millicores,
    memory / ephemeral-storage / hugepages in bytes, pods and extended resources
    (``nvidia.com/gpu``) in units."""
    return nanos_to_resource_int(resource_name, parse_nanos(text))


def format_quantity(value: Fraction | int, binary: bool = False) -> str:
    """A canonical quantity string for ``value`` that parses back to exactly ``value``.

    Decimal SI by default (``1500m``, ``2k``, ``1E``); with ``binary`` an integer of at
    least 1024 uses the largest binary suffix that divides it (``1536Mi``) or no suffix
    (``1025``), like upstream's BinarySI canonical form. Values that cannot be written
    exactly in binary (fractions, or above the binary cap) fall back to decimal.

    Raises ValueError for a value that is not a whole number of nano-units, since no
    quantity string can hold it.
    """
    nanos_fraction = Fraction(value) * NANOS_PER_UNIT
    if nanos_fraction.denominator != 1:
        raise ValueError(f"{value} is not a whole number of nano-units; no quantity holds it")
    nanos = nanos_fraction.numerator
    if nanos == 0:
        return "0"
    sign = "-" if nanos < 0 else ""
    magnitude = abs(nanos)

    if binary and magnitude % NANOS_PER_UNIT == 0:
        units = magnitude // NANOS_PER_UNIT
        if 1024 <= units <= _MAX_BINARY:
            power = 0
            while power < 6 and units % 1024 ** (power + 1) == 0:
                power += 1
            suffix = _BINARY_BY_POWER.get(power, "")
            return f"{sign}{units // 1024**power}{suffix}"

    # Largest exponent of 1000 (from nano up to exa) that keeps the mantissa whole.
    exponent = -9
    while exponent < 18 and magnitude % 10 ** (exponent + 12) == 0:
        exponent += 3
    mantissa = magnitude // 10 ** (exponent + 9)
    return f"{sign}{mantissa}{_DECIMAL_BY_EXPONENT[exponent]}"
