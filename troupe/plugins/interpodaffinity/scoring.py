"""InterPodAffinity Score: preferred (anti-)affinity, upstream ``scoring.go`` in numpy.

Called by the plugin's ``pre_score``/``normalize_score``. Upstream builds a map
``topology key -> value -> score`` from every (placed pod, term) pair and a node scores
the sum over the keys it has. The same sum, term by term: for a term with weight w
counting per-slot pods c, every node whose topology value v is shared with counted
pods gets ``w * Σ c over the domain v``. Contributions:

- the incoming pod's preferred affinity terms (+w) and anti-affinity terms (-w),
  counting placed pods that match the term;
- placed pods' required affinity terms matching the incoming pod (a namespace
  selector matched against the labels of the incoming pod's namespace)
  (+hardPodAffinityWeight, when > 0), preferred affinity (+w) and preferred
  anti-affinity (-w) terms matching it, counting the pods carrying the term.

Normalisation maps [min, max] linearly onto [0, 100] (truncated); all equal -> 0.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

from troupe.api.framework import MAX_NODE_SCORE
from troupe.api.nodetable import IntArray, NodeTable
from troupe.api.podcounts import PodMatcher, domain_sums
from troupe.api.podinfo import PodInfo
from troupe.plugins.interpodaffinity.terms import Carried, PodTerms, Term

CountsOf = Callable[[PodMatcher], IntArray]


class _TopologyScore:
    """Accumulates per-slot scores; ``empty`` while no term met a labelled pod."""

    __slots__ = ("empty", "scores", "table")

    def __init__(self, table: NodeTable) -> None:
        self.table = table
        self.scores = np.zeros(table.capacity, dtype=np.int64)
        self.empty = True

    def add(self, term: Term, weight: int, per_slot: IntArray) -> None:
        sums = domain_sums(self.table, term.topology_key, per_slot)
        if sums is None or not sums.sums.any():
            return
        self.empty = False
        self.scores += weight * sums.per_slot()


def score_affinity(
    table: NodeTable,
    pod: PodInfo,
    terms: PodTerms,
    carried: Mapping[Carried, IntArray],
    hard_pod_affinity_weight: int,
    counts_of: CountsOf,
    namespace_labels: Mapping[str, str] | None,
) -> IntArray | None:
    """Raw scores over all slots, or None when no term applies (upstream's empty
    topology score: the plugin then skips scoring). ``terms`` are the pod's, with
    namespace selectors resolved; ``namespace_labels`` (of the pod's namespace) is
    what placed pods' namespace selectors are matched against."""
    acc = _TopologyScore(table)
    for weight, term in terms.preferred_affinity:
        acc.add(term, weight, counts_of(PodMatcher((term.clause,))))
    for weight, term in terms.preferred_anti_affinity:
        acc.add(term, -weight, counts_of(PodMatcher((term.clause,))))
    namespace, labels = pod.namespace, pod.labels
    for c, holders in carried.items():
        if c.kind == "required-anti-affinity":
            continue
        if c.kind == "required-affinity":
            if hard_pod_affinity_weight <= 0:
                continue
            weight = hard_pod_affinity_weight
        else:
            weight = c.weight
        if c.term.matches(namespace, labels, namespace_labels):
            acc.add(c.term, weight, holders)
    return None if acc.empty else acc.scores


def normalize_affinity(scores: IntArray) -> None:
    """Rescale ``scores`` in place (upstream ``NormalizeScore``)."""
    if not len(scores):
        return
    low, high = int(scores.min()), int(scores.max())
    if high - low > 0:
        scaled = MAX_NODE_SCORE * ((scores - low) / float(high - low))
        scores[:] = scaled.astype(np.int64)
    else:
        scores[:] = 0
