"""DefaultPreemption: evict lower-priority pods so a pod that fits nowhere can run.

Built by ``troupe.plugins.registry`` from ``DefaultPreemptionArgs``; see
``plugin.py`` for the algorithm, ``victims.py`` and ``candidates.py`` for its two
halves, and docs/preemption.md for what troupe decided where upstream leaves room.
"""

from __future__ import annotations

from troupe.api.preemption import (
    DISRUPTION_TARGET,
    PREEMPTION_BY_SCHEDULER,
    terminating_by_preemption,
)
from troupe.plugins.defaultpreemption.args import DefaultPreemptionArgs
from troupe.plugins.defaultpreemption.plugin import DefaultPreemption

__all__ = [
    "DISRUPTION_TARGET",
    "PREEMPTION_BY_SCHEDULER",
    "DefaultPreemption",
    "DefaultPreemptionArgs",
    "terminating_by_preemption",
]
