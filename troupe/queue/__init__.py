"""The dual pod / pod-group scheduling queue (DESIGN.md "The dual queue").

``troupe.scheduler`` builds one ``SchedulingQueue`` per scheduler with the profile's
QueueSort ``less`` (and its key, when the plugin gives one) and PreEnqueue runner,
feeds it from the informers and pops ``QueuedEntity`` objects from it. One module
per sub-queue: ``active``, ``backoff``, ``unschedulable`` (also the gated pool),
``in_flight``, ``nominator``; ``scheduling_queue`` holds the flow between them, with
``intake`` (informer input), ``retries`` (hints, activation, flushes), ``moves`` (a
pod may join its group on the way into a sub-queue), ``group_table`` (which group
each pod is in) and ``group_queue`` (one group's entity, flight and solo pods, and
every change of them), ``pre_enqueue`` (the gang checks). Imports only
``troupe.api``. Calls go down: no module here calls back into one that imports it
(the callables the scheduler passes in, PreEnqueue, ``group_of``, ``on_incoming``,
are its own).
"""

from troupe.queue.backoff import backoff_duration
from troupe.queue.entity import (
    EntityKind,
    LessFunc,
    QueuedEntity,
    QueuedGroupInfo,
    QueuedPodInfo,
    SortKey,
)
from troupe.queue.pre_enqueue import GANG_SCHEDULING, MIN_COUNT_MESSAGE, missing_group_message
from troupe.queue.scheduling_queue import SchedulingQueue
from troupe.queue.sort import priority_sort_key, priority_sort_less
from troupe.queue.sub_queues import IncomingHook, QueueName

__all__ = [
    "GANG_SCHEDULING",
    "MIN_COUNT_MESSAGE",
    "EntityKind",
    "IncomingHook",
    "LessFunc",
    "QueueName",
    "QueuedEntity",
    "QueuedGroupInfo",
    "QueuedPodInfo",
    "SchedulingQueue",
    "SortKey",
    "backoff_duration",
    "missing_group_message",
    "priority_sort_key",
    "priority_sort_less",
]
