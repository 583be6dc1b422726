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

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from troupe.api.framework import Handle
from troupe.api.objects import Pod
from troupe.api.pdb import PodDisruptionBudget
from troupe.api.podinfo import PodInfo
from troupe.api.status import Status

NO_VICTIMS = "No preemption victims found for incoming pod"

_NOT_STARTED = math.inf


def start_time(pod: Pod) -> float:
    """``status.startTime`` as seconds; a pod not started yet counts as starting now,
    later than every started one (upstream ``GetPodStartTime``)."""
    raw = pod.status.start_time
    if not raw:
        return _NOT_STARTED
    try:
        return datetime.fromisoformat(raw).timestamp()
    except ValueError:
        return _NOT_STARTED


def importance(info: PodInfo) -> tuple[int, float]:
    """Sort key, most important first: higher priority, then running longer
    (upstream ``MoreImportantPod``)."""
    return -info.priority, start_time(info.pod)


def split_by_pdb_violation(
    pods: Sequence[PodInfo], pdbs: Sequence[PodDisruptionBudget]
) -> tuple[list[PodInfo], list[PodInfo]]:
    """(pods whose eviction would take a budget below zero, the others), each in
    the order given. Evicting the pods in order spends each budget's
    ``disruptionsAllowed``; a pod the budget already lists as disrupted spends
    nothing (upstream ``filterPodsWithPDBViolation``)."""
    allowed = [pdb.status.disruptions_allowed for pdb in pdbs]
    violating: list[PodInfo] = []
    others: list[PodInfo] = []
    for info in pods:
        violated = False
        for i, pdb in enumerate(pdbs):
            if not pdb.covers(info.pod) or info.pod.metadata.name in pdb.status.disrupted_pods:
                continue
            allowed[i] -= 1
            if allowed[i] < 0:
                violated = True
        (violating if violated else others).append(info)
    return violating, others


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
    there; a Status saying why not when no eviction on this node helps."""
    table = handle.table
    node = table.names[slot]
    potential = [p for p in table.pods[slot].values() if p.priority < pod.priority]
    if not potential:
        return Status.unresolvable(NO_VICTIMS)
    off: dict[str, PodInfo] = {}
    try:
        for p in potential:
            table.remove_pod(p, node)
            off[p.key] = p
        # If the pod does not fit even with every lower-priority pod gone, this node
        # cannot help (upstream does not consider affinity to the victims either).
        status = handle.run_filter_plugins_with_nominated_pods(pod, slot)
        if not status.is_success:
            return status
        potential.sort(key=importance)
        violating, others = split_by_pdb_violation(potential, pdbs)
        victims: list[PodInfo] = []

        def reprieve(p: PodInfo) -> bool:
            table.add_pod(p, node)
            del off[p.key]
            if handle.run_filter_plugins_with_nominated_pods(pod, slot).is_success:
                return True
            table.remove_pod(p, node)
            off[p.key] = p
            victims.append(p)
            return False

        violations = sum(1 for p in violating if not reprieve(p))
        for p in others:
            reprieve(p)
        if violating and others:
            victims.sort(key=importance)
        return NodeVictims(tuple(victims), violations)
    finally:
        for p in off.values():
            table.add_pod(p, node)
