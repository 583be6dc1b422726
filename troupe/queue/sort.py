"""The default QueueSort order, shared by the PrioritySort plugin and the queue tests.

``troupe.plugins`` wraps ``priority_sort_less`` (and the same order as a key,
``priority_sort_key``) in its QueueSort plugin; the scheduler passes that plugin's
``less`` and ``sort_key`` to ``SchedulingQueue``.
"""

from __future__ import annotations

from typing import Any

from troupe.api.framework import Sortable


def priority_sort_less(a: Sortable, b: Sortable) -> bool:
    """True when ``a`` should be scheduled before ``b``.

    KEP-3370 QueueSort: higher priority first; at equal priority the entity that
    entered the queue earlier (pod first attempt, group creation) first; then the
    key, so the order is total and pods of one group stay back to back.
    """
    if a.priority != b.priority:
        return a.priority > b.priority
    if a.timestamp != b.timestamp:
        return a.timestamp < b.timestamp
    return a.key < b.key


def priority_sort_key(entity: Sortable) -> tuple[Any, ...]:
    """``priority_sort_less`` as a key: ``less(a, b) == key(a) < key(b)``."""
    return (-entity.priority, entity.timestamp, entity.key)
