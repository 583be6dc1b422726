"""GangScheduling at PlacementFeasible (KEP-5732 beta): stop evaluating a placement
as soon as the gang's minCount can no longer be reached in it.

troupe's pod-group cycle does the rest of upstream's GangScheduling plugin itself
(``troupe.queue.pre_enqueue``, ``troupe.scheduler.gangs``); this plugin is the early
rejection point, with upstream's messages.
"""

from __future__ import annotations

from troupe.api.framework import Handle
from troupe.api.status import Code, Status


class GangScheduling:
    name = "GangScheduling"

    def __init__(self, args: None, handle: Handle) -> None:
        del args, handle

    def placement_feasible(self, min_count: int, scheduled: int, remaining: int) -> Status:
        if remaining + scheduled < min_count:
            return Status.unschedulable(
                f"minCount ({min_count}) cannot be satisfied: "
                f"{scheduled} scheduled, {remaining} remaining",
                plugin=self.name,
            )
        if scheduled < min_count:
            return Status(
                Code.WAIT,
                (
                    f"minCount ({min_count}) is not yet satisfied: "
                    f"{scheduled} scheduled, {remaining} remaining",
                ),
                self.name,
            )
        return Status()


__all__ = ["GangScheduling"]
