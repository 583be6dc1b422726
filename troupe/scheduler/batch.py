"""Placing a run of identical gang members as a batch (KEP-5598 opportunistic batching).

Members of a gang usually share one spec. When every Filter and Score plugin still
active for such a member is ``node_local`` (its verdict on a node depends only on
that node and the pod), placing a member on node *n* changes nothing about any
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

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from troupe.api.cycle import CycleState
from troupe.api.framework import FilterSlot, ScoreExtensions
from troupe.api.nodetable import IndexArray, IntArray
from troupe.api.podinfo import PodInfo
from troupe.scheduler.framework import Framework
from troupe.scheduler.results import ScheduleResult

if TYPE_CHECKING:
    from troupe.scheduler.schedule_one import Scheduler

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
        if not value:
            return ""
        if isinstance(value, list):
            return json.dumps([v.model_dump(mode="json") for v in value], sort_keys=True)
        return json.dumps(value.model_dump(mode="json"), sort_keys=True)  # type: ignore[attr-defined]

    return (
        tuple(sorted(info.requests.items())),
        info.nonzero_cpu,
        info.nonzero_memory,
        info.host_ports,
        info.priority,
        spec.scheduler_name,
        tuple(sorted(spec.node_selector.items())),
        dump(spec.affinity),
        dump(spec.tolerations),
        dump(spec.topology_spread_constraints),
        spec.node_name,
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
    name: str
    weight: int
    plugin: object
    raw: IntArray
    normalizer: ScoreExtensions | None


class BatchPlacer:
    """Places members of one run until it cannot; ``place`` returns None then."""

    def __init__(self, scheduler: Scheduler, fwk: Framework) -> None:
        self.s = scheduler
        self.fwk = fwk
        self.state: CycleState | None = None
        self.slots: IndexArray = np.zeros(0, dtype=np.intp)
        self.alive: np.ndarray = np.zeros(0, dtype=bool)
        self.scores: list[_Scores] = []
        self.evaluated = 0

    def start(self, first: PodInfo) -> bool:
        """Evaluate the run on ``first``; False when batching does not apply."""
        s, fwk, table = self.s, self.fwk, self.s.cache.table
        state = s.new_cycle_state()
        pre, status = fwk.run_pre_filter(state, first, table)
        if not status.is_success or pre is not None:
            return False
        active_filters = [(n, p) for n, p in fwk.filter if n not in state.skip_filter_plugins]
        if not all(getattr(p, "node_local", False) for _, p in active_filters):
            return False
        outcome = fwk.run_filter(state, first, table, table.present)
        if not outcome.status.is_success:
            return False
        slots, evaluated = s.feasible_slots(fwk, outcome.feasible)
        if len(slots) < 2:
            return False
        if not fwk.run_pre_score(state, first, table, slots).is_success:
            return False
        scores = []
        for name, plugin, weight in fwk.score:
            if name in state.skip_score_plugins:
                continue
            if not getattr(plugin, "node_local", False):
                return False
            raw = plugin.score(state, first, table, slots)
            # Protocol isinstance checks are slow: decide once per run.
            normalizer = plugin if isinstance(plugin, ScoreExtensions) else None
            scores.append(_Scores(name, weight, plugin, raw, normalizer))
        self.state, self.slots, self.evaluated, self.scores = state, slots, evaluated, scores
        # Single-node checks where a plugin offers one (decided once: Protocol
        # isinstance checks are slow).
        self._filters = [
            (p.filter_slot if isinstance(p, FilterSlot) else None, p) for _, p in active_filters
        ]
        self.alive = np.ones(len(slots), dtype=bool)
        return True

    def place(self, info: PodInfo) -> tuple[ScheduleResult, CycleState] | None:
        """The node for the next member (assumed in the cache), or None when no
        candidate is left."""
        if self.state is None or not self.alive.any():
            return None
        total = np.zeros(len(self.slots), dtype=np.int64)
        for sc in self.scores:
            scores = sc.raw.copy()
            if sc.normalizer is not None:
                sc.normalizer.normalize_score(self.state, info, scores)
            total += scores * sc.weight
        total[~self.alive] = np.iinfo(np.int64).min
        index = self.s.select_index(total)
        slot = int(self.slots[index])
        node = self.s.cache.table.names[slot]
        feasible_count = int(self.alive.sum())
        self.s.cache.assume(info, node)
        self._refresh(index, slot, info)
        result = ScheduleResult(node, self.evaluated, feasible_count)
        return result, self.state.clone()

    def _refresh(self, index: int, slot: int, info: PodInfo) -> None:
        """Node ``slot`` just got a pod: re-check it alone."""
        assert self.state is not None
        table = self.s.cache.table
        for check, plugin in self._filters:
            ok = (
                check(self.state, info, table, slot)
                if check is not None
                else bool(plugin.filter(self.state, info, table).feasible[slot])
            )
            if not ok:
                self.alive[index] = False
                return
        one = np.array([slot], dtype=np.intp)
        for sc in self.scores:
            sc.raw[index] = sc.plugin.score(self.state, info, table, one)[0]  # type: ignore[attr-defined]
