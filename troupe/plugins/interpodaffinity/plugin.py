"""InterPodAffinity: required and preferred pod affinity / anti-affinity.

The framework runs it at PreFilter/Filter, PreScore/Score/NormalizeScore and asks it
for queueing hints. Two caches owned by the instance keep every cycle cheap:

- ``CountsCache``: per-slot counts of pods matching the incoming pod's terms;
- ``CarriedCounts``: per-slot counts of placed pods carrying each distinct term
  (required anti-affinity for Filter; required affinity and preferred terms for
  Score), over ``NodeTable.affinity_pods`` only.

Both follow the NodeTable change log. PreFilter returns SKIP when the pod has no
required terms and no placed pod's anti-affinity term matches it (immediately when no
placed pod has any affinity); PreScore returns SKIP when no term applies.

Namespace selectors (``Handle.namespaces``): the incoming pod's terms are resolved to
namespace names (``namespaces.SelectedNamespaces``, cached until the labels change);
placed pods' terms are matched with the labels of the incoming pod's namespace, as
upstream. A namespace added, deleted or relabelled is a queueing-hint event here,
which upstream does not register.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
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
from troupe.api.objects import Namespace, Node, Pod
from troupe.api.podcounts import CarriedCounts, CountsCache, PodMatcher
from troupe.api.podinfo import PodInfo, PodRecord
from troupe.api.status import SKIP, SUCCESS, Status
from troupe.plugins.interpodaffinity.args import InterPodAffinityArgs
from troupe.plugins.interpodaffinity.filtering import filter_affinity
from troupe.plugins.interpodaffinity.namespaces import SelectedNamespaces
from troupe.plugins.interpodaffinity.scoring import normalize_affinity, score_affinity
from troupe.plugins.interpodaffinity.terms import Carried, PodTerms, Term, carried_terms, pod_terms

ASSIGNED_POD_CHANGE = ClusterEvent(
    Resource.ASSIGNED_POD, Action.ADD | Action.UPDATE_POD_LABEL | Action.DELETE
)
NODE_CHANGE = ClusterEvent(Resource.NODE, Action.ADD | Action.UPDATE_NODE_LABEL)
NAMESPACE_CHANGE = ClusterEvent(
    Resource.NAMESPACE, Action.ADD | Action.UPDATE_NAMESPACE_LABEL | Action.DELETE
)


@dataclass(frozen=True, slots=True)
class _FilterState:
    terms: PodTerms
    existing_anti: tuple[tuple[Term, IntArray], ...]


@dataclass(frozen=True, slots=True)
class _ScoreState:
    slots: IndexArray
    raw: IntArray  # capacity-long


_FILTER_KEY = StateKey[_FilterState]("PreFilterInterPodAffinity")
_SCORE_KEY = StateKey[_ScoreState]("PreScoreInterPodAffinity")


class InterPodAffinity:
    name = "InterPodAffinity"

    def __init__(self, args: InterPodAffinityArgs | None, handle: Handle) -> None:
        self.args = args if args is not None else InterPodAffinityArgs()
        self._handle = handle
        self._counts = CountsCache(maxsize=256)
        self._carried: CarriedCounts[Carried] = CarriedCounts(carried_terms)
        self._namespaces = SelectedNamespaces(handle.namespaces)

    def _counts_of(self, table: NodeTable) -> _CountsOf:
        return _CountsOf(self._counts, table)

    # --- filter --------------------------------------------------------------------

    def pre_filter(
        self, state: CycleState, pod: PodInfo, table: NodeTable
    ) -> tuple[PreFilterResult | None, Status]:
        terms = self._namespaces.terms_of(pod)
        existing = self._existing_anti(pod, table) if table.affinity_pods else ()
        if not existing and not terms.required_affinity and not terms.required_anti_affinity:
            return None, SKIP
        state.write(_FILTER_KEY, _FilterState(terms, existing))
        return None, SUCCESS

    def _existing_anti(self, pod: PodInfo, table: NodeTable) -> tuple[tuple[Term, IntArray], ...]:
        """Required anti-affinity terms of placed pods that match ``pod``."""
        namespace, labels = pod.namespace, pod.labels
        namespace_labels = self._namespaces.labels_of(namespace)
        return tuple(
            (c.term, holders)
            for c, holders in self._carried.refresh(table).items()
            if c.kind == "required-anti-affinity"
            and c.term.matches(namespace, labels, namespace_labels)
        )

    def filter(self, state: CycleState, pod: PodInfo, table: NodeTable) -> FilterResult:
        s = state.get(_FILTER_KEY)
        if s is None:
            return FilterResult.failed(
                table, Status.from_error(RuntimeError("no PreFilter state: PreFilter did not run"))
            )
        return filter_affinity(table, pod, s.terms, s.existing_anti, self._counts_of(table))

    # --- score ---------------------------------------------------------------------

    def pre_score(
        self, state: CycleState, pod: PodInfo, table: NodeTable, slots: IndexArray
    ) -> Status:
        terms = self._namespaces.terms_of(pod)
        has_preferred = bool(terms.preferred_affinity or terms.preferred_anti_affinity)
        if not has_preferred and (
            self.args.ignore_preferred_terms_of_existing_pods or not table.affinity_pods
        ):
            return SKIP
        carried: Mapping[Carried, IntArray] = (
            self._carried.refresh(table) if table.affinity_pods else {}
        )
        raw = score_affinity(
            table,
            pod,
            terms,
            carried,
            self.args.hard_pod_affinity_weight,
            self._counts_of(table),
            self._namespaces.labels_of(pod.namespace),
        )
        if raw is None:
            return SKIP
        state.write(_SCORE_KEY, _ScoreState(slots, raw))
        return SUCCESS

    def score(
        self, state: CycleState, pod: PodInfo, table: NodeTable, slots: IndexArray
    ) -> IntArray:
        s = state.get(_SCORE_KEY)
        if s is None:
            return score_array(slots)
        return s.raw[slots]

    def normalize_score(self, state: CycleState, pod: PodInfo, scores: IntArray) -> None:
        if state.get(_SCORE_KEY) is not None:
            normalize_affinity(scores)

    # --- queueing hints ------------------------------------------------------------

    def events_to_register(self) -> Sequence[ClusterEventWithHint]:
        return (
            ClusterEventWithHint(ASSIGNED_POD_CHANGE, self.after_pod_change),
            ClusterEventWithHint(NODE_CHANGE, after_node_change),
            ClusterEventWithHint(NAMESPACE_CHANGE, self.after_namespace_change),
        )

    def after_pod_change(self, pod: Pod, old: object | None, new: object | None) -> QueueingHint:
        """Upstream ``isSchedulableAfterPodChange``, with the fixes of kubernetes#135325
        (a deleted pod whose anti-affinity matched the pod) and #139161 (any
        anti-affinity term, not all, decides). The pod's terms are resolved against
        the namespace labels of now, and a deleted pod's terms are matched with the
        labels of the pod's namespace (upstream leaves namespace selectors out of its
        hints)."""
        if not isinstance(old, Pod | None) or not isinstance(new, Pod | None):
            return QueueingHint.QUEUE
        if (new is not None and not new.spec.node_name) or (
            old is not None and not old.spec.node_name
        ):
            return QueueingHint.SKIP
        # Resolved as of now, not cached: a hint builds the pod's record afresh.
        terms = _terms_of(pod).resolve(self._namespaces)
        if old is not None and new is not None:
            gained_affinity = not terms.matches_all_affinity(
                old.metadata.namespace, old.metadata.labels
            ) and terms.matches_all_affinity(new.metadata.namespace, new.metadata.labels)
            lost_anti = terms.matches_any_anti_affinity(
                old.metadata.namespace, old.metadata.labels
            ) and not terms.matches_any_anti_affinity(new.metadata.namespace, new.metadata.labels)
            return QueueingHint.QUEUE if gained_affinity or lost_anti else QueueingHint.SKIP
        if new is not None:
            if terms.matches_all_affinity(new.metadata.namespace, new.metadata.labels):
                return QueueingHint.QUEUE
            return QueueingHint.SKIP
        if old is None:
            return QueueingHint.QUEUE
        if terms.matches_any_anti_affinity(old.metadata.namespace, old.metadata.labels):
            return QueueingHint.QUEUE
        deleted = _terms_of(old)
        namespace = pod.metadata.namespace
        if deleted.matches_any_anti_affinity(
            namespace, pod.metadata.labels, self._namespaces.labels_of(namespace)
        ):
            return QueueingHint.QUEUE
        return QueueingHint.SKIP

    def after_namespace_change(
        self, pod: Pod, old: object | None, new: object | None
    ) -> QueueingHint:
        """A namespace was added, deleted or relabelled (troupe only; upstream
        registers no namespace event). QUEUE when it is the pod's own namespace
        (placed pods' namespace selectors are matched against its labels), when a
        required affinity term now selects it by label, or when a required
        anti-affinity term no longer does; as with pods, a namespace joining an
        anti-affinity term or leaving an affinity term cannot help."""
        if not isinstance(old, Namespace | None) or not isinstance(new, Namespace | None):
            return QueueingHint.QUEUE
        changed = new if new is not None else old
        if changed is None:
            return QueueingHint.QUEUE
        name = changed.name
        if name == pod.metadata.namespace:
            return QueueingHint.QUEUE
        before = old.metadata.labels if old is not None else None
        after = new.metadata.labels if new is not None else None
        terms = _terms_of(pod)
        for term in terms.required_affinity:
            if term.namespace_selector is not None and (
                term.selects_namespace(name, after) and not term.selects_namespace(name, before)
            ):
                return QueueingHint.QUEUE
        for term in terms.required_anti_affinity:
            if term.namespace_selector is not None and (
                term.selects_namespace(name, before) and not term.selects_namespace(name, after)
            ):
                return QueueingHint.QUEUE
        return QueueingHint.SKIP


class _CountsOf:
    __slots__ = ("_cache", "_table")

    def __init__(self, cache: CountsCache, table: NodeTable) -> None:
        self._cache = cache
        self._table = table

    def __call__(self, matcher: PodMatcher) -> IntArray:
        return self._cache.counts(self._table, matcher)


def _terms_of(pod: Pod) -> PodTerms:
    return pod_terms(PodRecord.of(pod))


def after_node_change(pod: Pod, old: object | None, new: object | None) -> QueueingHint:
    """Upstream ``isSchedulableAfterNodeChange`` (kubernetes#127470): QUEUE when a node
    gains or changes an affinity topology key, or (anti-affinity) is added, loses or
    changes such a key. troupe also queues a pod without terms of its own on a node
    add: it can only have been rejected by placed pods' anti-affinity, which a new
    node outside their domains resolves."""
    if not isinstance(new, Node) or not isinstance(old, Node | None):
        return QueueingHint.QUEUE
    terms = _terms_of(pod)
    if old is None and not terms.required_affinity and not terms.required_anti_affinity:
        return QueueingHint.QUEUE
    new_labels = new.metadata.labels
    for term in terms.required_affinity:
        if old is None:
            if term.topology_key in new_labels:
                return QueueingHint.QUEUE
            continue
        before = old.metadata.labels.get(term.topology_key)
        after = new_labels.get(term.topology_key)
        if after is not None and before != after:
            return QueueingHint.QUEUE
    for term in terms.required_anti_affinity:
        if old is None:
            return QueueingHint.QUEUE
        before = old.metadata.labels.get(term.topology_key)
        after = new_labels.get(term.topology_key)
        if before is not None and before != after:
            return QueueingHint.QUEUE
    return QueueingHint.SKIP
