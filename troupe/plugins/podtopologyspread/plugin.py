"""PodTopologySpread: spread matching pods evenly across topology domains (KEP-895).

The framework runs it at PreFilter/Filter (``whenUnsatisfiable: DoNotSchedule``),
PreScore/Score/NormalizeScore (``ScheduleAnyway``) and asks it for queueing hints.
PreFilter and PreScore return SKIP when the pod has no constraint of that kind, so
pods without spread constraints cost one cached tuple lookup.

Matching-pod counts come from a ``CountsCache`` owned by the plugin instance and kept
current from the NodeTable change log, so a cycle never rescans the cluster's pods;
the math lives in ``filtering.py`` and ``scoring.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from troupe.api.cycle import CycleState, StateKey
from troupe.api.events import (
    Action,
    ClusterEvent,
    ClusterEventWithHint,
    QueueingHint,
    Resource,
)
from troupe.api.framework import FilterResult, Handle, PreFilterResult, score_array
from troupe.api.nodetable import IndexArray, IntArray, NodeTable
from troupe.api.objects import Node, Pod
from troupe.api.podcounts import CountsCache, PodMatcher
from troupe.api.podinfo import PodInfo
from troupe.api.status import SKIP, SUCCESS, Status
from troupe.plugins.podtopologyspread.args import PodTopologySpreadArgs
from troupe.plugins.podtopologyspread.constraints import Constraint, pod_constraints
from troupe.plugins.podtopologyspread.filtering import filter_spread
from troupe.plugins.podtopologyspread.scoring import (
    SpreadScores,
    normalize_spread,
    score_spread,
)

ASSIGNED_POD_CHANGE = ClusterEvent(
    Resource.ASSIGNED_POD, Action.ADD | Action.UPDATE_POD_LABEL | Action.DELETE
)
POD_TOLERATIONS_UPDATE = ClusterEvent(Resource.POD, Action.UPDATE_POD_TOLERATIONS)
NODE_CHANGE = ClusterEvent(
    Resource.NODE,
    Action.ADD | Action.DELETE | Action.UPDATE_NODE_LABEL | Action.UPDATE_NODE_TAINT,
)


@dataclass(frozen=True, slots=True)
class _PodConstraints:
    owner: object  # the plugin instance that compiled them (args differ per profile)
    hard: tuple[Constraint, ...]
    soft: tuple[Constraint, ...]


@dataclass(frozen=True, slots=True)
class _FilterState:
    constraints: tuple[Constraint, ...]


_FILTER_KEY = StateKey[_FilterState]("PreFilterPodTopologySpread")
_SCORE_KEY = StateKey[SpreadScores]("PreScorePodTopologySpread")


class PodTopologySpread:
    name = "PodTopologySpread"

    def __init__(self, args: PodTopologySpreadArgs | None, handle: Handle) -> None:
        self.args = args if args is not None else PodTopologySpreadArgs()
        self._handle = handle
        # System defaults are not implemented (see args.py): they apply nothing.
        self._defaults = (
            tuple(self.args.default_constraints) if self.args.defaulting_type == "List" else ()
        )
        self._counts = CountsCache(maxsize=256)

    # --- constraints ---------------------------------------------------------------

    def _constraints(self, info: PodInfo) -> _PodConstraints:
        cached = info.extra.get(self.name)
        if isinstance(cached, _PodConstraints) and cached.owner is self:
            return cached
        pod = info.pod
        compiled = _PodConstraints(
            self,
            pod_constraints(pod, "DoNotSchedule", self._defaults),
            pod_constraints(pod, "ScheduleAnyway", self._defaults),
        )
        info.extra[self.name] = compiled
        return compiled

    def _counts_of(self, table: NodeTable) -> _CountsOf:
        return _CountsOf(self._counts, table)

    # --- filter --------------------------------------------------------------------

    def pre_filter(
        self, state: CycleState, pod: PodInfo, table: NodeTable
    ) -> tuple[PreFilterResult | None, Status]:
        hard = self._constraints(pod).hard
        if not hard:
            return None, SKIP
        state.write(_FILTER_KEY, _FilterState(hard))
        return None, SUCCESS

    def filter(self, state: CycleState, pod: PodInfo, table: NodeTable) -> FilterResult:
        s = state.get(_FILTER_KEY)
        if s is None:
            return FilterResult.failed(
                table, Status.from_error(RuntimeError("no PreFilter state: PreFilter did not run"))
            )
        return filter_spread(table, pod, s.constraints, self._counts_of(table))

    # --- score ---------------------------------------------------------------------

    def pre_score(
        self, state: CycleState, pod: PodInfo, table: NodeTable, slots: IndexArray
    ) -> Status:
        soft = self._constraints(pod).soft
        if not soft or table.size == 0:
            return SKIP
        state.write(_SCORE_KEY, score_spread(table, pod, soft, slots, self._counts_of(table)))
        return SUCCESS

    def score(
        self, state: CycleState, pod: PodInfo, table: NodeTable, slots: IndexArray
    ) -> IntArray:
        s = state.get(_SCORE_KEY)
        if s is None:
            return score_array(slots)
        if len(s.slots) == len(slots) and (s.slots == slots).all():
            return s.raw.copy()
        # Scored on other slots than PreScore saw: recompute for these.
        fresh = score_spread(table, pod, self._constraints(pod).soft, slots, self._counts_of(table))
        state.write(_SCORE_KEY, fresh)
        return fresh.raw.copy()

    def normalize_score(self, state: CycleState, pod: PodInfo, scores: IntArray) -> None:
        s = state.get(_SCORE_KEY)
        if s is None or len(s.ignored) != len(scores):
            return
        normalize_spread(scores, s.ignored)

    # --- queueing hints ------------------------------------------------------------

    def events_to_register(self) -> Sequence[ClusterEventWithHint]:
        return (
            ClusterEventWithHint(ASSIGNED_POD_CHANGE, self.after_pod_change),
            ClusterEventWithHint(POD_TOLERATIONS_UPDATE, self.after_pod_change),
            ClusterEventWithHint(NODE_CHANGE, self.after_node_change),
        )

    def _hard_of(self, pod: Pod) -> tuple[Constraint, ...]:
        return pod_constraints(pod, "DoNotSchedule", self._defaults)

    def after_pod_change(self, pod: Pod, old: object | None, new: object | None) -> QueueingHint:
        """Upstream ``isSchedulableAfterPodChange``."""
        if not isinstance(old, Pod | None) or not isinstance(new, Pod | None):
            return QueueingHint.QUEUE
        if (new is not None and not _involved(new, pod)) or (
            old is not None and not _involved(old, pod)
        ):
            return QueueingHint.SKIP
        constraints = self._hard_of(pod)
        if old is not None and new is not None:
            if (
                new.metadata.uid == pod.metadata.uid
                and new.spec.tolerations != old.spec.tolerations
                and any(c.honor_node_taints for c in constraints)
            ):
                return QueueingHint.QUEUE
            if new.metadata.labels == old.metadata.labels:
                return QueueingHint.SKIP
            changed = any(
                c.selects(old.metadata.labels) != c.selects(new.metadata.labels)
                for c in constraints
            )
            return QueueingHint.QUEUE if changed else QueueingHint.SKIP
        changed_pod = new if new is not None else old
        if changed_pod is None:
            return QueueingHint.QUEUE
        if any(c.selects(changed_pod.metadata.labels) for c in constraints):
            return QueueingHint.QUEUE
        return QueueingHint.SKIP

    def after_node_change(self, pod: Pod, old: object | None, new: object | None) -> QueueingHint:
        """Upstream ``isSchedulableAfterNodeChange``: QUEUE when a node that holds
        (or held) every topology key appears, goes, or changes those labels or taints."""
        if not isinstance(old, Node | None) or not isinstance(new, Node | None):
            return QueueingHint.QUEUE
        constraints = self._hard_of(pod)
        old_match = old is not None and _has_keys(old, constraints)
        new_match = new is not None and _has_keys(new, constraints)
        if old is not None and new is not None:
            if old_match != new_match:
                return QueueingHint.QUEUE
            if new_match and (
                any(
                    old.metadata.labels.get(c.topology_key)
                    != new.metadata.labels.get(c.topology_key)
                    for c in constraints
                )
                or old.spec.taints != new.spec.taints
            ):
                return QueueingHint.QUEUE
            return QueueingHint.SKIP
        return QueueingHint.QUEUE if (new_match or old_match) else QueueingHint.SKIP


class _CountsOf:
    """``PodMatcher -> per-slot counts`` bound to one table, for the math modules."""

    __slots__ = ("_cache", "_table")

    def __init__(self, cache: CountsCache, table: NodeTable) -> None:
        self._cache = cache
        self._table = table

    def __call__(self, matcher: PodMatcher) -> IntArray:
        return self._cache.counts(self._table, matcher)


def _involved(changed: Pod, pod: Pod) -> bool:
    """Whether ``changed`` can affect ``pod``'s spreading (upstream
    ``involvedInTopologySpreading``): the pod itself, or a placed pod of its namespace."""
    return changed.metadata.uid == pod.metadata.uid or (
        changed.spec.node_name != "" and changed.metadata.namespace == pod.metadata.namespace
    )


def _has_keys(node: Node, constraints: Sequence[Constraint]) -> bool:
    return all(c.topology_key in node.metadata.labels for c in constraints)
