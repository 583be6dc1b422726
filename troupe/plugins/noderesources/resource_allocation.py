"""Resource-allocation scoring shared by NodeResourcesFit and BalancedAllocation.

Upstream ``resourceAllocationScorer``: for each configured resource, the node's
allocatable and what would be requested with the pod placed there, then a scorer
folds those per-resource pairs into one node score. Here every step works on a
``(resources x candidate slots)`` matrix, so a Score call is a few numpy operations.

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

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from troupe.api.framework import MAX_NODE_SCORE
from troupe.api.nodetable import IndexArray, IntArray, NodeTable
from troupe.api.podinfo import PodInfo
from troupe.api.resources import CPU, EPHEMERAL_STORAGE, MEMORY

MAX_UTILIZATION = 100


def is_extended(name: str) -> bool:
    """``v1helper.IsExtendedResourceName``: a domain-prefixed name outside
    ``kubernetes.io/`` (and not a quota ``requests.`` name)."""
    return "/" in name and "kubernetes.io/" not in name and not name.startswith("requests.")


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


def requested_and_allocatable(
    table: NodeTable,
    slots: IndexArray,
    resources: Sequence[str],
    demand: PodDemand,
    use_requested: bool,
) -> tuple[IntArray, IntArray]:
    """``(requested with the pod, allocatable)``, each ``(len(resources), len(slots))``;
    both 0 where the resource does not count (upstream
    ``calculateResourceAllocatableRequest``)."""
    requested = np.zeros((len(resources), len(slots)), dtype=np.int64)
    allocatable = np.zeros((len(resources), len(slots)), dtype=np.int64)
    for i, (name, amount) in enumerate(zip(resources, demand.amounts, strict=True)):
        if amount == 0 and is_scalar(name):
            continue
        row = table.resource_index.get(name)
        if row is None or not (name in (CPU, MEMORY, EPHEMERAL_STORAGE) or is_scalar(name)):
            continue
        allocatable[i] = table.allocatable[row, slots]
        if not use_requested and name in (CPU, MEMORY):
            used = table.nonzero_requested[0 if name == CPU else 1, slots]
        else:
            used = table.requested[row, slots]
        requested[i] = used + amount
    requested[allocatable == 0] = 0
    return requested, allocatable


def _weighted_mean_floor(scores: IntArray, weights: IntArray) -> IntArray:
    """Per column ``sum(score * weight) // sum(weight)``; 0 where no weight counts."""
    total = (scores * weights).sum(axis=0)
    weight_sum = weights.sum(axis=0)
    return np.where(weight_sum > 0, total // np.maximum(weight_sum, 1), 0)


def least_allocated(requested: IntArray, allocatable: IntArray, weights: IntArray) -> IntArray:
    """Upstream ``leastResourceScorer``: (allocatable - requested) * 100 / allocatable,
    0 when over-committed, weighted over the resources the node offers."""
    offered = allocatable > 0
    divisor = np.where(offered, allocatable, 1)
    free = (allocatable - requested) * MAX_NODE_SCORE // divisor
    scores = np.where(requested > allocatable, 0, free)
    return _weighted_mean_floor(scores, weights[:, None] * offered)


def most_allocated(requested: IntArray, allocatable: IntArray, weights: IntArray) -> IntArray:
    """Upstream ``mostResourceScorer``: requested * 100 / allocatable, with requested
    capped at allocatable (non-zero defaults can exceed it)."""
    offered = allocatable > 0
    divisor = np.where(offered, allocatable, 1)
    scores = np.minimum(requested, allocatable) * MAX_NODE_SCORE // divisor
    return _weighted_mean_floor(scores, weights[:, None] * offered)


def _trunc_div(numerator: IntArray, denominator: int) -> IntArray:
    """Go integer division (towards zero) by a positive denominator."""
    quotient: IntArray = np.abs(numerator) // denominator
    return np.where(numerator < 0, -quotient, quotient)


@dataclass(frozen=True, slots=True)
class Shape:
    """A piecewise-linear utilization -> score function (upstream ``FunctionShape``),
    with scores already scaled to node scores."""

    utilization: tuple[int, ...]
    score: tuple[int, ...]

    def __call__(self, p: IntArray) -> IntArray:
        """Upstream ``BuildBrokenLinearFunction``: the first point at or above ``p``
        decides the segment; below the first point its score, above the last the
        last score."""
        u, s = self.utilization, self.score
        out = np.full(p.shape, s[-1], dtype=np.int64)
        for i in range(len(u) - 1, -1, -1):
            if i == 0:
                value = np.full(p.shape, s[0], dtype=np.int64)
            else:
                value = s[i - 1] + _trunc_div((s[i] - s[i - 1]) * (p - u[i - 1]), u[i] - u[i - 1])
            out = np.where(p <= u[i], value, out)
        return out


def requested_to_capacity_ratio(
    shape: Shape, requested: IntArray, allocatable: IntArray, weights: IntArray
) -> IntArray:
    """Upstream ``buildRequestedToCapacityRatioScorerFunction``: the shape at the
    utilization percentage (100 when over-committed); only resources scoring above 0
    count, and the weighted mean is rounded half away from zero."""
    offered = allocatable > 0
    divisor = np.where(offered, allocatable, 1)
    utilization = np.where(
        requested > allocatable, MAX_UTILIZATION, requested * MAX_UTILIZATION // divisor
    )
    scores = shape(utilization)
    counted = weights[:, None] * (offered & (scores > 0))
    total = (scores * counted).sum(axis=0)
    weight_sum = counted.sum(axis=0)
    # math.Round(total / weight_sum) for non-negative values, in exact integers.
    rounded = (2 * total + weight_sum) // np.maximum(2 * weight_sum, 1)
    return np.where(weight_sum > 0, rounded, 0)


def balanced_allocation(requested: IntArray, allocatable: IntArray) -> IntArray:
    """Upstream ``balancedResourceScorer``: (1 - std) * 100 of the requested fractions
    (each capped at 1) of the resources the node offers; with two resources the std
    is |f1 - f2| / 2, with fewer it is 0."""
    offered = allocatable > 0
    count = offered.sum(axis=0)
    fractions = np.where(
        offered, np.minimum(requested / np.where(offered, allocatable, 1), 1.0), 0.0
    )
    # Two resources (the usual cpu + memory): upstream's exact |f1 - f2| / 2.
    highest = np.where(offered, fractions, -np.inf).max(axis=0, initial=-np.inf)
    lowest = np.where(offered, fractions, np.inf).min(axis=0, initial=np.inf)
    std = np.where(count == 2, (highest - lowest) / 2, 0.0)
    if len(requested) > 2:
        n = np.maximum(count, 1)
        mean = fractions.sum(axis=0) / n
        variance = (np.where(offered, fractions - mean, 0.0) ** 2).sum(axis=0) / n
        std = np.where(count > 2, np.sqrt(variance), std)
    return ((1 - std) * MAX_NODE_SCORE).astype(np.int64)
