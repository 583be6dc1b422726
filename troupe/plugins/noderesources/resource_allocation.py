"""Resource-allocation scoring shared by NodeResourcesFit and BalancedAllocation.

Upstream ``resourceAllocationScorer``: for each configured resource, the node's
allocatable and what would be requested with the pod placed there, then a scorer
folds those per-resource pairs into one node score. Here each resource is one
column over the candidate slots, so a Score call is a few numpy operations per
resource; the common cases (every node offers every scored resource) skip masking.

What "requested" means differs (upstream ``useRequested``):
- NodeResourcesFit uses the non-zero requests for cpu and memory (a container without
  a request counts 100m / 200Mi, ``NodeTable.nonzero_requested`` and
  ``PodInfo.nonzero_cpu``/``nonzero_memory``), so best-effort pods still spread;
- BalancedAllocation uses the plain requests.
A resource the node does not offer (allocatable 0) is left out of the node's score,
and an extended resource the pod does not request is left out entirely.

The scorers mirror upstream integer arithmetic exactly (Go truncating division,
``math.Round`` half away from zero) so scores match kube-scheduler's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from troupe.api.framework import MAX_NODE_SCORE
from troupe.api.nodetable import BoolArray, IndexArray, IntArray, NodeTable
from troupe.api.podinfo import PodInfo
from troupe.api.resources import CPU, EPHEMERAL_STORAGE, MEMORY
from troupe.api.scoring import FunctionShape

MAX_UTILIZATION = 100


@lru_cache(maxsize=256)
def is_extended(name: str) -> bool:
    """``v1helper.IsExtendedResourceName``: a domain-prefixed name outside
    ``kubernetes.io/`` (and not a quota ``requests.`` name)."""
    return "/" in name and "kubernetes.io/" not in name and not name.startswith("requests.")


@lru_cache(maxsize=256)
def is_scalar(name: str) -> bool:
    """``schedutil.IsScalarResourceName``: extended, hugepages, prefixed native or
    attachable-volume resources (those kept in NodeInfo's ScalarResources)."""
    return (
        is_extended(name)
        or name.startswith("hugepages-")
        or "kubernetes.io/" in name
        or name.startswith("attachable-volumes-")
    )


@dataclass(frozen=True, slots=True)
class PodDemand:
    """The pod's request of each scored resource, in the scorer's resource order."""

    amounts: tuple[int, ...]

    @property
    def best_effort(self) -> bool:
        return not any(self.amounts)


def pod_demand(pod: PodInfo, resources: Sequence[str], use_requested: bool) -> PodDemand:
    amounts = []
    for name in resources:
        if not use_requested and name == CPU:
            amounts.append(pod.nonzero_cpu)
        elif not use_requested and name == MEMORY:
            amounts.append(pod.nonzero_memory)
        else:
            amounts.append(pod.requests.get(name, 0))
    return PodDemand(tuple(amounts))


@dataclass(frozen=True, slots=True)
class Column:
    """One scored resource over the candidate slots (upstream
    ``calculateResourceAllocatableRequest``)."""

    index: int  # position in the configured resources, for its weight
    requested: IntArray  # requested on the node with the pod placed there
    allocatable: IntArray
    offered_everywhere: bool  # allocatable > 0 on every slot (the usual case)


def columns(
    table: NodeTable,
    slots: IndexArray,
    resources: Sequence[str],
    demand: PodDemand,
    use_requested: bool,
) -> list[Column]:
    """The resources that count for this pod; an extended resource the pod does not
    request, or one no node has ever offered, is left out."""
    out = []
    for i, (name, amount) in enumerate(zip(resources, demand.amounts, strict=True)):
        if amount == 0 and is_scalar(name):
            continue
        row = table.resource_index.get(name)
        if row is None or not (name in (CPU, MEMORY, EPHEMERAL_STORAGE) or is_scalar(name)):
            continue
        allocatable = table.allocatable[row, slots]
        if not use_requested and name in (CPU, MEMORY):
            requested = table.nonzero_requested[0 if name == CPU else 1, slots]
        else:
            requested = table.requested[row, slots]
        requested += amount  # the gather made a copy
        # Neither can be negative from a parsed quantity; clamping keeps every score
        # in [0, 100] whatever reached the table.
        np.maximum(requested, 0, out=requested)
        np.maximum(allocatable, 0, out=allocatable)
        out.append(Column(i, requested, allocatable, bool(allocatable.all())))
    return out


def _divisor(column: Column) -> IntArray:
    # Where the node offers nothing the score is dropped by weight; divide by 1 there.
    a = column.allocatable
    return a if column.offered_everywhere else np.maximum(a, 1)


Scorer1D = Callable[[Column], tuple[IntArray, BoolArray | None]]
"""One resource's scores, and where they count (None: on every slot)."""


def _fold(
    cols: Sequence[Column], weights: IntArray, n: int, per_resource: Scorer1D
) -> tuple[IntArray, IntArray | int]:
    """Sum of ``score * weight`` and of the weights that count, per slot."""
    total = np.zeros(n, dtype=np.int64)
    weight_sum: IntArray | int = 0
    for col in cols:
        w = int(weights[col.index])
        scores, counted = per_resource(col)
        total += scores * w if w != 1 else scores
        weight_sum = weight_sum + (w if counted is None else counted * w)
    return total, weight_sum


def _offered(col: Column) -> BoolArray | None:
    return None if col.offered_everywhere else col.allocatable > 0


def _mean_floor(total: IntArray, weight_sum: IntArray | int) -> IntArray:
    """``total // weight_sum``, 0 where no weight counts (total is 0 there too)."""
    if isinstance(weight_sum, int):
        return total // weight_sum if weight_sum else np.zeros_like(total)
    return total // np.maximum(weight_sum, 1)


def _least(col: Column) -> tuple[IntArray, BoolArray | None]:
    r, a = col.requested, col.allocatable
    scores: IntArray = (a - r) * MAX_NODE_SCORE // _divisor(col)
    # Over-committed (requested > allocatable) gives a negative quotient: score 0.
    np.maximum(scores, 0, out=scores)
    return scores, _offered(col)


def least_allocated(cols: Sequence[Column], weights: IntArray, n: int) -> IntArray:
    """Upstream ``leastResourceScorer``: (allocatable - requested) * 100 / allocatable,
    0 when over-committed, weighted over the resources the node offers."""
    return _mean_floor(*_fold(cols, weights, n, _least))


def _most(col: Column) -> tuple[IntArray, BoolArray | None]:
    # Requested is capped at allocatable: non-zero defaults can exceed it.
    r, a = col.requested, col.allocatable
    scores: IntArray = np.minimum(r, a) * MAX_NODE_SCORE // _divisor(col)
    return scores, _offered(col)


def most_allocated(cols: Sequence[Column], weights: IntArray, n: int) -> IntArray:
    """Upstream ``mostResourceScorer``: requested * 100 / allocatable."""
    return _mean_floor(*_fold(cols, weights, n, _most))


def requested_to_capacity_ratio(
    shape: FunctionShape, cols: Sequence[Column], weights: IntArray, n: int
) -> IntArray:
    """Upstream ``buildRequestedToCapacityRatioScorerFunction``: the shape at the
    utilization percentage (100 when over-committed); only resources scoring above 0
    count, and the weighted mean is rounded half away from zero."""

    def per_resource(col: Column) -> tuple[IntArray, BoolArray | None]:
        r = col.requested
        # requested > allocatable makes the quotient exceed 100: the minimum is 100.
        utilization = np.minimum(r * MAX_UTILIZATION // _divisor(col), MAX_UTILIZATION)
        scores = shape(utilization)
        counted = scores > 0
        if not col.offered_everywhere:
            counted &= col.allocatable > 0
            scores = scores * counted
        return scores, counted

    total, weight_sum = _fold(cols, weights, n, per_resource)
    # math.Round(total / weight_sum) for non-negative values, in exact integers; where
    # nothing counts both are 0 and so is the result.
    if isinstance(weight_sum, int):
        weight_sum = np.full(n, weight_sum, dtype=np.int64)
    rounded: IntArray = (2 * total + weight_sum) // np.maximum(2 * weight_sum, 1)
    return rounded


def balanced_allocation(cols: Sequence[Column], n: int) -> IntArray:
    """Upstream ``balancedResourceScorer``: (1 - std) * 100 of the requested fractions
    (each capped at 1) of the resources the node offers; with two resources the std
    is |f1 - f2| / 2, with fewer it is 0."""
    if len(cols) == 2 and cols[0].offered_everywhere and cols[1].offered_everywhere:
        # The usual cpu + memory case, in upstream's exact arithmetic.
        f0 = np.minimum(cols[0].requested / cols[0].allocatable, 1.0)
        f1 = np.minimum(cols[1].requested / cols[1].allocatable, 1.0)
        std = np.abs(f0 - f1) / 2
        scores: IntArray = ((1 - std) * MAX_NODE_SCORE).astype(np.int64)
        return scores
    if not cols:
        return np.full(n, MAX_NODE_SCORE, dtype=np.int64)
    requested = np.stack([c.requested for c in cols])
    allocatable = np.stack([c.allocatable for c in cols])
    offered = allocatable > 0
    count = offered.sum(axis=0)
    fractions = np.where(
        offered, np.minimum(requested / np.where(offered, allocatable, 1), 1.0), 0.0
    )
    highest = np.where(offered, fractions, -np.inf).max(axis=0)
    lowest = np.where(offered, fractions, np.inf).min(axis=0)
    std = np.where(count == 2, np.abs(highest - lowest) / 2, 0.0)
    if len(cols) > 2:
        k = np.maximum(count, 1)
        mean = fractions.sum(axis=0) / k
        variance = (np.where(offered, fractions - mean, 0.0) ** 2).sum(axis=0) / k
        std = np.where(count > 2, np.sqrt(variance), std)
    return ((1 - std) * MAX_NODE_SCORE).astype(np.int64)
