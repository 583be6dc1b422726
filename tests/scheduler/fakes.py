"""A recording SchedulerClient for engine tests (no API server).

Records every binding, status patch and event; can fail bindings of chosen pods
with an ApiError, and can echo a successful binding back to the scheduler as the
watch would (``echo_to``), so the cache sees the pod bound.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from troupe.api.client import ApiError, Event
from troupe.api.objects import Pod, PodCondition


@dataclass
class Recorder:
    bindings: list[tuple[str, str]] = field(default_factory=list)
    conditions: dict[str, PodCondition] = field(default_factory=dict)
    events: list[Event] = field(default_factory=list)
    patches: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    # pod key -> errors raised by successive bind calls (popped one per call)
    bind_errors: dict[str, list[ApiError]] = field(default_factory=dict)
    echo_to: Callable[[Pod, Pod], None] | None = None
    # Preemption: the nominatedNodeName each status patch set ("" clears), and the
    # pods deleted, in order.
    nominations: dict[str, str] = field(default_factory=dict)
    deletions: list[str] = field(default_factory=list)
    # Pods evicted through the Eviction API, in order; pod key -> errors raised by
    # successive evict calls (a 429 for a PodDisruptionBudget).
    evictions: list[str] = field(default_factory=list)
    evict_errors: dict[str, list[ApiError]] = field(default_factory=dict)
    # When set, every binding waits for it (bindings held in flight).
    hold: asyncio.Event | None = None

    async def bind(self, pod: Pod, node_name: str) -> None:
        if self.hold is not None:
            await self.hold.wait()
        errors = self.bind_errors.get(pod.key)
        if errors:
            raise errors.pop(0)
        if any(key == pod.key for key, _ in self.bindings):
            raise AssertionError(f"pod {pod.key} bound twice")
        self.bindings.append((pod.key, node_name))
        if self.echo_to is not None:
            bound = pod.model_copy(
                update={"spec": pod.spec.model_copy(update={"node_name": node_name})}
            )
            asyncio.get_running_loop().call_soon(self.echo_to, pod, bound)

    async def patch_pod_status(
        self, pod: Pod, condition: PodCondition | None, nominated_node_name: str | None
    ) -> None:
        if condition is not None:
            self.conditions[pod.key] = condition
        if nominated_node_name is not None:
            self.nominations[pod.key] = nominated_node_name

    async def delete_pod(self, pod: Pod, grace_period_seconds: int | None = None) -> bool:
        self.deletions.append(pod.key)
        return True

    async def evict_pod(self, pod: Pod) -> bool:
        errors = self.evict_errors.get(pod.key)
        if errors:
            raise errors.pop(0)
        self.evictions.append(pod.key)
        return True

    async def record_event(self, event: Event) -> None:
        self.events.append(event)

    async def merge_patch(self, path: str, patch: Mapping[str, Any]) -> dict[str, Any]:
        self.patches.append((path, dict(patch)))
        return dict(patch)

    def node_of(self, key: str) -> str | None:
        return next((n for k, n in self.bindings if k == key), None)

    def events_for(self, key: str, reason: str) -> list[Event]:
        ns, name = key.split("/")
        return [
            e
            for e in self.events
            if e.reason == reason and e.regarding.namespace == ns and e.regarding.name == name
        ]
