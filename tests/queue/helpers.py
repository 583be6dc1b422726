"""Shared set-up for the queue tests: a queue on a FakeClock that records arrivals."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from troupe.api.clock import FakeClock
from troupe.api.events import Action, ClusterEvent, ClusterEventWithHint, QueueingHintFn, Resource
from troupe.api.objects import Pod
from troupe.api.status import Status
from troupe.queue import QueuedEntity, SchedulingQueue, priority_sort_less
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


@dataclass
class Harness:
    clock: FakeClock
    queue: SchedulingQueue
    arrivals: list[tuple[str, str]] = field(default_factory=list)

    def register(
        self, plugin: str, *events: ClusterEvent, hint: QueueingHintFn | None = None
    ) -> None:
        self.queue.register_hints(plugin, [ClusterEventWithHint(e, hint) for e in events])

    def pop(self) -> QueuedEntity:
        entity = self.queue.pop_nowait()
        assert entity is not None, "the active queue is empty"
        return entity

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
) -> Harness:
    clock = FakeClock()
    arrivals: list[tuple[str, str]] = []
    queue = SchedulingQueue(
        priority_sort_less,
        clock,
        pre_enqueue=pre_enqueue,
        initial_backoff=initial_backoff,
        max_backoff=max_backoff,
        max_in_unschedulable=max_in_unschedulable,
        on_incoming=lambda q, e: arrivals.append((q, e)),
    )
    return Harness(clock, queue, arrivals)
