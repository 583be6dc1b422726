"""Coscheduling's QueueSort: priority, then group creation time against a pod's
time, then key (upstream's sort key)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from troupe.api.clock import FakeClock
from troupe.api.framework import Sortable
from troupe.api.gangs import POD_GROUP_LABEL, GangPolicy
from troupe.api.podinfo import PodInfo
from troupe.plugins.coscheduling import (
    Coscheduling,
)
from troupe.queue.entity import QueuedPodInfo

from tests.plugins.coscheduling_doubles import (
    OTHER,
    PG,
    Directory,
    gang,
    loner,
    member,
    plugin_for,
)

# --- QueueSort -----------------------------------------------------------------------

CLOCK = FakeClock()  # the handle's clock: monotonic 1000.0 is wall 1.8e9
WALL_AT_1000 = CLOCK.wall()


def queued(info: PodInfo, at: float, priority: int = 0) -> QueuedPodInfo:
    entity = QueuedPodInfo.of(info, at)
    entity.priority = priority
    return entity


def sorter(policies: dict[str, GangPolicy]) -> Coscheduling:
    return plugin_for(Directory(policies))[0]


SORT_POLICIES = {
    PG: gang(2, created=WALL_AT_1000 - 100),  # created long before anyone queued
    OTHER: gang(2, created=WALL_AT_1000 + 50),
}


@pytest.mark.parametrize(
    ("a", "b", "a_first"),
    [
        pytest.param(
            queued(loner("a"), 900.0, priority=10),
            queued(member("b"), 800.0),
            True,
            id="higher priority first, whatever the group's age",
        ),
        pytest.param(
            queued(member("z"), 990.0),
            queued(loner("a"), 950.0),
            True,
            id="a member of an older group goes before an earlier queued pod",
        ),
        pytest.param(
            queued(loner("a"), 1020.0),
            queued(member("b", group="other"), 1000.0),
            True,
            id="a pod queued before a group was created goes first",
        ),
        pytest.param(
            queued(member("b"), 950.0),
            queued(member("a"), 990.0),
            False,
            id="members of one group go by pod key, not by queueing time",
        ),
        pytest.param(
            queued(member("a", group="unknown"), 960.0),
            queued(loner("b"), 950.0),
            False,
            id="a member of a group that does not exist goes by its own queueing time",
        ),
        pytest.param(
            queued(loner("a"), 950.0), queued(loner("a"), 950.0), False, id="no pod before itself"
        ),
    ],
)
def test_less(a: QueuedPodInfo, b: QueuedPodInfo, a_first: bool) -> None:
    assert sorter(SORT_POLICIES).less(a, b) is a_first


entities = st.builds(
    queued,
    st.sampled_from(
        [
            loner("a"),
            loner("b"),
            member("c"),
            member("d"),
            member("e", group="other"),
            member("f", group="unknown"),
        ]
    ),
    st.sampled_from([850.0, 900.0, 1050.0]),
    st.integers(0, 1),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(entities, min_size=1, max_size=6))
def test_the_order_is_upstreams_sort_key(items: list[QueuedPodInfo]) -> None:
    plugin = sorter(SORT_POLICIES)

    def sort_key(e: QueuedPodInfo) -> tuple[int, float, str]:
        group = e.pod.metadata.labels.get(POD_GROUP_LABEL)
        policy = SORT_POLICIES.get(f"default/{group}")
        since = policy.created if policy else e.timestamp - 1000.0 + WALL_AT_1000
        return (-e.priority, since, e.key)

    for a in items:
        for b in items:
            assert plugin.less(a, b) is (sort_key(a) < sort_key(b))


def test_a_sortable_that_is_not_a_pod_goes_by_its_own_time() -> None:
    @dataclass(frozen=True)
    class Entity:
        key: str
        priority: int
        timestamp: float

    plugin = sorter(SORT_POLICIES)
    early: Sortable = Entity("z", 0, 900.0)
    assert plugin.less(early, queued(loner("a"), 950.0))
