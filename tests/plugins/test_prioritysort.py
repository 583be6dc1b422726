"""PrioritySort: priority first, then queue time, then key (KEP-3370 QueueSort)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st
from troupe.plugins.prioritysort import PrioritySort

from tests.plugins.fakes import FakeHandle


@dataclass(frozen=True)
class Entity:
    key: str
    priority: int
    timestamp: float


SORT = PrioritySort(None, FakeHandle())


@pytest.mark.parametrize(
    ("a", "b", "a_first"),
    [
        pytest.param(
            Entity("a", 10, 5.0), Entity("b", 1, 1.0), True, id="higher priority goes first"
        ),
        pytest.param(
            Entity("a", 1, 1.0), Entity("b", 1, 2.0), True, id="equal priority: earlier first"
        ),
        pytest.param(
            Entity("b", 1, 1.0), Entity("a", 1, 1.0), False, id="then the smaller key first"
        ),
        pytest.param(
            Entity("a", 1, 1.0), Entity("a", 1, 1.0), False, id="an entity is not before itself"
        ),
    ],
)
def test_less(a: Entity, b: Entity, a_first: bool) -> None:
    assert SORT.less(a, b) is a_first


entity_st = st.builds(
    Entity, st.sampled_from("abcd"), st.integers(-2, 2), st.sampled_from([0.0, 1.0])
)


@given(st.lists(entity_st, min_size=1, max_size=8))
def test_the_order_is_total_and_agrees_with_a_sort_key(entities: list[Entity]) -> None:
    for a in entities:
        for b in entities:
            expected = (-a.priority, a.timestamp, a.key) < (-b.priority, b.timestamp, b.key)
            assert SORT.less(a, b) is expected
            assert (SORT.sort_key(a) < SORT.sort_key(b)) is expected
