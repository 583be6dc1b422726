"""What the scheduling queue holds: queued entities, a single pod or a whole pod group.

The sub-queues (``active``, ``backoff``, ``unschedulable``) and the QueueSort
comparator only see ``QueuedEntity``: a key, a priority, a timestamp and the
bookkeeping of scheduling attempts. Only ``SchedulingQueue`` (with its
``GroupTable``) knows how informer pods map to entities: a pod on its own is a
``QueuedPodInfo``; the pending members of a gang are one ``QueuedGroupInfo``
(DESIGN.md "The dual queue", KEP-4671 alternative 3). Entities are data: the
queue's modules change them, they call nothing.

Sub-queues index entities by ``queue_id``, not ``key``: a scheduler-plugins
PodGroup's key (``namespace/name``) can equal a pod's key, and both may be queued.

``schedule_one`` (``troupe.scheduler``) receives entities from ``SchedulingQueue.pop``
and records why an attempt failed in ``unschedulable_plugins`` / ``pending_plugins``
before handing the entity back with ``add_unschedulable_if_not_present``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from troupe.api.gangs import GangPolicy, GroupRef
from troupe.api.objects import Pod, PodKey
from troupe.api.podinfo import PodInfo

EntityKind = Literal["pod", "podgroup"]
"""The ``type`` label of ``scheduler_queued_entities``."""


@dataclass(slots=True, kw_only=True)
class QueuedEntity:
    """One schedulable unit and its attempt history.

    Satisfies ``troupe.api.framework.Sortable``: QueueSort orders entities by
    ``priority``, ``timestamp`` and ``key``.
    """

    key: str
    priority: int
    # When the entity entered the queue. It is not refreshed after a failed attempt
    # (upstream PrioritySort refreshes it): KEP-3370 QueueSort orders regular pods by
    # their first attempt and groups by their creation time (DESIGN.md).
    timestamp: float
    # First time the entity entered the active queue; the start of the pod
    # scheduling SLI (``scheduler_pod_scheduling_sli_duration_seconds``).
    initial_attempt_timestamp: float | None = None
    attempts: int = 0
    # Plugins that rejected the last attempt (Unschedulable / UnschedulableAndUnresolvable).
    # Empty after a failed attempt means an error: the entity is retried after backoff.
    unschedulable_plugins: set[str] = field(default_factory=set)
    # Plugins that answered PENDING: a QUEUE hint from one of them skips backoff.
    pending_plugins: set[str] = field(default_factory=set)
    # The PreEnqueue plugin holding the entity back, and its message; empty when not gated.
    gating_plugin: str = ""
    gating_message: str = ""
    # Clock time at which the current backoff ends (0: never backed off).
    backoff_expiry: float = 0.0
    # Set when the entity's pod was deleted while this attempt ran: whatever the
    # attempt reports later, the entity is not queued again (a pod re-created under
    # the same name is a new entity, with its own attempts).
    withdrawn: bool = False
    # The entity's index in the sub-queues and the in-flight table. An attribute
    # (set from ``key``, which never changes), not a property: the queue reads it
    # several times per pod, and a property is a Python call each time.
    queue_id: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.queue_id = self._queue_id()

    def _queue_id(self) -> str:
        return self.key

    @property
    def kind(self) -> EntityKind:
        raise NotImplementedError

    @property
    def gated(self) -> bool:
        return bool(self.gating_plugin)

    def rejectors(self) -> set[str]:
        """Every plugin that rejected the last attempt (hints are asked only of these)."""
        return self.unschedulable_plugins | self.pending_plugins

    def pods(self) -> Sequence[Pod]:
        """The pods whose change may make this entity schedulable (hint inputs)."""
        raise NotImplementedError

    def pod_keys(self) -> Sequence[str]:
        return [pod.key for pod in self.pods()]


@dataclass(slots=True, kw_only=True)
class QueuedPodInfo(QueuedEntity):
    """A single pod in the queue (upstream ``framework.QueuedPodInfo``)."""

    pod_info: PodInfo

    @classmethod
    def of(cls, info: PodInfo, now: float) -> QueuedPodInfo:
        return cls(key=info.key, priority=info.priority, timestamp=now, pod_info=info)

    @property
    def kind(self) -> EntityKind:
        return "pod"

    @property
    def pod(self) -> Pod:
        return self.pod_info.pod

    @property
    def pod_key(self) -> PodKey:
        return self.pod_info.key

    def pods(self) -> Sequence[Pod]:
        return (self.pod_info.pod,)

    def pod_keys(self) -> Sequence[str]:
        return (self.pod_info.key,)

    def replace_pod(self, info: PodInfo) -> None:
        """Take a newer version of the pod (an informer update)."""
        self.pod_info = info
        self.priority = info.priority


GROUP_ID_PREFIX = "podgroup:"
"""``queue_id`` of a group entity: the prefix keeps it apart from every pod key
(namespaces cannot contain a colon)."""


@dataclass(slots=True, kw_only=True)
class QueuedGroupInfo(QueuedEntity):
    """The pending members of one gang, queued and scheduled as one entity (KEP-4671).

    ``members`` holds only pods that passed their own PreEnqueue; a member still
    held by, say, a scheduling gate waits in the gated pool on its own. ``key`` is
    the group's ``GroupKey``. The group's ``GroupQueue`` (``group_queue``) adds and
    removes members and re-sorts the entity (priority and timestamp follow the
    policy) whenever members or policy change, with the entity out of any heap.
    """

    ref: GroupRef
    members: dict[str, PodInfo] = field(default_factory=dict)
    policy: GangPolicy | None = None
    # When each member entered the queue: the timestamp while the group's creation
    # time is unknown.
    joined: dict[str, float] = field(default_factory=dict)
    # The group object's creation time on the queue's clock; None while unknown.
    created: float | None = None

    @classmethod
    def of(cls, ref: GroupRef, now: float) -> QueuedGroupInfo:
        return cls(key=ref.key, priority=0, timestamp=now, ref=ref)

    @property
    def kind(self) -> EntityKind:
        return "podgroup"

    def _queue_id(self) -> str:
        return GROUP_ID_PREFIX + self.key

    def pods(self) -> Sequence[Pod]:
        return tuple(info.pod for info in self.members.values())

    def pod_keys(self) -> Sequence[str]:
        return tuple(self.members)


LessFunc = Callable[[QueuedEntity, QueuedEntity], bool]
"""QueueSort's ``less(a, b)``: True when ``a`` should be popped before ``b``."""

SortKey = Callable[[QueuedEntity], tuple[Any, ...]]
"""QueueSort's order as a key, when its plugin offers one: ``less(a, b)`` is
``key(a) < key(b)`` (``troupe.api.framework.QueueSortKey``)."""
