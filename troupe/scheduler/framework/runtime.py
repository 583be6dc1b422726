"""The framework runtime: one profile's plugins and a runner per extension point.

``Framework`` instantiates every plugin a ``ResolvedProfile`` enables (one instance
per plugin, shared by all its extension points) and sorts them into the extension
points they implement, in profile order. The framework is the plugins' handle
(upstream ``frameworkImpl`` implements ``framework.Handle``): each plugin is built
with it, and everything the handle serves (the client, the NodeTable, waiting pods,
nominated pods, PodDisruptionBudgets, namespace labels) is given to the constructor,
so a framework is complete once built.

The pod cycle (``troupe.scheduler.cycle``) and the group cycle
(``troupe.scheduler.gangs``) call the ``run_*`` methods. PreFilter to Score work on
whole node arrays and are written out here, specialised for speed; every other
point runs through the one runner shape of ``troupe.scheduler.framework.runners``:
PreEnqueue here; Reserve to PostBind in ``fwk.binding``
(``troupe.scheduler.framework.binding_points``); the pod-group points in
``fwk.group`` (``troupe.scheduler.framework.group_points``). The plugins are sorted
into their points, and what they declare read, once (``points.py``).
Every runner times the point (and, on sampled cycles, each plugin) through one
observer, stamps the failing plugin's name on the Status, and wraps exceptions and
errors as ``running "<Plugin>" <point> plugin: <error>``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import structlog

from troupe.api.client import SchedulerClient
from troupe.api.clock import Clock
from troupe.api.config import ResolvedProfile
from troupe.api.cycle import CycleState
from troupe.api.framework import (
    MAX_NODE_SCORE,
    MIN_NODE_SCORE,
    Diagnosis,
    FilterResult,
    NamespaceLabels,
    NamespaceLister,
    PostFilterResult,
    QueueSortKey,
    Sortable,
)
from troupe.api.gangs import GroupDirectory, NoGroups
from troupe.api.nodetable import BoolArray, IndexArray, IntArray, NodeTable
from troupe.api.objects import Pod
from troupe.api.pdb import PdbLister, PodDisruptionBudget, PodDisruptionBudgets
from troupe.api.podinfo import PodInfo
from troupe.api.status import CODE_NAMES, SUCCESS, Code, Status
from troupe.plugins.registry import Registry
from troupe.scheduler.framework import runners
from troupe.scheduler.framework.binding_points import BindingRunners
from troupe.scheduler.framework.diagnosis import (
    FilterOutcome,
    MergedPreFilterResult,
    no_common_node,
)
from troupe.scheduler.framework.group_points import GroupRunners
from troupe.scheduler.framework.instrument import (
    RECORD_PLUGIN_METRICS,
    Observer,
    no_observer,
    plugin_error,
    plugin_failure,
)
from troupe.scheduler.framework.nominated import NominatedPods, remove_pods
from troupe.scheduler.framework.points import capabilities, sort_plugins
from troupe.scheduler.framework.waiting_pods import WaitingPod, WaitingPods

log = structlog.get_logger("troupe.framework")

__all__ = [
    "RECORD_PLUGIN_METRICS",
    "FilterOutcome",
    "Framework",
    "MergedPreFilterResult",
    "Observer",
]


class _NoNominations:
    def pods_for_node(self, node_name: str) -> list[PodInfo]:
        return []

    def nodes(self) -> list[str]:
        return []

    def delete(self, key: str) -> None:
        return None


def _default_sort_key(entity: Sortable) -> tuple[Any, ...]:
    """``Framework.less`` without a QueueSort plugin, as a key."""
    return (-entity.priority, entity.timestamp, entity.key)


class Framework:
    def __init__(
        self,
        profile: ResolvedProfile,
        registry: Registry,
        *,
        client: SchedulerClient,
        clock: Clock,
        table: NodeTable,
        waiting: WaitingPods,
        groups: GroupDirectory | None = None,
        nominated: NominatedPods | None = None,
        pdbs: PdbLister | None = None,
        namespaces: NamespaceLister | None = None,
        observer: Observer | None = None,
    ) -> None:
        self.profile = profile
        self.name = profile.scheduler_name
        self.observe: Observer = observer if observer is not None else no_observer
        self._client, self._clock, self._table = client, clock, table
        self._waiting = waiting
        self._groups: GroupDirectory = groups if groups is not None else NoGroups()
        self.nominated = nominated if nominated is not None else NominatedPods(_NoNominations(), ())
        self._pdbs: PdbLister = pdbs if pdbs is not None else PodDisruptionBudgets()
        self._namespaces = namespaces if namespaces is not None else NamespaceLabels()
        names: list[str] = []
        for refs in profile.points.values():
            names.extend(r.name for r in refs if r.name not in names)
        # The framework is the handle every plugin is built with (upstream).
        self.plugins = {n: registry[n].factory(profile.args.get(n), self) for n in names}
        points = self.points = sort_plugins(profile.points, self.plugins)
        declared = self.capabilities = capabilities(points, self.plugins)
        # The hot path's plugin lists (PreFilter to Score run here, specialised).
        self.queue_sort = points.queue_sort
        self.pre_filter, self.filter = points.pre_filter, points.filter
        self.post_filter, self.pre_score, self.score = (
            points.post_filter,
            points.pre_score,
            points.score,
        )
        self.pod_group_post_filter = points.pod_group_post_filter
        self.placement_generate = points.placement_generate
        self.placement_levels = declared.placement_levels
        self.traits = declared.traits
        self.queueing_hints = declared.queueing_hints
        self.object_watches = declared.object_watches
        self.capacity_resources = declared.capacity_resources
        # PreFilter plugins told of pods added or removed by a simulation (AddPod,
        # RemovePod), and the pods preemption's simulation has taken off the table.
        self.pre_filter_extensions = declared.pre_filter_extensions
        self._taken_off: dict[str, tuple[PodInfo, str]] = {}
        self._normalizers = declared.normalizers
        # Every other point runs through the one runner shape (framework.runners).
        self.binding = BindingRunners(points, self.observe)
        self.group = GroupRunners(points, declared.placement_normalizers, self.observe)
        # Profiles with a Permit-barrier gang plugin (scheduler-plugins'
        # Coscheduling) gang pod by pod; all others place a gang in one cycle.
        self.pod_by_pod_gangs = any(t.gang_permit_barrier for t in self.traits.values())
        # PostFilter runs of a preemption plugin count as preemption attempts; the
        # victims it rejects at Permit are rejected in its name.
        preemptors = [n for n, _ in self.post_filter if self.traits[n].preemption]
        self.preempts = bool(preemptors)
        self.preemption_plugin = next(
            iter(preemptors + [n for n, _ in self.pod_group_post_filter]), ""
        )

    # --- the handle plugins are built with (api.framework.Handle) --------------------

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
        return self.name

    @property
    def groups(self) -> GroupDirectory:
        return self._groups

    def get_waiting_pod(self, key: str) -> WaitingPod | None:
        return self._waiting.get(key)

    def iterate_waiting_pods(self) -> Sequence[WaitingPod]:
        return self._waiting.all()

    def run_filter_plugins_with_nominated_pods(self, pod: PodInfo, slot: int) -> Status:
        return self.nominated.check_node(
            self.pre_filter,
            self.filter,
            pod,
            self._table,
            slot,
            extensions=self.pre_filter_extensions,
            taken_off=list(self._taken_off.values()),
        )

    def take_off(self, pod: PodInfo, node: str) -> None:
        self._table.remove_pod(pod, node)
        self._taken_off[pod.key] = (pod, node)

    def put_back(self, pod: PodInfo, node: str) -> None:
        self._table.add_pod(pod, node)
        self._taken_off.pop(pod.key, None)

    def nominated_for_node(self, pod: PodInfo, node: str) -> list[PodInfo]:
        return self.nominated.for_node(pod, node)

    def pod_disruption_budgets(self) -> Sequence[PodDisruptionBudget]:
        return self._pdbs.list()

    @property
    def namespaces(self) -> NamespaceLister:
        return self._namespaces

    # --- queue side ---------------------------------------------------------------

    def less(self, a: Sortable, b: Sortable) -> bool:
        if self.queue_sort is None:
            return (-a.priority, a.timestamp, a.key) < (-b.priority, b.timestamp, b.key)
        return self.queue_sort.less(a, b)

    @property
    def sort_key(self) -> Callable[[Sortable], tuple[Any, ...]] | None:
        """``less`` as a key, when the QueueSort plugin gives its order as one
        (``QueueSortKey``); None when only ``less`` can order entities."""
        if self.queue_sort is None:
            return _default_sort_key
        if isinstance(self.queue_sort, QueueSortKey):
            return self.queue_sort.sort_key
        return None

    def run_pre_enqueue(self, pod: Pod) -> Status:
        """SUCCESS, or the first plugin's gate. Timed per point only: there is no
        cycle state to sample per-plugin durations on."""
        return runners.run(
            self.observe,
            runners.PRE_ENQUEUE,
            self.points.pre_enqueue,
            None,
            lambda _, p: p.pre_enqueue(pod),
        )

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
                    status = Status.unresolvable(no_common_node(sorted(restricting)))
                    break
        if self._taken_off and self.pre_filter_extensions and status.is_success:
            # Inside preemption's simulation: the pods it took off, told (RemovePod).
            status = remove_pods(
                self.pre_filter_extensions, state, pod, list(self._taken_off.values())
            )
        self._point_timed("PreFilter", start, status)
        if merged is None or (merged and not status.is_success):
            # No restriction, or a plugin's own rejection (that plugin alone explains it).
            return None, status
        return MergedPreFilterResult(merged, tuple(sorted(restricting))), status

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
        if status.is_success and feasible.any():
            # Room promised to nominated pods of equal or higher priority is taken.
            feasible, extra = self.nominated.adjust(
                self.filter, state, pod, table, feasible, self.pre_filter_extensions
            )
            rejected.extend(extra)
        self._point_timed("Filter", start, status)
        return FilterOutcome(feasible, tuple(rejected), status)

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
        self._point_timed("PostFilter", start, status)
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
        self._point_timed("PreScore", start, status)
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
        self._point_timed("Score", start, status)
        return total, status

    # --- timing ----------------------------------------------------------------------

    def _point_timed(self, point: str, start: float, status: Status) -> None:
        self.observe(point, "", CODE_NAMES[status.code], time.perf_counter() - start)

    def _plugin_timed(self, point: str, plugin: str, start: float, status: Status) -> None:
        self.observe(point, plugin, CODE_NAMES[status.code], time.perf_counter() - start)
