"""The small client contract the scheduler writes through.

The scheduling engine never talks HTTP itself: binding, pod-condition patches and
events go through ``SchedulerClient``. ``troupe.kube`` implements it
against a Kubernetes API server; unit tests use a recording double.

Plugins reach it as ``Handle.client``. Besides the scheduler's own writes it reads
and writes any API object by its ``ObjectKind`` (``troupe.api.watches``): a PreBind
that sets a claim's selected node or a ResourceClaim's allocation goes through
``get_object`` / ``create_object`` / ``update_object`` / ``update_object_status`` /
``patch_object``, with the retries, the rate limit and the leader-lease fencing of
every other write, failing with ``ApiError`` (``is_conflict``, ``is_not_found``) or
``WriteFenced``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol, runtime_checkable

from troupe.api.objects import Pod, PodCondition
from troupe.api.watches import ObjectKind


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


class PatchType(StrEnum):
    """How ``patch_object`` patches: its value is the request's Content-Type."""

    MERGE = "application/merge-patch+json"  # RFC 7386; any resource
    STRATEGIC = "application/strategic-merge-patch+json"  # built-in kinds only
    JSON = "application/json-patch+json"  # RFC 6902: a list of operations


JsonPatch = Mapping[str, Any] | Sequence[Mapping[str, Any]]
"""A merge or strategic patch (an object), or a JSON patch (a list of operations)."""


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

    # --- any API object (plugins' PreBind) -------------------------------------------
    # After a transient failure is retried, a create or an update may have landed on
    # the attempt whose reply was lost: its 409 is then the caller's own success, so
    # callers that care re-read the object (as upstream's PreBind re-reads on conflict).

    async def get_object(self, kind: ObjectKind, name: str, namespace: str = "") -> dict[str, Any]:
        """The object as the server has it. Raises ApiError (``is_not_found``)."""
        ...

    async def create_object(self, kind: ObjectKind, obj: Mapping[str, Any]) -> dict[str, Any]:
        """POST ``obj`` (in ``metadata.namespace`` for a namespaced kind); the object as
        created. Raises ApiError (``is_conflict``: it exists already)."""
        ...

    async def update_object(
        self, kind: ObjectKind, obj: Mapping[str, Any], *, subresource: str = ""
    ) -> dict[str, Any]:
        """PUT ``obj`` (named by its metadata); its ``metadata.resourceVersion`` is the
        precondition, so a stale object raises ApiError ``is_conflict``. The object as
        the server stored it."""
        ...

    async def update_object_status(
        self, kind: ObjectKind, obj: Mapping[str, Any]
    ) -> dict[str, Any]:
        """``update_object`` of the ``status`` subresource."""
        ...

    async def patch_object(
        self,
        kind: ObjectKind,
        name: str,
        patch: JsonPatch,
        *,
        namespace: str = "",
        patch_type: PatchType = PatchType.MERGE,
        subresource: str = "",
    ) -> dict[str, Any]:
        """PATCH the object (or its ``subresource``); the object as patched. Raises
        ApiError (``is_not_found``; ``is_conflict`` when a ``resourceVersion`` in the
        patch is stale)."""
        ...


@runtime_checkable
class TimesBindings(Protocol):
    """A ``SchedulerClient`` that times its binding requests, so the number of bindings
    in flight can follow the API server's latency (``troupe.scheduler.loop.binding_limit``).
    ``troupe.kube.KubeClient`` is one; test doubles need not be."""

    @property
    def write_qps(self) -> float | None:
        """Writes per second the client's rate limiter lets out; None: no limit."""
        ...

    def take_binding_latencies(self) -> list[float]:
        """Seconds each binding request answered since the last call took, from the
        moment it left (after the rate limiter) to its response; forgets them."""
        ...
