"""Score helpers shared by Score plugins (upstream ``plugins/helper``).

``default_normalize_score`` (NodeResourcesFit, TaintToleration, ...), and the
piecewise-linear ``FunctionShape`` that NodeResourcesFit's RequestedToCapacityRatio
and VolumeBinding's StorageCapacityScoring map utilization through, with the shape
validation their Args share (upstream ``validateFunctionShape``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from troupe.api.framework import MAX_NODE_SCORE
from troupe.api.nodetable import IntArray

_LOOKUP_LIMIT = 4096

MAX_CUSTOM_PRIORITY_SCORE = 10
"""Shape scores are 0..10 and scaled by 10 to node scores (upstream
``config.MaxCustomPriorityScore``)."""


def default_normalize_score(scores: IntArray, reverse: bool) -> None:
    """Upstream ``helper.DefaultNormalizeScore``, in place: scale to [0, 100] by the
    maximum (integer division), optionally reversed; all zeros stay 0 (or become
    100 when reversed)."""
    if len(scores) == 0:
        return
    highest = int(scores.max())
    if highest == 0:
        if reverse:
            scores[:] = MAX_NODE_SCORE
        return
    if highest <= _LOOKUP_LIMIT and int(scores.min()) >= 0:
        # Scores here are small counts or weight sums: map them through a table of
        # the scaled values instead of dividing every score.
        lookup = MAX_NODE_SCORE * np.arange(highest + 1, dtype=np.int64) // highest
        scaled = lookup[scores]
    else:
        scaled = MAX_NODE_SCORE * scores // highest
    scores[:] = MAX_NODE_SCORE - scaled if reverse else scaled


def _trunc_div(numerator: IntArray, denominator: int) -> IntArray:
    """Go integer division (towards zero) by a positive denominator."""
    quotient: IntArray = np.abs(numerator) // denominator
    return np.where(numerator < 0, -quotient, quotient)


@dataclass(frozen=True, slots=True)
class FunctionShape:
    """A piecewise-linear utilization -> score function (upstream ``FunctionShape``),
    with scores already scaled to node scores."""

    utilization: tuple[int, ...]
    score: tuple[int, ...]

    @classmethod
    def of(cls, points: Sequence[tuple[int, int]]) -> FunctionShape:
        """From (utilization, shape score 0..10) points, scaling scores by 10 as
        upstream does when it builds a plugin's scorer."""
        scale = MAX_NODE_SCORE // MAX_CUSTOM_PRIORITY_SCORE
        return cls(tuple(u for u, _ in points), tuple(s * scale for _, s in points))

    def __call__(self, p: IntArray) -> IntArray:
        """Upstream ``BuildBrokenLinearFunction``: the first point at or above ``p``
        decides the segment; below the first point its score, above the last the
        last score."""
        u, s = self.utilization, self.score
        out = np.full(p.shape, s[-1], dtype=np.int64)
        for i in range(len(u) - 1, 0, -1):
            value = s[i - 1] + _trunc_div((s[i] - s[i - 1]) * (p - u[i - 1]), u[i] - u[i - 1])
            out = np.where(p <= u[i], value, out)
        return np.where(p <= u[0], s[0], out)

    def at(self, utilization: int) -> int:
        """The score at one utilization."""
        return int(self(np.array([utilization], dtype=np.int64))[0])


def function_shape_errors(points: Sequence[tuple[int, int]], path: str) -> list[str]:
    """Upstream ``validateFunctionShape`` over (utilization, score) points: at least
    one point, utilizations strictly increasing and in [0, 100], scores in [0, 10];
    each message names its field under ``path``."""
    if not points:
        return [f"{path}: Required value: at least one point must be specified"]
    errors = []
    for i in range(1, len(points)):
        if points[i - 1][0] >= points[i][0]:
            errors.append(
                f"{path}[{i}].utilization: Invalid value: {points[i][0]}: "
                "values must be sorted in increasing order"
            )
            break
    for i, (utilization, score) in enumerate(points):
        if not 0 <= utilization <= 100:
            errors.append(
                f"{path}[{i}].utilization: Invalid value: {utilization}: "
                "not in valid range [0, 100]"
            )
        if not 0 <= score <= MAX_CUSTOM_PRIORITY_SCORE:
            errors.append(
                f"{path}[{i}].score: Invalid value: {score}: "
                f"not in valid range [0, {MAX_CUSTOM_PRIORITY_SCORE}]"
            )
    return errors
