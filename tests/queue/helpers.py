"""Shared set-up for the queue tests: a queue on a FakeClock that records arrivals."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from troupe.api.clock import FakeClock
from troupe.api.events import Action, ClusterEvent, ClusterEventWithHint, QueueingHintFn, Resource
from troupe.api.gangs import (
    POD_GROUP_LABEL,
    GangApi,
    GangPolicy,
    GroupKey,
    GroupProblem,
    GroupRef,
    group_ref_of,
)
from troupe.api.objects import Pod
from troupe.api.status import Status
from troupe.queue import (
    QueuedEntity,
    QueuedGroupInfo,
    SchedulingQueue,
    priority_sort_key,
    priority_sort_less,
)
from troupe.queue.sub_queues import QueueName

from tests.plugins.builders import make_pod

GATES = "SchedulingGates"
FIT = "NodeResourcesFit"
AFFINITY = "InterPodAffinity"
GANG = "Coscheduling"

POD_GROUP_ADD = ClusterEvent(Resource.POD_GROUP, Action.ADD, "PodGroupAdd")


def scheduling_gates(pod: Pod) -> Status:
    """PreEnqueue of the SchedulingGates plugin: gated while any gate is left."""
    if pod.spec.scheduling_gates:
        return Status.unschedulable("waiting for scheduling gates", plugin=GATES)
    return Status()


def pod(name: str, priority: int = 0) -> Pod:
    return make_pod().name(name).priority(priority).obj()


def member(name: str, group: str, priority: int = 0, *gates: str) -> Pod:
    """A pod of the scheduler-plugins PodGroup ``group`` (label), optionally gated."""
    builder = make_pod().name(name).priority(priority).label(POD_GROUP_LABEL, group)
    if gates:
        builder.scheduling_gates(*gates)
    return builder.obj()


def ref(group: str) -> GroupRef:
    return GroupRef(GangApi.COSCHEDULING, "default", group)


def gang(min_count: int, *, priority: int | None = None, created: float = 0.0) -> GangPolicy:
    return GangPolicy(gang=True, min_count=min_count, priority=priority, created=created)


BASIC = GangPolicy(gang=False, min_count=0)


@dataclass
class FakeGroups:
    """A ``GroupDirectory`` the test edits directly."""

    policies: dict[GroupKey, GangPolicy] = field(default_factory=dict)
    problems: dict[GroupKey, GroupProblem] = field(default_factory=dict)
    placed: dict[GroupKey, int] = field(default_factory=dict)

    def set(self, group: str, policy: GangPolicy | None) -> GroupRef:
        r = ref(group)
        if policy is None:
            self.policies.pop(r.key, None)
        else:
            self.policies[r.key] = policy
        return r

    def policy(self, ref: GroupRef) -> GangPolicy | None:
        return self.policies.get(ref.key)

    def problem(self, ref: GroupRef) -> GroupProblem | None:
        return self.problems.get(ref.key)

    def placed_count(self, key: GroupKey) -> int:
        return self.placed.get(key, 0)


def groups_with(**policies: GangPolicy | None) -> FakeGroups:
    """A directory holding these groups (None: the group object does not exist)."""
    groups = FakeGroups()
    for name, policy in policies.items():
        groups.set(name, policy)
    return groups


@dataclass
class Harness:
    clock: FakeClock
    queue: SchedulingQueue
    arrivals: list[tuple[str, str]] = field(default_factory=list)

    def register(
        self, plugin: str, *events: ClusterEvent, hint: QueueingHintFn | None = None
    ) -> None:
        self.queue.register_hints(plugin, [ClusterEventWithHint(e, hint) for e in events])

    groups: FakeGroups = field(default_factory=FakeGroups)

    def pop(self) -> QueuedEntity:
        entity = self.queue.pop_nowait()
        assert entity is not None, "the active queue is empty"
        return entity

    def members_of(self, group: str) -> list[str]:
        """Pod keys of the queued entity of ``group`` (a group key), sorted."""
        entity = self.queue.get_group(group)
        assert entity is not None, f"group {group} is not queued"
        return sorted(entity.members)

    def pop_group(self) -> QueuedGroupInfo:
        entity = self.pop()
        assert isinstance(entity, QueuedGroupInfo), f"{entity.key} is not a group"
        return entity

    def fail_group(
        self, entity: QueuedGroupInfo, remaining: Iterable[str], rejected_by: Iterable[str] = (FIT,)
    ) -> QueueName | None:
        """Report a group attempt in which only ``remaining`` (pod keys) were not placed."""
        return self.queue.requeue_group_remainder(
            entity, list(remaining), self.queue.scheduling_cycle, unschedulable_plugins=rejected_by
        )

    def fail(
        self,
        entity: QueuedEntity,
        rejected_by: Iterable[str] = (),
        pending: Iterable[str] = (),
    ) -> QueueName | None:
        """Report a failed attempt on a popped entity."""
        entity.unschedulable_plugins.update(rejected_by)
        entity.pending_plugins.update(pending)
        return self.queue.add_unschedulable_if_not_present(entity, self.queue.scheduling_cycle)

    def add_and_fail(
        self, p: Pod, rejected_by: Iterable[str] = (FIT,), pending: Iterable[str] = ()
    ) -> QueuedEntity:
        """Add ``p``, pop it and fail it; returns its entity (now unschedulable or in backoff)."""
        self.queue.add(p)
        entity = self.pop()
        assert entity.key == p.key
        self.fail(entity, rejected_by, pending)
        return entity


def harness(
    pre_enqueue: Callable[[Pod], Status] = scheduling_gates,
    initial_backoff: float = 1.0,
    max_backoff: float = 10.0,
    max_in_unschedulable: float = 300.0,
    groups: FakeGroups | None = None,
) -> Harness:
    """A queue on a FakeClock; with ``groups``, pods join groups by their label."""
    clock = FakeClock()
    arrivals: list[tuple[str, str]] = []
    directory = groups if groups is not None else FakeGroups()
    queue = SchedulingQueue(
        priority_sort_less,
        clock,
        sort_key=priority_sort_key,
        pre_enqueue=pre_enqueue,
        initial_backoff=initial_backoff,
        max_backoff=max_backoff,
        max_in_unschedulable=max_in_unschedulable,
        on_incoming=lambda q, e: arrivals.append((q, e)),
        **({"group_of": group_ref_of, "groups": directory} if groups is not None else {}),
    )
    return Harness(clock, queue, arrivals, directory)
