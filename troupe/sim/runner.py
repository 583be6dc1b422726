"""Plays a scenario on a SimCluster and watches what happens to every pod.

``ScenarioRunner.run`` creates the scenario's pods and node changes at their times
(through the cluster's store, so every write is a watch event the scheduler sees
over HTTP), follows each pod from creation to binding, completion or its last
``PodScheduled=False`` reason, and returns a ``Summary`` once the run settles
(nothing left pending, or nothing changing for ``settleSeconds``) or times out.
The scheduler is not its business: ``troupe sim`` runs one beside it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from troupe.api.clock import Clock, RealClock
from troupe.sim.cluster import SimCluster
from troupe.sim.nodespec import NodeSpec
from troupe.sim.scenario import NodeGroup, Scenario, Step, pod_manifests

Progress = Callable[[int, int, float], None]
"""(pods scheduled, pods created, seconds elapsed)."""


@dataclass(slots=True)
class PodRecord:
    key: str
    app: str
    created: float
    bound: float | None = None
    node: str = ""
    phase: str = "Pending"
    reason: str = ""
    message: str = ""


@dataclass(slots=True)
class Summary:
    scenario: str
    seconds: float
    pods: int
    scheduled: int
    succeeded: int
    pending: int
    pending_reasons: list[tuple[str, int]]
    per_app: list[tuple[str, int, int]]  # app, pods, scheduled
    pods_per_second: float
    latency_ms: dict[str, float] = field(default_factory=dict)
    timed_out: bool = False


def node_spec(group: NodeGroup) -> NodeSpec:
    return NodeSpec(
        count=group.count,
        cpu=group.cpu,
        memory=group.memory,
        pods=group.pods,
        gpus=group.gpus,
        labels=dict(group.labels),
        taints=tuple(t.model_dump() for t in group.taints),
        name_prefix=group.name_prefix,
        zones=tuple(group.zones),
        racks=group.racks,
    )


class ScenarioRunner:
    def __init__(
        self,
        cluster: SimCluster,
        scenario: Scenario,
        *,
        clock: Clock | None = None,
        progress: Progress | None = None,
    ) -> None:
        self.cluster = cluster
        self.scenario = scenario
        self.clock = clock or RealClock()
        self.progress = progress
        self.records: dict[str, PodRecord] = {}
        self._last_change = 0.0
        self._next_index: Counter[str] = Counter()

    def _on_pod(self, type_: str, obj: dict[str, Any]) -> None:
        meta = obj.get("metadata", {})
        key = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
        record = self.records.get(key)
        if record is None:
            return
        self._last_change = self.clock.now()
        spec, status = obj.get("spec", {}), obj.get("status", {})
        if spec.get("nodeName") and record.bound is None:
            record.bound = self.clock.now()
            record.node = spec["nodeName"]
        record.phase = "Deleted" if type_ == "DELETED" else status.get("phase", record.phase)
        for cond in status.get("conditions", []):
            if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
                record.reason = cond.get("reason", "")
                record.message = cond.get("message", "")

    def _apply(self, step: Step) -> None:
        if step.pods is not None:
            first = self._next_index[step.pods.name]
            self._next_index[step.pods.name] += step.pods.count
            for pod in pod_manifests(step.pods, first):
                meta = pod["metadata"]
                key = f"{meta['namespace']}/{meta['name']}"
                self.records[key] = PodRecord(key, step.pods.name, self.clock.now())
                self._ensure_namespace(meta["namespace"])
                self.cluster.store.create("pods", pod, copy=False)
        elif step.add_nodes is not None:
            self.cluster.add_nodes(node_spec(step.add_nodes))
        elif step.remove_nodes is not None:
            names = list(step.remove_nodes.names)
            if step.remove_nodes.count:
                names += self.cluster.node_names[-step.remove_nodes.count :]
            for name in names:
                self.cluster.remove_node(name)

    def _ensure_namespace(self, namespace: str) -> None:
        store = self.cluster.store
        if store.find(store.resolve("namespaces"), "", namespace) is None:
            self.cluster.store.create(
                "namespaces",
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
            )

    def _settled(self) -> bool:
        return all(r.bound is not None for r in self.records.values())

    async def run(self) -> Summary:
        stop_listening = self.cluster.store.listen("pods", self._on_pod)
        start = self.clock.now()
        timed_out = False
        try:
            for step in sorted(self.scenario.steps, key=lambda s: s.at):
                delay = start + step.at - self.clock.now()
                while delay > 0:
                    await self.clock.sleep(min(delay, 0.1))
                    self._report(start)
                    delay = start + step.at - self.clock.now()
                self._apply(step)
            last_step = self.clock.now()
            self._last_change = last_step
            while not self._settled():
                now = self.clock.now()
                if now - self._last_change >= self.scenario.settle_seconds:
                    break
                if now - last_step >= self.scenario.timeout_seconds:
                    timed_out = True
                    break
                await self.clock.sleep(0.05)
                self._report(start)
        finally:
            stop_listening()
        self._report(start)
        return self.summary(self.clock.now() - start, timed_out)

    def _report(self, start: float) -> None:
        if self.progress is not None:
            scheduled = sum(1 for r in self.records.values() if r.bound is not None)
            self.progress(scheduled, len(self.records), self.clock.now() - start)

    def summary(self, seconds: float, timed_out: bool = False) -> Summary:
        records = list(self.records.values())
        bound = [r for r in records if r.bound is not None]
        pending = [r for r in records if r.bound is None and r.phase != "Deleted"]
        reasons = Counter(r.message or "not attempted yet" for r in pending)
        apps: dict[str, list[int]] = {}
        for r in records:
            counts = apps.setdefault(r.app, [0, 0])
            counts[0] += 1
            counts[1] += r.bound is not None
        latencies = np.array([(r.bound or 0.0) - r.created for r in bound]) * 1000.0
        latency = (
            {
                "p50": float(np.percentile(latencies, 50)),
                "p90": float(np.percentile(latencies, 90)),
                "p99": float(np.percentile(latencies, 99)),
                "max": float(latencies.max()),
            }
            if len(bound)
            else {}
        )
        # Peak rate: bindings in the busiest one-second window (arrivals are spread
        # over the scenario, so an average over the run would measure the scenario).
        times = np.sort(np.array([r.bound or 0.0 for r in bound]))
        rate = 0.0
        if len(times):
            ends = np.searchsorted(times, times + 1.0, side="left")
            rate = float((ends - np.arange(len(times))).max())
        return Summary(
            scenario=self.scenario.name,
            seconds=seconds,
            pods=len(records),
            scheduled=len(bound),
            succeeded=sum(1 for r in records if r.phase == "Succeeded"),
            pending=len(pending),
            pending_reasons=reasons.most_common(),
            per_app=[(app, c[0], c[1]) for app, c in apps.items()],
            pods_per_second=rate,
            latency_ms=latency,
            timed_out=timed_out,
        )
