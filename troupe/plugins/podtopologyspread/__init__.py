"""PodTopologySpread: spread matching pods across topology domains (KEP-895, KEP-3022,
KEP-3094, KEP-3243).

Run by the framework at PreFilter, Filter, PreScore, Score and NormalizeScore, and
asked for queueing hints; see ``plugin.py``.
"""

from __future__ import annotations

from troupe.plugins.podtopologyspread.args import PodTopologySpreadArgs
from troupe.plugins.podtopologyspread.filtering import (
    ERR_REASON_CONSTRAINTS_NOT_MATCH,
    ERR_REASON_NODE_LABEL_NOT_MATCH,
)
from troupe.plugins.podtopologyspread.plugin import PodTopologySpread

__all__ = [
    "ERR_REASON_CONSTRAINTS_NOT_MATCH",
    "ERR_REASON_NODE_LABEL_NOT_MATCH",
    "PodTopologySpread",
    "PodTopologySpreadArgs",
]
