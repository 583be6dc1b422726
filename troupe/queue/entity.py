"""What the scheduling queue holds: queued entities (a pod now, a pod group next).

The sub-queues (``active``, ``backoff``, ``unschedulable``) and the QueueSort
comparator only see ``QueuedEntity``: a key, a priority, a timestamp and the
bookkeeping of scheduling attempts. Only ``SchedulingQueue`` knows how informer
pods map to entities; today every pod is its own ``QueuedPodInfo``. A gang's
``QueuedGroupInfo`` (DESIGN.md "The dual queue", KEP-4671 alternative 3) is a
further subclass that overrides ``kind``, ``pods`` and ``pod_keys``.

``schedule_one`` (``troupe.scheduler``) receives entities from ``SchedulingQueue.pop``
and records why an attempt failed in ``unschedulable_plugins`` / ``pending_plugins``
before handing the entity back with ``add_unschedulable_if_not_present``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

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
    # The PreEnqueue plugin holding the entity back; empty when not gated.
    gating_plugin: str = ""
    # Clock time at which the current backoff ends (0: never backed off).
    backoff_expiry: float = 0.0

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


LessFunc = Callable[[QueuedEntity, QueuedEntity], bool]
"""QueueSort's ``less(a, b)``: True when ``a`` should be popped before ``b``."""
