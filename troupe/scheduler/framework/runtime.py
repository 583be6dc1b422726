"""The framework runtime: one profile's plugins and a runner per extension point.

``Framework.build`` instantiates every plugin a ``ResolvedProfile`` enables (one
instance per plugin, shared by all its extension points) and sorts them into the
extension points they implement, in profile order. ``troupe.scheduler.loop.schedule_one``
calls the ``run_*`` methods: those up to Score are here, Reserve to PostBind in
``troupe.scheduler.framework.runners``.

Every runner has the same shape: loop over the point's plugins, time the point
(and, on sampled cycles, each plugin) through one observer, stamp the failing
plugin's name on the Status, and wrap exceptions and errors as
``running "<Plugin>" <point> plugin: <error>``.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import structlog

from troupe.api.client import SchedulerClient
from troupe.api.clock import Clock
from troupe.api.config import ResolvedProfile
from troupe.api.cycle import CycleState
from troupe.api.framework import (
    MAX_NODE_SCORE,
    MIN_NODE_SCORE,
    BindPlugin,
    Diagnosis,
    FilterPlugin,
    FilterResult,
    PermitDisruptionPlugin,
    PermitPlugin,
    PostBindPlugin,
    PostFilterPlugin,
    PostFilterResult,
    PreBindPlugin,
    PreEnqueuePlugin,
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    QueueSortPlugin,
    ReservePlugin,
    ScoreExtensions,
    ScorePlugin,
    Sortable,
)
from troupe.api.gangs import GroupDirectory, NoGroups
from troupe.api.nodetable import BoolArray, IndexArray, IntArray, NodeTable
from troupe.api.objects import Pod
from troupe.api.pdb import PodDisruptionBudget
from troupe.api.podinfo import PodInfo
from troupe.api.status import SUCCESS, Code, Status
from troupe.plugins.registry import Registry
from troupe.scheduler.framework.instrument import (
    RECORD_PLUGIN_METRICS,
    Observer,
    no_observer,
    plugin_error,
    plugin_failure,
)
from troupe.scheduler.framework.messages import pre_filter_excluded_reason
from troupe.scheduler.framework.nominated import NominatedPods
from troupe.scheduler.framework.runners import CommitRunners
from troupe.scheduler.framework.waiting_pods import WaitingPod, WaitingPods

log = structlog.get_logger("troupe.framework")

__all__ = [
    "RECORD_PLUGIN_METRICS",
    "FilterOutcome",
    "Framework",
    "FrameworkHandle",
    "MergedPreFilterResult",
    "Observer",
]


def _no_common_node(plugins: Sequence[str]) -> str:
    """Upstream RunPreFilterPlugins' message when the PreFilter results of
    ``plugins`` (sorted) have no node in common."""
    if len(plugins) == 1:
        return f"node(s) didn't satisfy plugin {plugins[0]}"
    return f"node(s) didn't satisfy plugin(s) [{' '.join(plugins)}] simultaneously"


@dataclass(frozen=True, slots=True)
class MergedPreFilterResult(PreFilterResult):
    """The intersection of the PreFilter results of one cycle, with the plugins
    that restricted it (upstream's ``pluginsWithNodes``, sorted): the nodes it
    leaves out are theirs to explain in the diagnosis."""

    plugins: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class FilterOutcome:
    """The result of the Filter point over all candidate slots."""

    feasible: BoolArray
    # (plugin, its result, the slots it was first to reject): for the diagnosis.
    rejected_by: tuple[tuple[str, FilterResult, BoolArray], ...]
    status: Status = SUCCESS


class FrameworkHandle:
    """What plugins see of the scheduler (api.framework.Handle)."""

    def __init__(
        self,
        client: SchedulerClient,
        clock: Clock,
        table: NodeTable,
        scheduler_name: str,
        waiting: WaitingPods,
        groups: GroupDirectory | None = None,
    ) -> None:
        self._client, self._clock, self._table = client, clock, table
        self._scheduler_name, self._waiting = scheduler_name, waiting
        self._groups: GroupDirectory = groups if groups is not None else NoGroups()
        # Wired by the scheduler once the framework and the queue exist.
        self.framework: Framework | None = None
        self.nominated: NominatedPods | None = None
        self.pdbs: Mapping[str, PodDisruptionBudget] = {}

    @property
    def client(self) -> SchedulerClient:
        return self._client

    @property
    def clock(self) -> Clock:
        return self._clock

    @property
    def table(self) -> NodeTable:
        return self._table

    @property
    def scheduler_name(self) -> str:
        return self._scheduler_name

    @property
    def groups(self) -> GroupDirectory:
        return self._groups

    def get_waiting_pod(self, key: str) -> WaitingPod | None:
        return self._waiting.get(key)

    def run_filter_plugins_with_nominated_pods(self, pod: PodInfo, slot: int) -> Status:
        if self.framework is None or self.nominated is None:
            return Status.from_error(RuntimeError("the framework is not wired to a scheduler"))
        return self.nominated.check_node(self.framework, pod, self._table, slot)

    def pod_disruption_budgets(self) -> Sequence[PodDisruptionBudget]:
        return list(self.pdbs.values())

    def iterate_waiting_pods(self) -> Sequence[WaitingPod]:
        return self._waiting.all()


class Framework(CommitRunners):
    def __init__(
        self,
        profile: ResolvedProfile,
        plugins: dict[str, object],
        handle: FrameworkHandle,
        observer: Observer = no_observer,
    ) -> None:
        self.profile = profile
        self.name = profile.scheduler_name
        self.handle = handle
        self.plugins = plugins
        self.observe = observer
        points = profile.points

        def at(point: str, proto: type) -> list[tuple[str, object]]:
            out = []
            for ref in points.get(point, ()):
                plugin = plugins[ref.name]
                if not isinstance(plugin, proto):
                    raise TypeError(f"plugin {ref.name!r} does not implement {point}")
                out.append((ref.name, plugin))
            return out

        self.pre_enqueue: list[tuple[str, PreEnqueuePlugin]] = at("preEnqueue", PreEnqueuePlugin)  # type: ignore[assignment]
        sorts = at("queueSort", QueueSortPlugin)
        self.queue_sort: QueueSortPlugin | None = sorts[0][1] if sorts else None  # type: ignore[assignment]
        self.pre_filter: list[tuple[str, PreFilterPlugin]] = at("preFilter", PreFilterPlugin)  # type: ignore[assignment]
        self.filter: list[tuple[str, FilterPlugin]] = at("filter", FilterPlugin)  # type: ignore[assignment]
        self.post_filter: list[tuple[str, PostFilterPlugin]] = at("postFilter", PostFilterPlugin)  # type: ignore[assignment]
        self.pre_score: list[tuple[str, PreScorePlugin]] = at("preScore", PreScorePlugin)  # type: ignore[assignment]
        self.score: list[tuple[str, ScorePlugin, int]] = [
            (ref.name, plugins[ref.name], ref.weight)  # type: ignore[misc]
            for ref in points.get("score", ())
        ]
        self.reserve: list[tuple[str, ReservePlugin]] = at("reserve", ReservePlugin)  # type: ignore[assignment]
        self.permit: list[tuple[str, PermitPlugin]] = at("permit", PermitPlugin)  # type: ignore[assignment]
        self.permit_disruption: list[tuple[str, PermitDisruptionPlugin]] = at(  # type: ignore[assignment]
            "permitDisruption", PermitDisruptionPlugin
        )
        self.pre_bind: list[tuple[str, PreBindPlugin]] = at("preBind", PreBindPlugin)  # type: ignore[assignment]
        self.bind: list[tuple[str, BindPlugin]] = at("bind", BindPlugin)  # type: ignore[assignment]
        self.post_bind: list[tuple[str, PostBindPlugin]] = at("postBind", PostBindPlugin)  # type: ignore[assignment]
        for name, plugin, _ in self.score:
            if not isinstance(plugin, ScorePlugin):
                raise TypeError(f"plugin {name!r} does not implement score")
        # Profiles with scheduler-plugins' Coscheduling gang pod by pod (Permit
        # barrier); all others place a gang in one pod-group cycle.
        self.pod_by_pod_gangs = "Coscheduling" in plugins
        # PostFilter runs of DefaultPreemption count as preemption attempts.
        self.preempts = any(name == "DefaultPreemption" for name, _ in self.post_filter)
        # Protocol isinstance checks are slow: decide once, not every cycle.
        self._normalizers: dict[str, ScoreExtensions] = {
            name: plugin for name, plugin, _ in self.score if isinstance(plugin, ScoreExtensions)
        }

    @classmethod
    def build(
        cls,
        profile: ResolvedProfile,
        registry: Registry,
        handle: FrameworkHandle,
        observer: Observer = no_observer,
    ) -> Framework:
        names: list[str] = []
        for refs in profile.points.values():
            names.extend(r.name for r in refs if r.name not in names)
        plugins = {name: registry[name].factory(profile.args.get(name), handle) for name in names}
        return cls(profile, plugins, handle, observer)

    # --- queue side ---------------------------------------------------------------

    def less(self, a: Sortable, b: Sortable) -> bool:
        if self.queue_sort is None:
            return (-a.priority, a.timestamp, a.key) < (-b.priority, b.timestamp, b.key)
        return self.queue_sort.less(a, b)

    def run_pre_enqueue(self, pod: Pod) -> Status:
        """SUCCESS, or the first plugin's gate. Timed per point only: there is no
        cycle state to sample per-plugin durations on."""
        start = time.perf_counter()
        status = SUCCESS
        for name, plugin in self.pre_enqueue:
            try:
                st = plugin.pre_enqueue(pod)
            except Exception as exc:
                status = plugin_error(name, "preEnqueue", exc)
                break
            if not st.is_success:
                status = plugin_failure(name, "preEnqueue", st)
                break
        self._timed("PreEnqueue", start, status)
        return status

    # --- scheduling cycle ---------------------------------------------------------

    def run_pre_filter(
        self, state: CycleState, pod: PodInfo, table: NodeTable
    ) -> tuple[MergedPreFilterResult | None, Status]:
        """The merged node restriction (None: all nodes) and the point's status."""
        start = time.perf_counter()
        merged: frozenset[str] | None = None
        restricting: list[str] = []
        status = SUCCESS
        sampled = state.get(RECORD_PLUGIN_METRICS)
        for name, plugin in self.pre_filter:
            t = time.perf_counter()
            try:
                result, st = plugin.pre_filter(state, pod, table)
            except Exception as exc:
                status = plugin_error(name, "preFilter", exc)
                break
            if sampled:
                self._plugin_timed("PreFilter", name, t, st)
            if st.is_skip:
                state.skip_filter_plugins.add(name)
                continue
            if not st.is_success:
                status = plugin_failure(name, "preFilter", st)
                break
            if result is not None and result.node_names is not None:
                restricting.append(name)
                merged = result.node_names if merged is None else merged & result.node_names
                if not merged:
                    # Every restricting plugin is to blame: returned with the result.
                    status = Status.unresolvable(_no_common_node(sorted(restricting)))
                    break
        self._timed("PreFilter", start, status)
        if merged is None or (merged and not status.is_success):
            # No restriction, or a plugin's own rejection (that plugin alone explains it).
            return None, status
        return MergedPreFilterResult(merged, tuple(sorted(restricting))), status

    def diagnose_pre_filter(
        self, status: Status, pre: MergedPreFilterResult | None, num_nodes: int
    ) -> Diagnosis:
        """Why no node was even filtered: the rejecting plugin, or every plugin whose
        node sets did not intersect (``pre``); the message replaces the per-node
        counts (upstream FitError.PreFilterMsg)."""
        plugins = set(pre.plugins) if pre is not None else set()
        if status.plugin:
            plugins.add(status.plugin)
        return Diagnosis(
            num_nodes=num_nodes, unschedulable_plugins=plugins, pre_filter_message=status.message
        )

    def run_filter(
        self, state: CycleState, pod: PodInfo, table: NodeTable, candidates: BoolArray
    ) -> FilterOutcome:
        start = time.perf_counter()
        feasible = candidates
        rejected: list[tuple[str, FilterResult, BoolArray]] = []
        status = SUCCESS
        sampled = state.get(RECORD_PLUGIN_METRICS)
        for name, plugin in self.filter:
            if name in state.skip_filter_plugins:
                continue
            t = time.perf_counter()
            try:
                result = plugin.filter(state, pod, table)
            except Exception as exc:
                status = plugin_error(name, "filter", exc)
                break
            if sampled:
                self._plugin_timed("Filter", name, t, result.status)
            if result.status.code is Code.ERROR:
                status = plugin_failure(name, "filter", result.status)
                break
            newly = feasible & ~result.feasible
            if newly.any():
                rejected.append((name, result, newly))
                feasible = feasible & result.feasible
                if not feasible.any():
                    break
        nominated = self.handle.nominated
        if nominated is not None and status.is_success and feasible.any():
            # Room promised to nominated pods of equal or higher priority is taken.
            feasible, extra = nominated.adjust(self, state, pod, table, feasible)
            rejected.extend(extra)
        self._timed("Filter", start, status)
        return FilterOutcome(feasible, tuple(rejected), status)

    def diagnose(
        self,
        outcome: FilterOutcome,
        num_nodes: int,
        left_out: BoolArray | None = None,
        pre: MergedPreFilterResult | None = None,
    ) -> Diagnosis:
        """Count, per reason, the nodes each plugin was first to reject.

        ``left_out``: the nodes the PreFilter result ``pre`` excluded. As upstream's
        findNodesThatFitPod, they count as UnschedulableAndUnresolvable with
        ``node(s) didn't satisfy plugin(s) [<plugins>]``, and the restricting plugins
        join the rejectors (their queueing hints release the pod)."""
        diagnosis = Diagnosis(num_nodes=num_nodes)
        counts = diagnosis.reason_counts
        unresolvable: BoolArray | None = None
        if left_out is not None and pre is not None:
            n = int(np.count_nonzero(left_out))
            if n:
                counts[pre_filter_excluded_reason(pre.plugins)] = n
                unresolvable = left_out
            diagnosis.unschedulable_plugins.update(pre.plugins)
        for name, result, newly in outcome.rejected_by:
            diagnosis.unschedulable_plugins.add(name)
            for rejection in result.explain():
                hit = rejection.nodes & newly
                n = int(np.count_nonzero(hit))
                if n:
                    counts[rejection.reason] = counts.get(rejection.reason, 0) + n
                    if rejection.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                        unresolvable = hit if unresolvable is None else unresolvable | hit
        diagnosis.unresolvable = unresolvable
        return diagnosis

    def run_post_filter(
        self, state: CycleState, pod: PodInfo, table: NodeTable, diagnosis: Diagnosis
    ) -> tuple[PostFilterResult | None, Status]:
        start = time.perf_counter()
        status = Status.unschedulable("no PostFilter plugin made the pod schedulable")
        result: PostFilterResult | None = None
        sampled = state.get(RECORD_PLUGIN_METRICS)
        for name, plugin in self.post_filter:
            t = time.perf_counter()
            try:
                result, st = plugin.post_filter(state, pod, table, diagnosis)
            except Exception as exc:
                status = plugin_error(name, "postFilter", exc)
                break
            if sampled:
                self._plugin_timed("PostFilter", name, t, st)
            if st.is_success or st.code is Code.ERROR:
                status = plugin_failure(name, "postFilter", st)
                break
            if st.message:
                diagnosis.post_filter_message = st.message
        self._timed("PostFilter", start, status)
        return result, status

    def run_pre_score(
        self, state: CycleState, pod: PodInfo, table: NodeTable, slots: IndexArray
    ) -> Status:
        start = time.perf_counter()
        status = SUCCESS
        sampled = state.get(RECORD_PLUGIN_METRICS)
        for name, plugin in self.pre_score:
            t = time.perf_counter()
            try:
                st = plugin.pre_score(state, pod, table, slots)
            except Exception as exc:
                status = plugin_error(name, "preScore", exc)
                break
            if sampled:
                self._plugin_timed("PreScore", name, t, st)
            if st.is_skip:
                state.skip_score_plugins.add(name)
            elif not st.is_success:
                status = plugin_failure(name, "preScore", st)
                break
        self._timed("PreScore", start, status)
        return status

    def run_score(
        self, state: CycleState, pod: PodInfo, table: NodeTable, slots: IndexArray
    ) -> tuple[IntArray, Status]:
        """Weighted sum of every score plugin's normalized scores, per slot."""
        start = time.perf_counter()
        total = np.zeros(len(slots), dtype=np.int64)
        status = SUCCESS
        sampled = state.get(RECORD_PLUGIN_METRICS)
        for name, plugin, weight in self.score:
            if name in state.skip_score_plugins:
                continue
            t = time.perf_counter()
            try:
                scores = plugin.score(state, pod, table, slots)
                normalizer = self._normalizers.get(name)
                if normalizer is not None:
                    normalizer.normalize_score(state, pod, scores)
            except Exception as exc:
                status = plugin_error(name, "score", exc)
                break
            if len(scores) and (scores.min() < MIN_NODE_SCORE or scores.max() > MAX_NODE_SCORE):
                status = plugin_error(
                    name,
                    "score",
                    f"score out of range [{MIN_NODE_SCORE}, {MAX_NODE_SCORE}]: "
                    f"{int(scores.min())}..{int(scores.max())}",
                )
                break
            total += scores * weight
            if sampled:
                # Upstream times Score and NormalizeScore apart; here they are one step.
                self._plugin_timed("Score", name, t, SUCCESS)
        self._timed("Score", start, status)
        return total, status
