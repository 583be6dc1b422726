"""Which pods on one node would have to go for the preemptor to fit there.

``select_victims_on_node`` is upstream's ``SelectVictimsOnNode``: take every pod of
lower priority off the node, check that the preemptor then passes PreFilter and
Filter (with the nominated pods of equal or higher priority counted), then put the
pods back one at a time, most important first and those whose eviction would
break a PodDisruptionBudget before the others, keeping back each one the
preemptor still fits beside. What could not be put back are the victims.

The node's pods are taken off and put back on the live NodeTable: the scheduling
cycle does not yield, and every change is undone before the function returns, so
the rest of the cycle (and every other reader) sees the table as it was.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from troupe.api.framework import Handle
from troupe.api.pdb import PodDisruptionBudget
from troupe.api.podinfo import PodInfo
from troupe.api.status import Status
from troupe.plugins.defaultpreemption.units import (
    VictimUnit,
    importance,
    split_units_by_pdb_violation,
    victim_units,
)

NO_VICTIMS = "No preemption victims found for incoming pod"


def split_by_pdb_violation(
    pods: Sequence[PodInfo], pdbs: Sequence[PodDisruptionBudget]
) -> tuple[list[PodInfo], list[PodInfo]]:
    """(pods whose eviction would take a budget below zero, the others), each in
    the order given (upstream ``filterPodsWithPDBViolation``; ``units.py`` does it by
    victim unit)."""
    units = [VictimUnit(p.key, ((p, ""),), p.priority) for p in pods]
    violating, others = split_units_by_pdb_violation(units, pdbs)
    return [u.pods[0][0] for u in violating], [u.pods[0][0] for u in others]


@dataclass(frozen=True, slots=True)
class NodeVictims:
    """The victims on one node, most important first, and how many of them break a
    PodDisruptionBudget."""

    victims: tuple[PodInfo, ...]
    pdb_violations: int


def select_victims_on_node(
    handle: Handle,
    pod: PodInfo,
    slot: int,
    pdbs: Sequence[PodDisruptionBudget],
) -> NodeVictims | Status:
    """The fewest, least important pods to evict from node ``slot`` so ``pod`` fits
    there; a Status saying why not when no eviction on this node helps.

    Candidates are victim units (``units.py``): a member of a group with disruption
    mode ``all`` takes its whole group with it, members on other nodes included, or
    stays; a gang member counts at its group's priority."""
    table = handle.table
    units = victim_units(table, handle.groups, pod.priority, slots=[slot])
    if not units:
        return Status.unresolvable(NO_VICTIMS)
    off: dict[str, VictimUnit] = {}

    def take(unit: VictimUnit) -> None:
        for info, node in unit.pods:
            handle.take_off(info, node)
        off[unit.key] = unit

    def back(unit: VictimUnit) -> None:
        for info, node in unit.pods:
            handle.put_back(info, node)
        del off[unit.key]

    try:
        for unit in units:
            take(unit)
        # If the pod does not fit even with every lower-priority pod gone, this node
        # cannot help (upstream does not consider affinity to the victims either).
        status = handle.run_filter_plugins_with_nominated_pods(pod, slot)
        if not status.is_success:
            return status
        violating, others = split_units_by_pdb_violation(sorted(units, key=importance), pdbs)
        chosen: list[VictimUnit] = []

        def reprieve(unit: VictimUnit) -> bool:
            back(unit)
            if handle.run_filter_plugins_with_nominated_pods(pod, slot).is_success:
                return True
            take(unit)
            chosen.append(unit)
            return False

        violations = sum(len(u.pods) for u in violating if not reprieve(u))
        for unit in others:
            reprieve(unit)
        victims = tuple(info for u in sorted(chosen, key=importance) for info, _ in u.pods)
        return NodeVictims(victims, violations)
    finally:
        for unit in list(off.values()):
            back(unit)
