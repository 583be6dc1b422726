"""SchedulingGates: keeps pods with ``spec.schedulingGates`` out of the active queue.

Called by ``troupe.queue`` at PreEnqueue; see ``scheduling_gates.py``.
"""

from __future__ import annotations

from troupe.plugins.schedulinggates.scheduling_gates import SchedulingGates

__all__ = ["SchedulingGates"]
