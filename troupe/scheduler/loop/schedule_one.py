"""schedule_one: pop an entity, run the scheduling cycle, hand off the binding cycle.

``Scheduler.schedule_one`` is the loop body (upstream ``schedule_one.go``):

1. pop the next entity from the queue and pick the framework by schedulerName;
2. scheduling cycle (synchronous, so the live NodeTable is its snapshot):
   PreFilter, Filter over all nodes as one batch, PostFilter when nothing fits,
   PreScore/Score over the feasible nodes, select, assume, Reserve, Permit;
3. binding cycle in an owned task (``troupe.scheduler.cycle.binding_cycle``): WaitOnPermit,
   PreBind, Bind, PostBind.

Every failure after assume unreserves and forgets, then reports the failure
(``troupe.scheduler.cycle.failure``). Cluster events from the informers arrive through
``troupe.scheduler.service.handlers``.
"""

from __future__ import annotations

import random
import time

import numpy as np
import structlog

from troupe.api.client import SchedulerClient
from troupe.api.clock import Clock
from troupe.api.config import ResolvedConfig
from troupe.api.cycle import PODS_TO_ACTIVATE, CycleState
from troupe.api.events import ASSIGNED_POD_DELETE
from troupe.api.framework import Diagnosis
from troupe.api.gangs import GroupRef, group_ref_of
from troupe.api.nodetable import IndexArray
from troupe.api.objects import Pod
from troupe.api.pdb import PodDisruptionBudget
from troupe.api.podinfo import PodInfo
from troupe.api.status import SUCCESS, Code, Status
from troupe.api.tasks import TaskSupervisor
from troupe.plugins.registry import Registry
from troupe.queue.entity import QueuedGroupInfo, QueuedPodInfo
from troupe.queue.scheduling_queue import SchedulingQueue
from troupe.scheduler.cache import Cache
from troupe.scheduler.cycle.binding_cycle import BindingCycle
from troupe.scheduler.cycle.evictions import Preemptions
from troupe.scheduler.cycle.failure import FailureReporter
from troupe.scheduler.cycle.pod_batch import PodBatches
from troupe.scheduler.cycle.results import CycleFailure, ScheduleResult
from troupe.scheduler.cycle.writer import BackgroundWriter
from troupe.scheduler.framework.messages import NO_NODES_AVAILABLE
from troupe.scheduler.framework.nominated import NominatedPods
from troupe.scheduler.framework.runtime import (
    RECORD_PLUGIN_METRICS,
    Framework,
    FrameworkHandle,
    Observer,
)
from troupe.scheduler.framework.waiting_pods import WaitingPods
from troupe.scheduler.gangs.directory import GangDirectory
from troupe.scheduler.gangs.group_cycle import GroupCycle
from troupe.scheduler.gangs.timeouts import GangTimeouts
from troupe.scheduler.observe.metrics import PLUGIN_METRICS_SAMPLE_PERCENT, SchedulerMetrics
from troupe.scheduler.observe.stats import AttemptStats

log = structlog.get_logger("troupe.scheduler")

# Upstream: below 100 nodes every node is scored; adaptive percentage never < 5%.
MIN_FEASIBLE_NODES_TO_FIND = 100
MIN_FEASIBLE_NODES_PERCENTAGE = 5


def num_feasible_nodes_to_find(percentage: int, num_nodes: int) -> int:
    """How many feasible nodes to score (upstream ``numFeasibleNodesToFind``)."""
    if num_nodes < MIN_FEASIBLE_NODES_TO_FIND:
        return num_nodes
    if percentage == 0:
        percentage = max(50 - num_nodes // 125, MIN_FEASIBLE_NODES_PERCENTAGE)
    return max(num_nodes * percentage // 100, MIN_FEASIBLE_NODES_TO_FIND)


class Scheduler(BindingCycle):
    def __init__(
        self,
        config: ResolvedConfig,
        registry: Registry,
        client: SchedulerClient,
        clock: Clock,
        *,
        seed: int = 0,
        observer: Observer | None = None,
        stats: AttemptStats | None = None,
        groups: GangDirectory | None = None,
        metrics: SchedulerMetrics | None = None,
    ) -> None:
        self.config = config
        self.client = client
        self.clock = clock
        self.groups = groups if groups is not None else GangDirectory()
        self.cache = Cache(clock, assumed_ttl=config.assumed_pod_ttl_seconds, listener=self.groups)
        self.background = TaskSupervisor("background")
        self.bindings = TaskSupervisor("binding", limit=config.binding_concurrency)
        self.waiting = WaitingPods(clock, self.background)
        self.stats = stats if stats is not None else AttemptStats()
        self.metrics = metrics
        if metrics is not None:
            self.stats.hooks.append(metrics.attempt)
            self.stats.group_hooks.append(metrics.group_attempt)
            self.stats.bound_hooks.append(metrics.pod_bound)
        self.frameworks: dict[str, Framework] = {}
        for profile in config.profiles:
            handle = FrameworkHandle(
                client, clock, self.cache.table, profile.scheduler_name, self.waiting, self.groups
            )
            fwk_observer = observer
            if fwk_observer is None and metrics is not None:
                fwk_observer = metrics.observer(profile.scheduler_name)
            kwargs = {"observer": fwk_observer} if fwk_observer is not None else {}
            self.frameworks[profile.scheduler_name] = Framework.build(
                profile, registry, handle, **kwargs
            )
        first = next(iter(self.frameworks.values()))
        self.queue = SchedulingQueue(
            first.less,
            clock,
            pre_enqueue=self._pre_enqueue,
            initial_backoff=config.pod_initial_backoff_seconds,
            max_backoff=config.pod_max_backoff_seconds,
            max_in_unschedulable=config.pod_max_in_unschedulable_pods_duration,
            group_of=self._group_of,
            groups=self.groups,
            on_incoming=metrics.incoming if metrics is not None else None,
        )
        if metrics is not None:
            metrics.attach(self.queue, self.cache, self.clock)
        self.groups.on_change(self.queue.group_changed)
        self.group_cycle = GroupCycle(self)
        self.pod_batches = PodBatches(self)
        self.gang_timeouts = GangTimeouts(self, config.gang_schedule_timeout_seconds)
        for fwk in self.frameworks.values():
            for name, plugin in fwk.plugins.items():
                events_to_register = getattr(plugin, "events_to_register", None)
                if events_to_register is not None:
                    self.queue.register_hints(name, events_to_register())
        # Events yield to bindings (see troupe.scheduler.cycle.writer).
        self.writer = BackgroundWriter(
            client, self.background, bindings=self.bindings, clock=self.clock
        )
        self.failures = FailureReporter(self.writer, self.queue)
        # Preemption: nominated pods count in Filter; PDBs are filled by an informer.
        self.pdbs: dict[str, PodDisruptionBudget] = {}
        self.nominated = NominatedPods(self.queue, self.cache)
        for fwk in self.frameworks.values():
            fwk.handle.framework = fwk
            fwk.handle.nominated, fwk.handle.pdbs = self.nominated, self.pdbs
        self.preemptions = Preemptions(
            client, self.writer, self.queue, self.waiting, self.background, metrics
        )
        self._rng = random.Random(seed)
        # Its own generator: sampling must not shift the seeded tie-breaks.
        self._sample_rng = random.Random(seed + 1)
        # Gang members of the running group cycles: (attempts, first active-queue
        # entry) of their group, for the SLI once they are bound.
        self._member_attempts: dict[str, tuple[int, float | None]] = {}
        self._next_start_node_index = 0
        self._stopping = False

    # --- the loop ------------------------------------------------------------------

    def _pre_enqueue(self, pod: Pod) -> Status:
        fwk = self.frameworks.get(pod.spec.scheduler_name)
        return fwk.run_pre_enqueue(pod) if fwk is not None else SUCCESS

    def _group_of(self, pod: Pod) -> GroupRef | None:
        """The gang a pod is queued with; None to queue it on its own — including
        in profiles that use the Coscheduling plugin, which gangs pod by pod at
        Permit (scheduler-plugins' algorithm)."""
        fwk = self.frameworks.get(pod.spec.scheduler_name)
        if fwk is None or fwk.pod_by_pod_gangs:
            return None
        return group_ref_of(pod)

    def owns(self, scheduler_name: str) -> bool:
        return scheduler_name in self.frameworks

    async def schedule_one(self) -> bool:
        """One pop and attempt; False once the queue is closed."""
        entity = await self.queue.pop()
        if entity is None:
            return False
        if isinstance(entity, QueuedGroupInfo):
            await self._schedule_group(entity)
            return True
        if not isinstance(entity, QueuedPodInfo):
            log.error("unknown queued entity kind", entity=entity.key)
            self.queue.done(entity.key)
            return True
        info = entity.pod_info
        fwk = self.frameworks.get(info.pod.spec.scheduler_name)
        cached_uid = self.cache.uid_of(info.key)
        if fwk is None or cached_uid == info.pod.metadata.uid:
            # Not ours (any more), or already assumed/bound: nothing to do.
            self.queue.done(info.key)
            return True
        cycle = self.queue.scheduling_cycle
        if cached_uid is not None:
            # A deleted pod of the same name is still being bound; try this one
            # once that binding has settled (it will fail on the UID precondition).
            entity.unschedulable_plugins = set()
            self.queue.add_unschedulable_if_not_present(entity, cycle)
            return True
        start = time.perf_counter()
        # Run the scheduling cycle.
        state, outcome = self._scheduling_cycle(fwk, info)
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
            return True
        self.queue.done(info.key)
        self.stats.cycle(time.perf_counter() - start)
        # Hand the pod to the binding cycle.
        binding = self.binding_cycle(fwk, state, entity, outcome, start, cycle)
        waiting = self.waiting.get(info.key)
        if waiting is not None:
            # Waiting at Permit must not hold a binding slot: a gang larger than
            # bindingConcurrency would otherwise never reach its quorum.
            node = outcome.node
            self.background.spawn(
                self.wait_for_permit(waiting, binding, lambda: self.revert(fwk, state, info, node)),
                name=f"permit {info.key}",
            )
            return True
        await self.bindings.acquire()
        self.bindings.spawn(binding, name=f"bind {info.key}", held=True)
        return True

    def new_cycle_state(self) -> CycleState:
        """A fresh CycleState; with metrics, 10% of cycles record per-plugin durations."""
        state = CycleState()
        state.write(PODS_TO_ACTIVATE, set())
        if (
            self.metrics is not None
            and self._sample_rng.randrange(100) < PLUGIN_METRICS_SAMPLE_PERCENT
        ):
            state.write(RECORD_PLUGIN_METRICS, True)
        return state

    async def _schedule_group(self, entity: QueuedGroupInfo) -> None:
        cycle = self.queue.scheduling_cycle
        first = next(iter(entity.members.values()), None)
        fwk = self.frameworks.get(first.pod.spec.scheduler_name) if first else None
        if fwk is None:
            self.queue.done(entity.key, entity)
            return
        for key in entity.members:
            self._member_attempts[key] = (entity.attempts, entity.initial_attempt_timestamp)
        await self.group_cycle.run(fwk, entity, cycle)
        for key in entity.members:
            if key not in self.cache:
                self._member_attempts.pop(key, None)

    def _scheduling_cycle(
        self, fwk: Framework, info: PodInfo
    ) -> tuple[CycleState, ScheduleResult | CycleFailure]:
        t = time.perf_counter()
        batched = self.pod_batches.place(fwk, info)
        result: ScheduleResult | CycleFailure
        if batched is not None:
            # Placed (and assumed) from the evaluation shared with the last pods.
            result, state = batched
        else:
            state = self.new_cycle_state()
            result = self.schedule_pod(fwk, state, info)
        if self.metrics is not None:
            self.metrics.algorithm(time.perf_counter() - t)
        if isinstance(result, CycleFailure):
            return state, result
        node = result.node
        if batched is None:
            # Assume: the next cycle must see this pod's resources as taken.
            self.cache.assume(info, node)
            self.pod_batches.assumed(fwk, info)
        # Run "reserve" plugins.
        status = fwk.run_reserve(state, info, node)
        if not status.is_success:
            self.revert(fwk, state, info, node)
            return state, CycleFailure(status)
        # Run "permit" plugins.
        status = fwk.run_permit(state, info, node, self.waiting)
        if not (status.is_success or status.is_wait):
            self.revert(fwk, state, info, node)
            return state, CycleFailure(status)
        return state, result

    def revert(self, fwk: Framework, state: CycleState, info: PodInfo, node: str) -> None:
        fwk.run_unreserve(state, info, node)
        self.cache.forget(info)
        self._member_attempts.pop(info.key, None)

    def schedule_pod(
        self, fwk: Framework, state: CycleState, info: PodInfo
    ) -> ScheduleResult | CycleFailure:
        table = self.cache.table
        num_nodes = table.size
        if num_nodes == 0:
            return CycleFailure(Status.unschedulable(NO_NODES_AVAILABLE))
        # Run "prefilter" plugins.
        pre, status = fwk.run_pre_filter(state, info, table)
        if not status.is_success:
            if status.code is Code.ERROR:
                return CycleFailure(status)
            diagnosis = fwk.diagnose_pre_filter(status, pre, num_nodes)
            return self._post_filter(fwk, state, info, diagnosis, status)
        candidates = table.present
        left_out = None
        if pre is not None and pre.node_names is not None:
            allowed = np.zeros(table.capacity, dtype=bool)
            allowed[[table.index[n] for n in pre.node_names if n in table.index]] = True
            candidates = candidates & allowed
            left_out = table.present & ~allowed
        # Run "filter" plugins over every candidate node at once.
        outcome = fwk.run_filter(state, info, table, candidates)
        if not outcome.status.is_success:
            return CycleFailure(outcome.status)
        slots, evaluated = self.feasible_slots(fwk, outcome.feasible)
        if len(slots) == 0:
            diagnosis = fwk.diagnose(outcome, num_nodes, left_out, pre)
            return self._post_filter(fwk, state, info, diagnosis, Status.unschedulable())
        if len(slots) == 1:
            return ScheduleResult(table.names[int(slots[0])], evaluated, 1)
        # Run "prescore" and "score" plugins over the feasible nodes.
        status = fwk.run_pre_score(state, info, table, slots)
        if not status.is_success:
            return CycleFailure(status)
        scores, status = fwk.run_score(state, info, table, slots)
        if not status.is_success:
            return CycleFailure(status)
        return ScheduleResult(table.names[self._select(slots, scores)], evaluated, len(slots))

    def feasible_slots(self, fwk: Framework, feasible: np.ndarray) -> tuple[IndexArray, int]:
        """The first ``numFeasibleNodesToFind`` feasible slots, starting where the last
        cycle stopped so every node gets its turn (upstream nextStartNodeIndex)."""
        table = self.cache.table
        present = table.slots()
        n = len(present)
        if n == 0:
            return present, 0
        percentage = fwk.profile.percentage_of_nodes_to_score
        if percentage is None:
            percentage = self.config.percentage_of_nodes_to_score
        want = num_feasible_nodes_to_find(percentage, n)
        start = self._next_start_node_index % n
        order = np.concatenate([present[start:], present[:start]]) if start else present
        hits = np.flatnonzero(feasible[order])
        if len(hits) > want:
            processed = int(hits[want - 1]) + 1
            hits = hits[:want]
        else:
            processed = n
        self._next_start_node_index = (start + processed) % n
        return order[hits], processed

    def select_index(self, scores: np.ndarray) -> int:
        """Index of the highest score; ties broken uniformly at random (seeded), as
        upstream's selectHost."""
        best = np.flatnonzero(scores == scores.max())
        return int(best[self.tie_break(len(best))])

    def tie_break(self, count: int) -> int:
        """Which of ``count`` equally good candidates to take (seeded)."""
        return self._rng.randrange(count) if count > 1 else 0

    def _select(self, slots: IndexArray, scores: np.ndarray) -> int:
        return int(slots[self.select_index(scores)])

    def _post_filter(
        self,
        fwk: Framework,
        state: CycleState,
        info: PodInfo,
        diagnosis: Diagnosis,
        status: Status,
    ) -> CycleFailure:
        nominated: str | None = None
        if (
            status.code is not Code.UNSCHEDULABLE_AND_UNRESOLVABLE
            and fwk.post_filter
            # An earlier preemption of this pod is still evicting: wait for it.
            and not self.preemptions.in_flight(info)
        ):
            # Run "postfilter" plugins (e.g. preemption).
            result, post = fwk.run_post_filter(state, info, self.cache.table, diagnosis)
            if fwk.preempts:
                self.preemptions.attempted()
            if post.code is Code.ERROR:
                return CycleFailure(post, diagnosis)
            if result is not None and post.is_success and result.victims:
                nominated = result.nominated_node_name
                self.preemptions.actuate(fwk.name, info, nominated, result.victims)
            elif (
                fwk.preempts
                and result is not None
                and not result.nominated_node_name
                and (self.queue.nominated_node(info.key) or info.pod.status.nominated_node_name)
            ):
                # Preemption cannot help: the earlier nomination ends.
                self.queue.delete_nominated(info.key)
                nominated = ""
        return CycleFailure(
            Status(
                status.code if status.is_rejected else Code.UNSCHEDULABLE,
                status.reasons,
                status.plugin,
            ),
            diagnosis,
            nominated,
        )

    # --- lifecycle ---------------------------------------------------------------------

    async def run(self) -> None:
        """Schedule until ``stop``; housekeeping (queue flushes, assumed-pod expiry)
        runs beside the loop."""
        self.background.spawn(self.queue.run(), name="queue flush")
        self.background.spawn(self._expire_assumed(), name="assumed expiry")
        while not self._stopping and await self.schedule_one():
            pass

    async def _expire_assumed(self) -> None:
        while not self._stopping:
            await self.clock.sleep(1.0)
            self.housekeeping()

    def housekeeping(self) -> None:
        """Once a second: expire assumed pods never confirmed, report gang timeouts."""
        for key in self.cache.cleanup_expired():
            self.queue.on_event(ASSIGNED_POD_DELETE, None, None)
            log.warning("binding never confirmed; capacity released", pod=key)
        self.gang_timeouts.sweep()

    async def stop(self, grace: float = 10.0) -> None:
        """Stop popping, let in-flight bindings finish for ``grace`` seconds, then
        cancel what is left (each cancelled binding unreserves and forgets)."""
        self._stopping = True
        self.queue.close()
        await self.bindings.drain(timeout=grace)
        await self.bindings.cancel_all()
        await self.writer.flush(timeout=min(grace, 2.0))
        await self.background.drain(timeout=1.0)
        await self.background.cancel_all()
