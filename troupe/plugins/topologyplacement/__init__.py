"""TopologyPlacement: one placement per value of a node label (KEP-5732).

Run by the pod-group cycle at PlacementGenerate (``troupe.scheduler.gangs.topology``);
see ``topology_placement.py``.
"""

from __future__ import annotations

from troupe.plugins.topologyplacement.topology_placement import (
    TopologyPlacement,
    TopologyPlacementArgs,
)

__all__ = ["TopologyPlacement", "TopologyPlacementArgs"]
