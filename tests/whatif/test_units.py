"""Amounts in the units a person reads (``troupe.whatif.units``)."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st
from troupe.api.quantity import parse_quantity
from troupe.whatif.fit import fmt_vector
from troupe.whatif.units import amount_text, binary, cores

GI = 1 << 30


@pytest.mark.parametrize(
    ("resource", "amount", "text"),
    [
        ("cpu", 187_900, "187.9 cpu"),
        ("cpu", 250, "0.25 cpu"),
        ("cpu", 1, "0.001 cpu"),
        ("cpu", 32_000, "32 cpu"),
        ("memory", 18944 * GI, "18.5Ti memory"),
        ("memory", 384 * GI, "384Gi memory"),
        ("memory", 640 * GI, "640Gi memory"),
        ("memory", (1 << 40) - 1, "1Ti memory"),
        ("memory", 1023, "1023 memory"),
        ("ephemeral-storage", 3 * GI // 2, "1.5Gi ephemeral-storage"),
        ("nvidia.com/gpu", 64, "64 nvidia.com/gpu"),
    ],
)
def test_amounts_read_as_a_person_writes_them(resource: str, amount: int, text: str) -> None:
    assert amount_text(resource, amount) == text


def test_a_vector_lists_cpu_first_and_leaves_zeros_out() -> None:
    vector = {"nvidia.com/gpu": 8, "memory": 18944 * GI, "cpu": 187_900, "pods": 0}
    assert fmt_vector(vector) == "187.9 cpu, 18.5Ti memory, 8 nvidia.com/gpu"
    assert fmt_vector({"cpu": 0}) == "-"


@given(st.integers(min_value=-(10**15), max_value=10**15))
def test_cores_are_exact(millis: int) -> None:
    assert parse_quantity(cores(millis)) == Fraction(millis, 1000)


@given(st.integers(min_value=1, max_value=1 << 62))
def test_bytes_are_within_a_twentieth_of_a_unit(amount: int) -> None:
    # One decimal of the largest unit reached: off by at most 0.05 of that unit, which
    # is at most 5% of the amount (the unit is never larger than the amount, bar the
    # round-up to 1 of the next unit).
    shown = parse_quantity(binary(amount))
    assert abs(shown - amount) <= Fraction(amount, 20)
