"""NodeResourcesFit: the node must have room for the pod's requests; score by how
allocated the node would be (LeastAllocated by default).

Filter (upstream ``fitsRequest``): a node is rejected when it already holds as many
pods as it allows (``Too many pods``) or when, for some resource the pod requests,
the request exceeds allocatable minus requested (``Insufficient <resource>``, one
reason per resource, so one node may give several). Only the rows of resources the
pod requests are read, plus the pods row. Extended resources listed in
``ignoredResources`` or under an ``ignoredResourceGroups`` prefix are not checked.

Score: ``scoringStrategy`` picks LeastAllocated, MostAllocated or
RequestedToCapacityRatio over ``scoringStrategy.resources`` (resource_allocation.py).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from troupe.api.cycle import CycleState, StateKey
from troupe.api.events import (
    Action,
    ClusterEvent,
    ClusterEventWithHint,
    QueueingHint,
    Resource,
)
from troupe.api.framework import (
    MAX_NODE_SCORE,
    FilterResult,
    Handle,
    PlacementAssignment,
    PluginTraits,
    PreFilterResult,
    Rejection,
)
from troupe.api.nodetable import BoolArray, IndexArray, IntArray, NodeTable, summable
from troupe.api.objects import Node, Pod
from troupe.api.podinfo import PodInfo
from troupe.api.resources import PODS, node_allocatable, pod_requests
from troupe.api.scoring import FunctionShape
from troupe.api.status import SUCCESS, Status
from troupe.plugins.noderesources import one_node
from troupe.plugins.noderesources.args import NodeResourcesFitArgs
from troupe.plugins.noderesources.resource_allocation import (
    Column,
    PodDemand,
    columns,
    is_extended,
    least_allocated,
    most_allocated,
    pod_demand,
    requested_to_capacity_ratio,
)

TOO_MANY_PODS = "Too many pods"

ASSIGNED_POD_FREED = ClusterEvent(
    Resource.ASSIGNED_POD,
    Action.DELETE | Action.UPDATE_POD_SCALE_DOWN,
    "AssignedPodDeleteOrScaleDown",
)
POD_SCALE_DOWN = ClusterEvent(Resource.POD, Action.UPDATE_POD_SCALE_DOWN)
NODE_ADD_OR_ALLOCATABLE_CHANGE = ClusterEvent(
    Resource.NODE, Action.ADD | Action.UPDATE_NODE_ALLOCATABLE, "NodeAddOrAllocatableUpdate"
)

Scorer = Callable[[Sequence[Column], int], IntArray]
"""(resource columns, number of slots) -> one score per slot."""


@dataclass(frozen=True, slots=True)
class _Fit:
    """Per cycle: the checked resources as table rows and the pod's amounts."""

    names: tuple[str, ...]
    rows: tuple[int, ...]
    amounts: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class _Demand:
    owner: object
    requests: Mapping[str, int]


FIT_KEY = StateKey[_Fit]("PreFilterNodeResourcesFit")
SCORE_KEY = StateKey[PodDemand]("PreScoreNodeResourcesFit")


class Fit:
    name = "NodeResourcesFit"
    # Filter and Score of a node depend only on that node and the pod.
    traits = PluginTraits(node_local=True, capacity_modelled=True)

    def __init__(self, args: NodeResourcesFitArgs | None, handle: Handle) -> None:
        del handle
        args = args or NodeResourcesFitArgs()
        self._ignored = frozenset(args.ignored_resources)
        self._ignored_groups = frozenset(args.ignored_resource_groups)
        strategy = args.scoring_strategy
        self._resources = tuple(r.name for r in strategy.resources)
        self._plans = one_node.Plans(self._resources, use_requested=False)
        weights = np.array([r.weight for r in strategy.resources], dtype=np.int64)
        self._scorer: Scorer
        weight_list = [int(w) for w in weights]
        self._weights = tuple(weight_list)
        self._one: Callable[[list[one_node.Value]], int] | None = None
        if strategy.type == "LeastAllocated":
            self._scorer = lambda cols, n: least_allocated(cols, weights, n)
            self._one = lambda vals: one_node.least_allocated(vals, weight_list)
        elif strategy.type == "MostAllocated":
            self._scorer = lambda cols, n: most_allocated(cols, weights, n)
            self._one = lambda vals: one_node.most_allocated(vals, weight_list)
        else:
            assert strategy.requested_to_capacity_ratio is not None  # validated by args
            points = strategy.requested_to_capacity_ratio.shape
            shape = FunctionShape.of([(p.utilization, p.score) for p in points])
            self._scorer = lambda cols, n: requested_to_capacity_ratio(shape, cols, weights, n)

    # --- filter ------------------------------------------------------------------

    def pre_filter(
        self, state: CycleState, pod: PodInfo, table: NodeTable
    ) -> tuple[PreFilterResult | None, Status]:
        state.write(FIT_KEY, self._fit(pod, table))
        return None, SUCCESS

    def filter(self, state: CycleState, pod: PodInfo, table: NodeTable) -> FilterResult:
        fit = state.get(FIT_KEY)
        if fit is None:  # PreFilter disabled in this profile
            fit = self._fit(pod, table)
        pods_row = table.resource_index[PODS]
        too_many: BoolArray = table.requested[pods_row] >= table.allocatable[pods_row]
        rejected = too_many.copy()
        short: list[tuple[str, BoolArray]] = []
        for name, row, amount in zip(fit.names, fit.rows, fit.amounts, strict=True):
            insufficient: BoolArray = table.allocatable[row] - table.requested[row] < amount
            rejected |= insufficient
            short.append((name, insufficient))
        present = table.present

        def explain() -> Sequence[Rejection]:
            reasons = [Rejection(TOO_MANY_PODS, too_many & present)]
            reasons += [Rejection(f"Insufficient {n}", m & present) for n, m in short]
            return [r for r in reasons if r.nodes.any()]

        return FilterResult(~rejected, explain)

    def filter_slot(self, state: CycleState, pod: PodInfo, table: NodeTable, slot: int) -> bool:
        """``filter`` for one node (api.framework.FilterSlot)."""
        fit = state.get(FIT_KEY)
        if fit is None:
            fit = self._fit(pod, table)
        # ndarray.item gives Python ints: no numpy scalar arithmetic per check.
        allocatable, requested = table.allocatable.item, table.requested.item
        pods_row = table.resource_index[PODS]
        if requested(pods_row, slot) >= allocatable(pods_row, slot):
            return False
        for row, amount in zip(fit.rows, fit.amounts, strict=True):
            if allocatable(row, slot) - requested(row, slot) < amount:
                return False
        return True

    def _fit(self, pod: PodInfo, table: NodeTable) -> _Fit:
        demand = self._demand(pod)
        rows = tuple(table.resource_row(n) for n in demand)
        return _Fit(tuple(demand), rows, tuple(demand.values()))

    def _demand(self, pod: PodInfo) -> Mapping[str, int]:
        """The requests the filter checks, computed once per PodInfo (and per plugin
        instance: profiles may ignore different resources)."""
        cached = pod.extra.get(self.name)
        if isinstance(cached, _Demand) and cached.owner is self:
            return cached.requests
        requests = {
            n: v for n, v in pod.requests.items() if v > 0 and n != PODS and not self._ignores(n)
        }
        pod.extra[self.name] = _Demand(self, requests)
        return requests

    def checks(self, resource: str) -> bool:
        """Whether Filter holds pods to ``resource`` at all (not an ignored one)."""
        return not self._ignores(resource)

    def _ignores(self, resource: str) -> bool:
        # Only extended resources can be ignored (upstream fitsRequest).
        if not is_extended(resource):
            return False
        return resource in self._ignored or resource.split("/", 1)[0] in self._ignored_groups

    # --- score -------------------------------------------------------------------

    def pre_score(
        self, state: CycleState, pod: PodInfo, table: NodeTable, slots: IndexArray
    ) -> Status:
        state.write(SCORE_KEY, pod_demand(pod, self._resources, use_requested=False))
        return SUCCESS

    def score(
        self, state: CycleState, pod: PodInfo, table: NodeTable, slots: IndexArray
    ) -> IntArray:
        demand = state.get(SCORE_KEY)
        if demand is None:  # PreScore disabled in this profile
            demand = pod_demand(pod, self._resources, use_requested=False)
        cols = columns(table, slots, self._resources, demand, use_requested=False)
        return self._scorer(cols, len(slots))

    def score_slot(
        self, state: CycleState, pod: PodInfo, table: NodeTable, slot: int
    ) -> int | None:
        """``score`` for one node (api.framework.ScoreSlot)."""
        demand = state.get(SCORE_KEY)
        if self._one is None or demand is None:
            return None
        return self._one(one_node.values(table, slot, self._plans.get(table, demand)))

    # --- requeueing --------------------------------------------------------------

    def score_placement(self, table: NodeTable, assignment: PlacementAssignment) -> int:
        """KEP-5732's placement scorer: bin packing, MostAllocated over the placement's
        nodes taken together (requested after the assignment / allocatable, per scoring
        resource, weighted), whatever the profile's node scoring strategy."""
        nodes = assignment.placement.nodes & table.present
        total = weight_sum = 0
        for resource, weight in zip(self._resources, self._weights, strict=True):
            row = table.resource_index.get(resource)
            if row is None:
                continue
            allocatable = int(summable(table.allocatable[row][nodes]).sum())
            if allocatable <= 0:
                continue
            requested = int(summable(table.requested[row][nodes]).sum())
            requested = max(requested + assignment.requested.get(resource, 0), 0)
            total += weight * min(requested, allocatable) * MAX_NODE_SCORE // allocatable
            weight_sum += weight
        return total // weight_sum if weight_sum else 0

    def events_to_register(self) -> Sequence[ClusterEventWithHint]:
        return (
            ClusterEventWithHint(ASSIGNED_POD_FREED, self.pod_freed_resources),
            ClusterEventWithHint(POD_SCALE_DOWN, self.pod_freed_resources),
            ClusterEventWithHint(NODE_ADD_OR_ALLOCATABLE_CHANGE, self.node_now_fits),
        )

    def _wanted(self, pod: Pod) -> dict[str, int]:
        requests = pod_requests(pod)
        return {n: v for n, v in requests.items() if v > 0 and not self._ignores(n)}

    def pod_freed_resources(self, pod: Pod, old: object | None, new: object | None) -> QueueingHint:
        """Upstream ``isSchedulableAfterPodEvent``: a deleted assigned pod may free
        room; a scale-down helps when it is the pod itself, or an assigned pod that
        now requests less of something this pod needs."""
        try:
            if new is None:
                if isinstance(old, Pod) and not old.spec.node_name:
                    return QueueingHint.SKIP
                return QueueingHint.QUEUE
            if not isinstance(old, Pod) or not isinstance(new, Pod):
                return QueueingHint.QUEUE
            if new.metadata.uid == pod.metadata.uid:
                return QueueingHint.QUEUE
            if not new.spec.node_name:
                return QueueingHint.SKIP
            before, after = pod_requests(old), pod_requests(new)
            if any(before.get(n, 0) > after.get(n, 0) for n in self._wanted(pod)):
                return QueueingHint.QUEUE
            return QueueingHint.SKIP
        except ValueError:  # a malformed quantity: let the scheduling cycle report it
            return QueueingHint.QUEUE

    def node_now_fits(self, pod: Pod, old: object | None, new: object | None) -> QueueingHint:
        """Upstream ``isSchedulableAfterNodeChange``: the pod must fit the (empty)
        node, and an update must have raised the allocatable of something it needs."""
        if not isinstance(new, Node):
            return QueueingHint.QUEUE
        try:
            wanted = self._wanted(pod)
            offered = node_allocatable(new)
            if offered.get(PODS, 0) < 1 or any(v > offered.get(n, 0) for n, v in wanted.items()):
                return QueueingHint.SKIP
            if not isinstance(old, Node):
                return QueueingHint.QUEUE
            before = node_allocatable(old)
            if offered.get(PODS, 0) > before.get(PODS, 0):
                return QueueingHint.QUEUE
            if any(offered.get(n, 0) > before.get(n, 0) for n in wanted):
                return QueueingHint.QUEUE
            return QueueingHint.SKIP
        except ValueError:
            return QueueingHint.QUEUE
