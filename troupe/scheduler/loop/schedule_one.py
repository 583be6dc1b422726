"""schedule_one: pop an entity, run its scheduling cycle, hand off the binding cycle.

``Scheduler.schedule_one`` is the loop body (upstream ``schedule_one.go``): pop the
next entity from the queue, pick the framework by schedulerName, and run

- for a pod, the pod cycle (``troupe.scheduler.cycle.pod_cycle``): the per-pod
  algorithm, assume, Reserve, Permit, then the binding cycle in an owned task;
- for a pod group, the group cycle (``troupe.scheduler.gangs.group_cycle``): the
  whole gang placed in one cycle, all or nothing.

``Scheduler`` builds those parts once, each with only the collaborators it uses,
and runs the loop with its housekeeping (queue flushes, assumed-pod expiry, gang
timeouts). Cluster events from the informers arrive through
``troupe.scheduler.service.handlers``.
"""

from __future__ import annotations

import asyncio

import structlog

from troupe.api.client import SchedulerClient
from troupe.api.clock import Clock
from troupe.api.config import ResolvedConfig
from troupe.api.events import ASSIGNED_POD_DELETE
from troupe.api.framework import NamespaceLister
from troupe.api.gangs import GroupRef, group_ref_of
from troupe.api.objects import Pod
from troupe.api.pdb import PodDisruptionBudget
from troupe.api.status import SUCCESS, Status
from troupe.api.tasks import TaskSupervisor, WorkerPool
from troupe.plugins.registry import Registry
from troupe.queue.entity import QueuedEntity, QueuedGroupInfo, QueuedPodInfo
from troupe.queue.nominator import Nominator
from troupe.queue.scheduling_queue import SchedulingQueue
from troupe.scheduler.cache import Cache
from troupe.scheduler.cycle.algorithm import PodAlgorithm
from troupe.scheduler.cycle.binding_cycle import BindingCycle
from troupe.scheduler.cycle.evictions import Preemptions
from troupe.scheduler.cycle.failure import FailureReporter
from troupe.scheduler.cycle.pod_batch import PodBatches
from troupe.scheduler.cycle.pod_cycle import PodCycle
from troupe.scheduler.cycle.writer import BackgroundWriter
from troupe.scheduler.framework.instrument import Observer
from troupe.scheduler.framework.nominated import NominatedPods
from troupe.scheduler.framework.runtime import Framework
from troupe.scheduler.framework.waiting_pods import WaitingPods
from troupe.scheduler.gangs.admission import GangAdmission
from troupe.scheduler.gangs.directory import GangDirectory
from troupe.scheduler.gangs.group_cycle import GroupCycle
from troupe.scheduler.gangs.placement import GangPlacer
from troupe.scheduler.gangs.preemption import GangPreemption
from troupe.scheduler.gangs.recovery import GangRecovery
from troupe.scheduler.gangs.report import GangReporter
from troupe.scheduler.gangs.timeouts import GangTimeouts
from troupe.scheduler.gangs.topology import TopologyPlacer
from troupe.scheduler.observe.explain import Explanations
from troupe.scheduler.observe.metrics import SchedulerMetrics
from troupe.scheduler.observe.stats import AttemptStats

log = structlog.get_logger("troupe.scheduler")


class Scheduler:
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
        namespaces: NamespaceLister | None = None,
    ) -> None:
        self.config = config
        self.client = client
        self.clock = clock
        self.groups = groups if groups is not None else GangDirectory()
        self.cache = Cache(clock, assumed_ttl=config.assumed_pod_ttl_seconds, listener=self.groups)
        self.background = TaskSupervisor("background")
        # With every slot taken, the loop goes on once a quarter of them are free:
        # their bindings then leave together (troupe.api.tasks.WorkerPool).
        limit = config.binding_concurrency
        self.bindings = WorkerPool("binding", limit=limit, refill=max(1, limit // 4))
        self.waiting = WaitingPods(clock, self.background)
        self.stats = stats if stats is not None else AttemptStats()
        self.metrics = metrics
        if metrics is not None:
            self.stats.hooks.append(metrics.attempt)
            self.stats.group_hooks.append(metrics.group_attempt)
            self.stats.bound_hooks.append(metrics.pod_bound)
        # Preemption: nominated pods count in Filter; PDBs are filled by an informer.
        self.pdbs: dict[str, PodDisruptionBudget] = {}
        nominator = Nominator()
        self.nominated = NominatedPods(nominator, self.cache)
        self.frameworks: dict[str, Framework] = {}
        for profile in config.profiles:
            fwk_observer = observer
            if fwk_observer is None and metrics is not None:
                fwk_observer = metrics.observer(profile.scheduler_name)
            kwargs = {"observer": fwk_observer} if fwk_observer is not None else {}
            self.frameworks[profile.scheduler_name] = Framework(
                profile,
                registry,
                client=client,
                clock=clock,
                table=self.cache.table,
                waiting=self.waiting,
                groups=self.groups,
                nominated=self.nominated,
                pdbs=self.pdbs,
                namespaces=namespaces,
                **kwargs,
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
            nominator=nominator,
            sort_key=first.sort_key,
        )
        if metrics is not None:
            metrics.attach(self.queue, self.cache, self.clock)
        self.groups.on_change(self.queue.group_changed)
        for fwk in self.frameworks.values():
            for name, plugin in fwk.plugins.items():
                events_to_register = getattr(plugin, "events_to_register", None)
                if events_to_register is not None:
                    self.queue.register_hints(name, events_to_register())
        # Events yield to bindings (see troupe.scheduler.cycle.writer).
        self.writer = BackgroundWriter(
            client, self.background, bindings=self.bindings, clock=self.clock
        )
        # The last failed attempt of every pending pod and group (``troupe explain``).
        self.explanations = Explanations()
        self.failures = FailureReporter(self.writer, self.queue, self.explanations)
        self.preemptions = Preemptions(
            client, self.writer, self.queue, self.waiting, self.background, metrics
        )
        # The pod cycle.
        self.algorithm = PodAlgorithm(
            self.cache,
            percentage_of_nodes_to_score=config.percentage_of_nodes_to_score,
            preemptions=self.preemptions,
            nominations=self.queue,
            ended=self.stats,
            sample_plugin_metrics=metrics is not None,
            seed=seed,
        )
        self.binding = BindingCycle(
            cache=self.cache,
            queue=self.queue,
            waiting=self.waiting,
            bindings=self.bindings,
            background=self.background,
            writer=self.writer,
            failures=self.failures,
            stats=self.stats,
            clock=clock,
            revert=self.algorithm.revert,
            metrics=metrics,
        )
        self.pod_batches = PodBatches(self.algorithm, clock)
        self.pod_cycle = PodCycle(
            algorithm=self.algorithm,
            batches=self.pod_batches,
            binding=self.binding,
            queue=self.queue,
            waiting=self.waiting,
            failures=self.failures,
            stats=self.stats,
            metrics=metrics,
        )
        # The group cycle.
        report = GangReporter(self.writer, self.groups, clock)
        placer = GangPlacer(self.algorithm, self.groups)
        topology = TopologyPlacer(placer, self.groups)
        self.gang_recovery = GangRecovery(
            clock=clock,
            queue=self.queue,
            cache=self.cache,
            groups=self.groups,
            report=report,
            client=client,
            tasks=self.background,
            policy_of=self._partial_gang_policy,
            default_timeout=config.gang_schedule_timeout_seconds,
            metrics=metrics,
        )
        if metrics is not None:
            # Exported as 0 from the start, so an alert has a series to read.
            metrics.partial_gangs_now(
                {(name, f.profile.partial_gang_policy): 0 for name, f in self.frameworks.items()}
            )
        self.group_cycle = GroupCycle(
            groups=self.groups,
            queue=self.queue,
            cache=self.cache,
            placer=placer,
            topology=topology,
            preemption=GangPreemption(
                preemptions=self.preemptions,
                cache=self.cache,
                groups=self.groups,
                pdbs=self.pdbs,
                new_cycle_state=self.algorithm.new_cycle_state,
                place=topology.place_quorum,
                in_place=topology.in_place,
                disrupted=report.disruption_target,
                clock=clock.now,
            ),
            admission=GangAdmission(
                binding=self.binding, queue=self.queue, groups=self.groups, report=report
            ),
            waiting=self.waiting,
            bindings=self.bindings,
            stats=self.stats,
            report=report,
            held=self.gang_recovery.holds,
            explanations=self.explanations,
        )
        self.gang_timeouts = GangTimeouts(
            clock=clock,
            queue=self.queue,
            groups=self.groups,
            report=report,
            default_timeout=config.gang_schedule_timeout_seconds,
        )
        self._stopping = False
        self._housekeeping: list[asyncio.Task[None]] = []

    # --- the loop ------------------------------------------------------------------

    def _pre_enqueue(self, pod: Pod) -> Status:
        fwk = self.frameworks.get(pod.spec.scheduler_name)
        return fwk.run_pre_enqueue(pod) if fwk is not None else SUCCESS

    def _group_of(self, pod: Pod) -> GroupRef | None:
        """The gang a pod is queued with (the CompositePodGroup its PodGroup is under,
        when that is a gang); None to queue it on its own — including
        in profiles that use the Coscheduling plugin, which gangs pod by pod at
        Permit (scheduler-plugins' algorithm)."""
        fwk = self.frameworks.get(pod.spec.scheduler_name)
        if fwk is None or fwk.pod_by_pod_gangs:
            return None
        ref = group_ref_of(pod)
        # KEP-6012: the pods of a gang CompositePodGroup's leaves are one entity.
        return self.groups.entity_ref(ref) if ref is not None else None

    def _partial_gang_policy(self, scheduler_name: str) -> str | None:
        fwk = self.frameworks.get(scheduler_name)
        return fwk.profile.partial_gang_policy if fwk is not None else None

    def owns(self, scheduler_name: str) -> bool:
        return scheduler_name in self.frameworks

    async def schedule_one(self) -> bool:
        """One pop and attempt; False once the queue is closed.

        No pod or group can stop the loop: an unexpected error fails that entity's
        attempt (``_attempt_failed``) and the loop goes on."""
        entity = await self.queue.pop()
        if entity is None:
            return False
        cycle = self.queue.scheduling_cycle
        try:
            if isinstance(entity, QueuedGroupInfo):
                await self._schedule_group(entity, cycle)
            elif isinstance(entity, QueuedPodInfo):
                await self._schedule_pod(entity, cycle)
            else:
                log.error("unknown queued entity kind", entity=entity.key)
                self.queue.done(entity.key)
        except Exception:
            self._attempt_failed(entity, cycle)
        return True

    def _attempt_failed(self, entity: QueuedEntity, cycle: int) -> None:
        """An attempt raised: log it with its traceback, count it as an error, undo
        what it assumed that is not being bound, and retry the entity after backoff."""
        members = (
            list(entity.members.values())
            if isinstance(entity, QueuedGroupInfo)
            else [entity.pod_info]
            if isinstance(entity, QueuedPodInfo)
            else []
        )
        profile = members[0].pod.spec.scheduler_name if members else ""
        log.exception("scheduling attempt failed", entity=entity.key, profile=profile)
        if isinstance(entity, QueuedGroupInfo):
            entity_type = "compositepodgroup" if entity.ref.composite else "podgroup"
            self.stats.group_attempt("error", profile, 0.0, entity_type)
        else:
            self.stats.attempt("error", profile, 0.0)
        remaining = []
        for info in members:
            if self.cache.uid_of(info.key) != info.pod.metadata.uid:
                remaining.append(info.key)
            elif not self.binding.in_flight(info.key) and not self.waiting.get(info.key):
                # Assumed by the failed attempt and handed to no binding cycle.
                self.cache.forget(info)
                self.stats.forget_member(info.key)
                remaining.append(info.key)
        # An error: retried after backoff, whatever the cluster events.
        entity.unschedulable_plugins = set()
        if isinstance(entity, QueuedGroupInfo):
            self.queue.requeue_group_remainder(entity, remaining, cycle, unschedulable_plugins=())
        elif remaining:
            self.queue.add_unschedulable_if_not_present(entity, cycle)
        else:
            self.queue.done(entity.key)

    async def _schedule_pod(self, entity: QueuedPodInfo, cycle: int) -> None:
        info = entity.pod_info
        fwk = self.frameworks.get(info.pod.spec.scheduler_name)
        cached_uid = self.cache.uid_of(info.key)
        if fwk is None or cached_uid == info.pod.metadata.uid:
            # Not ours (any more), or already assumed/bound: nothing to do.
            self.queue.done(info.key)
            return
        if cached_uid is not None:
            # A deleted pod of the same name is still being bound; try this one
            # once that binding has settled (it will fail on the UID precondition).
            entity.unschedulable_plugins = set()
            self.queue.add_unschedulable_if_not_present(entity, cycle)
            return
        await self.pod_cycle.run(fwk, entity, cycle)

    async def _schedule_group(self, entity: QueuedGroupInfo, cycle: int) -> None:
        first = next(iter(entity.members.values()), None)
        fwk = self.frameworks.get(first.pod.spec.scheduler_name) if first else None
        if fwk is None:
            self.queue.done(entity.key, entity)
            return
        await self.group_cycle.run(fwk, entity, cycle)

    # --- lifecycle ---------------------------------------------------------------------

    async def run(self) -> None:
        """Schedule until ``stop``; housekeeping (queue flushes, assumed-pod expiry)
        runs beside the loop."""
        self._housekeeping = [
            self.background.spawn(self.queue.run(), name="queue flush"),
            self.background.spawn(self._expire_assumed(), name="assumed expiry"),
        ]
        while not self._stopping and await self.schedule_one():
            pass

    async def _expire_assumed(self) -> None:
        while not self._stopping:
            await self.clock.sleep(1.0)
            self.housekeeping()

    def housekeeping(self) -> None:
        """Once a second: expire assumed pods never confirmed, report gang timeouts,
        recover gangs left partly bound."""
        for key in self.cache.cleanup_expired():
            self.queue.on_event(ASSIGNED_POD_DELETE, None, None)
            log.warning("binding never confirmed; capacity released", pod=key)
        self.gang_timeouts.sweep()
        self.gang_recovery.sweep()

    async def stop(self, grace: float = 10.0) -> None:
        """Stop popping, let in-flight bindings finish for ``grace`` seconds, then
        cancel what is left (each cancelled binding unreserves and forgets)."""
        self._stopping = True
        self.queue.close()
        # The housekeeping loops end only when told: no reason to wait for them.
        for task in self._housekeeping:
            task.cancel()
        await self.bindings.drain(timeout=grace)
        await self.bindings.cancel_all()
        await self.writer.flush(timeout=min(grace, 2.0))
        await self.background.drain(timeout=1.0)
        await self.background.cancel_all()
