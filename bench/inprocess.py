"""An in-process client for benchmarks: bindings succeed at once and are echoed
back to the scheduler as the watch would report them (on the next loop turn)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any

from troupe.api.client import Event
from troupe.api.objects import Pod, PodCondition


class EchoClient:
    def __init__(self) -> None:
        self.on_bound: Callable[[Pod, Pod], None] | None = None
        self.bound = 0
        self.failed_patches = 0
        self.events = 0
        self.patches: list[tuple[str, dict[str, Any]]] = []
        self.deleted: list[str] = []

    async def bind(self, pod: Pod, node_name: str) -> None:
        self.bound += 1
        if self.on_bound is not None:
            bound = pod.model_copy(
                update={"spec": pod.spec.model_copy(update={"node_name": node_name})}
            )
            asyncio.get_running_loop().call_soon(self.on_bound, pod, bound)

    async def patch_pod_status(
        self, pod: Pod, condition: PodCondition | None, nominated_node_name: str | None
    ) -> None:
        self.failed_patches += 1

    async def record_event(self, event: Event) -> None:
        self.events += 1

    async def delete_pod(self, pod: Pod, grace_period_seconds: int | None = None) -> bool:
        # No benchmark preempts; recorded so a run that did would show it.
        self.deleted.append(pod.metadata.name)
        return True

    async def evict_pod(self, pod: Pod) -> bool:
        self.deleted.append(pod.metadata.name)
        return True

    async def merge_patch(self, path: str, patch: Mapping[str, Any]) -> dict[str, Any]:
        self.patches.append((path, dict(patch)))
        return dict(patch)
