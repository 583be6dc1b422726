"""NodeAffinity over the NodeTable's label columns.

Required part (Filter, upstream ``RequiredNodeAffinity.Match``): the node must carry
every ``spec.nodeSelector`` label and match at least one term of
``requiredDuringSchedulingIgnoredDuringExecution`` (no terms: no node), and must match
the profile's ``addedAffinity``. Rejections are UnschedulableAndUnresolvable.

Preferred part (Score): the sum of the weights of the matching preferred terms (the
pod's and ``addedAffinity``'s), normalized so the best node scores 100.

Label masks are computed once per distinct label value by the table; the plugin
caches each pod spec's mask and score column, keyed by the spec's text, until
``table.node_generation`` moves, so the pods of one controller cost one mask.
PreFilter and PreScore return SKIP when the pod has nothing to check.
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
from troupe.api.objects import Node, NodeSelector, NodeSelectorTerm, Pod
from troupe.api.podinfo import PodInfo
from troupe.api.scoring import default_normalize_score
from troupe.api.selectors import (
    NODE_NAME_FIELD,
    node_matches_pod,
    node_selector_matches,
    node_selector_term_errors,
    requirement_matches,
)
from troupe.api.status import SKIP, SUCCESS, Code, Status
from troupe.plugins.nodeaffinity.args import NodeAffinityArgs

ERR_REASON_POD = "node(s) didn't match Pod's node affinity/selector"
ERR_REASON_ENFORCED = "node(s) didn't match scheduler-enforced node affinity"
ERR_REASON_CONFLICT = "pod affinity terms conflict"

NODE_ADD_OR_LABEL_CHANGE = ClusterEvent(
    Resource.NODE, Action.ADD | Action.UPDATE_NODE_LABEL, "NodeAddOrLabelUpdate"
)

_CACHE_LIMIT = 4096  # distinct pod specs remembered per node generation


@dataclass(frozen=True, slots=True)
class _Required:
    """A pod's required node constraints (nodeSelector AND required affinity)."""

    key: str
    node_selector: tuple[tuple[str, str], ...]
    affinity: NodeSelector | None


@dataclass(frozen=True, slots=True)
class _PodSpec:
    """What the pod spec says, computed once per PodInfo."""

    required: _Required | None  # None: neither nodeSelector nor required affinity
    # Upstream PreFilterResult: nodes named by ``metadata.name In`` in every term.
    node_names: frozenset[str] | None
    preferred: tuple[tuple[int, NodeSelectorTerm], ...]
    preferred_key: str


def _pod_spec(pod: Pod) -> _PodSpec:
    aff = pod.spec.affinity.node_affinity if pod.spec.affinity else None
    required_affinity = aff.required_during_scheduling_ignored_during_execution if aff else None
    selector = tuple(sorted(pod.spec.node_selector.items()))
    required = None
    if selector or required_affinity is not None:
        key = repr(selector) + (
            required_affinity.model_dump_json() if required_affinity is not None else ""
        )
        required = _Required(key, selector, required_affinity)
    preferred = tuple(
        (t.weight, t.preference)
        for t in (aff.preferred_during_scheduling_ignored_during_execution if aff else ())
        if t.weight != 0
    )
    preferred_key = "|".join(f"{w}:{term.model_dump_json()}" for w, term in preferred)
    return _PodSpec(required, _named_nodes(required_affinity), preferred, preferred_key)


def _named_nodes(required: NodeSelector | None) -> frozenset[str] | None:
    """Nodes every term restricts itself to through ``metadata.name In`` (upstream
    NodeAffinity PreFilter); None when some term allows any node."""
    if required is None or not required.node_selector_terms:
        return None
    union: set[str] = set()
    for term in required.node_selector_terms:
        names_of_term: set[str] | None = None
        for req in term.match_fields:
            if req.key == NODE_NAME_FIELD and req.operator == "In":
                values = set(req.values)
                names_of_term = values if names_of_term is None else names_of_term & values
        if names_of_term is None:
            return None
        union |= names_of_term
    return frozenset(union)


def term_mask(table: NodeTable, term: NodeSelectorTerm) -> BoolArray:
    """Slots matching ``term``; an empty or unparsable term matches none (upstream
    ``LazyErrorNodeSelector``)."""
    if (not term.match_expressions and not term.match_fields) or node_selector_term_errors(
        term, ""
    ):
        return np.zeros(table.capacity, dtype=bool)
    mask = np.ones(table.capacity, dtype=bool)
    for req in term.match_expressions:
        values = tuple(req.values)

        def matches(
            value: str | None, op: str = req.operator, vals: tuple[str, ...] = values
        ) -> bool:
            return requirement_matches(op, vals, value)

        mask &= table.label_mask(req.key, matches)
    for req in term.match_fields:
        # Only metadata.name exists as a node field; any other reads as "".
        named = np.zeros(table.capacity, dtype=bool)
        slot = table.slot(req.values[0]) if req.key == NODE_NAME_FIELD else None
        if slot is not None:
            named[slot] = True
        mask &= named if req.operator == "In" else ~named
    return mask


def selector_mask(table: NodeTable, selector: NodeSelector) -> BoolArray:
    mask = np.zeros(table.capacity, dtype=bool)
    for term in selector.node_selector_terms:
        mask |= term_mask(table, term)
    return mask


def required_mask(table: NodeTable, required: _Required) -> BoolArray:
    mask = np.ones(table.capacity, dtype=bool)
    for key, value in required.node_selector:

        def equals(label: str | None, expected: str = value) -> bool:
            return label == expected

        mask &= table.label_mask(key, equals)
    if required.affinity is not None:
        mask &= selector_mask(table, required.affinity)
    return mask


@dataclass(slots=True)
class _NodeCache:
    table: NodeTable | None = None
    generation: int = -1
    added: BoolArray | None = None
    added_scores: IntArray | None = None
    required: dict[str, BoolArray] = field(default_factory=dict)
    preferred: dict[str, IntArray] = field(default_factory=dict)

    def refresh(self, table: NodeTable) -> None:
        if self.table is table and self.generation == table.node_generation:
            return
        self.table = table
        self.generation = table.node_generation
        self.added = None
        self.added_scores = None
        self.required.clear()
        self.preferred.clear()


@dataclass(frozen=True, slots=True)
class _Feasible:
    feasible: BoolArray
    enforced: BoolArray | None  # slots the addedAffinity allows, when there is one


FILTER_KEY = StateKey[_Feasible]("PreFilterNodeAffinity")
SCORE_KEY = StateKey[IntArray]("PreScoreNodeAffinity")


class NodeAffinity:
    name = "NodeAffinity"
    # Filter and Score of a node depend only on that node and the pod, and not on
    # the pods placed on the node.
    traits = PluginTraits(node_local=True, node_only=True)

    def __init__(self, args: NodeAffinityArgs | None, handle: Handle) -> None:
        del handle
        added = (args or NodeAffinityArgs()).added_affinity
        self._added_required = (
            added.required_during_scheduling_ignored_during_execution if added else None
        )
        self._added_preferred = tuple(
            (t.weight, t.preference)
            for t in (added.preferred_during_scheduling_ignored_during_execution if added else ())
            if t.weight != 0
        )
        self._cache = _NodeCache()

    # --- filter ------------------------------------------------------------------

    def pre_filter(
        self, state: CycleState, pod: PodInfo, table: NodeTable
    ) -> tuple[PreFilterResult | None, Status]:
        spec = self._spec(pod)
        if spec.required is None and self._added_required is None:
            return None, SKIP
        if spec.node_names is not None and not spec.node_names:
            return None, Status.unresolvable(ERR_REASON_CONFLICT, plugin=self.name)
        result = self._feasible(spec, table)
        if spec.node_names is not None:
            state.write(FILTER_KEY, result)
            return PreFilterResult(spec.node_names), SUCCESS
        if bool((result.feasible | ~table.present).all()):
            return None, SKIP
        state.write(FILTER_KEY, result)
        return None, SUCCESS

    def filter(self, state: CycleState, pod: PodInfo, table: NodeTable) -> FilterResult:
        result = state.get(FILTER_KEY)
        if result is None:  # PreFilter disabled in this profile
            result = self._feasible(self._spec(pod), table)
        return FilterResult(result.feasible, lambda: _explain(result))

    def _feasible(self, spec: _PodSpec, table: NodeTable) -> _Feasible:
        cache = self._cache
        cache.refresh(table)
        enforced = None
        if self._added_required is not None:
            if cache.added is None:
                cache.added = selector_mask(table, self._added_required)
            enforced = cache.added
        if spec.required is None:
            assert enforced is not None
            return _Feasible(enforced, enforced)
        mask = cache.required.get(spec.required.key)
        if mask is None:
            if len(cache.required) >= _CACHE_LIMIT:
                cache.required.clear()
            mask = required_mask(table, spec.required)
            cache.required[spec.required.key] = mask
        return _Feasible(mask if enforced is None else mask & enforced, enforced)

    # --- score -------------------------------------------------------------------

    def pre_score(
        self, state: CycleState, pod: PodInfo, table: NodeTable, slots: IndexArray
    ) -> Status:
        spec = self._spec(pod)
        if not spec.preferred and not self._added_preferred:
            return SKIP
        state.write(SCORE_KEY, self._score_column(spec, table))
        return SUCCESS

    def score(
        self, state: CycleState, pod: PodInfo, table: NodeTable, slots: IndexArray
    ) -> IntArray:
        column = state.get(SCORE_KEY)
        if column is None:  # PreScore disabled in this profile
            column = self._score_column(self._spec(pod), table)
        return column[slots]

    def normalize_score(self, state: CycleState, pod: PodInfo, scores: IntArray) -> None:
        default_normalize_score(scores, reverse=False)

    def _score_column(self, spec: _PodSpec, table: NodeTable) -> IntArray:
        """Sum of matching preferred-term weights per slot (upstream
        ``PreferredSchedulingTerms.Score``)."""
        cache = self._cache
        cache.refresh(table)
        if cache.added_scores is None:
            cache.added_scores = _weighted(table, self._added_preferred)
        column = cache.preferred.get(spec.preferred_key)
        if column is None:
            if len(cache.preferred) >= _CACHE_LIMIT:
                cache.preferred.clear()
            column = cache.added_scores + _weighted(table, spec.preferred)
            cache.preferred[spec.preferred_key] = column
        return column

    def _spec(self, pod: PodInfo) -> _PodSpec:
        cached = pod.extra.get(self.name)
        if isinstance(cached, _PodSpec):
            return cached
        spec = _pod_spec(pod.pod)
        pod.extra[self.name] = spec
        return spec

    # --- requeueing --------------------------------------------------------------

    def events_to_register(self) -> Sequence[ClusterEventWithHint]:
        return (ClusterEventWithHint(NODE_ADD_OR_LABEL_CHANGE, self.node_now_matches),)

    def node_now_matches(self, pod: Pod, old: object | None, new: object | None) -> QueueingHint:
        """QUEUE when an added node matches, or an updated node starts to match, the
        pod's required affinity and the added affinity (upstream
        ``isSchedulableAfterNodeChange``)."""
        if not isinstance(new, Node):
            return QueueingHint.QUEUE
        if self._added_required is not None and not node_selector_matches(
            self._added_required, new.metadata.labels, new.metadata.name
        ):
            return QueueingHint.SKIP
        if not node_matches_pod(new, pod):
            return QueueingHint.SKIP
        if isinstance(old, Node) and node_matches_pod(old, pod):
            return QueueingHint.SKIP
        return QueueingHint.QUEUE


def _weighted(table: NodeTable, terms: Sequence[tuple[int, NodeSelectorTerm]]) -> IntArray:
    column = np.zeros(table.capacity, dtype=np.int64)
    for weight, term in terms:
        column += weight * term_mask(table, term)
    return column


def _explain(result: _Feasible) -> tuple[Rejection, ...]:
    unresolvable = Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    rejected = ~result.feasible
    if result.enforced is None:
        return (Rejection(ERR_REASON_POD, rejected, unresolvable),)
    # Upstream checks the added affinity first: a node failing it gets that reason only.
    return (
        Rejection(ERR_REASON_ENFORCED, ~result.enforced, unresolvable),
        Rejection(ERR_REASON_POD, rejected & result.enforced, unresolvable),
    )
