"""``troupe_podgroup_oldest_pending_seconds``: the age of the longest-pending pod group,
counted from when the queue first held one of its pods, wherever its entity is."""

from __future__ import annotations

from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry
from troupe.api.clock import FakeClock
from troupe.api.gangs import GangApi, GroupRef
from troupe.queue.entity import QueuedEntity, QueuedGroupInfo
from troupe.scheduler.observe.metrics import SchedulerMetrics

from tests.scheduler.observe.test_recording import FakeCache, queued_pod

NAME = "troupe_podgroup_oldest_pending_seconds"


def group(name: str) -> QueuedGroupInfo:
    return QueuedGroupInfo.of(GroupRef(GangApi.COSCHEDULING, "default", name), now=0.0)


@dataclass
class GroupQueue:
    pools: dict[str, list[QueuedEntity]] = field(default_factory=dict)
    first_seen: dict[str, float] = field(default_factory=dict)

    def pending_counts(self) -> dict[str, int]:
        return {}

    def entity_counts(self) -> dict[tuple[str, str], int]:
        return {}

    def entities(self, queue: str) -> list[QueuedEntity]:
        return self.pools.get(queue, [])

    def in_flight(self) -> list[QueuedEntity]:
        return self.pools.get("in_flight", [])

    def group_first_seen(self, key: str) -> float | None:
        return self.first_seen.get(key)


def test_the_oldest_group_keeps_its_age_wherever_it_is() -> None:
    registry, clock, queue = CollectorRegistry(), FakeClock(start=1000.0), GroupQueue()
    SchedulerMetrics(registry).watch_state(queue, FakeCache(), clock)  # type: ignore[arg-type]
    assert registry.get_sample_value(NAME) == 0, "no group pending"

    old, new = group("old"), group("new")
    queue.first_seen = {old.key: 900.0, new.key: 990.0}
    queue.pools = {"unschedulable": [old], "active": [new, queued_pod("p", set())]}
    assert registry.get_sample_value(NAME) == 100

    clock.advance(30)  # the old gang is retried: in flight, then in backoff
    queue.pools = {"in_flight": [old], "active": [new]}
    assert registry.get_sample_value(NAME) == 130
    queue.pools = {"backoff": [old], "gated": [new]}
    assert registry.get_sample_value(NAME) == 130

    queue.pools = {"gated": [new]}  # the old gang was bound
    assert registry.get_sample_value(NAME) == 40
    queue.pools = {"active": [queued_pod("q", set())]}
    assert registry.get_sample_value(NAME) == 0, "pods alone do not count"
