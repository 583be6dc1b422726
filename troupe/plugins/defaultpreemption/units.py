"""Preemption victims as units: a single pod, or a whole pod group (KEP-5710).

A bound pod is a victim candidate in the unit it would be evicted in:

- a pod of no group, or of a ``basic`` group: itself, at its own priority;
- a member of a gang whose disruption mode is ``single`` (the default): itself, at
  its **group's** priority (the group's ``priorityClassName``/``priority``; a
  scheduler-plugins PodGroup has none and takes its members' priority);
- a member of a gang whose disruption mode is ``all`` (v1beta1 ``{all: {}}``, v1alpha2
  ``PodGroup``): the whole group, every bound member wherever it runs, evicted or
  spared together.

``importance`` orders units most important first, as upstream 1.37 does: higher
priority, then a pod group over a single pod, then the larger group, then the earlier
start. Pods already being deleted and pods not bound yet (their binding in flight)
are never victims.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

import numpy as np

from troupe.api.gangs import GroupDirectory, GroupKey, GroupRef, group_ref_of
from troupe.api.nodetable import NodeTable
from troupe.api.objects import Pod, PodKey
from troupe.api.pdb import PodDisruptionBudget
from troupe.api.podinfo import PodInfo

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


@dataclass(frozen=True, slots=True)
class VictimUnit:
    """Pods evicted or spared together, with where each runs."""

    key: str
    pods: tuple[tuple[PodInfo, str], ...]
    priority: int
    # A member of a pod group with a gang policy (ordered before single pods).
    group: bool = False
    # How many members the group has bound (1 for a single pod).
    size: int = 1
    start: float = math.inf
    # The group of a unit evicted whole (disruption mode ``all``).
    whole: GroupRef | None = None

    @property
    def nodes(self) -> frozenset[str]:
        return frozenset(node for _, node in self.pods)


def importance(unit: VictimUnit) -> tuple[int, int, int, float, str]:
    """Sort key, most important first."""
    return (-unit.priority, 0 if unit.group else 1, -unit.size, unit.start, unit.key)


def victim_units(
    table: NodeTable,
    groups: GroupDirectory,
    below: int,
    *,
    exclude: GroupKey | None = None,
    slots: Iterable[int] | None = None,
    eligible: Callable[[PodInfo], bool] | None = None,
) -> list[VictimUnit]:
    """Every unit of priority below ``below`` with a pod on ``slots`` (default: every
    node); an ``all`` group found there comes whole, with its members on other
    nodes. ``exclude``: the preemptor's own group."""
    scan = np.flatnonzero(table.present) if slots is None else slots
    singles: list[VictimUnit] = []
    wholes: dict[GroupKey, tuple[GroupRef, int]] = {}
    for slot in scan:
        node = table.names[int(slot)]
        for info in table.pods[int(slot)].values():
            if not info.pod.spec.node_name or info.pod.metadata.deletion_timestamp:
                continue
            if eligible is not None and not eligible(info):
                continue
            ref = group_ref_of(info.pod)
            policy = groups.policy(ref) if ref is not None else None
            if ref is not None and (ref.key == exclude):
                continue
            if policy is None or not policy.gang:
                if info.priority < below:
                    singles.append(
                        VictimUnit(info.key, ((info, node),), info.priority, start=_start(info))
                    )
                continue
            priority = policy.priority if policy.priority is not None else info.priority
            if priority >= below:
                continue
            assert ref is not None
            if policy.disrupt_all:
                wholes[ref.key] = (ref, priority)
                continue
            size = groups.placed_count(ref.key)
            singles.append(
                VictimUnit(info.key, ((info, node),), priority, True, size, _start(info))
            )
    return singles + [_whole(table, groups, ref, prio) for _, (ref, prio) in sorted(wholes.items())]


def terminating_below(table: NodeTable, below: int) -> list[tuple[PodInfo, str]]:
    """(pod, node) of every assigned pod of priority below ``below`` whose deletion
    has begun, in node then pod order."""
    out: list[tuple[PodInfo, str]] = []
    for slot in np.flatnonzero(table.present):
        node = table.names[int(slot)]
        for info in table.pods[int(slot)].values():
            pod = info.pod
            if pod.spec.node_name and pod.metadata.deletion_timestamp and info.priority < below:
                out.append((info, node))
    return out


def _whole(table: NodeTable, groups: GroupDirectory, ref: GroupRef, priority: int) -> VictimUnit:
    pods: list[tuple[PodInfo, str]] = []
    for member in sorted(groups.placed_members(ref.key)):
        for slot in _slots_of(table, member):
            info = table.pods[slot].get(member)
            if info is not None and info.pod.spec.node_name:
                pods.append((info, table.names[slot]))
    start = min((_start(info) for info, _ in pods), default=math.inf)
    return VictimUnit(str(ref.key), tuple(pods), priority, True, len(pods), start, ref)


def _slots_of(table: NodeTable, key: str) -> list[int]:
    found = table.pod_slot(PodKey(key))
    return [found] if found is not None else []


def _start(info: PodInfo) -> float:
    return start_time(info.pod)


def split_units_by_pdb_violation(
    units: Sequence[VictimUnit], pdbs: Sequence[PodDisruptionBudget]
) -> tuple[list[VictimUnit], list[VictimUnit]]:
    """(units with a pod whose eviction would take a budget below zero, the others),
    each in the order given (upstream ``filterPodsWithPDBViolation``, by unit)."""
    allowed = [pdb.status.disruptions_allowed for pdb in pdbs]
    violating: list[VictimUnit] = []
    others: list[VictimUnit] = []
    for unit in units:
        violated = False
        for info, _ in unit.pods:
            for i, pdb in enumerate(pdbs):
                if not pdb.covers(info.pod) or info.pod.metadata.name in pdb.status.disrupted_pods:
                    continue
                allowed[i] -= 1
                if allowed[i] < 0:
                    violated = True
        (violating if violated else others).append(unit)
    return violating, others
