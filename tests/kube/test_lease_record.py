"""Reading a Lease never raises: what does not fit a Lease spec is a record whose
``problem`` names the field; resourceVersions compare as KEP-5504 says."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from troupe.kube.lease_record import LeaderRecord, Lease, is_newer, read_record

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=8,
)
spec_fields = st.sampled_from(
    ["holderIdentity", "leaseDurationSeconds", "acquireTime", "renewTime", "leaseTransitions"]
)


@given(st.dictionaries(spec_fields, json_values) | json_values)
def test_any_spec_reads_as_a_record_or_a_problem_naming_the_field(spec: Any) -> None:
    record = read_record(spec)
    if record.problem:
        assert record.problem.startswith("spec")
        assert record.held_by_another("me") and record.held_by_another("")
    else:
        assert isinstance(record.lease_duration_seconds, int)
        assert -(2**31) <= record.lease_duration_seconds < 2**31


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        (
            {"leaseDurationSeconds": "abc"},
            'spec.leaseDurationSeconds: expected an integer, got "abc"',
        ),
        (
            {"leaseDurationSeconds": 15.0},
            "spec.leaseDurationSeconds: expected an integer, got 15.0",
        ),
        (
            {"leaseDurationSeconds": True},
            "spec.leaseDurationSeconds: expected an integer, got true",
        ),
        (
            {"leaseTransitions": 2**31},
            "spec.leaseTransitions: 2147483648 is out of the int32 range",
        ),
        ({"holderIdentity": ["a"]}, 'spec.holderIdentity: expected a string, got ["a"]'),
        ("abc", "spec: expected an object, got str"),
    ],
    ids=["a string", "a float", "a boolean", "beyond int32", "a list holder", "not an object"],
)
def test_unreadable_fields_are_named(spec: Any, problem: str) -> None:
    assert read_record(spec).problem == problem


def test_absent_fields_read_as_empty_and_a_readable_spec_round_trips() -> None:
    assert read_record(None) == read_record({}) == LeaderRecord()
    record = LeaderRecord("a_1", 15, "2027-01-15T08:00:00.000000Z", "2027-01-15T08:00:02Z", 3)
    assert read_record(record.spec()) == record
    assert not record.held_by_another("a_1") and record.held_by_another("b_1")
    assert not LeaderRecord().held_by_another("a_1"), "a released lease is nobody's"


@given(st.integers(1, 10**30), st.integers(1, 10**30))
def test_resource_versions_compare_as_integers(a: int, b: int) -> None:
    assert is_newer(str(a), str(b)) is (a > b)


@pytest.mark.parametrize(
    ("rv", "than", "newer"),
    [
        ("", "7", True),
        ("7", "", True),
        ("007", "7", True),
        ("abc", "abc", False),
        ("abc", "abd", True),
    ],
    ids=["no version", "nothing seen", "leading zeros", "same opaque", "other opaque"],
)
def test_versions_that_cannot_be_compared_count_as_newer_unless_equal(
    rv: str, than: str, newer: bool
) -> None:
    assert is_newer(rv, than) is newer


def test_the_watch_model_keeps_the_spec_as_sent_and_ignores_bad_labels() -> None:
    lease = Lease.model_validate(
        {
            "metadata": {"name": "l", "namespace": "ns", "resourceVersion": "9", "labels": ["x"]},
            "spec": {"leaseDurationSeconds": "abc"},
        }
    )
    assert lease.as_mapping() == {
        "metadata": {"name": "l", "namespace": "ns", "uid": "", "resourceVersion": "9"},
        "spec": {"leaseDurationSeconds": "abc"},
    }
