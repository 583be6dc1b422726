"""Placing a run of identical gang members as a batch (KEP-5598 opportunistic batching).

Members of a gang usually share one spec. When every plugin still active for such
a member (its Filter and Score, and every plugin whose PreFilter did not SKIP)
declares ``node_local`` (``api.framework.PluginTraits``: its verdict on a node
depends only on that node and the pod), placing a member on node *n* changes nothing about any
other node. So ``BatchPlacer`` runs PreFilter, Filter over all nodes, the sampling
of candidate nodes, PreScore and Score once for the run, then for each member
picks the best live candidate, assumes it, and re-evaluates *only node n*:
its feasibility and its raw scores (normalization is redone over the candidates,
which is a few hundred numbers). The result is what running the full pod cycle per
member would give — the same filters, the same scores, the same node choice rule —
at a fraction of the cost. When the candidates run out, or the run is not
eligible, the caller falls back to the per-pod cycle.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from troupe.api.cycle import PODS_TO_ACTIVATE, CycleState, GroupState
from troupe.api.framework import FilterSlot, ScoreExtensions, ScoreSlot
from troupe.api.nodetable import BoolArray, IndexArray, IntArray, NodeTable
from troupe.api.podinfo import PodInfo
from troupe.scheduler.cycle.algorithm import PodAlgorithm
from troupe.scheduler.cycle.results import ScheduleResult
from troupe.scheduler.framework.runtime import Framework

Signature = tuple[object, ...]


def signature(info: PodInfo, with_labels: bool) -> Signature:
    """What must be equal for two pods to be placed alike (cached on the PodInfo:
    a pod's spec never changes under it)."""
    cache_key = "troupe.signature.labels" if with_labels else "troupe.signature"
    cached = info.extra.get(cache_key)
    if cached is None:
        cached = info.extra[cache_key] = _signature(info, with_labels)
    return cached  # type: ignore[return-value]


def _signature(info: PodInfo, with_labels: bool) -> Signature:
    spec = info.pod.spec

    def dump(value: object) -> str:
        # Serialized in field order: two equal specs written with their map keys in
        # another order only miss a batch, they are never confused.
        if not value:
            return ""
        if isinstance(value, list):
            return "\x00".join(v.model_dump_json() for v in value)
        return value.model_dump_json()  # type: ignore[attr-defined,no-any-return]

    return (
        tuple(sorted(info.requests.items())),
        info.nonzero_cpu,
        info.nonzero_memory,
        info.host_ports,
        info.priority,
        spec.scheduler_name,
        tuple(sorted(spec.node_selector.items())),
        dump(spec.affinity),
        # Tolerations are flat (strings and an int) and nearly every pod has some
        # (the two defaults): their field values stand for them, cheaper than JSON.
        tuple(
            [(t.key, t.operator, t.value, t.effect, t.toleration_seconds) for t in spec.tolerations]
        ),
        dump(spec.topology_spread_constraints),
        spec.node_name,
        # Placed pods' (anti-)affinity terms select pods by namespace too.
        info.pod.metadata.namespace,
        # A pod's own labels matter to spread and affinity (self-matching), and to
        # existing pods' anti-affinity (``with_labels``).
        tuple(sorted(info.pod.metadata.labels.items()))
        if with_labels or spec.topology_spread_constraints or info.has_affinity
        else (),
    )


def runs(members: list[PodInfo], with_labels: bool) -> Iterator[list[PodInfo]]:
    """Consecutive members with one signature (members are ordered so that identical
    ones are adjacent)."""
    run: list[PodInfo] = []
    last: Signature | None = None
    for info in members:
        sig = signature(info, with_labels)
        if run and sig != last:
            yield run
            run = []
        run.append(info)
        last = sig
    if run:
        yield run


@dataclass(slots=True)
class _Scores:
    """One score plugin's column over the candidates. A placement reads and writes
    one entry of each through ``item`` (a Python int; indexing makes a numpy scalar,
    and arithmetic on one costs several times an int's)."""

    name: str
    weight: int
    plugin: object
    raw: IntArray
    normalizer: ScoreExtensions | None
    node_only: bool
    weighted: IntArray  # weight * normalized raw, this plugin's share of the total
    one: Callable[[CycleState, PodInfo, NodeTable, int], int | None] | None = None


_DEAD = int(np.iinfo(np.int64).min)


class BatchPlacer:
    """Places pods of one signature until it cannot; ``place`` returns None then.

    The weighted total of every candidate is kept up to date incrementally: a
    placement changes one node's raw scores, so only that entry moves, unless a
    normalizing plugin's raw score moved (then its column is normalized again).
    """

    def __init__(
        self,
        algorithm: PodAlgorithm,
        fwk: Framework,
        *,
        within: BoolArray | None = None,
        group: GroupState | None = None,
    ) -> None:
        self.algorithm = algorithm
        self.cache = algorithm.cache
        self.fwk = fwk
        # Gang members: the placement's nodes, and their attempt's shared area.
        self.within = within
        self.group = group
        self.state: CycleState | None = None
        self.slots: IndexArray = np.zeros(0, dtype=np.intp)
        self.alive: np.ndarray = np.zeros(0, dtype=bool)
        self.total: IntArray = np.zeros(0, dtype=np.int64)
        self.live = 0
        self.scores: list[_Scores] = []
        self.evaluated = 0
        self.placed = 0
        # The candidates whose total is the highest, ascending (as np.flatnonzero
        # gives them, so a seeded pick is the one ``PodAlgorithm.select_index`` would
        # make), kept as totals move one entry at a time (a pod lands on one node):
        # a pick is not a pass over every candidate. None when it must be found again.
        self._best: list[int] | None = None
        self._best_value = 0

    def start(self, first: PodInfo, *, sample: bool = True) -> bool:
        """Evaluate the run on ``first``; False when batching does not apply.

        ``sample``: score the first ``numFeasibleNodesToFind`` feasible nodes, as one
        pod cycle does; otherwise every feasible node (the evaluation is shared by
        the whole run, so a long run can afford looking at all of them).
        """
        algorithm, fwk, table = self.algorithm, self.fwk, self.cache.table
        state = algorithm.new_cycle_state(self.group)
        pre, status = fwk.run_pre_filter(state, first, table)
        if not status.is_success or pre is not None:
            return False
        traits = fwk.traits
        skipped = state.skip_filter_plugins
        active_filters = [(n, p) for n, p in fwk.filter if n not in skipped]
        # Exact only when every plugin active for the pod is node-local: its Filter,
        # and any plugin whose PreFilter did not SKIP (what it keeps may tie nodes
        # together, e.g. something its Reserve takes for earlier pods).
        if not all(traits[n].node_local for n, _ in active_filters) or not all(
            traits[n].node_local for n, _ in fwk.pre_filter if n not in skipped
        ):
            return False
        outcome = fwk.run_filter(state, first, table, algorithm.candidates(self.within))
        if not outcome.status.is_success:
            return False
        if sample:
            slots, evaluated = algorithm.feasible_slots(fwk, outcome.feasible)
        else:
            slots, evaluated = table.slots()[outcome.feasible[table.slots()]], table.size
        if len(slots) < 2:
            return False
        if not fwk.run_pre_score(state, first, table, slots).is_success:
            return False
        scores = []
        for name, plugin, weight in fwk.score:
            if name in state.skip_score_plugins:
                continue
            if not traits[name].node_local:
                return False
            raw = plugin.score(state, first, table, slots)
            # Protocol isinstance checks are slow: decide once per run.
            normalizer = plugin if isinstance(plugin, ScoreExtensions) else None
            node_only = traits[name].node_only
            one = plugin.score_slot if isinstance(plugin, ScoreSlot) else None
            sc = _Scores(name, weight, plugin, raw, normalizer, node_only, raw, one)
            self._weigh(sc, first, state)
            scores.append(sc)
        self.state, self.slots, self.evaluated, self.scores = state, slots, evaluated, scores
        # Single-node checks where a plugin offers one (decided once: Protocol
        # isinstance checks are slow). A node-only verdict cannot change when a pod
        # lands on the node, so it is never re-checked.
        self._filters = [
            (p.filter_slot if isinstance(p, FilterSlot) else None, p)
            for n, p in active_filters
            if not traits[n].node_only
        ]
        self.alive = np.ones(len(slots), dtype=bool)
        self.live = len(slots)
        self._add_up()
        return True

    @staticmethod
    def _weigh(sc: _Scores, info: PodInfo, state: CycleState) -> None:
        scores = sc.raw.copy()
        if sc.normalizer is not None:
            sc.normalizer.normalize_score(state, info, scores)
        sc.weighted = scores.astype(np.int64) * sc.weight

    def _add_up(self) -> None:
        """Every candidate's total over the columns (dead ones stay dead)."""
        total = np.zeros(len(self.slots), dtype=np.int64)
        for sc in self.scores:
            total += sc.weighted
        total[~self.alive] = _DEAD
        self.total = total

    def place(self, info: PodInfo) -> tuple[ScheduleResult, CycleState] | None:
        """The node for the next pod (assumed in the cache), or None when no
        candidate is left."""
        if self.state is None or self.live == 0:
            return None
        index = self._pick()
        slot: int = self.slots.item(index)
        node = self.cache.table.names[slot]
        feasible_count = self.live
        self.cache.assume(info, node)
        self.placed += 1
        self._refresh(index, slot, info)
        state = self.state.clone()
        state.write(PODS_TO_ACTIVATE, set())
        return ScheduleResult(node, self.evaluated, feasible_count), state

    def _refresh(self, index: int, slot: int, info: PodInfo) -> None:
        """Node ``slot`` just got a pod: re-check it alone."""
        state = self.state
        assert state is not None
        table = self.cache.table
        ok = True
        for check, plugin in self._filters:
            if check is not None:
                ok = check(state, info, table, slot)
            else:
                ok = bool(plugin.filter(state, info, table).feasible[slot])
            if not ok:
                break
        if ok:
            # Room nominated to pods of equal or higher priority stays theirs.
            ok = self.fwk.nominated.fits(
                self.fwk.filter, state, info, table, slot, self.fwk.pre_filter_extensions
            )
        if not ok:
            self.alive[index] = False
            self.live -= 1
            self.total[index] = _DEAD
            self._moved(index, _DEAD)
            return
        renormalized = False
        delta = 0
        for sc in self.scores:
            if sc.node_only:
                continue
            value = sc.one(state, info, table, slot) if sc.one is not None else None
            if value is None:
                one = np.array([slot], dtype=np.intp)
                value = int(sc.plugin.score(state, info, table, one)[0])  # type: ignore[attr-defined]
            raw = sc.raw
            if value == raw.item(index):
                continue
            raw[index] = value
            if sc.normalizer is None:
                weighted = value * sc.weight
                delta += weighted - sc.weighted.item(index)
                sc.weighted[index] = weighted
            else:
                self._weigh(sc, info, state)
                renormalized = True
        if renormalized:
            self._add_up()
            self._best = None
        elif delta:
            # Unchanged, it stays the best it was picked as (``_moved`` has nothing to do).
            value = self.total.item(index) + delta
            self.total[index] = value
            self._moved(index, value)

    def _pick(self) -> int:
        """A candidate with the highest total; ties broken uniformly at random with
        the algorithm's seeded generator, as ``PodAlgorithm.select_index`` does."""
        best = self._best
        if best is None:
            best = self._best = np.flatnonzero(self.total == self.total.max()).tolist()
            self._best_value = int(self.total[best[0]])
        return best[self.algorithm.tie_break(len(best))]

    def _moved(self, index: int, value: int) -> None:
        """Candidate ``index``'s total changed to ``value`` (it was a best one: it was
        picked)."""
        best = self._best
        if best is None:
            return
        if value > self._best_value:
            # Every other total is unchanged and below: this one alone is the best.
            self._best, self._best_value = [index], value
        elif value < self._best_value:
            at = bisect_left(best, index)
            if at < len(best) and best[at] == index:
                del best[at]
            if not best:
                self._best = None
