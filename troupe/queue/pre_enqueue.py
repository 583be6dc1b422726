"""PreEnqueue of a queued entity: a pod's own plugins, or the gang checks of a group.

``SchedulingQueue`` builds one ``EntityGate`` and hands it to ``SubQueues``, which
runs it on every entity entering the active or backoff queue and on every gated
entity asked to try again; a refusal sends the entity to the gated pool with the
Status's plugin and message.

* A pod entity passes when every pod passes the profile's PreEnqueue plugins
  (scheduling gates, say).
* A group entity gets upstream GangScheduling's checks and messages (KEP-4671
  "GangScheduling Plugin"): the group object must exist and carry no user error
  (``GroupDirectory.problem``); no other attempt of the group may be in flight
  (late members wait for its outcome: ``InFlight`` indexes a group's flight by
  the ``queue_id`` every entity of the group shares); and ``placed + members >=
  minCount`` (KEP-3370 Permit: assigned + assumed members count, so late members
  of a group that already has its quorum are scheduled at once).

A leaf: it reads the directory and the flights and changes nothing.
"""

from __future__ import annotations

from collections.abc import Callable

from troupe.api.gangs import GroupDirectory, GroupRef
from troupe.api.objects import Pod
from troupe.api.status import Status
from troupe.queue.entity import QueuedEntity, QueuedGroupInfo
from troupe.queue.in_flight import InFlight

GANG_SCHEDULING = "GangScheduling"
"""The gating plugin recorded on a group entity held back by the gang checks."""

MIN_COUNT_MESSAGE = "waiting for minCount pods from a gang to appear in scheduling queue"


def missing_group_message(ref: GroupRef) -> str:
    # Upstream's Workload wording, used for all three APIs.
    return f'waiting for pods\'s workload "{ref.name}" to appear in scheduling queue'


def in_flight_message(ref: GroupRef) -> str:
    return f"waiting for the scheduling attempt of pod group {ref.key} to finish"


class EntityGate:
    def __init__(
        self, pod_gate: Callable[[Pod], Status], groups: GroupDirectory, in_flight: InFlight
    ) -> None:
        self._pod_gate = pod_gate
        self._groups = groups
        self._in_flight = in_flight

    def __call__(self, entity: QueuedEntity) -> Status:
        if isinstance(entity, QueuedGroupInfo):
            return self.group(entity)
        for pod in entity.pods():
            status = self._pod_gate(pod)
            if not status.is_success:
                return status
        return Status()

    def group(self, entity: QueuedGroupInfo) -> Status:
        ref = entity.ref
        policy = self._groups.policy(ref)
        if policy is None:
            return Status.unresolvable(missing_group_message(ref), plugin=GANG_SCHEDULING)
        problem = self._groups.problem(ref)
        if problem is not None:
            return Status.unresolvable(str(problem), plugin=GANG_SCHEDULING)
        flight = self._in_flight.get(entity.queue_id)
        if flight is not None and flight.entity is not entity:
            # One attempt per group at a time: late members wait for its outcome.
            return Status.unresolvable(in_flight_message(ref), plugin=GANG_SCHEDULING)
        if policy.gang and self._groups.placed_count(ref.key) + len(entity.members) < (
            policy.min_count
        ):
            return Status.unresolvable(MIN_COUNT_MESSAGE, plugin=GANG_SCHEDULING)
        return Status()
