"""PodTopologySpread Filter: DoNotSchedule constraints over every node at once.

Called by the plugin's ``filter``. Upstream ``filtering.go`` computes, in PreFilter,
the matching pods per topology pair and the two smallest domains, then checks one node
at a time; here each constraint is a handful of numpy operations over all slots:

1. per-slot matching-pod counts (``CountsCache``, incremental);
2. per-domain totals over the *eligible* nodes (all topology keys present, node
   inclusion policies passed) with ``np.bincount``;
3. global minimum = the smallest eligible domain, or 0 when there are fewer eligible
   domains than ``minDomains`` (KEP-3022);
4. a labelled node fails when ``domain total + selfMatch - global minimum > maxSkew``
   (a domain with no eligible node has total 0); a node without the topology key
   fails as UnschedulableAndUnresolvable.

Constraints are checked in order and a node keeps the reason of the first one it
fails, as upstream's per-node loop does.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Final

import numpy as np

from troupe.api.framework import FilterResult, Rejection
from troupe.api.nodetable import IntArray, NodeTable
from troupe.api.podcounts import PodMatcher, domain_sums
from troupe.api.podinfo import PodInfo
from troupe.api.status import Code
from troupe.plugins.podtopologyspread.constraints import Constraint, InclusionMasks

ERR_REASON_CONSTRAINTS_NOT_MATCH: Final = "node(s) didn't match pod topology spread constraints"
ERR_REASON_NODE_LABEL_NOT_MATCH: Final = (
    ERR_REASON_CONSTRAINTS_NOT_MATCH + " (missing required label)"
)

CountsOf = Callable[[PodMatcher], IntArray]


def filter_spread(
    table: NodeTable,
    pod: PodInfo,
    constraints: Sequence[Constraint],
    counts_of: CountsOf,
) -> FilterResult:
    """The feasibility mask of ``pod``'s DoNotSchedule ``constraints``."""
    cap = table.capacity
    masks = InclusionMasks(table, pod.pod, constraints)
    decided = ~table.present
    unresolvable = np.zeros(cap, dtype=bool)
    unschedulable = np.zeros(cap, dtype=bool)
    zeros = np.zeros(cap, dtype=np.int64)
    for c in constraints:
        counts = zeros if c.matcher is None else counts_of(c.matcher)
        eligible = masks.eligible(c)
        sums = domain_sums(table, c.topology_key, counts, among=eligible)
        if sums is None:
            missing = ~decided
            unresolvable |= missing
            decided = decided | missing
            continue
        missing = ~sums.has_label & ~decided
        unresolvable |= missing
        decided = decided | missing
        nodes_per_domain = np.bincount(sums.column[eligible], minlength=len(sums.sums))
        domains = nodes_per_domain > 0
        num_domains = int(np.count_nonzero(domains))
        global_min = (
            0 if num_domains < c.min_domains or num_domains == 0 else int(sums.sums[domains].min())
        )
        skew = sums.per_slot() + int(c.self_match) - global_min
        violates = sums.has_label & (skew > c.max_skew) & ~decided
        unschedulable |= violates
        decided = decided | violates
    feasible = ~(unresolvable | unschedulable)

    def explain() -> Sequence[Rejection]:
        out: list[Rejection] = []
        if unschedulable.any():
            out.append(Rejection(ERR_REASON_CONSTRAINTS_NOT_MATCH, unschedulable))
        if unresolvable.any():
            out.append(
                Rejection(
                    ERR_REASON_NODE_LABEL_NOT_MATCH,
                    unresolvable,
                    Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                )
            )
        return out

    return FilterResult(feasible, explain)
