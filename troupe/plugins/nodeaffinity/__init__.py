"""NodeAffinity: ``spec.nodeSelector`` and node affinity, required (Filter) and
preferred (Score), plus the profile's ``addedAffinity``.

Run by the framework at PreFilter, Filter, PreScore, Score and NormalizeScore; see
``node_affinity.py``.
"""

from __future__ import annotations

from troupe.plugins.nodeaffinity.args import NodeAffinityArgs
from troupe.plugins.nodeaffinity.node_affinity import NodeAffinity

__all__ = ["NodeAffinity", "NodeAffinityArgs"]
