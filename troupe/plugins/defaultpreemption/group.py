"""DefaultPreemption at PodGroupPostFilter: victims for a whole gang (KEP-5710).

Upstream's algorithm over the whole cluster, on the live NodeTable (every change is
undone before returning):

1. **Candidates**: every victim unit below the gang's priority
   (``troupe.plugins.defaultpreemption.units``: single pods, gang members at their
   group's priority, ``all`` groups whole).
2. Take them all off and run the group algorithm once (``evaluate``: with the
   topology placement when the gang has one, so the room freed is inside one
   domain). The gang does not fit even so: nothing to do, and the message says how
   many members would still be left without room.
3. **Binary search over priorities**: the lowest priority N such that evicting only
   units at or below N makes the gang fit; units above N go back.
4. **Reprieve**, most important first and units whose eviction would break a
   PodDisruptionBudget before all: with the gang assumed where the last evaluation put
   it, a unit goes back when every node it runs on keeps room for it
   (``in_place``: resources and host ports are all the gang's Filters care about), or
   else when the group algorithm still reaches the quorum with it back. What cannot go
   back are the victims; each of them, put back alone, would break the placement.

Lower-priority pods already terminating (an earlier preemption's victims) are off the
table for the whole search: they go anyway, and the room they leave is what that
preemption's nominated pods (which ``evaluate`` counts) will take. Those on the nodes
the plan uses are its ``awaited`` pods: the gang waits for them as for its victims.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

from troupe.api.framework import DisruptionPlan, GroupEvaluation, GroupPreemptor, Handle
from troupe.api.nodetable import NodeTable
from troupe.api.podinfo import PodInfo
from troupe.api.status import SKIP, Status
from troupe.plugins.defaultpreemption.units import (
    VictimUnit,
    importance,
    split_units_by_pdb_violation,
    terminating_below,
    victim_units,
)


def select_group_victims(
    handle: Handle, preemptor: GroupPreemptor, evaluate: Callable[[], GroupEvaluation]
) -> tuple[DisruptionPlan | None, Status]:
    table = handle.table
    units = victim_units(table, handle.groups, preemptor.priority, exclude=preemptor.key)
    if not units:
        # Nothing it could evict: preemption does not apply (declared as SKIP).
        return None, SKIP
    search = _Search(handle, units)
    # Pods already on their way out (an earlier preemption's victims) are gone for
    # this plan: their room is what the nominated pods of that preemption take, and
    # counting both would evict twice for it.
    leaving = terminating_below(table, preemptor.priority)
    for info, node in leaving:
        handle.take_off(info, node)
    try:
        search.take_off(units)
        nominated, placed = evaluate()
        if nominated is None:
            missing = preemptor.min_count - preemptor.already - placed
            return None, Status.unresolvable(
                f"evicting every lower-priority pod would still leave {missing} of "
                f"{preemptor.min_count} required members without room"
            )
        nominated = search.lowest_priority(evaluate, nominated)
        candidates = sorted(search.off_units(), key=importance)
        violating, others = split_units_by_pdb_violation(
            candidates, list(handle.pod_disruption_budgets())
        )
        ordered = [*violating, *others]
        if preemptor.in_place:
            held = _nominated_elsewhere(handle, preemptor, nominated)
            victims = search.reprieve_in_place(ordered, preemptor.members, nominated, held)
        else:
            victims, nominated = search.reprieve(ordered, evaluate, nominated)
        pods = tuple(info for unit in sorted(victims, key=importance) for info, _ in unit.pods)
        whole = tuple(u.whole for u in victims if u.whole is not None)
        used = set(nominated.values())
        awaited = tuple(info for info, node in leaving if node in used)
        plan = DisruptionPlan(pods, dict(nominated), len(candidates) - len(victims), whole, awaited)
        return plan, Status()
    finally:
        search.restore()
        for info, node in leaving:
            handle.put_back(info, node)


class _Search:
    """The units taken off the table, and putting them back."""

    def __init__(self, handle: Handle, units: list[VictimUnit]) -> None:
        # Victims go off and back through the handle: PreFilter plugins that keep
        # per-pod state are told (RemovePod) while they are off.
        self.handle = handle
        self.table = table = handle.table
        self.units = units
        self.off: dict[str, VictimUnit] = {}
        # What each node was asked for before anything was taken off: a node already
        # past its allocatable (an extended resource it does not offer) stays valid.
        self.before = table.requested.copy()

    def take_off(self, units: list[VictimUnit]) -> None:
        for unit in units:
            if unit.key in self.off:
                continue
            for info, node in unit.pods:
                self.handle.take_off(info, node)
            self.off[unit.key] = unit

    def put_back(self, unit: VictimUnit) -> None:
        for info, node in unit.pods:
            self.handle.put_back(info, node)
        del self.off[unit.key]

    def off_units(self) -> list[VictimUnit]:
        return list(self.off.values())

    def restore(self) -> None:
        for unit in list(self.off.values()):
            self.put_back(unit)

    def lowest_priority(
        self, evaluate: Callable[[], GroupEvaluation], nominated: Mapping[str, str]
    ) -> Mapping[str, str]:
        """Keep off only the units at or below the lowest priority that still lets
        the gang fit (binary search over the candidates' priorities)."""
        priorities = sorted({u.priority for u in self.units})
        lo, hi = 0, len(priorities) - 1
        best = nominated
        while lo < hi:
            mid = (lo + hi) // 2
            self._only_up_to(priorities[mid])
            found, _ = evaluate()
            if found is not None:
                best, hi = found, mid
            else:
                lo = mid + 1
        self._only_up_to(priorities[hi])
        return best

    def _only_up_to(self, priority: int) -> None:
        for unit in list(self.off.values()):
            if unit.priority > priority:
                self.put_back(unit)
        self.take_off([u for u in self.units if u.priority <= priority])

    def reprieve_in_place(
        self,
        ordered: list[VictimUnit],
        members: Mapping[str, PodInfo],
        nominated: Mapping[str, str],
        held: list[tuple[PodInfo, str]],
    ) -> list[VictimUnit]:
        """With the gang assumed at ``nominated`` (and the room ``held`` for other
        nominated pods it must leave alone), put back every unit whose nodes keep room
        for it; the rest are the victims."""
        table = self.table
        assumed = [(members[k], node) for k, node in nominated.items() if k in members]
        assumed += held
        for info, node in assumed:
            table.add_pod(info, node)
        victims: list[VictimUnit] = []
        used = set(nominated.values())
        try:
            for unit in ordered:
                self.put_back(unit)
                # A node the gang does not use is as it was: the unit fits back there.
                touched = [node for node in unit.nodes if node in used]
                if not all(_room(table, node, self.before) for node in touched):
                    self.take_off([unit])
                    victims.append(unit)
        finally:
            for info, node in assumed:
                table.remove_pod(info, node)
        return victims

    def reprieve(
        self,
        ordered: list[VictimUnit],
        evaluate: Callable[[], GroupEvaluation],
        nominated: Mapping[str, str],
    ) -> tuple[list[VictimUnit], Mapping[str, str]]:
        """Put back each unit the group algorithm still reaches the quorum beside."""
        victims: list[VictimUnit] = []
        for unit in ordered:
            self.put_back(unit)
            found, _ = evaluate()
            if found is None:
                self.take_off([unit])
                victims.append(unit)
            else:
                nominated = found
        return victims, nominated


def _nominated_elsewhere(
    handle: Handle, preemptor: GroupPreemptor, nominated: Mapping[str, str]
) -> list[tuple[PodInfo, str]]:
    """Pods of other preemptions nominated to the gang's nodes (equal or higher
    priority): their room is taken as the group algorithm took it."""
    if not preemptor.members:
        return []
    first = next(iter(preemptor.members.values()))
    out = []
    for node in sorted(set(nominated.values())):
        for other in handle.nominated_for_node(first, node):
            if other.key not in preemptor.members:
                out.append((other, node))
    return out


def _room(table: NodeTable, node: str, before: np.ndarray) -> bool:
    """No resource of ``node`` is requested beyond its allocatable (or beyond what it
    was asked for before, if that was more) and no host port is taken twice."""
    slot = table.slot(node)
    if slot is None:
        return True
    rows = min(before.shape[0], table.requested.shape[0])
    limit = np.maximum(table.allocatable[:rows, slot], before[:rows, slot])
    if np.any(table.requested[:rows, slot] > limit):
        return False
    return all(count <= 1 for count in table.ports[slot].values())
