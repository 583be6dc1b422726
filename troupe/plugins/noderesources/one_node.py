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


def values(
    table: NodeTable,
    slot: int,
    resources: Sequence[str],
    demand: PodDemand,
    use_requested: bool,
) -> list[Value]:
    """``resource_allocation.columns`` for one slot."""
    out = []
    for i, (name, amount) in enumerate(zip(resources, demand.amounts, strict=True)):
        if amount == 0 and is_scalar(name):
            continue
        row = table.resource_index.get(name)
        if row is None or not (name in (CPU, MEMORY, EPHEMERAL_STORAGE) or is_scalar(name)):
            continue
        # ndarray.item reads a Python int directly (no numpy scalar to convert).
        if not use_requested and name in (CPU, MEMORY):
            requested = table.nonzero_requested.item(0 if name == CPU else 1, slot)
        else:
            requested = table.requested.item(row, slot)
        # Clamped at 0 as resource_allocation.columns, so scores stay in [0, 100].
        allocatable = max(table.allocatable.item(row, slot), 0)
        out.append((i, max(requested + amount, 0), allocatable))
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
