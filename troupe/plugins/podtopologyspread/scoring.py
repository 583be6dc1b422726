"""PodTopologySpread Score: ScheduleAnyway constraints, upstream ``scoring.go`` in numpy.

Called by the plugin's ``pre_score``/``score``/``normalize_score``.

- Scored nodes missing any constraint's topology key are *ignored*: score 0, left out
  of normalisation (troupe never system-defaults, so upstream's
  ``requireAllTopologies`` is always true).
- Per constraint, the domains are those of the scored, non-ignored nodes; a domain's
  count is the matching pods on every node of the cluster that has all keys and
  passes the inclusion policies. For ``kubernetes.io/hostname`` the count is the
  pods on the node itself.
- raw score = Σ over constraints of ``count * log(domains + 2) + (maxSkew - 1)``,
  rounded half away from zero (``topologyNormalizingWeight``, ``scoreForCount``).
- normalise: ``100 * (max + min - s) / max`` over non-ignored nodes (integer
  division), 100 for all when max is 0, so fewer matching pods scores higher.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from troupe.api.framework import MAX_NODE_SCORE
from troupe.api.nodetable import BoolArray, IndexArray, IntArray, NodeTable
from troupe.api.podcounts import domain_sums
from troupe.api.podinfo import PodInfo
from troupe.plugins.podtopologyspread.constraints import (
    HOSTNAME_KEY,
    Constraint,
    InclusionMasks,
)
from troupe.plugins.podtopologyspread.filtering import CountsOf


@dataclass(frozen=True, slots=True)
class SpreadScores:
    """Raw scores and the ignored flag of the slots PreScore was given."""

    slots: IndexArray
    raw: IntArray
    ignored: BoolArray


def score_spread(
    table: NodeTable,
    pod: PodInfo,
    constraints: Sequence[Constraint],
    slots: IndexArray,
    counts_of: CountsOf,
) -> SpreadScores:
    masks = InclusionMasks(table, pod.pod, constraints)
    ignored = ~masks.all_keys[slots]
    scored = slots[~ignored]
    total = np.zeros(len(slots), dtype=np.float64)
    zeros = np.zeros(table.capacity, dtype=np.int64)
    for c in constraints:
        column = table.labels.get(c.topology_key)
        if column is None:  # no node has the key: every slot is ignored already
            continue
        counts = zeros if c.matcher is None else counts_of(c.matcher)
        labels = column[slots]
        if c.topology_key == HOSTNAME_KEY:
            # Per-node counts, no inclusion policy (upstream counts in Score).
            size = len(scored)
            count = counts[slots]
        else:
            sums = domain_sums(table, c.topology_key, counts, among=masks.eligible(c))
            assert sums is not None
            domains = len(sums.sums)
            size = int(np.count_nonzero(np.bincount(column[scored], minlength=domains)))
            count = sums.sums[labels] if domains else np.zeros(len(slots), dtype=np.int64)
        weight = float(np.log(size + 2))
        total += (count * weight + (c.max_skew - 1)) * (labels >= 0)
    raw = np.floor(total + 0.5).astype(np.int64)
    raw[ignored] = 0
    return SpreadScores(slots, raw, ignored)


def normalize_spread(scores: IntArray, ignored: BoolArray) -> None:
    """Rescale ``scores`` in place (upstream ``NormalizeScore``)."""
    valid = ~ignored
    if valid.any():
        values = scores[valid]
        low, high = int(values.min()), max(int(values.max()), 0)
        if high == 0:
            scores[valid] = MAX_NODE_SCORE
        else:
            scores[valid] = MAX_NODE_SCORE * (high + low - values) // high
    scores[ignored] = 0
