"""``KubeClient``: troupe's writes to the API server (implements ``SchedulerClient``).

The binding cycle calls ``bind``; failure handling calls ``patch_pod_status`` and
``record_event``; preemption and gang status code call ``delete_pod``,
``evict_pod``, ``get_json`` and ``merge_patch``; leader election its Lease calls,
one request each, and ``watch_lease``; plugins read and write any object
through ``get_object``, ``create_object``, ``update_object``, ``update_object_status``
and ``patch_object`` (``object_client``). Every write attempt takes a token
from the ``clientConnection.qps/burst`` bucket and runs under the bounded retry
policy; bodies are serialized once with compact separators and sent as bytes,
replies are read raw (no generated model objects on the hot path). Each binding
request is timed from the moment it leaves (after the rate limiter) to its answer;
the scheduler takes those latencies to size its binding concurrency
(``TimesBindings``, ``troupe.scheduler.loop.binding_limit``).
"""

from __future__ import annotations

import json
import random
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC, datetime
from typing import Any

import structlog
from kubernetes_asyncio.client import ApiClient
from pydantic_core import to_json

from troupe.api.client import ApiError, Event, JsonPatch, PatchType, raise_if_called_off
from troupe.api.clock import Clock
from troupe.api.objects import Pod, PodCondition
from troupe.api.watches import ObjectKind
from troupe.kube.events import EventPolicy, EventRecorder
from troupe.kube.informer import Informer
from troupe.kube.lease_record import Lease
from troupe.kube.object_client import ObjectClient
from troupe.kube.ratelimit import TokenBucket
from troupe.kube.retry import RetryPolicy, is_ambiguous, with_retries
from troupe.kube.transport import (
    JSON,
    MERGE_PATCH,
    STRATEGIC_MERGE_PATCH,
    HttpTransport,
    Response,
    Transport,
)

log = structlog.get_logger("troupe.kube")

BINDING_LATENCIES_KEPT = 4096
"""Binding latencies kept until the scheduler takes them (once a second)."""


def _dumps(obj: object) -> bytes:
    # pydantic-core's serializer: compact JSON, several times faster than json.dumps
    # on the small bodies written for every pod (bindings, status patches).
    return to_json(obj)


def rfc3339(wall: float) -> str:
    """A ``metav1.Time`` (seconds precision, UTC)."""
    return datetime.fromtimestamp(wall, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def pod_path(namespace: str, name: str, subresource: str = "") -> str:
    path = f"/api/v1/namespaces/{namespace}/pods/{name}"
    return f"{path}/{subresource}" if subresource else path


def lease_path(namespace: str, name: str = "") -> str:
    """``coordination.k8s.io/v1`` Lease collection (no name) or object path."""
    path = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"
    return f"{path}/{name}" if name else path


def custom_object_path(
    group: str,
    version: str,
    plural: str,
    name: str = "",
    *,
    namespace: str = "",
    subresource: str = "",
) -> str:
    """``/apis/<group>/<version>[/namespaces/<ns>]/<plural>[/<name>[/<subresource>]]``."""
    path = f"/apis/{group}/{version}"
    if namespace:
        path += f"/namespaces/{namespace}"
    path += f"/{plural}"
    if name:
        path += f"/{name}"
        if subresource:
            path += f"/{subresource}"
    return path


def binding_body(pod: Pod, node_name: str) -> bytes:
    m = pod.metadata
    # The UID makes the API server refuse (409) a binding for a pod that was deleted
    # and recreated under the same name since we scheduled it.
    return _dumps(
        {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": m.name, "namespace": m.namespace, "uid": m.uid},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node_name},
        }
    )


def status_patch(
    pod: Pod, condition: PodCondition | None, nominated_node_name: str | None, wall: float
) -> bytes | None:
    """The strategic-merge patch of ``pods/status``, or None when it would change
    nothing (upstream ``updatePod`` skips such writes)."""
    status: dict[str, Any] = {}
    if condition is not None:
        existing = next((c for c in pod.status.conditions if c.type == condition.type), None)
        same = (
            existing is not None
            and existing.status == condition.status
            and existing.reason == condition.reason
            and existing.message == condition.message
        )
        if not same:
            # podutil.UpdatePodCondition: the transition time moves only when the
            # status does.
            if condition.last_transition_time:
                transition = condition.last_transition_time
            elif existing is not None and existing.status == condition.status:
                transition = existing.last_transition_time or rfc3339(wall)
            else:
                transition = rfc3339(wall)
            entry: dict[str, Any] = {"type": condition.type, "status": condition.status}
            if condition.reason:
                entry["reason"] = condition.reason
            if condition.message:
                entry["message"] = condition.message
            entry["lastProbeTime"] = None
            entry["lastTransitionTime"] = transition
            status["conditions"] = [entry]  # merged by "type" (patchMergeKey)
    if nominated_node_name is not None and nominated_node_name != pod.status.nominated_node_name:
        status["nominatedNodeName"] = nominated_node_name or None  # null deletes
    if not status:
        return None
    return _dumps({"status": status})


class KubeClient:
    def __init__(
        self,
        api_client: ApiClient | Transport,
        clock: Clock,
        *,
        qps: float,
        burst: int,
        scheduler_name: str,
        instance: str,
        retry: RetryPolicy | None = None,
        event_policy: EventPolicy | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.transport: Transport = (
            HttpTransport(api_client) if isinstance(api_client, ApiClient) else api_client
        )
        self._clock = clock
        self._rng = rng or random.Random()
        self.retry = retry or RetryPolicy()
        self.limiter = TokenBucket(qps, burst, clock)
        # Latencies of binding requests not yet taken (``take_binding_latencies``).
        self._binding_latencies: deque[float] = deque(maxlen=BINDING_LATENCIES_KEPT)
        self.events = EventRecorder(
            self.transport,
            clock,
            reporting_controller=scheduler_name,
            reporting_instance=instance,
            limiter=TokenBucket(qps, burst, clock),
            retry=self.retry,
            policy=event_policy,
            rng=self._rng,
        )
        self._objects = ObjectClient(self._write, self._read)

    # --- the binding latency, for the binding concurrency ----------------------------

    @property
    def write_qps(self) -> float | None:
        return None if self.limiter.unlimited else self.limiter.qps

    def take_binding_latencies(self) -> list[float]:
        taken = list(self._binding_latencies)
        self._binding_latencies.clear()
        return taken

    # --- plumbing ---------------------------------------------------------------------

    async def _write(
        self,
        method: str,
        path: str,
        body: bytes | None,
        *,
        content_type: str = JSON,
        what: str,
        retry_on_429: bool = True,
        ambiguous: list[ApiError] | None = None,
        latencies: deque[float] | None = None,
    ) -> Response:
        """``latencies``: where each answered attempt's request time goes."""
        # The first attempt is made here: a write that succeeds at once (nearly all
        # of them) builds no retry closures and runs no retry loop.
        start = self._clock.now()
        first: Response | ApiError
        try:
            first = await self._attempt(method, path, body, content_type, latencies)
        except ApiError as exc:
            first = exc
        else:
            if first.ok:
                return first

        def attempt() -> Awaitable[Response]:
            return self._attempt(method, path, body, content_type, latencies)

        def retry_on(err: ApiError) -> bool:
            return err.is_transient and (retry_on_429 or err.status != 429)

        def on_failure(err: ApiError) -> None:
            if ambiguous is not None and is_ambiguous(err):
                ambiguous.append(err)

        return await with_retries(
            attempt,
            policy=self.retry,
            clock=self._clock,
            rng=self._rng,
            what=what,
            retry_on=retry_on,
            on_failure=on_failure,
            first=first,
            start=start,
        )

    async def _attempt(
        self,
        method: str,
        path: str,
        body: bytes | None,
        content_type: str,
        latencies: deque[float] | None = None,
    ) -> Response:
        """One attempt of a write: a token from the write limiter, then the request
        (timed into ``latencies`` when it is answered)."""
        delay = self.limiter.reserve()
        if delay > 0:
            await self.limiter.wait(delay)
        # A binding called off while it waited for its turn is not sent.
        raise_if_called_off()
        if latencies is None:
            return await self.transport.request(method, path, body=body, content_type=content_type)
        sent = self._clock.now()
        resp = await self.transport.request(method, path, body=body, content_type=content_type)
        latencies.append(self._clock.now() - sent)
        return resp

    async def _read(self, path: str, what: str) -> Response:
        async def attempt() -> Response:
            return await self.transport.request("GET", path)

        return await with_retries(
            attempt, policy=self.retry, clock=self._clock, rng=self._rng, what=what
        )

    # --- SchedulerClient ------------------------------------------------------------

    async def bind(self, pod: Pod, node_name: str) -> None:
        """POST ``pods/binding``. 409 (already bound, or UID mismatch) and 404 raise
        at once; transient failures are retried within the policy."""
        m = pod.metadata
        ambiguous: list[ApiError] = []
        try:
            await self._write(
                "POST",
                pod_path(m.namespace, m.name, "binding"),
                binding_body(pod, node_name),
                what=f"bind {m.namespace}/{m.name}",
                ambiguous=ambiguous,
                latencies=self._binding_latencies,
            )
        except ApiError as exc:
            # A 409 after an attempt whose outcome we never saw may be our own
            # binding having landed: check before reporting a conflict.
            if exc.is_conflict and ambiguous and await self._bound_to(pod, node_name):
                log.debug("binding landed on an earlier attempt", pod=pod.key, node=node_name)
                return
            raise

    async def _bound_to(self, pod: Pod, node_name: str) -> bool:
        m = pod.metadata
        try:
            resp = await self._read(pod_path(m.namespace, m.name), f"get {pod.key}")
        except ApiError:
            return False
        current = Pod.model_validate_json(resp.body)
        return current.metadata.uid == m.uid and current.spec.node_name == node_name

    async def patch_pod_status(
        self, pod: Pod, condition: PodCondition | None, nominated_node_name: str | None
    ) -> None:
        body = status_patch(pod, condition, nominated_node_name, self._clock.wall())
        if body is None:
            return
        m = pod.metadata
        try:
            await self._write(
                "PATCH",
                pod_path(m.namespace, m.name, "status"),
                body,
                content_type=STRATEGIC_MERGE_PATCH,
                what=f"patch status of {pod.key}",
            )
        except ApiError as exc:
            if exc.is_not_found:
                log.info("pod is gone; status not updated", pod=pod.key)
                return
            raise

    async def record_event(self, event: Event) -> None:
        await self.events.record(event)

    # --- preemption and gang helpers -------------------------------------------------

    async def delete_pod(self, pod: Pod, grace_period_seconds: int | None = None) -> bool:
        """Delete the pod with its UID as precondition. False when that pod is
        already gone (404, or 409: the name now belongs to another pod)."""
        m = pod.metadata
        options: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions"}
        if m.uid:
            options["preconditions"] = {"uid": m.uid}
        if grace_period_seconds is not None:
            options["gracePeriodSeconds"] = grace_period_seconds
        try:
            await self._write(
                "DELETE", pod_path(m.namespace, m.name), _dumps(options), what=f"delete {pod.key}"
            )
        except ApiError as exc:
            if exc.is_not_found or exc.is_conflict:
                return False
            raise
        return True

    async def evict_pod(self, pod: Pod) -> bool:
        """POST a policy/v1 Eviction. False when the pod is already gone. A 429
        (a PodDisruptionBudget forbids it now) is raised at once, not retried: the
        caller decides whether to pick other victims."""
        m = pod.metadata
        eviction: dict[str, Any] = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": m.name, "namespace": m.namespace},
        }
        if m.uid:
            eviction["deleteOptions"] = {"preconditions": {"uid": m.uid}}
        try:
            await self._write(
                "POST",
                pod_path(m.namespace, m.name, "eviction"),
                _dumps(eviction),
                what=f"evict {pod.key}",
                retry_on_429=False,
            )
        except ApiError as exc:
            if exc.is_not_found or exc.is_conflict:
                return False
            raise
        return True

    async def get_json(self, path: str) -> dict[str, Any] | None:
        """GET an object as a JSON mapping; None when it does not exist."""
        try:
            resp = await self._read(path, f"get {path}")
        except ApiError as exc:
            if exc.is_not_found:
                return None
            raise
        data = json.loads(resp.body)
        if not isinstance(data, dict):
            raise ApiError(
                resp.status, f"get {path}: expected an object, got {type(data).__name__}"
            )
        return data

    async def merge_patch(self, path: str, patch: Mapping[str, Any]) -> dict[str, Any]:
        """JSON merge patch (RFC 7386) of an object or subresource (custom objects do
        not support strategic merge); the object as the server returned it."""
        resp = await self._write(
            "PATCH", path, _dumps(patch), content_type=MERGE_PATCH, what=f"patch {path}"
        )
        data = json.loads(resp.body) if resp.body else {}
        return data if isinstance(data, dict) else {}

    # --- any API object (troupe.kube.object_client) ----------------------------------

    async def get_object(self, kind: ObjectKind, name: str, namespace: str = "") -> dict[str, Any]:
        return await self._objects.get_object(kind, name, namespace)

    async def create_object(self, kind: ObjectKind, obj: Mapping[str, Any]) -> dict[str, Any]:
        return await self._objects.create_object(kind, obj)

    async def update_object(
        self, kind: ObjectKind, obj: Mapping[str, Any], *, subresource: str = ""
    ) -> dict[str, Any]:
        return await self._objects.update_object(kind, obj, subresource=subresource)

    async def update_object_status(
        self, kind: ObjectKind, obj: Mapping[str, Any]
    ) -> dict[str, Any]:
        return await self._objects.update_object_status(kind, obj)

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
        return await self._objects.patch_object(
            kind, name, patch, namespace=namespace, patch_type=patch_type, subresource=subresource
        )

    # --- leases (leader election) ----------------------------------------------------
    #
    # One attempt each, outside the write limiter and the retry policy: the elector
    # retries on its own schedule (retryPeriod) and must hear back within
    # renewDeadline, so a renewal never queues behind a burst of bindings nor sleeps
    # in a backoff past the deadline (client-go's leader election likewise makes one
    # request per tryAcquireOrRenew).

    async def _lease_request(
        self, method: str, path: str, body: Mapping[str, Any] | None, timeout: float, what: str
    ) -> dict[str, Any]:
        resp = await self.transport.request(
            method, path, body=None if body is None else _dumps(body), timeout=timeout
        )
        if not resp.ok:
            raise resp.error(what)
        data = json.loads(resp.body)
        if not isinstance(data, dict):
            raise ApiError(resp.status, f"{what}: expected an object, got {type(data).__name__}")
        return data

    async def get_lease(
        self, namespace: str, name: str, *, timeout: float
    ) -> dict[str, Any] | None:
        """The Lease object, or None when it does not exist."""
        try:
            return await self._lease_request(
                "GET", lease_path(namespace, name), None, timeout, f"get lease {namespace}/{name}"
            )
        except ApiError as exc:
            if exc.is_not_found:
                return None
            raise

    async def create_lease(
        self, namespace: str, lease: Mapping[str, Any], *, timeout: float
    ) -> dict[str, Any]:
        """POST a new Lease; 409 (AlreadyExists: another replica created it first) raises."""
        return await self._lease_request(
            "POST", lease_path(namespace), lease, timeout, f"create lease in {namespace}"
        )

    async def update_lease(
        self, namespace: str, name: str, lease: Mapping[str, Any], *, timeout: float
    ) -> dict[str, Any]:
        """PUT the Lease. ``metadata.resourceVersion`` in ``lease`` is the optimistic
        concurrency precondition: a stale one raises a 409 ``ApiError``."""
        return await self._lease_request(
            "PUT", lease_path(namespace, name), lease, timeout, f"update lease {namespace}/{name}"
        )

    async def watch_lease(
        self, namespace: str, name: str, observe: Callable[[Mapping[str, Any] | None], None]
    ) -> None:
        """List and watch one Lease (``fieldSelector=metadata.name=<name>``, which RBAC
        matches against a Role's ``resourceNames``) until cancelled, through the
        informer machinery: ``observe`` gets each version seen (identity metadata and
        the spec as sent), the current one first, and None when it is deleted."""
        informer: Informer[Lease] = Informer(
            self.transport,
            lease_path(namespace),
            Lease,
            self._clock,
            on_add=lambda lease: observe(lease.as_mapping()),
            on_update=lambda _, lease: observe(lease.as_mapping()),
            on_delete=lambda _: observe(None),
            rng=self._rng,
            name=f"lease {namespace}/{name}",
            selector={"fieldSelector": f"metadata.name={name}"},
        )
        await informer.run()

    # --- lifecycle -------------------------------------------------------------------

    async def run(self) -> None:
        """Background upkeep (event series refresh); run as an owned task."""
        await self.events.run()
