"""The minResources pre-check: can the cluster's free capacity hold a whole group?

Upstream ``CheckClusterResource`` walks the nodes in snapshot order and subtracts each
node's free capacity (allocatable minus requested, pods counted as slots) from the
group's ``minResources`` plus ``pods: minMember``; a resource is covered once what is
left reaches zero, and the group passes once every resource is covered. Pods of the
group itself that are already placed count as free (upstream removes them from its
node copies), so a partly placed group is not held back by its own members.

Here the walk is one cumulative sum over the NodeTable's columns: a resource is
covered when any prefix of the nodes frees at least the request. Called by
``Coscheduling.pre_filter``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

from troupe.api.gangs import GroupKey
from troupe.api.nodetable import BoolArray, IndexArray, IntArray, NodeTable, summable
from troupe.api.podinfo import PodInfo
from troupe.api.resources import CPU, PODS


def resource_gap(
    table: NodeTable,
    request: Mapping[str, int],
    group: GroupKey,
    group_of: Callable[[PodInfo], GroupKey | None],
    members_placed: bool,
) -> dict[str, int]:
    """What of ``request`` the cluster cannot free, by resource; empty if it fits.

    ``group_of`` names a placed pod's group; it is only called when
    ``members_placed`` says the group has pods on nodes to count back as free.
    """
    names = list(request)
    if not names:
        return {}
    rows = [table.resource_row(name) for name in names]  # may grow the arrays: read after
    slots = table.slots()
    free = table.allocatable[rows][:, slots] - table.requested[rows][:, slots]
    if members_placed:
        _count_members_as_free(table, names, slots, free, group, group_of)
    walk = summable(free)  # thousands of nodes at MAX_AMOUNT would wrap an int64 sum
    wanted = np.array([request[name] for name in names], dtype=np.int64)
    # With no node at all nothing is covered and the whole request is the gap.
    covered: BoolArray = np.asarray((np.cumsum(walk, axis=1) >= wanted[:, None]).any(axis=1))
    left = wanted - walk.sum(axis=1)
    return {name: int(left[i]) for i, name in enumerate(names) if not covered[i]}


def _count_members_as_free(
    table: NodeTable,
    names: list[str],
    slots: IndexArray,
    free: IntArray,
    group: GroupKey,
    group_of: Callable[[PodInfo], GroupKey | None],
) -> None:
    for column, slot in enumerate(slots):
        for info in table.pods[int(slot)].values():
            if group_of(info) != group:
                continue
            for i, name in enumerate(names):
                free[i, column] += 1 if name == PODS else info.requests.get(name, 0)


def format_gap(gap: Mapping[str, int]) -> str:
    """``resource gap: map[cpu:4 pods:2]`` (upstream prints the Go map of what is
    missing; cpu is kept in millicores here, shown as cores when whole)."""
    parts = []
    for name in sorted(gap):
        value = gap[name]
        if name == CPU:
            text = f"{value // 1000}" if value % 1000 == 0 else f"{value}m"
        else:
            text = str(value)
        parts.append(f"{name}:{text}")
    return f"resource gap: map[{' '.join(parts)}]"
