"""The per-pod algorithm: where one pod goes, as the NodeTable stands now.

``PodAlgorithm.schedule_pod`` is upstream's ``schedulePod``: PreFilter, Filter over
every candidate node as one batch, PostFilter (preemption) when nothing fits,
PreScore and Score over the first ``numFeasibleNodesToFind`` feasible nodes
(``feasible_slots``, starting where the last cycle stopped), and the best node with
ties broken at random by a seeded generator (``select_index``). It never assumes
nor yields: the caller decides what to do with the node.

The pod cycle (``troupe.scheduler.cycle.pod_cycle``), the batch placers and the
group cycle (``troupe.scheduler.gangs``) all place pods through one instance, so a
pod and a gang member are placed by the same rule and share one rotation and one
tie-break generator. ``revert`` undoes a placement (Unreserve, forget the
assumption) on every failure path. A gang member is placed inside a placement
(KEP-5732) by passing its node mask as ``within``; nothing here remembers it.
"""

from __future__ import annotations

import random
from typing import Protocol

import numpy as np

from troupe.api.cycle import PODS_TO_ACTIVATE, CycleState, GroupState
from troupe.api.framework import Diagnosis, PreFilterResult
from troupe.api.nodetable import BoolArray, IndexArray, NodeTable
from troupe.api.podinfo import PodInfo
from troupe.api.status import Code, Status
from troupe.scheduler.cache import Cache
from troupe.scheduler.cycle.evictions import Preemptions
from troupe.scheduler.cycle.results import CycleFailure, ScheduleResult
from troupe.scheduler.framework.diagnosis import diagnose, diagnose_pre_filter
from troupe.scheduler.framework.instrument import RECORD_PLUGIN_METRICS
from troupe.scheduler.framework.messages import NO_NODES_AVAILABLE
from troupe.scheduler.framework.runtime import Framework
from troupe.scheduler.observe.metrics import PLUGIN_METRICS_SAMPLE_PERCENT

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


def pre_filter_mask(table: NodeTable, pre: PreFilterResult | None) -> BoolArray | None:
    """The nodes a PreFilter result leaves in (None: it restricts nothing), as upstream
    ``findNodesThatFitPod`` reads ``PreFilterResult.NodeNames``."""
    if pre is None or pre.node_names is None:
        return None
    allowed = np.zeros(table.capacity, dtype=bool)
    allowed[[table.index[n] for n in pre.node_names if n in table.index]] = True
    return allowed


class Nominations(Protocol):
    """The queue's record of nominated nodes, as PostFilter reads and ends it."""

    def nominated_node(self, key: str) -> str | None: ...
    def delete_nominated(self, key: str) -> None: ...


class PlacementEnded(Protocol):
    """Told when a placement is undone (the gang SLI stops following the pod)."""

    def forget_member(self, key: str) -> None: ...


class PodAlgorithm:
    def __init__(
        self,
        cache: Cache,
        *,
        percentage_of_nodes_to_score: int,
        preemptions: Preemptions,
        nominations: Nominations,
        ended: PlacementEnded,
        sample_plugin_metrics: bool = False,
        seed: int = 0,
    ) -> None:
        self.cache = cache
        self._percentage = percentage_of_nodes_to_score
        self._preemptions = preemptions
        self._nominations = nominations
        self._ended = ended
        self._sample = sample_plugin_metrics
        self._rng = random.Random(seed)
        # Its own generator: sampling must not shift the seeded tie-breaks.
        self._sample_rng = random.Random(seed + 1)
        self._next_start_node_index = 0

    def candidates(self, within: BoolArray | None = None) -> BoolArray:
        """The nodes a pod may go to in this cycle: every present node, or those of
        the placement being evaluated (``within``, KEP-5732)."""
        table = self.cache.table
        if within is None:
            return table.present
        return table.present & within

    def nominated_node(self, info: PodInfo) -> str | None:
        """The node a preemption nominated ``info`` to, if any."""
        return self._nominations.nominated_node(info.key) or info.pod.status.nominated_node_name

    def new_cycle_state(self, group: GroupState | None = None) -> CycleState:
        """A fresh CycleState (a gang member's reaches its attempt's ``group`` area);
        with metrics, 10% of cycles record per-plugin durations."""
        state = CycleState(group)
        state.write(PODS_TO_ACTIVATE, set())
        if self._sample and self._sample_rng.randrange(100) < PLUGIN_METRICS_SAMPLE_PERCENT:
            state.write(RECORD_PLUGIN_METRICS, True)
        return state

    def revert(self, fwk: Framework, state: CycleState, info: PodInfo, node: str) -> None:
        """Undo a placement: Unreserve, and forget the assumption."""
        fwk.binding.run_unreserve(state, info, node)
        self.cache.forget(info)
        self._ended.forget_member(info.key)

    def schedule_pod(
        self,
        fwk: Framework,
        state: CycleState,
        info: PodInfo,
        within: BoolArray | None = None,
    ) -> ScheduleResult | CycleFailure:
        """Where ``info`` goes, on every node or only ``within`` (a placement's nodes)."""
        table = self.cache.table
        num_nodes = table.size
        if num_nodes == 0:
            return CycleFailure(Status.unschedulable(NO_NODES_AVAILABLE))
        if within is not None:
            # Messages count the placement's nodes ("0/50 nodes are available").
            num_nodes = int(np.count_nonzero(self.candidates(within)))
        # Run "prefilter" plugins.
        pre, status = fwk.run_pre_filter(state, info, table)
        if not status.is_success:
            if status.code is Code.ERROR:
                return CycleFailure(status)
            diagnosis = diagnose_pre_filter(status, pre, num_nodes)
            return self.post_filter(fwk, state, info, diagnosis, status)
        candidates = self.candidates(within)
        left_out = None
        allowed = pre_filter_mask(table, pre)
        if allowed is not None:
            candidates = candidates & allowed
            left_out = table.present & ~allowed
        # Run "filter" plugins over every candidate node at once.
        outcome = fwk.run_filter(state, info, table, candidates)
        if not outcome.status.is_success:
            return CycleFailure(outcome.status)
        slots, evaluated = self.feasible_slots(fwk, outcome.feasible)
        if len(slots) == 0:
            diagnosis = diagnose(outcome, num_nodes, left_out, pre)
            return self.post_filter(fwk, state, info, diagnosis, Status.unschedulable())
        if len(slots) == 1:
            return ScheduleResult(table.names[int(slots[0])], evaluated, 1)
        # Run "prescore" and "score" plugins over the feasible nodes.
        status = fwk.run_pre_score(state, info, table, slots)
        if not status.is_success:
            return CycleFailure(status)
        scores, status = fwk.run_score(state, info, table, slots)
        if not status.is_success:
            return CycleFailure(status)
        slot = int(slots[self.select_index(scores)])
        return ScheduleResult(table.names[slot], evaluated, len(slots))

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
            percentage = self._percentage
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

    def post_filter(
        self,
        fwk: Framework,
        state: CycleState,
        info: PodInfo,
        diagnosis: Diagnosis,
        status: Status,
    ) -> CycleFailure:
        """Nothing fits: run PostFilter (preemption) unless it cannot help."""
        nominated: str | None = None
        if (
            status.code is not Code.UNSCHEDULABLE_AND_UNRESOLVABLE
            and fwk.post_filter
            # An earlier preemption of this pod is still evicting: wait for it.
            and not self._preemptions.in_flight(info)
        ):
            # Run "postfilter" plugins (e.g. preemption).
            result, post = fwk.run_post_filter(state, info, self.cache.table, diagnosis)
            if fwk.preempts:
                self._preemptions.attempted()
            if post.code is Code.ERROR:
                return CycleFailure(post, diagnosis)
            if result is not None and post.is_success and result.victims:
                nominated = result.nominated_node_name
                self._preemptions.actuate(
                    fwk.name, info, nominated, result.victims, by=fwk.preemption_plugin
                )
            elif (
                fwk.preempts
                and result is not None
                and not result.nominated_node_name
                and (
                    self._nominations.nominated_node(info.key)
                    or info.pod.status.nominated_node_name
                )
            ):
                # Preemption cannot help: the earlier nomination ends.
                self._nominations.delete_nominated(info.key)
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
