"""NodeResourcesFit (does the pod fit, and how full would the node be) and
NodeResourcesBalancedAllocation (how even would cpu and memory use be).

Run by the framework at PreFilter, Filter, PreScore and Score; see ``fit.py``,
``balanced_allocation.py`` and the shared ``resource_allocation.py``.
"""

from __future__ import annotations

from troupe.plugins.noderesources.args import (
    NodeResourcesBalancedAllocationArgs,
    NodeResourcesFitArgs,
)
from troupe.plugins.noderesources.balanced_allocation import BalancedAllocation
from troupe.plugins.noderesources.fit import Fit

__all__ = [
    "BalancedAllocation",
    "Fit",
    "NodeResourcesBalancedAllocationArgs",
    "NodeResourcesFitArgs",
]
