"""NodeResourcesBalancedAllocation: prefer nodes whose cpu and memory (by default)
would be used in similar proportions once the pod is placed.

Score (upstream ``balancedResourceScorer``): ``(1 - std) * 100`` of the requested /
allocatable fractions, where requested includes the pod. Like upstream it uses the
plain requests, not the non-zero defaults (``useRequested``), and PreScore returns
SKIP for a pod that requests none of the resources (kubernetes#129138: scoring
best-effort pods this way piles them onto one node).
"""

from __future__ import annotations

import numpy as np

from troupe.api.cycle import CycleState, StateKey
from troupe.api.framework import Handle, PluginTraits
from troupe.api.nodetable import IndexArray, IntArray, NodeTable
from troupe.api.podinfo import PodInfo
from troupe.api.status import SKIP, SUCCESS, Status
from troupe.plugins.noderesources import one_node
from troupe.plugins.noderesources.args import NodeResourcesBalancedAllocationArgs
from troupe.plugins.noderesources.resource_allocation import (
    PodDemand,
    balanced_allocation,
    columns,
    pod_demand,
)

SCORE_KEY = StateKey[PodDemand]("PreScoreNodeResourcesBalancedAllocation")


class BalancedAllocation:
    name = "NodeResourcesBalancedAllocation"
    # Filter and Score of a node depend only on that node and the pod.
    traits = PluginTraits(node_local=True)

    def __init__(self, args: NodeResourcesBalancedAllocationArgs | None, handle: Handle) -> None:
        del handle
        args = args or NodeResourcesBalancedAllocationArgs()
        self._resources = tuple(r.name for r in args.resources)
        self._plans = one_node.Plans(self._resources, use_requested=True)

    def pre_score(
        self, state: CycleState, pod: PodInfo, table: NodeTable, slots: IndexArray
    ) -> Status:
        demand = pod_demand(pod, self._resources, use_requested=True)
        if demand.best_effort:
            return SKIP
        state.write(SCORE_KEY, demand)
        return SUCCESS

    def score(
        self, state: CycleState, pod: PodInfo, table: NodeTable, slots: IndexArray
    ) -> IntArray:
        demand = state.get(SCORE_KEY)
        if demand is None:  # PreScore disabled in this profile
            demand = pod_demand(pod, self._resources, use_requested=True)
            if demand.best_effort:
                return np.zeros(len(slots), dtype=np.int64)
        cols = columns(table, slots, self._resources, demand, use_requested=True)
        return balanced_allocation(cols, len(slots))

    def score_slot(
        self, state: CycleState, pod: PodInfo, table: NodeTable, slot: int
    ) -> int | None:
        """``score`` for one node (api.framework.ScoreSlot)."""
        demand = state.get(SCORE_KEY)
        if demand is None:
            return None
        return one_node.balanced_allocation(
            one_node.values(table, slot, self._plans.get(table, demand))
        )
