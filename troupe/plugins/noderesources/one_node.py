"""The resource-allocation scores of a single node, in plain integers.

When a batch re-scores the one node that just received a pod, a numpy pass over a
one-element array costs more in call overhead than the arithmetic. These mirror
``resource_allocation``'s column scorers for the common strategies exactly (the
same Go integer division, the same float operations for the balanced score); a
property test holds them equal. Anything else returns None and the caller uses the
column scorer.
"""

from __future__ import annotations

from collections.abc import Sequence

from troupe.api.framework import MAX_NODE_SCORE
from troupe.api.nodetable import NodeTable
from troupe.api.resources import CPU, EPHEMERAL_STORAGE, MEMORY
from troupe.plugins.noderesources.resource_allocation import PodDemand, is_scalar

Value = tuple[int, int, int]
"""(position in the configured resources, requested with the pod, allocatable)."""


Step = tuple[int, int, int, int]
"""(position in the configured resources, what to read: 0 ``requested`` at ``row``,
1/2 the non-zero cpu/memory row, the row in ``requested``/``allocatable``, amount)."""


def plan(
    table: NodeTable, resources: Sequence[str], demand: PodDemand, use_requested: bool
) -> tuple[Step, ...]:
    """Which rows ``values`` reads for these resources and amounts on ``table``."""
    steps = []
    for i, (name, amount) in enumerate(zip(resources, demand.amounts, strict=True)):
        if amount == 0 and is_scalar(name):
            continue
        row = table.resource_index.get(name)
        if row is None or not (name in (CPU, MEMORY, EPHEMERAL_STORAGE) or is_scalar(name)):
            continue
        nonzero = 0 if use_requested or name not in (CPU, MEMORY) else 1 if name == CPU else 2
        steps.append((i, nonzero, row, amount))
    return tuple(steps)


class Plans:
    """A scorer's last ``plan`` (the pods of a batch share one demand): it depends on
    the table only through which resources have a row, and rows are only ever
    added, so the number of rows tells an outdated plan."""

    __slots__ = ("_key", "_plan", "_resources", "_table", "_use_requested")

    def __init__(self, resources: Sequence[str], use_requested: bool) -> None:
        self._resources = tuple(resources)
        self._use_requested = use_requested
        self._table: NodeTable | None = None
        self._key: tuple[tuple[int, ...], int] | None = None
        self._plan: tuple[Step, ...] = ()

    def get(self, table: NodeTable, demand: PodDemand) -> tuple[Step, ...]:
        key = (demand.amounts, len(table.resource_index))
        if table is not self._table or key != self._key:
            self._plan = plan(table, self._resources, demand, self._use_requested)
            self._table, self._key = table, key
        return self._plan


def values(table: NodeTable, slot: int, steps: Sequence[Step]) -> list[Value]:
    """``resource_allocation.columns`` for one slot, by a ``plan``."""
    # ndarray.item reads a Python int directly (no numpy scalar to convert).
    requested, nonzero = table.requested.item, table.nonzero_requested.item
    allocatable = table.allocatable.item
    out = []
    for i, source, row, amount in steps:
        used = requested(row, slot) if source == 0 else nonzero(source - 1, slot)
        # Clamped at 0 as resource_allocation.columns, so scores stay in [0, 100].
        out.append((i, max(used + amount, 0), max(allocatable(row, slot), 0)))
    return out


def least_allocated(vals: Sequence[Value], weights: Sequence[int]) -> int:
    total = weight_sum = 0
    for i, r, a in vals:
        w = weights[i]
        if a > 0:
            total += max((a - r) * MAX_NODE_SCORE // a, 0) * w
            weight_sum += w
    return total // weight_sum if weight_sum else 0


def most_allocated(vals: Sequence[Value], weights: Sequence[int]) -> int:
    total = weight_sum = 0
    for i, r, a in vals:
        w = weights[i]
        if a > 0:
            total += min(r, a) * MAX_NODE_SCORE // a * w
            weight_sum += w
    return total // weight_sum if weight_sum else 0


def balanced_allocation(vals: Sequence[Value]) -> int | None:
    """The two-resource case (cpu and memory, both offered); None otherwise."""
    if len(vals) != 2 or vals[0][2] <= 0 or vals[1][2] <= 0:
        return None
    f0 = min(vals[0][1] / vals[0][2], 1.0)
    f1 = min(vals[1][1] / vals[1][2], 1.0)
    std = abs(f0 - f1) / 2
    return int((1 - std) * MAX_NODE_SCORE)
