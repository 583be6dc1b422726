"""InterPodAffinity Filter: required pod affinity and anti-affinity over every node at once.

Called by the plugin's ``filter``. Upstream ``filtering.go`` counts, per topology pair,
(1) placed pods whose required anti-affinity matches the incoming pod, (2) placed
pods matching *all* the incoming pod's required affinity terms and (3) placed pods
matching each of its required anti-affinity terms, then checks one node at a time.
Here each term is a per-slot count folded into its topology domains with
``np.bincount`` and spread back over the slots:

- affinity: a node passes when it has every term's topology key and, for every term,
  its domain holds a pod matching all terms. Special case (a first pod of a
  self-affine group): when no such pod exists anywhere on a node with any of the
  keys and the pod matches all its own terms, any node with all the keys passes.
  Failure is UnschedulableAndUnresolvable (preemption cannot create a pod).
- anti-affinity: a node fails when, for some term, it has the key and its domain
  holds a matching pod.
- existing pods' anti-affinity: a node fails when it shares, for some term carried
  by a placed pod that matches the incoming pod, the term's topology value with
  that pod's node.

A node keeps the first reason it fails, in upstream's order.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Final

import numpy as np

from troupe.api.framework import FilterResult, Rejection
from troupe.api.nodetable import BoolArray, IntArray, NodeTable
from troupe.api.podcounts import PodMatcher, domain_sums
from troupe.api.podinfo import PodInfo
from troupe.api.status import Code
from troupe.plugins.interpodaffinity.terms import PodTerms, Term

ERR_REASON_AFFINITY_RULES_NOT_MATCH: Final = "node(s) didn't match pod affinity rules"
ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH: Final = "node(s) didn't match pod anti-affinity rules"
ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH: Final = (
    "node(s) didn't satisfy existing pods anti-affinity rules"
)

CountsOf = Callable[[PodMatcher], IntArray]


def _affinity_rejects(
    table: NodeTable, pod: PodInfo, terms: PodTerms, counts_of: CountsOf
) -> BoolArray:
    cap = table.capacity
    matching = counts_of(terms.affinity_matcher)
    all_keys = np.ones(cap, dtype=bool)
    pods_exist = np.ones(cap, dtype=bool)
    any_pair = False
    for term in terms.required_affinity:
        sums = domain_sums(table, term.topology_key, matching)
        if sums is None:
            return table.present.copy()  # no node has this key: every node fails
        all_keys &= sums.has_label
        any_pair = any_pair or bool(sums.sums.any())
        pods_exist &= sums.per_slot() > 0
    if not any_pair and terms.matches_all_affinity(pod.namespace, pod.labels):
        return table.present & ~all_keys
    return table.present & ~(all_keys & pods_exist)


def _domains_hit(table: NodeTable, term: Term, per_slot: IntArray) -> BoolArray | None:
    """Nodes whose ``term`` domain holds a counted pod; None: no node has the key."""
    sums = domain_sums(table, term.topology_key, per_slot)
    if sums is None:
        return None
    return sums.per_slot() > 0


def filter_affinity(
    table: NodeTable,
    pod: PodInfo,
    terms: PodTerms,
    existing_anti: Sequence[tuple[Term, IntArray]],
    counts_of: CountsOf,
) -> FilterResult:
    """``existing_anti``: terms carried by placed pods that match ``pod``, each with
    the per-slot number of pods carrying it."""
    cap = table.capacity
    affinity = (
        _affinity_rejects(table, pod, terms, counts_of)
        if terms.required_affinity
        else np.zeros(cap, dtype=bool)
    )
    anti = np.zeros(cap, dtype=bool)
    for term in terms.required_anti_affinity:
        hit = _domains_hit(table, term, counts_of(PodMatcher((term.clause,))))
        if hit is not None:
            anti |= hit
    anti &= table.present & ~affinity
    existing = np.zeros(cap, dtype=bool)
    for term, holders in existing_anti:
        hit = _domains_hit(table, term, holders)
        if hit is not None:
            existing |= hit
    existing &= table.present & ~affinity & ~anti
    feasible = ~(affinity | anti | existing)

    def explain() -> Sequence[Rejection]:
        reasons: Mapping[str, tuple[BoolArray, Code]] = {
            ERR_REASON_AFFINITY_RULES_NOT_MATCH: (
                affinity,
                Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
            ),
            ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH: (anti, Code.UNSCHEDULABLE),
            ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH: (existing, Code.UNSCHEDULABLE),
        }
        return [Rejection(r, mask, code) for r, (mask, code) in reasons.items() if mask.any()]

    return FilterResult(feasible, explain)
