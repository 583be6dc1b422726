"""PrioritySort: the default QueueSort plugin.

The scheduler hands ``PrioritySort.less`` to ``troupe.queue.SchedulingQueue``; the
order itself lives in ``troupe.queue.sort`` so the queue's tests use the same one.
"""

from __future__ import annotations

from troupe.plugins.prioritysort.priority_sort import PrioritySort

__all__ = ["PrioritySort"]
