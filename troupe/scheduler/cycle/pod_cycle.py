"""The scheduling cycle of one pod, and its hand-off to the binding cycle.

``PodCycle.run`` is what the loop (``troupe.scheduler.loop.schedule_one``) does with
a popped pod once it knows the pod is its own (upstream ``schedulingCycle``):

1. place it: from the evaluation shared with the last pods of its signature
   (``troupe.scheduler.cycle.pod_batch``), or with the per-pod algorithm
   (``troupe.scheduler.cycle.algorithm``), then assume it so the next cycle sees its
   resources taken;
2. Reserve, then Permit; a rejection reverts the placement (Unreserve, forget);
3. on failure, report it (``troupe.scheduler.cycle.failure``): the pod goes back to
   the queue with a condition and an event; on success, the binding cycle
   (``troupe.scheduler.cycle.binding_cycle``) takes it in an owned task.

The cycle is synchronous up to the hand-off, so the live NodeTable is its snapshot.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from troupe.api.cycle import PODS_TO_ACTIVATE, CycleState
from troupe.api.podinfo import PodInfo
from troupe.api.status import Code
from troupe.queue.entity import QueuedPodInfo
from troupe.queue.scheduling_queue import SchedulingQueue
from troupe.scheduler.cycle.algorithm import PodAlgorithm
from troupe.scheduler.cycle.binding_cycle import BindingCycle
from troupe.scheduler.cycle.failure import FailureReporter
from troupe.scheduler.cycle.pod_batch import PodBatches
from troupe.scheduler.cycle.results import CycleFailure, ScheduleResult
from troupe.scheduler.framework.runtime import Framework
from troupe.scheduler.framework.waiting_pods import WaitingPods
from troupe.scheduler.observe.metrics import SchedulerMetrics
from troupe.scheduler.observe.stats import AttemptStats


@dataclass(eq=False, kw_only=True)
class PodCycle:
    algorithm: PodAlgorithm
    batches: PodBatches
    binding: BindingCycle
    queue: SchedulingQueue
    waiting: WaitingPods
    failures: FailureReporter
    stats: AttemptStats
    metrics: SchedulerMetrics | None = None

    def __post_init__(self) -> None:
        self.cache = self.algorithm.cache

    async def run(self, fwk: Framework, entity: QueuedPodInfo, cycle: int) -> None:
        """Schedule ``entity``'s pod with ``fwk`` (the caller checked it is ours and
        not placed yet)."""
        info = entity.pod_info
        start = time.perf_counter()
        # Run the scheduling cycle.
        state, outcome = self.scheduling_cycle(fwk, info)
        to_activate = state.read(PODS_TO_ACTIVATE)
        if to_activate:
            self.queue.activate(to_activate)
        if isinstance(outcome, CycleFailure):
            self.stats.attempt(
                "error" if outcome.status.code is Code.ERROR else "unschedulable",
                fwk.name,
                time.perf_counter() - start,
            )
            self.failures.report(
                fwk, entity, outcome.status, outcome.diagnosis, cycle, outcome.nominated_node_name
            )
            return
        self.queue.done(info.key)
        self.stats.cycle(time.perf_counter() - start)
        # Hand the pod to the binding cycle.
        await self.binding.submit(fwk, state, entity, outcome, start, cycle)

    def scheduling_cycle(
        self, fwk: Framework, info: PodInfo
    ) -> tuple[CycleState, ScheduleResult | CycleFailure]:
        t = time.perf_counter()
        batched = self.batches.place(fwk, info)
        result: ScheduleResult | CycleFailure
        if batched is not None:
            # Placed (and assumed) from the evaluation shared with the last pods.
            result, state = batched
        else:
            state = self.algorithm.new_cycle_state()
            result = self.algorithm.schedule_pod(fwk, state, info)
        if self.metrics is not None:
            self.metrics.algorithm(time.perf_counter() - t)
        if isinstance(result, CycleFailure):
            return state, result
        node = result.node
        if batched is None:
            # Assume: the next cycle must see this pod's resources as taken.
            self.cache.assume(info, node)
            self.batches.assumed(fwk, info)
        # Run "reserve" plugins.
        status = fwk.binding.run_reserve(state, info, node)
        if not status.is_success:
            self.algorithm.revert(fwk, state, info, node)
            return state, CycleFailure(status)
        # Run "permit" plugins.
        status = fwk.binding.run_permit(state, info, node, self.waiting)
        if not (status.is_success or status.is_wait):
            self.algorithm.revert(fwk, state, info, node)
            return state, CycleFailure(status)
        return state, result
