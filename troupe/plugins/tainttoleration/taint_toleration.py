"""TaintToleration over the NodeTable's taint bitset.

The table numbers every distinct taint some node carries (``taint_list``,
``live_taint_ids``) and keeps a boolean row per taint (``taints[taint id, slot]``);
an id no node carries any more is freed and later reused for another taint. Whether
a pod tolerates a taint depends only on the pod's tolerations, so the plugin decides
it once per distinct taint, not once per node, and turns the answer into a node mask
with one ``any`` over the untolerated rows. Those masks depend on node attributes
alone and are cached per toleration set until ``table.node_generation`` moves.

Filter (upstream ``Filter``): a node is rejected, UnschedulableAndUnresolvable, when
it has a NoSchedule or NoExecute taint no toleration matches; the reason names the
node's *first* such taint (``node(s) had untolerated taint {key: value}``), so nodes
are grouped per taint in the FitError. PreFilter returns SKIP when no node would be
rejected, which is the usual case of an untainted cluster.

Score (upstream ``Score`` + ``NormalizeScore``): the number of PreferNoSchedule
taints the pod's tolerations (those with an empty or PreferNoSchedule effect) do not
cover, normalized in reverse so the node with the fewest scores 100.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

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
    FilterResult,
    Handle,
    PluginTraits,
    PreFilterResult,
    Rejection,
)
from troupe.api.nodetable import BoolArray, IndexArray, IntArray, NodeTable
from troupe.api.objects import Node, Pod, Taint, Toleration
from troupe.api.podinfo import PodInfo
from troupe.api.scoring import default_normalize_score
from troupe.api.selectors import find_untolerated_taint, format_taint, tolerates
from troupe.api.status import SKIP, SUCCESS, Code, Status

FILTER_EFFECTS = frozenset({"NoSchedule", "NoExecute"})
PREFER_NO_SCHEDULE = "PreferNoSchedule"

NODE_ADD_OR_TAINT_CHANGE = ClusterEvent(
    Resource.NODE, Action.ADD | Action.UPDATE_NODE_TAINT, "NodeAddOrTaintUpdate"
)
POD_TOLERATIONS_UPDATE = ClusterEvent(Resource.POD, Action.UPDATE_POD_TOLERATIONS)

TolerationKey = frozenset[tuple[str, str, str, str]]


def _key(tolerations: Sequence[Toleration]) -> TolerationKey:
    return frozenset((t.key, t.operator, t.value, t.effect) for t in tolerations)


@dataclass(frozen=True, slots=True)
class _PodTolerations:
    """What the pod spec says, computed once per PodInfo."""

    all: tuple[Toleration, ...]
    all_key: TolerationKey
    # Tolerations that can cover a PreferNoSchedule taint (empty effect = every effect).
    prefer: tuple[Toleration, ...]
    prefer_key: TolerationKey


@dataclass(slots=True)
class _Verdict:
    """Filter outcome for one toleration set over the current node attributes."""

    untolerated: frozenset[int]  # taint ids with a filter effect nobody tolerates
    rejected: BoolArray | None  # capacity-long; None: no node is rejected
    reasons: tuple[Rejection, ...] | None = None  # built on first explain


@dataclass(frozen=True, slots=True)
class _Counts:
    """Intolerable PreferNoSchedule taints per slot; None when no node has any."""

    per_slot: IntArray | None


@dataclass(slots=True)
class _NodeCache:
    """Per toleration set results, valid for one table at one node generation."""

    table: NodeTable | None = None
    generation: int = -1
    filter_ids: tuple[int, ...] = ()
    prefer_ids: tuple[int, ...] = ()
    verdicts: dict[TolerationKey, _Verdict] = field(default_factory=dict)
    counts: dict[TolerationKey, _Counts] = field(default_factory=dict)

    def refresh(self, table: NodeTable) -> None:
        if self.table is table and self.generation == table.node_generation:
            return
        self.table = table
        self.generation = table.node_generation
        # Only taints some node carries: the table frees and reuses the ids of the
        # others (their rows are cleared), which is also why this is per generation.
        live = table.live_taint_ids()
        self.filter_ids = tuple(t for t in live if table.taint_list[t].effect in FILTER_EFFECTS)
        self.prefer_ids = tuple(t for t in live if table.taint_list[t].effect == PREFER_NO_SCHEDULE)
        self.verdicts.clear()
        self.counts.clear()


VERDICT_KEY = StateKey[_Verdict]("PreFilterTaintToleration")
COUNTS_KEY = StateKey[_Counts]("PreScoreTaintToleration")


class TaintToleration:
    name = "TaintToleration"
    # Filter and Score of a node depend only on that node and the pod, and not on
    # the pods placed on the node.
    traits = PluginTraits(node_local=True, node_only=True)

    def __init__(self, args: None, handle: Handle) -> None:
        del args, handle
        self._cache = _NodeCache()

    # --- filter ------------------------------------------------------------------

    def pre_filter(
        self, state: CycleState, pod: PodInfo, table: NodeTable
    ) -> tuple[PreFilterResult | None, Status]:
        verdict = self._verdict(pod, table)
        if verdict.rejected is None:
            return None, SKIP
        state.write(VERDICT_KEY, verdict)
        return None, SUCCESS

    def filter(self, state: CycleState, pod: PodInfo, table: NodeTable) -> FilterResult:
        verdict = state.get(VERDICT_KEY)
        if verdict is None:  # PreFilter disabled in this profile
            verdict = self._verdict(pod, table)
        if verdict.rejected is None:
            return FilterResult.all(table)
        rejected = verdict.rejected
        return FilterResult(~rejected, lambda: self._explain(verdict, table))

    def _verdict(self, pod: PodInfo, table: NodeTable) -> _Verdict:
        cache = self._cache
        cache.refresh(table)
        tols = self._tolerations(pod)
        verdict = cache.verdicts.get(tols.all_key)
        if verdict is None:
            untolerated = [
                tid
                for tid in cache.filter_ids
                if not any(tolerates(t, table.taint_list[tid]) for t in tols.all)
            ]
            rejected: BoolArray | None = (
                np.logical_or.reduce(table.taints[untolerated], axis=0) if untolerated else None
            )
            verdict = _Verdict(frozenset(untolerated), rejected)
            cache.verdicts[tols.all_key] = verdict
        return verdict

    def _explain(self, verdict: _Verdict, table: NodeTable) -> tuple[Rejection, ...]:
        if verdict.reasons is not None or verdict.rejected is None:
            return verdict.reasons or ()
        # Group rejected nodes by their first untolerated taint, in the node's own
        # taint order (upstream FindMatchingUntoleratedTaint returns the first).
        by_taint: dict[int, list[int]] = {}
        for slot in np.flatnonzero(verdict.rejected).tolist():
            first = next(t for t in table.node_taints[slot] if t in verdict.untolerated)
            by_taint.setdefault(first, []).append(slot)
        reasons = []
        for tid, slots in by_taint.items():
            mask = np.zeros(table.capacity, dtype=bool)
            mask[slots] = True
            reason = f"node(s) had untolerated taint {format_taint(table.taint_list[tid])}"
            reasons.append(Rejection(reason, mask, Code.UNSCHEDULABLE_AND_UNRESOLVABLE))
        verdict.reasons = tuple(reasons)
        return verdict.reasons

    # --- score -------------------------------------------------------------------

    def pre_score(
        self, state: CycleState, pod: PodInfo, table: NodeTable, slots: IndexArray
    ) -> Status:
        state.write(COUNTS_KEY, self._counts(pod, table))
        return SUCCESS

    def score(
        self, state: CycleState, pod: PodInfo, table: NodeTable, slots: IndexArray
    ) -> IntArray:
        counts = state.get(COUNTS_KEY)
        if counts is None:  # PreScore disabled in this profile
            counts = self._counts(pod, table)
        if counts.per_slot is None:
            return np.zeros(len(slots), dtype=np.int64)
        return counts.per_slot[slots]

    def normalize_score(self, state: CycleState, pod: PodInfo, scores: IntArray) -> None:
        default_normalize_score(scores, reverse=True)

    def _counts(self, pod: PodInfo, table: NodeTable) -> _Counts:
        cache = self._cache
        cache.refresh(table)
        tols = self._tolerations(pod)
        if tols.prefer_key in cache.counts:
            return cache.counts[tols.prefer_key]
        intolerable = [
            tid
            for tid in cache.prefer_ids
            if not any(tolerates(t, table.taint_list[tid]) for t in tols.prefer)
        ]
        counts = _Counts(
            table.taints[intolerable].sum(axis=0, dtype=np.int64) if intolerable else None
        )
        cache.counts[tols.prefer_key] = counts
        return counts

    def _tolerations(self, pod: PodInfo) -> _PodTolerations:
        cached = pod.extra.get(self.name)
        if isinstance(cached, _PodTolerations):
            return cached
        all_ = tuple(pod.pod.spec.tolerations)
        prefer = tuple(t for t in all_ if t.effect in ("", PREFER_NO_SCHEDULE))
        tols = _PodTolerations(all_, _key(all_), prefer, _key(prefer))
        pod.extra[self.name] = tols
        return tols

    # --- requeueing --------------------------------------------------------------

    def events_to_register(self) -> Sequence[ClusterEventWithHint]:
        return (
            ClusterEventWithHint(NODE_ADD_OR_TAINT_CHANGE, node_became_tolerated),
            ClusterEventWithHint(POD_TOLERATIONS_UPDATE, tolerations_of_this_pod_changed),
        )


def untolerated_taint(node: Node, pod: Pod) -> Taint | None:
    return find_untolerated_taint(node.spec.taints, pod.spec.tolerations, FILTER_EFFECTS)


def node_became_tolerated(pod: Pod, old: object | None, new: object | None) -> QueueingHint:
    """QUEUE when the node goes from having an untolerated taint (or not existing)
    to having none (upstream ``isSchedulableAfterNodeChange``)."""
    if not isinstance(new, Node):
        return QueueingHint.QUEUE
    was_untolerated = not isinstance(old, Node) or untolerated_taint(old, pod) is not None
    if was_untolerated and untolerated_taint(new, pod) is None:
        return QueueingHint.QUEUE
    return QueueingHint.SKIP


def tolerations_of_this_pod_changed(
    pod: Pod, old: object | None, new: object | None
) -> QueueingHint:
    """Only the rejected pod's own toleration update can help it."""
    if isinstance(new, Pod) and new.metadata.uid == pod.metadata.uid:
        return QueueingHint.QUEUE
    return QueueingHint.SKIP
