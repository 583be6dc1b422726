"""The composition root: every part of the scheduler, built once with what it uses.

``build_scheduler`` is upstream's ``scheduler.New()``: from a resolved configuration,
the plugin registry and a client it builds the cache, one framework per profile, the
queue, the pod cycle, the group cycle, the binding cycle and the housekeeping parts,
each complete when built and given only the collaborators it uses, and returns them
as ``Wired``. ``Scheduler`` (``troupe.scheduler.loop.schedule_one``) is only the loop
over them; ``ClusterEventHandlers`` gets the narrow things it calls
(``Wired.handlers``), and the API objects the profiles' plugins watch are merged,
once, into one watch per resource (``Wired.object_watches``, which the daemon starts
informers for). ``SchedulerDaemon`` (``troupe.scheduler.service.daemon``), the
engine tests and the in-process benchmarks all build through here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from troupe.api.client import SchedulerClient
from troupe.api.clock import Clock
from troupe.api.config import ResolvedConfig
from troupe.api.framework import NamespaceLister
from troupe.api.pdb import PodDisruptionBudgets
from troupe.api.tasks import TaskSupervisor, WorkerPool
from troupe.api.watches import SharedWatch, share_watches
from troupe.plugins.registry import Registry
from troupe.queue.nominator import Nominator
from troupe.queue.scheduling_queue import SchedulingQueue
from troupe.scheduler.cache import Cache
from troupe.scheduler.cycle.algorithm import PodAlgorithm
from troupe.scheduler.cycle.binding_cycle import BindingCycle
from troupe.scheduler.cycle.evictions import Preemptions
from troupe.scheduler.cycle.failure import FailureReporter
from troupe.scheduler.cycle.pod_batch import PodBatches
from troupe.scheduler.cycle.pod_cycle import PodCycle
from troupe.scheduler.cycle.writer import EVENT_HOLD_SECONDS, BackgroundWriter
from troupe.scheduler.framework.instrument import Observer
from troupe.scheduler.framework.nominated import NominatedPods
from troupe.scheduler.framework.runtime import Framework
from troupe.scheduler.framework.waiting_pods import WaitingPods
from troupe.scheduler.gangs.admission import GangAdmission
from troupe.scheduler.gangs.directory import GangDirectory
from troupe.scheduler.gangs.group_algorithm import GroupAlgorithm
from troupe.scheduler.gangs.group_cycle import GroupCycle
from troupe.scheduler.gangs.placement import GangPlacer
from troupe.scheduler.gangs.preemption import GangPreemption
from troupe.scheduler.gangs.recovery import GangRecovery
from troupe.scheduler.gangs.report import GangReporter
from troupe.scheduler.gangs.submit import GroupSubmit
from troupe.scheduler.gangs.timeouts import GangTimeouts
from troupe.scheduler.gangs.topology import TopologyPlacer
from troupe.scheduler.loop.binding_limit import BindingConcurrency
from troupe.scheduler.loop.profiles import Profiles
from troupe.scheduler.loop.schedule_one import LoopHooks, LoopParts, Scheduler
from troupe.scheduler.observe.explain import Explanations
from troupe.scheduler.observe.metrics import SchedulerMetrics
from troupe.scheduler.observe.stats import AttemptStats
from troupe.scheduler.service.handlers import ClusterEventHandlers, PodListener


@dataclass(frozen=True, slots=True)
class Options:
    """How the parts are tuned; the defaults are production's."""

    seed: int = 0
    # KEP-5598: place runs of identical gang members as a batch. Off only to compare
    # a batched placement with the member-by-member one it must equal.
    batching: bool = True
    # Seconds an event yields to bindings in flight at most (``BackgroundWriter``).
    event_hold: float = EVENT_HOLD_SECONDS
    hooks: LoopHooks = field(default_factory=LoopHooks)
    # Times every extension point (default: the metrics' observer, or none).
    observer: Observer | None = None


@dataclass(frozen=True, slots=True)
class Wired:
    """Every part of one scheduler, as built by ``build_scheduler``."""

    scheduler: Scheduler
    profiles: Profiles
    cache: Cache
    queue: SchedulingQueue
    groups: GangDirectory
    waiting: WaitingPods
    writer: BackgroundWriter
    explanations: Explanations
    pdbs: PodDisruptionBudgets
    algorithm: PodAlgorithm
    pod_batches: PodBatches
    pod_cycle: PodCycle
    binding: BindingCycle
    group_cycle: GroupCycle
    gang_timeouts: GangTimeouts
    gang_recovery: GangRecovery
    stats: AttemptStats
    # One per resource the profiles' plugins watch (``troupe.api.watches``); empty
    # when none does, and the daemon then starts nothing for them.
    object_watches: list[SharedWatch]
    # Sizes the binding slots; None when they are fixed (``_binding_limit``).
    binding_limit: BindingConcurrency | None = None

    def handlers(self, pod_listener: PodListener | None = None) -> ClusterEventHandlers:
        """The handlers cluster events go through, with the parts they call."""
        return ClusterEventHandlers(
            cache=self.cache,
            queue=self.queue,
            groups=self.groups,
            writer=self.writer,
            explanations=self.explanations,
            binding=self.binding,
            waiting=self.waiting,
            batches=self.pod_batches,
            owns=self.profiles.owns,
            pod_listener=pod_listener,
        )


@dataclass(frozen=True, slots=True)
class _Core:
    """The parts every cycle shares."""

    config: ResolvedConfig
    client: SchedulerClient
    clock: Clock
    groups: GangDirectory
    cache: Cache
    stats: AttemptStats
    metrics: SchedulerMetrics | None
    background: TaskSupervisor
    bindings: WorkerPool
    waiting: WaitingPods


def build_scheduler(
    config: ResolvedConfig,
    registry: Registry,
    client: SchedulerClient,
    clock: Clock,
    *,
    options: Options | None = None,
    stats: AttemptStats | None = None,
    groups: GangDirectory | None = None,
    metrics: SchedulerMetrics | None = None,
    namespaces: NamespaceLister | None = None,
) -> Wired:
    options = options or Options()
    core = _core(config, client, clock, groups or GangDirectory(), stats, metrics)
    pdbs = PodDisruptionBudgets()
    nominator = Nominator()
    nominated = NominatedPods(nominator, core.cache)
    frameworks = {
        profile.scheduler_name: Framework(
            profile,
            registry,
            client=client,
            clock=clock,
            table=core.cache.table,
            waiting=core.waiting,
            groups=core.groups,
            nominated=nominated,
            pdbs=pdbs,
            namespaces=namespaces,
            observer=_observer(options, metrics, profile.scheduler_name),
        )
        for profile in config.profiles
    }
    profiles = Profiles(frameworks, core.groups)
    queue = _queue(core, profiles, nominator)
    pods = _Pods(core, queue, options)
    gangs = _Gangs(core, queue, pods, profiles, options)
    binding_limit = _binding_limit(core)
    sweeps: tuple[Callable[[], object], ...] = (gangs.timeouts.sweep, gangs.recovery.sweep)
    if binding_limit is not None:
        sweeps += (binding_limit.adjust,)
    scheduler = Scheduler(
        LoopParts(
            profiles=profiles,
            queue=queue,
            cache=core.cache,
            pod_cycle=pods.cycle,
            group_cycle=gangs.cycle,
            binding=pods.binding,
            waiting=core.waiting,
            stats=core.stats,
            bindings=core.bindings,
            writer=pods.writer,
            background=core.background,
            clock=clock,
            sweeps=sweeps,
            hooks=options.hooks,
        )
    )
    return Wired(
        scheduler=scheduler,
        profiles=profiles,
        cache=core.cache,
        queue=queue,
        groups=core.groups,
        waiting=core.waiting,
        writer=pods.writer,
        explanations=pods.explanations,
        pdbs=pdbs,
        algorithm=pods.algorithm,
        pod_batches=pods.batches,
        pod_cycle=pods.cycle,
        binding=pods.binding,
        group_cycle=gangs.cycle,
        gang_timeouts=gangs.timeouts,
        gang_recovery=gangs.recovery,
        stats=core.stats,
        object_watches=share_watches(
            (f"{plugin} (profile {name})", watch)
            for name, fwk in frameworks.items()
            for plugin, watch in fwk.object_watches
        ),
        binding_limit=binding_limit,
    )


def _core(
    config: ResolvedConfig,
    client: SchedulerClient,
    clock: Clock,
    groups: GangDirectory,
    stats: AttemptStats | None,
    metrics: SchedulerMetrics | None,
) -> _Core:
    stats = stats if stats is not None else AttemptStats()
    if metrics is not None:
        stats.hooks.append(metrics.attempt)
        stats.group_hooks.append(metrics.group_attempt)
        stats.bound_hooks.append(metrics.pod_bound)
    background = TaskSupervisor("background")
    # With every slot taken, the loop goes on once a quarter of them are free:
    # their bindings then leave together (troupe.api.tasks.WorkerPool).
    limit = config.binding_concurrency
    return _Core(
        config=config,
        client=client,
        clock=clock,
        groups=groups,
        cache=Cache(clock, assumed_ttl=config.assumed_pod_ttl_seconds, listener=groups),
        stats=stats,
        metrics=metrics,
        background=background,
        bindings=WorkerPool("binding", limit=limit, refill=max(1, limit // 4)),
        waiting=WaitingPods(clock, background),
    )


def _binding_limit(core: _Core) -> BindingConcurrency | None:
    """The binding slots follow the client's qps and the API server's latency, between
    ``bindingConcurrency`` and ``maxBindingConcurrency``, adjusted once a second with
    the loop's housekeeping (``troupe.scheduler.loop.binding_limit``). None for a
    client that does not time its bindings, or when the two are equal."""
    metrics = core.metrics
    control = BindingConcurrency.for_client(
        core.bindings,
        core.client,
        core.clock.now,
        floor=core.config.binding_concurrency,
        ceiling=core.config.max_binding_concurrency,
        on_change=metrics.binding_limit if metrics is not None else None,
    )
    if metrics is not None:
        metrics.binding_limit(core.bindings.limit)
    return control


def _observer(options: Options, metrics: SchedulerMetrics | None, profile: str) -> Observer | None:
    if options.observer is not None:
        return options.observer
    return metrics.observer(profile) if metrics is not None else None


def _queue(core: _Core, profiles: Profiles, nominator: Nominator) -> SchedulingQueue:
    """The queue, ordered by the first profile's QueueSort, with every plugin's
    queueing hints; it hears of every change to a group's policy."""
    config, metrics, first = core.config, core.metrics, profiles.first
    queue = SchedulingQueue(
        first.less,
        core.clock,
        pre_enqueue=profiles.pre_enqueue,
        initial_backoff=config.pod_initial_backoff_seconds,
        max_backoff=config.pod_max_backoff_seconds,
        max_in_unschedulable=config.pod_max_in_unschedulable_pods_duration,
        group_of=profiles.group_of,
        groups=core.groups,
        on_incoming=metrics.incoming if metrics is not None else None,
        nominator=nominator,
        sort_key=first.sort_key,
    )
    if metrics is not None:
        metrics.watch_state(queue, core.cache, core.clock)
    core.groups.on_change(queue.group_changed)
    for fwk in profiles.values():
        for name, hints in fwk.queueing_hints:
            queue.register_hints(name, hints)
    return queue


class _Pods:
    """The pod cycle's parts (the per-pod algorithm, batching, preemption, the
    binding cycle) and what reports failures."""

    def __init__(self, core: _Core, queue: SchedulingQueue, options: Options) -> None:
        client, clock, metrics = core.client, core.clock, core.metrics
        # Events yield to bindings (see troupe.scheduler.cycle.writer).
        self.writer = BackgroundWriter(
            client,
            core.background,
            bindings=core.bindings,
            clock=clock,
            event_hold=options.event_hold,
        )
        # The last failed attempt of every pending pod and group (``troupe explain``).
        self.explanations = Explanations()
        failures = FailureReporter(self.writer, queue, self.explanations)
        self.preemptions = Preemptions(
            client, self.writer, queue, core.waiting, core.background, metrics
        )
        self.algorithm = PodAlgorithm(
            core.cache,
            percentage_of_nodes_to_score=core.config.percentage_of_nodes_to_score,
            preemptions=self.preemptions,
            nominations=queue,
            ended=core.stats,
            sample_plugin_metrics=metrics is not None,
            seed=options.seed,
        )
        self.binding = BindingCycle(
            cache=core.cache,
            queue=queue,
            waiting=core.waiting,
            bindings=core.bindings,
            background=core.background,
            writer=self.writer,
            failures=failures,
            stats=core.stats,
            clock=clock,
            revert=self.algorithm.revert,
            metrics=metrics,
        )
        self.batches = PodBatches(self.algorithm, clock)
        self.cycle = PodCycle(
            algorithm=self.algorithm,
            batches=self.batches,
            binding=self.binding,
            queue=queue,
            waiting=core.waiting,
            failures=failures,
            stats=core.stats,
            metrics=metrics,
        )


class _Gangs:
    """The group cycle with its parts (placement, preemption, admission, reports),
    and the gang housekeeping (timeouts, recovery of partly bound gangs)."""

    def __init__(
        self,
        core: _Core,
        queue: SchedulingQueue,
        pods: _Pods,
        profiles: Profiles,
        options: Options,
    ) -> None:
        clock, groups = core.clock, core.groups
        report = GangReporter(pods.writer, groups, clock)
        placer = GangPlacer(pods.algorithm, groups, batching=options.batching)
        topology = TopologyPlacer(placer, groups)
        timeout = core.config.gang_schedule_timeout_seconds
        self.recovery = GangRecovery(
            clock=clock,
            queue=queue,
            cache=core.cache,
            groups=groups,
            report=report,
            client=core.client,
            tasks=core.background,
            policy_of=profiles.partial_gang_policy,
            default_timeout=timeout,
            metrics=core.metrics,
        )
        if core.metrics is not None:
            # Exported as 0 from the start, so an alert has a series to read.
            core.metrics.partial_gangs_now(
                {(name, f.profile.partial_gang_policy): 0 for name, f in profiles.items()}
            )
        self.timeouts = GangTimeouts(
            clock=clock, queue=queue, groups=groups, report=report, default_timeout=timeout
        )
        preemption = GangPreemption(
            preemptions=pods.preemptions,
            cache=core.cache,
            groups=groups,
            new_cycle_state=pods.algorithm.new_cycle_state,
            place=topology.place_quorum,
            in_place=topology.in_place,
            disrupted=report.disruption_target,
            clock=clock.now,
        )
        admission = GangAdmission(binding=pods.binding, queue=queue, groups=groups, report=report)
        self.cycle = GroupCycle(
            groups=groups,
            queue=queue,
            cache=core.cache,
            algorithm=GroupAlgorithm(
                placer=placer, topology=topology, preemption=preemption, waiting=core.waiting
            ),
            submit=GroupSubmit(
                queue=queue,
                admission=admission,
                preemption=preemption,
                stats=core.stats,
                report=report,
                explanations=pods.explanations,
            ),
            stats=core.stats,
            held=self.recovery.holds,
        )
