"""An in-process scheduler on a FakeClock with a recording client, for engine tests."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

from troupe.api.clock import FakeClock
from troupe.api.config import config_document, load_config
from troupe.api.framework import NamespaceLabels
from troupe.api.objects import Namespace, Node, ObjectMeta, Pod
from troupe.plugins.registry import Registry, catalog, default_registry
from troupe.scheduler.observe.metrics import SchedulerMetrics
from troupe.scheduler.service.wiring import Options, build_scheduler

from tests.scheduler.fakes import Recorder


class Harness:
    def __init__(
        self,
        config: dict[str, Any] | None = None,
        registry: Registry | None = None,
        echo: bool = True,
        seed: int = 0,
        metrics: SchedulerMetrics | None = None,
        namespaces: NamespaceLabels | None = None,
        batching: bool = True,
    ) -> None:
        self.registry = registry or default_registry()
        self.config = load_config(config_document(**(config or {})), catalog(self.registry))
        self.clock = FakeClock()
        self.client = Recorder()
        # Namespace labels as the Namespace informer would keep them.
        self.namespaces = namespaces if namespaces is not None else NamespaceLabels()
        self.echo = echo
        self.wire(Options(seed=seed, batching=batching), metrics)

    def wire(self, options: Options, metrics: SchedulerMetrics | None = None) -> None:
        """(Re)build the scheduler's parts with ``options``, before any event."""
        self.parts = build_scheduler(
            self.config,
            self.registry,
            self.client,
            self.clock,
            options=options,
            metrics=metrics,
            namespaces=self.namespaces,
        )
        self.scheduler = self.parts.scheduler
        self.handlers = self.parts.handlers()
        if self.echo:
            self.client.echo_to = self.handlers.on_pod_update

    def nodes(self, nodes: Iterable[Node]) -> Harness:
        for node in nodes:
            self.handlers.on_node_add(node)
        return self

    def namespace(self, name: str, **labels: str) -> Harness:
        """Add or relabel namespace ``name``, as the Namespace informer reports it."""
        new = Namespace(metadata=ObjectMeta(name=name, labels=labels))
        old_labels = self.namespaces.labels_of(name)
        if self.namespaces.put(new):
            if old_labels is None:
                self.handlers.on_namespace_add(new)
            else:
                old = Namespace(metadata=ObjectMeta(name=name, labels=dict(old_labels)))
                self.handlers.on_namespace_update(old, new)
        return self

    def pods(self, pods: Iterable[Pod]) -> Harness:
        for pod in pods:
            self.handlers.on_pod_add(pod)
        return self

    async def settle(self, rounds: int = 50) -> None:
        """Schedule everything currently poppable, and let bindings finish."""
        for _ in range(rounds):
            while self.scheduler.queue.pending_counts()["active"]:
                await self.scheduler.schedule_one()
            for _ in range(5):
                await asyncio.sleep(0)
            if (
                not len(self.scheduler.bindings)
                and not self.scheduler.queue.pending_counts()["active"]
            ):
                break
        await self.scheduler.bindings.drain(timeout=5)
        for _ in range(5):
            await asyncio.sleep(0)

    async def advance(self, seconds: float) -> None:
        self.clock.advance(seconds)
        self.scheduler.queue.flush_backoff_completed()
        self.scheduler.queue.flush_unschedulable_leftover()
        await asyncio.sleep(0)

    async def close(self) -> None:
        await self.scheduler.stop(grace=1)
