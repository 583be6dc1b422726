"""How many of a gang's members each placement could hold, from the NodeTable alone.

The pod-group cycle must not run the whole group algorithm once per topology domain
(a thousand gangs over a hundred racks). So before any member is placed, one PreFilter
and one Filter run over every node decide which nodes the gang's first member could
use, and the table's free capacity says how many copies of the smallest member each of
those nodes holds (one, if the pod has host ports). Summed per domain (one
``np.bincount`` over the label column), that is an upper bound of the members a domain
can take: domains below the quorum are pruned without being tried.

When every member has one signature and every Filter that could change its verdict
as pods land declares ``capacity_modelled`` (resources and host ports only,
``api.framework.PluginTraits``), the bound is exact: it is what placing
the members one after another in the domain would give, and the cycle scores the
domains from it, placing the gang only once, in the domain it picks
(``troupe.scheduler.gangs.topology``). Otherwise the domains that pass are tried for
real, as upstream does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from troupe.api.cycle import GroupState
from troupe.api.framework import Placement
from troupe.api.nodetable import BoolArray, IntArray, NodeTable
from troupe.api.podinfo import PodInfo
from troupe.scheduler.cycle.algorithm import PodAlgorithm, pre_filter_mask
from troupe.scheduler.cycle.batch_placer import runs
from troupe.scheduler.framework.runtime import Framework


@dataclass(slots=True)
class Capacity:
    """Copies of the smallest member per node slot, and whether that is exact."""

    copies: IntArray
    exact: bool
    # The only Filters whose verdict moves as pods land are capacity-modelled ones
    # (whatever the members' specs).
    modelled: bool
    # What one member requests (exact: every member's requests), by resource.
    request: dict[str, int]

    def bounds(self, table: NodeTable, parent: BoolArray, candidates: list[Placement]) -> list[int]:
        """Members each candidate can hold at most: candidates of one label key inside
        ``parent`` are summed in one pass over the label column."""
        keys = {c.key for c in candidates}
        if len(keys) == 1 and (key := next(iter(keys))) and key in table.labels:
            column = table.labels[key]
            sel = parent & table.present & (column >= 0) & (self.copies > 0)
            sums = np.bincount(column[sel], weights=self.copies[sel])
            out = []
            for c in candidates:
                lid = table.label_id(key, c.value)
                out.append(int(sums[lid]) if lid is not None and lid < len(sums) else 0)
            return out
        return [int(self.copies[c.nodes & table.present].sum()) for c in candidates]


def capacity_of(
    fwk: Framework,
    algorithm: PodAlgorithm,
    members: Sequence[PodInfo],
    group: GroupState | None = None,
) -> Capacity:
    """The per-node copies of the gang's smallest member (upper bound), exact when
    the members are identical and only modelled filters can change their verdict.
    ``group``: the attempt's shared area, which the first member's cycle state reaches."""
    table = algorithm.cache.table
    with_labels = bool(table.affinity_pods)
    same = sum(1 for _ in runs(list(members), with_labels)) == 1
    modelled = True
    first = members[0]
    feasible = table.present
    state = algorithm.new_cycle_state(group)
    pre, status = fwk.run_pre_filter(state, first, table)
    if status.is_success:
        candidates = table.present
        allowed = pre_filter_mask(table, pre)
        if allowed is not None:
            candidates = candidates & allowed
        outcome = fwk.run_filter(state, first, table, candidates)
        if outcome.status.is_success:
            feasible = outcome.feasible
        else:
            modelled = False
        for name, _ in fwk.filter:
            traits = fwk.traits[name]
            if name in state.skip_filter_plugins or traits.node_only:
                continue
            if not (traits.capacity_modelled and traits.node_local):
                modelled = False
    else:
        # Every domain gets the same verdict: the bound stays the resources'.
        modelled = False
    holders = fwk.capacity_resources
    request: dict[str, int] = {}
    for resource in {r for m in members for r in m.requests}:
        request[resource] = min(m.requests.get(resource, 0) for m in members)
    copies = np.full(table.capacity, np.iinfo(np.int64).max // 4, dtype=np.int64)
    vector = table.request_vector(request)
    free = table.allocatable - table.requested
    for row, amount in enumerate(vector.tolist()):
        resource = table.resources[row]
        if amount <= 0:
            continue
        if resource != "pods" and not any(p.checks(resource) for p in holders):
            continue
        np.minimum(copies, np.maximum(free[row], 0) // amount, out=copies)
    if first.host_ports:
        np.minimum(copies, 1, out=copies)
    copies[~(feasible & table.present)] = 0
    return Capacity(copies, same and modelled, modelled, request)
