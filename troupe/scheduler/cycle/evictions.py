"""Carrying out a preemption that PostFilter decided (upstream ``prepareCandidate``).

``PodAlgorithm.post_filter`` calls ``Preemptions.actuate`` when a PostFilter plugin
(a preemption plugin such as DefaultPreemption) returns a node and victims. In the
scheduling cycle, at once:

- the preemptor is nominated to the node in the queue's nominator, so the next
  cycles leave the freed room to it (its ``status.nominatedNodeName`` is written
  with its ``PodScheduled`` condition by ``troupe.scheduler.cycle.failure``);
- pods of lower priority nominated to the same node lose that nomination (in the
  nominator now, in their status from the task below): they may no longer fit there;
- ``scheduler_preemption_victims`` observes the number of victims.

Then, in one owned task, each victim in parallel: a victim waiting at Permit is
rejected (it was never bound); any other gets ``DisruptionTarget=True`` with reason
``PreemptionByScheduler``, is deleted with its UID as precondition, and gets a
``Preempted`` event (``Preempted by pod <uid> on node <node>``). A victim already
being deleted is left alone. While that task runs the preemptor does not preempt
again (upstream async preemption keeps it out of the cycle the same way); if an
API call fails, the preemptor is moved to the active queue to try again, as
upstream does.

``actuate_group`` does the same for a gang's ``DisruptionPlan`` (KEP-5710, decided
by ``troupe.scheduler.gangs.preemption``): every member is nominated to its planned
node, every victim evicted, ``scheduler_workload_preemption_victims`` observed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass

import structlog

from troupe.api.client import ApiError, Event, ObjectRef, SchedulerClient
from troupe.api.framework import DisruptionPlan
from troupe.api.gangs import GroupRef
from troupe.api.objects import PodCondition
from troupe.api.podinfo import PodInfo
from troupe.api.preemption import DISRUPTION_TARGET, PREEMPTION_BY_SCHEDULER
from troupe.api.tasks import TaskSupervisor
from troupe.queue.scheduling_queue import SchedulingQueue
from troupe.scheduler.cycle.writer import BackgroundWriter
from troupe.scheduler.framework.waiting_pods import WaitingPods
from troupe.scheduler.observe.metrics import SchedulerMetrics

log = structlog.get_logger("troupe.preemption")

# In-flight markers of gangs are kept apart from pod keys (namespaces have no colon).
GROUP_MARKER = "podgroup:"


def disruption_condition(scheduler_name: str) -> PodCondition:
    return PodCondition(
        type=DISRUPTION_TARGET,
        status="True",
        reason=PREEMPTION_BY_SCHEDULER,
        message=f"{scheduler_name}: preempting to accommodate a higher priority pod",
    )


def preempted_note(preemptor: PodInfo, node: str) -> str:
    return f"Preempted by pod {preemptor.pod.metadata.uid} on node {node}"


def group_preempted_note(ref: GroupRef, node: str) -> str:
    """A gang's victim: the gang is named, there is no single preemptor pod."""
    return f"Preempted by pod group {ref.display} on node {node}"


@dataclass(eq=False)
class Preemptions:
    client: SchedulerClient
    writer: BackgroundWriter
    queue: SchedulingQueue
    waiting: WaitingPods
    tasks: TaskSupervisor
    metrics: SchedulerMetrics | None = None

    def __post_init__(self) -> None:
        # Preemptor keys (with UID) whose victims are being evicted.
        self._running: set[tuple[str, str]] = set()

    def in_flight(self, preemptor: PodInfo) -> bool:
        """The preemptor's last preemption is still evicting its victims."""
        return (preemptor.key, preemptor.pod.metadata.uid) in self._running

    def attempted(self) -> None:
        if self.metrics is not None:
            self.metrics.preemption_attempt()

    def actuate(
        self,
        scheduler_name: str,
        preemptor: PodInfo,
        node: str,
        victims: tuple[PodInfo, ...],
        *,
        by: str,
    ) -> None:
        """Nominate ``preemptor`` to ``node`` and evict ``victims`` (in an owned
        task); ``by``: the plugin that chose them (a victim waiting at Permit is
        rejected in its name)."""
        self.queue.add_nominated(preemptor, node)
        lesser = [
            other
            for other in self.queue.nominated_pods_for_node(node)
            if other.priority < preemptor.priority
        ]
        for other in lesser:
            self.queue.delete_nominated(other.key)
        if self.metrics is not None:
            self.metrics.preemption_victims(len(victims))
        log.info(
            "preempting",
            pod=preemptor.key,
            node=node,
            victims=[v.key for v in victims],
        )
        marker = (preemptor.key, preemptor.pod.metadata.uid)
        self._running.add(marker)
        note = preempted_note(preemptor, node)
        evictions = [(v, node, note) for v in victims]
        self.tasks.spawn(
            self._evict(scheduler_name, by, preemptor.key, evictions, lesser, marker),
            name=f"preempt for {preemptor.key}",
        )

    def actuate_group(
        self,
        scheduler_name: str,
        ref: GroupRef,
        priority: int,
        members: Mapping[str, PodInfo],
        plan: DisruptionPlan,
        *,
        by: str,
    ) -> None:
        """Carry out a gang's plan (KEP-5710): every member of ``plan.nominated`` is
        nominated to its node, lesser nominations there end, and every victim is
        evicted as for a pod. ``in_flight_group`` holds while the calls run."""
        lesser: dict[str, PodInfo] = {}
        for key, node in plan.nominated.items():
            self.queue.add_nominated(members[key], node)
        for node in set(plan.nominated.values()):
            for other in self.queue.nominated_pods_for_node(node):
                if other.priority < priority and other.key not in plan.nominated:
                    lesser[other.key] = other
        for other in lesser.values():
            self.queue.delete_nominated(other.key)
        if self.metrics is not None:
            self.metrics.workload_preemption_victims(len(plan.victims))
        log.info(
            "preempting for a gang",
            group=ref.key,
            nominated=plan.nominated,
            victims=[v.key for v in plan.victims],
        )
        marker = (GROUP_MARKER + ref.key, "")
        self._running.add(marker)
        evictions = []
        for v in plan.victims:
            node = v.pod.spec.node_name or ""
            evictions.append((v, node, group_preempted_note(ref, node)))
        # On a failed call, activating any member retries its gang.
        member = next(iter(plan.nominated))
        self.tasks.spawn(
            self._evict(scheduler_name, by, member, evictions, list(lesser.values()), marker),
            name=f"preempt for {ref.key}",
        )

    def in_flight_group(self, ref: GroupRef) -> bool:
        """The gang's last preemption is still sending its evictions."""
        return (GROUP_MARKER + ref.key, "") in self._running

    def workload_attempt(self, result: str, seconds: float = 0.0, reprieved: int = 0) -> None:
        if self.metrics is not None:
            self.metrics.workload_preemption_attempt(result, seconds, reprieved)

    async def _evict(
        self,
        scheduler_name: str,
        by: str,
        activate: str,
        evictions: list[tuple[PodInfo, str, str]],
        lesser: list[PodInfo],
        marker: tuple[str, str],
    ) -> None:
        try:
            for other in lesser:
                await self._clear_nomination(other)
            done = await asyncio.gather(
                *(
                    self._preempt(scheduler_name, by, activate, v, node, note)
                    for v, node, note in evictions
                )
            )
        finally:
            self._running.discard(marker)
        if not all(done):
            # The preemptor (or the gang of this member) may be stuck in the
            # unschedulable pool: try again now.
            self.queue.activate([activate])

    async def _clear_nomination(self, pod: PodInfo) -> None:
        # Not through the coalescing writer: that would replace a pending condition.
        try:
            await self.client.patch_pod_status(pod.pod, None, "")
        except ApiError as exc:
            log.warning("could not clear a nomination", pod=pod.key, err=str(exc))

    async def _preempt(
        self, scheduler_name: str, by: str, preemptor: str, victim: PodInfo, node: str, note: str
    ) -> bool:
        """Evict one victim; False when an API call failed."""
        waiting = self.waiting.get(victim.key)
        if waiting is not None:
            waiting.reject(by, "preempted")
        elif victim.pod.metadata.deletion_timestamp is not None:
            # Graceful deletion already started: nothing to send.
            return True
        else:
            try:
                await self.client.patch_pod_status(
                    victim.pod, disruption_condition(scheduler_name), None
                )
                await self.client.delete_pod(victim.pod)
            except ApiError as exc:
                if exc.is_not_found:
                    return True
                log.error(
                    "could not preempt victim",
                    pod=preemptor,
                    victim=victim.key,
                    node=node,
                    err=str(exc),
                )
                return False
        self.writer.event(
            Event(
                ObjectRef.of_pod(victim.pod),
                "Normal",
                "Preempted",
                "Preempting",
                note,
            )
        )
        return True
