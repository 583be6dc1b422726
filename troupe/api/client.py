"""The small client contract the scheduler writes through.

The scheduling engine never talks HTTP itself: binding, pod-condition patches and
events go through ``SchedulerClient``. ``troupe.kube`` implements it
against a Kubernetes API server; unit tests use a recording double.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Protocol

from troupe.api.objects import Pod, PodCondition


class CalledOff(Exception):
    """A write was not sent: the scheduler called it off while it waited to be sent
    (a binding to a node deleted meanwhile, or a member of a gang that broke)."""


CALL_OFF: ContextVar[Callable[[], str | None] | None] = ContextVar("troupe_call_off", default=None)
"""Set by a binding cycle for its own task: why its writes are called off, or None.
The client asks right before a write leaves (``raise_if_called_off``), after any
wait for the rate limiter, so a write that was waiting is never sent late."""


def raise_if_called_off() -> None:
    guard = CALL_OFF.get()
    why = guard() if guard is not None else None
    if why:
        raise CalledOff(why)


class WriteFenced(RuntimeError):
    """A write was not sent: this replica cannot prove it holds the leader lease
    (``troupe.kube.fence``)."""


class ApiError(Exception):
    """An API call failed. ``status`` is the HTTP status (0: no response)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status}: {message}" if status else message)
        self.status = status
        self.message = message

    @property
    def is_conflict(self) -> bool:
        return self.status == 409

    @property
    def is_not_found(self) -> bool:
        return self.status == 404

    @property
    def is_transient(self) -> bool:
        return self.status == 0 or self.status == 429 or self.status >= 500


@dataclass(frozen=True, slots=True)
class ObjectRef:
    """What an event is about."""

    kind: str
    namespace: str
    name: str
    uid: str = ""
    api_version: str = "v1"

    @classmethod
    def of_pod(cls, pod: Pod) -> ObjectRef:
        m = pod.metadata
        return cls("Pod", m.namespace, m.name, m.uid)


@dataclass(frozen=True, slots=True)
class Event:
    regarding: ObjectRef
    type: str  # Normal | Warning
    reason: str  # Scheduled | FailedScheduling | ...
    action: str  # Binding | Scheduling | ...
    note: str
    # The scheduler name of the profile that made the decision: kube-scheduler gives each
    # profile its own recorder. Empty: the client's own name.
    reporting_controller: str = ""


class SchedulerClient(Protocol):
    async def bind(self, pod: Pod, node_name: str) -> None:
        """POST the binding with the pod UID as precondition. Raises ApiError."""
        ...

    async def patch_pod_status(
        self, pod: Pod, condition: PodCondition | None, nominated_node_name: str | None
    ) -> None:
        """Merge ``condition`` into the pod's conditions (by type) and set or clear
        (``""``) ``status.nominatedNodeName`` (``None`` leaves it alone)."""
        ...

    async def record_event(self, event: Event) -> None: ...

    async def delete_pod(self, pod: Pod, grace_period_seconds: int | None = None) -> bool:
        """Delete the pod with its UID as precondition (preemption). False when that
        pod is already gone. Raises ApiError."""
        ...

    async def evict_pod(self, pod: Pod) -> bool:
        """POST a policy/v1 Eviction with the pod UID as precondition, so
        PodDisruptionBudgets are respected. False when that pod is already gone. A 429
        (a budget forbids it now) is raised, not retried. Raises ApiError."""
        ...

    async def merge_patch(self, path: str, patch: Mapping[str, Any]) -> dict[str, Any]:
        """JSON merge patch of any object (e.g. a PodGroup's status); returns it."""
        ...
