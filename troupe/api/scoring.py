"""Score helpers shared by Score plugins (upstream ``plugins/helper``)."""

from __future__ import annotations

import numpy as np

from troupe.api.framework import MAX_NODE_SCORE
from troupe.api.nodetable import IntArray

_LOOKUP_LIMIT = 4096


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
