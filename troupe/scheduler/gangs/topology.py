"""Topology-aware placement of a gang (KEP-5732), with troupe's preferred levels.

``TopologyPlacer.place`` stands in for ``GangPlacer.place`` in the pod-group cycle.
A gang with no topology (its own, or its profile's default for its API) is placed on
the whole cluster as before. Otherwise, on the live NodeTable:

1. **PlacementGenerate**: one placement per value of the required label
   (``TopologyPlacement``); members already bound or assumed pin the placement to
   their domain.
2. **Prune**: ``troupe.scheduler.gangs.capacity`` bounds how many members each domain
   can hold; domains that cannot reach the quorum are not tried.
3. **Evaluate**: domains in generation order until ``percentageOfPlacementsToScore``
   of them are feasible. When the bound is exact (identical members, only resource
   and port filters move) it is the evaluation; otherwise the members are placed in
   the domain for real, with **PlacementFeasible** ending a domain early once its
   quorum is out of reach, and taken back.
4. **PlacementScore**: PodGroupPodsCount and NodeResourcesFit (MostAllocated over the
   domain), normalized and weighted; the best domain wins (the first on a tie).
5. The gang is placed in that domain; preferred levels narrow it first: a single
   domain of the innermost preferred level with room, else of the next level out,
   else as few domains of the outermost preferred level as hold the gang, else the
   whole required domain.

No feasible domain: nothing is placed, and the attempt says which domain came
closest and why (``best rack r7: 6 of 8 pods fit``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from troupe.api.framework import GroupEvaluation, Placement, PlacementAssignment
from troupe.api.gangs import GangPolicy, GroupRef
from troupe.api.status import Code, Status
from troupe.api.topology import TopologyLevels, short_name
from troupe.scheduler.framework.runtime import Framework
from troupe.scheduler.gangs.attempt import Failure, GroupAttempt
from troupe.scheduler.gangs.attempt import Placement as Member
from troupe.scheduler.gangs.capacity import Capacity, capacity_of
from troupe.scheduler.gangs.composite_topology import CompositePlacer, has_topology
from troupe.scheduler.gangs.directory import GangDirectory
from troupe.scheduler.gangs.placement import GangPlacer

# Below this many nodes over all placements every feasible placement is scored.
MIN_NODES_FOR_PLACEMENT_LIMIT = 100
MIN_PLACEMENTS_PERCENTAGE = 5


def num_placements_to_score(percentage: int, placements: int, nodes: int) -> int:
    """How many feasible placements to score (KEP-5732 beta): ``percentage`` of them,
    or adaptively from 100% on small clusters down to 10% at 5000 nodes over all
    placements, never below 5%; always at least one."""
    if percentage == 0:
        if nodes < MIN_NODES_FOR_PLACEMENT_LIMIT:
            return placements
        percentage = max(100 - nodes * 90 // 5000, MIN_PLACEMENTS_PERCENTAGE)
    return max(placements * percentage // 100, 1)


@dataclass(slots=True)
class TopologyAttempt:
    placed: list[Member]
    failures: list[Failure]
    shortfall: str = ""
    # How close the gang came, for its message ("best rack r7: 6 of 8 pods fit").
    state: str = ""
    # The placement the gang went to ("" without topology).
    domain: str = ""
    levels: TopologyLevels = field(default_factory=TopologyLevels)


class TopologyPlacer:
    def __init__(self, gang: GangPlacer, groups: GangDirectory) -> None:
        self.gang = gang
        self.algorithm = gang.algorithm
        self.cache = gang.cache
        self.groups = groups
        self.composites = CompositePlacer(gang, groups)

    def levels(self, fwk: Framework, ref: GroupRef, policy: GangPolicy) -> TopologyLevels:
        """The group's levels; none when the profile generates no placements."""
        if not fwk.placement_generate:
            return TopologyLevels()
        if fwk.placement_levels is not None:
            return fwk.placement_levels.levels(ref.api, policy.topology)
        return policy.topology

    def place(self, attempt: GroupAttempt) -> TopologyAttempt:
        fwk, policy = attempt.fwk, attempt.policy
        tree = policy.tree
        if tree is not None and fwk.placement_generate and has_topology(tree):
            placed, failures = self.composites.place(attempt, tree)
            return TopologyAttempt(placed, failures, levels=tree.topology)
        levels = self.levels(fwk, attempt.ref, policy) if tree is None else TopologyLevels()
        if not levels:
            placed, failures, shortfall = self.gang.place(attempt)
            return TopologyAttempt(placed, failures, shortfall)
        shortfall = self.gang.min_resources_shortfall(attempt)
        if shortfall:
            return TopologyAttempt([], [], shortfall, levels=levels)
        quorum = policy.min_count if policy.gang else 1
        return _DomainSearch(self, attempt, quorum, levels).run()

    def place_quorum(self, attempt: GroupAttempt) -> GroupEvaluation:
        """Where the members would go as the table stands, if that reaches the quorum
        (with the group's topology), and how many were placed; nothing stays placed
        (the preemption dry run)."""
        found = self.place(attempt)
        try:
            count = len(found.placed)
            if found.shortfall or attempt.already + count < attempt.policy.min_count:
                return None, count
            return {p.info.key: p.result.node for p in found.placed}, count
        finally:
            self.gang.revert(attempt.fwk, found.placed)

    def in_place(self, attempt: GroupAttempt) -> bool:
        """Whether only resources and host ports can change the members' verdicts."""
        return capacity_of(attempt.fwk, self.algorithm, attempt.members, attempt.group).modelled


class _DomainSearch:
    """The search for a gang's domain in one attempt (the state its steps share)."""

    def __init__(
        self, placer: TopologyPlacer, attempt: GroupAttempt, quorum: int, levels: TopologyLevels
    ) -> None:
        self.placer, self.attempt, self.fwk, self.ref = placer, attempt, attempt.fwk, attempt.ref
        self.gang = placer.gang
        self.table = placer.cache.table
        self.members, self.already = attempt.members, attempt.already
        self.quorum, self.levels = quorum, levels
        self.capacity: Capacity = capacity_of(
            self.fwk, placer.algorithm, self.members, attempt.group
        )
        self.pinned = self._pinned()

    # --- the steps ---------------------------------------------------------------------

    def run(self) -> TopologyAttempt:
        table = self.table
        root = Placement("", table.present.copy())
        if not self.levels.required:
            return self._inside(root)
        key = self.levels.required
        candidates, status = self._generate(key, root)
        if not status.is_success:
            return self._all_failed(status)
        if self.pinned:
            candidates = [c for c in candidates if self._holds_pinned(c)]
        if not candidates:
            return self._all_failed(Status.unresolvable(self._pinned_message(key)))
        bounds = self.capacity.bounds(table, root.nodes, candidates)
        limit = num_placements_to_score(
            self.fwk.profile.percentage_of_placements_to_score,
            len(candidates),
            int(np.count_nonzero(root.nodes)),
        )
        feasible: list[tuple[Placement, int, dict[str, int]]] = []
        for c, bound in zip(candidates, bounds, strict=True):
            if self.already + bound < self.quorum:
                continue
            if self.capacity.exact:
                count = min(len(self.members), bound)
                request = {r: v * count for r, v in self.capacity.request.items()}
                feasible.append((c, count, request))
            else:
                placed, _ = self._try(c.nodes, early=True)
                requested = _requested(placed)
                count = len(placed)
                self.gang.revert(self.fwk, placed)
                if self.already + count >= self.quorum:
                    feasible.append((c, count, requested))
            if len(feasible) >= limit:
                break
        while feasible:
            best, status = self._best(feasible)
            if not status.is_success:
                return TopologyAttempt([], [(self.members[0], status, None)], levels=self.levels)
            attempt = self._inside(best)
            if self.already + len(attempt.placed) >= self.quorum:
                return attempt
            # The bound was not met (a filter it does not model): try the next one.
            self.gang.revert(self.fwk, attempt.placed)
            feasible = [f for f in feasible if f[0] is not best]
        return self._none_feasible(candidates, bounds)

    def _inside(self, domain: Placement) -> TopologyAttempt:
        """Place the gang in ``domain``, narrowed by the preferred levels."""
        for key in reversed(self.levels.preferred):
            found = self._single(key, domain)
            if found is not None:
                return found
        if self.levels.preferred:
            found = self._fewest(self.levels.preferred[0], domain)
            if found is not None:
                return found
        placed, failures = self._try(domain.nodes, early=False)
        return TopologyAttempt(placed, failures, domain=domain.name, levels=self.levels)

    def _single(self, key: str, domain: Placement) -> TopologyAttempt | None:
        """The gang in one domain of ``key`` inside ``domain``, the best-scoring one
        that holds the quorum, or None."""
        subs, status = self._generate(key, domain)
        if not status.is_success:
            return None
        if self.pinned:
            subs = [s for s in subs if self._holds_pinned(s)]
        bounds = self.capacity.bounds(self.table, domain.nodes, subs)
        room = [
            (s, min(len(self.members), b), self._request(b))
            for s, b in zip(subs, bounds, strict=True)
            if self.already + b >= self.quorum
        ]
        while room:
            best, status = self._best(room)
            if not status.is_success:
                return None
            placed, failures = self._try(best.nodes, early=True)
            if self.already + len(placed) >= self.quorum:
                return TopologyAttempt(placed, failures, domain=best.name, levels=self.levels)
            self.gang.revert(self.fwk, placed)
            room = [r for r in room if r[0] is not best]
        return None

    def _fewest(self, key: str, domain: Placement) -> TopologyAttempt | None:
        """The gang in as few domains of ``key`` inside ``domain`` as hold it: those
        with the most room first (the pinned ones before all)."""
        subs, status = self._generate(key, domain)
        if not status.is_success or len(subs) < 2:
            return None
        bounds = self.capacity.bounds(self.table, domain.nodes, subs)
        order = sorted(
            range(len(subs)),
            key=lambda i: (not self._touches_pinned(subs[i]), -bounds[i], subs[i].value),
        )
        nodes = np.zeros_like(domain.nodes)
        total = 0
        names: list[str] = []
        for used, i in enumerate(order, start=1):
            nodes |= subs[i].nodes
            total += bounds[i]
            names.append(subs[i].value)
            if self.already + total < self.quorum or used == len(order):
                continue
            placed, failures = self._try(nodes, early=True)
            if self.already + len(placed) >= self.quorum:
                name = f"{domain.name}/{key}=" + "+".join(names) if domain.name else ""
                return TopologyAttempt(placed, failures, domain=name, levels=self.levels)
            self.gang.revert(self.fwk, placed)
        return None

    def _none_feasible(self, candidates: list[Placement], bounds: list[int]) -> TopologyAttempt:
        """No domain holds the quorum: try the one with the most room to say why."""
        key = self.levels.required
        best = max(range(len(candidates)), key=lambda i: (bounds[i], -i))
        domain = candidates[best]
        placed, failures = self._try(domain.nodes, early=False)
        count = self.already + len(placed)
        self.gang.revert(self.fwk, placed)
        if not failures:
            failures = [
                (
                    m,
                    Status.unschedulable(
                        f"the {short_name(key)} has room for {count} of the gang's pods"
                    ),
                    None,
                )
                for m in self.members[len(placed) :]
            ] or [(self.members[0], Status.unschedulable("not enough room"), None)]
        state = f"best {short_name(key)} {domain.value}: {count} of {self.quorum} pods fit"
        return TopologyAttempt([], failures, state=state, levels=self.levels)

    # --- helpers -----------------------------------------------------------------------

    def _try(self, nodes: np.ndarray, *, early: bool) -> tuple[list[Member], list[Failure]]:
        quorum = (self.quorum, self.already) if early else None
        return self.gang.place_within(self.attempt, self.members, nodes, quorum)

    def _generate(self, key: str, parent: Placement) -> tuple[list[Placement], Status]:
        for _, plugin in self.fwk.placement_generate:
            return plugin.generate_placements(key, self.table, parent)
        return [parent], Status()

    def _best(
        self, feasible: list[tuple[Placement, int, dict[str, int]]]
    ) -> tuple[Placement, Status]:
        assignments = [
            PlacementAssignment(p, self.already + count, requested)
            for p, count, requested in feasible
        ]
        totals, status = self.fwk.group.run_placement_score(self.table, assignments)
        top = max(range(len(totals)), key=lambda i: (totals[i], -i))
        return feasible[top][0], status

    def _request(self, bound: int) -> dict[str, int]:
        count = min(len(self.members), bound)
        return {r: v * count for r, v in self.capacity.request.items()}

    def _pinned(self) -> list[int]:
        slots = []
        for key in self.placer.groups.placed_members(self.ref.key):
            node = self.placer.cache.node_of(key)
            slot = self.table.slot(node) if node else None
            if slot is not None:
                slots.append(slot)
        return slots

    def _holds_pinned(self, p: Placement) -> bool:
        return all(bool(p.nodes[s]) for s in self.pinned)

    def _touches_pinned(self, p: Placement) -> bool:
        return any(bool(p.nodes[s]) for s in self.pinned)

    def _pinned_message(self, key: str) -> str:
        values = sorted({self.table.label_value(s, key) or "(none)" for s in self.pinned})
        return (
            f"the gang's bound pods are on nodes in {short_name(key)} {', '.join(values)}: "
            "no single domain holds them"
        )

    def _all_failed(self, status: Status) -> TopologyAttempt:
        if status.code is Code.ERROR:
            return TopologyAttempt([], [(self.members[0], status, None)], levels=self.levels)
        return TopologyAttempt([], [(m, status, None) for m in self.members], levels=self.levels)


def _requested(placed: list[Member]) -> dict[str, int]:
    """What the members ``placed`` request in all (they are taken back before the
    placements are scored)."""
    total: dict[str, int] = {}
    for p in placed:
        for resource, amount in p.info.requests.items():
            total[resource] = total.get(resource, 0) + amount
    return total
