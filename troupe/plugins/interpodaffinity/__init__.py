"""InterPodAffinity: required and preferred inter-pod affinity and anti-affinity.

Run by the framework at PreFilter, Filter, PreScore, Score and NormalizeScore, and
asked for queueing hints; see ``plugin.py``.
"""

from __future__ import annotations

from troupe.plugins.interpodaffinity.args import InterPodAffinityArgs
from troupe.plugins.interpodaffinity.filtering import (
    ERR_REASON_AFFINITY_RULES_NOT_MATCH,
    ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH,
    ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH,
)
from troupe.plugins.interpodaffinity.plugin import InterPodAffinity

__all__ = [
    "ERR_REASON_AFFINITY_RULES_NOT_MATCH",
    "ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH",
    "ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH",
    "InterPodAffinity",
    "InterPodAffinityArgs",
]
