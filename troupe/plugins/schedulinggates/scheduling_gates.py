"""SchedulingGates: a pod with scheduling gates waits until every gate is removed.

PreEnqueue rejects the pod with UnschedulableAndUnresolvable (upstream message
``waiting for scheduling gates: [a b]``, Go's ``%v`` of a slice); the queue parks it
among the gated pods. The pod's own update that removes the last gate requeues it
(KEP-3521).
"""

from __future__ import annotations

from collections.abc import Sequence

from troupe.api.events import (
    Action,
    ClusterEvent,
    ClusterEventWithHint,
    QueueingHint,
    Resource,
)
from troupe.api.framework import Handle
from troupe.api.objects import Pod
from troupe.api.status import SUCCESS, Status

GATES_ELIMINATED = ClusterEvent(Resource.POD, Action.UPDATE_POD_SCHEDULING_GATES_ELIMINATED)


class SchedulingGates:
    name = "SchedulingGates"

    def __init__(self, args: None, handle: Handle) -> None:
        del args, handle

    def pre_enqueue(self, pod: Pod) -> Status:
        gates = pod.spec.scheduling_gates
        if not gates:
            return SUCCESS
        listed = " ".join(gate.name for gate in gates)
        return Status.unresolvable(f"waiting for scheduling gates: [{listed}]", plugin=self.name)

    def events_to_register(self) -> Sequence[ClusterEventWithHint]:
        return (ClusterEventWithHint(GATES_ELIMINATED, gates_removed_from_this_pod),)


def gates_removed_from_this_pod(pod: Pod, old: object | None, new: object | None) -> QueueingHint:
    """Only the gated pod's own update can ungate it (upstream
    ``isSchedulableAfterUpdatePodSchedulingGatesEliminated``)."""
    if isinstance(new, Pod) and new.metadata.uid == pod.metadata.uid:
        return QueueingHint.QUEUE
    return QueueingHint.SKIP
