"""What a user is told about a gang: its pods' conditions, events, ``PodGroupScheduled``.

``GangReporter`` writes, through the ``BackgroundWriter`` (the loop never waits
for the API):

- a ``PodScheduled=False`` condition on a member pod, with its reason
  (``Unschedulable``, ``CoschedulingNotMeetMinMember`` or ``SchedulerError``), and a
  ``FailedScheduling`` event on it (the kube client aggregates repeats and rate
  limits them per object, as client-go's event broadcaster does);
- a ``FailedScheduling`` event on the group object;
- the ``PodGroupScheduled`` condition of a v1alpha2 PodGroup, or
  ``PodGroupInitiallyScheduled`` of a v1beta1 one, never turned from True back to
  False (``pod_group_scheduled_condition``).

The pod-group cycle (``troupe.scheduler.gangs.group_cycle``) reports its attempts with it,
and ``troupe.scheduler.gangs.timeouts`` reports gangs held back by their gate (bad
input, a missing group object, too few pods) and gangs past their timeout. Every
message names the group as ``gang <namespace>/<name>`` (``GroupRef.display``).
"""

from __future__ import annotations

from typing import Final

from troupe.api.client import Event, ObjectRef
from troupe.api.clock import Clock
from troupe.api.gangapi import Condition, ScheduledOutcome
from troupe.api.gangapi_kinds import NATIVE_POD_GROUPS, scheduled_condition_type
from troupe.api.gangs import GangApi, GroupRef
from troupe.api.objects import Pod, PodCondition
from troupe.api.podinfo import PodInfo
from troupe.api.preemption import DISRUPTION_TARGET, PREEMPTION_BY_SCHEDULER
from troupe.kube.client import rfc3339
from troupe.scheduler.cycle.writer import BackgroundWriter
from troupe.scheduler.gangs.directory import GangDirectory
from troupe.scheduler.gangs.status import (
    conditions_patch,
    pod_group_scheduled_condition,
    status_path,
)

REASON_NOT_MEET_MIN_MEMBER: Final = "CoschedulingNotMeetMinMember"
REASON_UNSCHEDULABLE: Final = "Unschedulable"
REASON_SCHEDULER_ERROR: Final = "SchedulerError"

# metav1.Condition message limit.
_CONDITION_MESSAGE_LIMIT: Final = 32768


def group_object_ref(ref: GroupRef, api_version: str = "") -> ObjectRef:
    """The group's API object, as an event's ``regarding`` (at ``api_version``,
    default the API's own)."""
    return ObjectRef(ref.kind, ref.namespace, ref.name, "", api_version or ref.api.value)


class GangReporter:
    def __init__(self, writer: BackgroundWriter, groups: GangDirectory, clock: Clock) -> None:
        self._writer = writer
        self._groups = groups
        self._clock = clock

    def pod(
        self,
        info: PodInfo,
        reason: str,
        message: str,
        *,
        event: bool = True,
        nominated_node_name: str | None = None,
    ) -> None:
        """``PodScheduled=False`` with ``reason`` and ``message`` on a member, and
        (unless ``event`` is False) a ``FailedScheduling`` event on it; with
        ``nominated_node_name`` also its ``status.nominatedNodeName`` (gang preemption)."""
        condition = PodCondition(
            type="PodScheduled", status="False", reason=reason, message=message
        )
        self._writer.pod_status(info.pod, condition, nominated_node_name)
        if event:
            self._writer.event(
                Event(
                    ObjectRef.of_pod(info.pod), "Warning", "FailedScheduling", "Scheduling", message
                )
            )

    def group_event(self, ref: GroupRef, message: str) -> None:
        """A ``FailedScheduling`` event on the group object."""
        self._writer.event(
            Event(
                group_object_ref(ref, self._groups.api_version(ref)),
                "Warning",
                "FailedScheduling",
                "Scheduling",
                message,
            )
        )

    def warning(self, ref: GroupRef, reason: str, action: str, message: str) -> None:
        """A ``Warning`` event with ``reason`` on the group object."""
        regarding = group_object_ref(ref, self._groups.api_version(ref))
        self._writer.event(Event(regarding, "Warning", reason, action, message))

    def pod_warning(self, pod: Pod, reason: str, action: str, message: str) -> None:
        """A ``Warning`` event with ``reason`` on a member."""
        self._writer.event(Event(ObjectRef.of_pod(pod), "Warning", reason, action, message))

    def group_condition(self, ref: GroupRef, outcome: ScheduledOutcome, message: str) -> None:
        """``PodGroupScheduled`` on a v1alpha2 PodGroup, ``PodGroupInitiallyScheduled``
        on a v1beta1 one (the only kinds with conditions), at the version the object
        was read; never True -> False, and nothing written when nothing changes.

        A CompositePodGroup's status stays empty in Kubernetes 1.37 (KEP-6012: the
        leaves report): its leaves get the condition, ``Scheduled`` only those that
        reached their own quorum."""
        if ref.api is not GangApi.POD_GROUP:
            return
        if ref.composite:
            self._leaf_conditions(ref, outcome, message)
            return
        obj = self._groups.get(ref.api, ref.namespace, ref.name)
        if not isinstance(obj, NATIVE_POD_GROUPS):
            return
        previous = list(obj.status.conditions)
        conditions = pod_group_scheduled_condition(
            previous,
            outcome,
            message[:_CONDITION_MESSAGE_LIMIT],
            self._clock.wall(),
            scheduled_condition_type(obj.api_version),
        )
        if conditions == previous:
            return
        self._writer.merge_patch(
            status_path(ref.api, ref.namespace, ref.name, obj.api_version),
            conditions_patch(conditions),
        )
        # Kept as written until the informer brings the server's copy: the next
        # outcome must see this one (a True condition is never turned False).
        status = obj.status.model_copy(update={"conditions": conditions})
        self._groups.upsert(ref.api, obj.model_copy(update={"status": status}))

    def disruption_target(self, ref: GroupRef, message: str) -> None:
        """``DisruptionTarget=True`` (reason ``PreemptionByScheduler``) on a v1alpha2 or
        v1beta1 PodGroup whose members are being evicted as a whole (KEP-5710)."""
        if ref.api is not GangApi.POD_GROUP or ref.composite:
            return
        obj = self._groups.get(ref.api, ref.namespace, ref.name)
        if not isinstance(obj, NATIVE_POD_GROUPS):
            return
        now = rfc3339(self._clock.wall())
        previous = list(obj.status.conditions)
        condition = Condition(
            type=DISRUPTION_TARGET,
            status="True",
            reason=PREEMPTION_BY_SCHEDULER,
            message=message[:_CONDITION_MESSAGE_LIMIT],
            last_transition_time=now,
        )
        conditions = [c for c in previous if c.type != DISRUPTION_TARGET] + [condition]
        self._writer.merge_patch(
            status_path(ref.api, ref.namespace, ref.name, obj.api_version),
            conditions_patch(conditions),
        )
        status = obj.status.model_copy(update={"conditions": conditions})
        self._groups.upsert(ref.api, obj.model_copy(update={"status": status}))
        self._writer.event(
            Event(
                group_object_ref(ref, obj.api_version), "Normal", "Preempted", "Preempting", message
            )
        )

    def _leaf_conditions(self, ref: GroupRef, outcome: ScheduledOutcome, message: str) -> None:
        tree = self._groups.tree_of(ref.key)
        if tree is None:
            return
        placed = self._groups.leaf_placed(tree)
        for leaf in tree.leaves():
            if outcome == "Scheduled" and placed.get(leaf.key, 0) < max(leaf.min_count, 1):
                continue
            self.group_condition(
                GroupRef(GangApi.POD_GROUP, ref.namespace, leaf.name), outcome, message
            )
