"""PrioritySort: higher priority first, then earlier, then by key (KEP-3370 QueueSort).

Upstream compares pod priority and then the pod's queue timestamp; troupe's queue
also holds pod groups, so the comparison works on ``Sortable`` entities and breaks
the last tie by key to make the order total.
"""

from __future__ import annotations

from typing import Any

from troupe.api.framework import Handle, Sortable
from troupe.queue.sort import priority_sort_key, priority_sort_less


class PrioritySort:
    name = "PrioritySort"

    def __init__(self, args: None, handle: Handle) -> None:
        del args, handle

    def less(self, a: Sortable, b: Sortable) -> bool:
        return priority_sort_less(a, b)

    def sort_key(self, entity: Sortable) -> tuple[Any, ...]:
        return priority_sort_key(entity)
