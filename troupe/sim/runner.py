"""Plays a scenario on a SimCluster and watches what happens to every pod and gang.

``ScenarioRunner.run`` creates the scenario's pods, gangs (group object, then member
pods) and node changes at their times (through the cluster's store, so every write is
a watch event the scheduler sees over HTTP). A ``Tracker`` follows each pod from
creation to binding, completion or its last ``PodScheduled=False`` reason, and each
gang's members bound against its ``minMember``. The run settles when every pod is
bound, when nothing changed for ``settleSeconds`` after the last step, or at the
timeout; it returns a ``Summary`` (rendered by ``troupe.cli.render``). The scheduler
is not its business: ``troupe sim`` runs one beside it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from fractions import Fraction
from typing import Any, Final

import numpy as np

from troupe.api.clock import Clock, RealClock
from troupe.api.quantity import format_quantity, parse_quantity
from troupe.sim.cluster import SimCluster
from troupe.sim.manifests import (
    COMPOSITE_KIND,
    GangManifests,
    composite_manifests,
    gang_manifests,
    pod_manifests,
)
from troupe.sim.nodespec import NodeSpec
from troupe.sim.scenario import GangStep, NodeGroup, Scenario, ScenarioError, Step
from troupe.sim.usage import NodeUsage, node_usage

Progress = Callable[[int, int, float], None]
"""(pods scheduled, pods created, seconds elapsed)."""

SHOWN_RESOURCES: Final = ("cpu", "memory", "nvidia.com/gpu")


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
    finished: float | None = None
    gang: str = ""  # "namespace/name" of the gang step that created it, if any
    # The values of its gang's topology labels on the node it was bound to (read at
    # binding: the node may be gone by the summary). Empty for pods of no topology.
    domain: tuple[str, ...] = ()


class GangOutcome(StrEnum):
    PENDING = "pending"  # no member bound
    PARTIAL = "partial"  # bound, but fewer than minMember: troupe must never leave this
    SCHEDULED = "scheduled"  # at least minMember bound
    COMPLETED = "completed"  # every member ran to completion (Succeeded)


def gang_outcome(size: int, min_member: int, bound: int, succeeded: int) -> GangOutcome:
    if size and succeeded >= size:
        return GangOutcome.COMPLETED
    if bound == 0:
        return GangOutcome.PENDING
    return GangOutcome.PARTIAL if bound < min_member else GangOutcome.SCHEDULED


@dataclass(slots=True)
class GangRecord:
    step: GangStep
    created: float
    pods: list[str]
    reason: str = ""
    message: str = ""


@dataclass(frozen=True, slots=True)
class GangRow:
    """One gang at the end of a run; times are seconds from the start of the run."""

    name: str
    namespace: str
    api: str
    size: int
    min_member: int
    requests: str
    bound: int
    succeeded: int
    outcome: GangOutcome
    submitted: float
    first_bound: float | None
    last_bound: float | None
    finished: float | None  # when its last member Succeeded (completed gangs)
    reason: str  # last PodScheduled=False seen on its pods, even if since scheduled
    message: str
    # The last PodScheduled=False reason of each member still unbound, counted
    # (a pod that fits in a gang that does not is CoschedulingNotMeetMinMember).
    pod_reasons: tuple[tuple[str, int], ...] = ()
    # Each topology label the gang is placed by (outermost first) and the values its
    # bound members' nodes have ("" for a node without the label); none without
    # topology.
    domains: tuple[tuple[str, tuple[str, ...]], ...] = ()

    @property
    def domain(self) -> str:
        """``troupe.dev/rack=zone-a-r1``; several values joined by ``+``, several labels
        by a space; ``-`` while no member is bound."""
        return " ".join(
            f"{key}=" + ("+".join(v or "<none>" for v in values) if values else "-")
            for key, values in self.domains
        )


@dataclass(slots=True)
class Summary:
    scenario: str
    seconds: float
    pods: int
    scheduled: int
    succeeded: int
    pending: int
    pending_reasons: list[tuple[str, int]]  # plain pods only; gangs say theirs per gang
    per_app: list[tuple[str, int, int]]  # app, pods, scheduled (plain pods only)
    pods_per_second: float
    latency_ms: dict[str, float] = field(default_factory=dict)
    timed_out: bool = False
    gangs: list[GangRow] = field(default_factory=list)
    nodes: int = 0
    capacity: dict[str, str] = field(default_factory=dict)  # allocatable, summed
    # For the HTML report: every pod still pending (plain or gang member) with the
    # message of its last PodScheduled=False, and each node's numbers at the end.
    pending_pods: list[tuple[str, str]] = field(default_factory=list)
    node_usage: list[NodeUsage] = field(default_factory=list)


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


def _key(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata", {})
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


NodeLabels = Callable[[str], Mapping[str, str]]
"""A node's labels by name (empty if there is no such node)."""


def _no_labels(_: str) -> Mapping[str, str]:
    return {}


class Tracker:
    """Follows the pods and gangs a scenario created, from the store's pod events."""

    def __init__(self, clock: Clock, node_labels: NodeLabels = _no_labels) -> None:
        self.clock = clock
        self.node_labels = node_labels
        self.records: dict[str, PodRecord] = {}
        self.gangs: dict[str, GangRecord] = {}
        # Last time something a summary shows changed (a binding, a phase, a new
        # scheduling message); repeated identical retries of a pod that never fits do
        # not count, or a run with such a pod would never settle.
        self.last_change = clock.now()

    def add_pods(self, app: str, pods: list[dict[str, Any]], gang: str = "") -> None:
        now = self.clock.now()
        for pod in pods:
            key = _key(pod)
            self.records[key] = PodRecord(key, app, now, gang=gang)

    def add_gang(self, step: GangStep, manifests: GangManifests) -> None:
        key = f"{step.namespace}/{step.name}"
        self.gangs[key] = GangRecord(step, self.clock.now(), [_key(p) for p in manifests.pods])
        self.add_pods(step.name, manifests.pods, gang=key)

    def on_pod(self, type_: str, obj: dict[str, Any]) -> None:
        record = self.records.get(_key(obj))
        if record is None:
            return
        now = self.clock.now()
        before = (record.bound, record.phase, record.reason, record.message)
        spec, status = obj.get("spec", {}), obj.get("status", {})
        if spec.get("nodeName") and record.bound is None:
            record.bound = now
            record.node = spec["nodeName"]
            gang = self.gangs.get(record.gang)
            if gang is not None and gang.step.topology_keys:
                labels = self.node_labels(record.node)
                record.domain = tuple(labels.get(k, "") for k in gang.step.topology_keys)
        record.phase = "Deleted" if type_ == "DELETED" else status.get("phase", record.phase)
        if record.phase == "Succeeded" and record.finished is None:
            record.finished = now
        for cond in status.get("conditions", []):
            if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
                record.reason = cond.get("reason", "")
                record.message = cond.get("message", "")
        if (record.bound, record.phase, record.reason, record.message) == before:
            return
        self.last_change = now
        gang = self.gangs.get(record.gang)
        if gang is not None and (record.reason, record.message) != before[2:]:
            gang.reason, gang.message = record.reason, record.message

    def bound(self) -> int:
        return sum(1 for r in self.records.values() if r.bound is not None)

    def all_bound(self) -> bool:
        return all(r.bound is not None for r in self.records.values())

    def gang_rows(self, start: float) -> list[GangRow]:
        rows = []
        for g in self.gangs.values():
            step = g.step
            members = [self.records[k] for k in g.pods]
            bound = sorted(r.bound for r in members if r.bound is not None)
            succeeded = [r.finished for r in members if r.finished is not None]
            outcome = gang_outcome(step.size, step.quorum, len(bound), len(succeeded))
            rows.append(
                GangRow(
                    name=step.name,
                    namespace=step.namespace,
                    api=step.api_label,
                    size=step.size,
                    min_member=step.quorum,
                    requests=f"{step.cpu} cpu, {step.memory}"
                    + (f", {step.gpus} gpu" if step.gpus else ""),
                    bound=len(bound),
                    succeeded=len(succeeded),
                    outcome=outcome,
                    submitted=g.created - start,
                    first_bound=bound[0] - start if bound else None,
                    last_bound=bound[-1] - start if bound else None,
                    finished=(max(succeeded) - start if outcome is GangOutcome.COMPLETED else None),
                    reason=g.reason,
                    message=g.message,
                    pod_reasons=tuple(
                        Counter(
                            r.reason or "not attempted yet"
                            for r in members
                            if r.bound is None and r.phase != "Deleted"
                        ).most_common()
                    ),
                    domains=_domains(step, members),
                )
            )
        return rows

    def summary(self, scenario: str, start: float, timed_out: bool = False) -> Summary:
        records = list(self.records.values())
        plain = [r for r in records if not r.gang]
        bound = [r for r in records if r.bound is not None]
        pending = [r for r in records if r.bound is None and r.phase != "Deleted"]
        reasons = Counter(r.message or "not attempted yet" for r in pending if not r.gang)
        apps: dict[str, list[int]] = {}
        for r in plain:
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
            scenario=scenario,
            seconds=self.clock.now() - start,
            pods=len(records),
            scheduled=len(bound),
            succeeded=sum(1 for r in records if r.phase == "Succeeded"),
            pending=len(pending),
            pending_reasons=reasons.most_common(),
            per_app=[(app, c[0], c[1]) for app, c in apps.items()],
            pods_per_second=rate,
            latency_ms=latency,
            timed_out=timed_out,
            gangs=self.gang_rows(start),
            pending_pods=sorted(
                (r.key, r.message or r.reason or "not attempted yet") for r in pending
            ),
        )


def _domains(step: GangStep, members: list[PodRecord]) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """Each topology label of the gang and the sorted values of its bound members."""
    bound = [r.domain for r in members if r.bound is not None and r.domain]
    return tuple(
        (key, tuple(sorted({d[i] for d in bound}))) for i, key in enumerate(step.topology_keys)
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
        self.tracker = Tracker(self.clock, self._node_labels)
        self._next_index: Counter[str] = Counter()

    @property
    def records(self) -> dict[str, PodRecord]:
        return self.tracker.records

    def _apply(self, step: Step) -> None:
        store = self.cluster.store
        if step.pods is not None:
            first = self._next_index[step.pods.name]
            self._next_index[step.pods.name] += step.pods.count
            pods = pod_manifests(step.pods, first)
            self._ensure_namespace(step.pods.namespace)
            self.tracker.add_pods(step.pods.name, pods)
            for pod in pods:
                store.create("pods", pod, copy=False)
        elif step.gang is not None:
            self._ensure_namespace(step.gang.namespace)
            self._create_gang(step.gang, gang_manifests(step.gang))
        elif step.composite is not None:
            composite, leaves = composite_manifests(step.composite)
            self._ensure_namespace(step.composite.namespace)
            self._served(COMPOSITE_KIND, f"composite {step.composite.name!r}")
            # The composite first, as a workload controller creates it, then each
            # child PodGroup with its pods (docs/gangs.md "CompositePodGroups").
            store.create(COMPOSITE_KIND, composite, copy=False)
            for leaf, made in zip(step.composite.leaves(), leaves, strict=True):
                self._create_gang(leaf, made)
        elif step.add_nodes is not None:
            self.cluster.add_nodes(node_spec(step.add_nodes))
        elif step.remove_nodes is not None:
            names = list(step.remove_nodes.names)
            if step.remove_nodes.count:
                names += self.cluster.node_names[-step.remove_nodes.count :]
            for name in names:
                self.cluster.remove_node(name)

    def _node_labels(self, name: str) -> Mapping[str, str]:
        store = self.cluster.store
        node = store.find(store.resolve("nodes"), "", name)
        labels: Mapping[str, str] = (node or {}).get("metadata", {}).get("labels") or {}
        return labels

    def _served(self, kind: str, what: str) -> None:
        try:
            self.cluster.store.resolve(kind)
        except KeyError:
            raise ScenarioError(f"{what}: the cluster does not serve {kind}") from None

    def _create_gang(self, step: GangStep, made: GangManifests) -> None:
        store = self.cluster.store
        self._served(made.kind, f"gang {step.name!r}")
        self.tracker.add_gang(step, made)
        # The group object first, as operators create it (members that arrive
        # before it wait in the queue either way, docs/gangs.md "Queueing").
        store.create(made.kind, made.group, copy=False)
        for pod in made.pods:
            store.create("pods", pod, copy=False)

    def _ensure_namespace(self, namespace: str) -> None:
        store = self.cluster.store
        if store.find(store.resolve("namespaces"), "", namespace) is None:
            store.create(
                "namespaces",
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
            )

    async def run(self) -> Summary:
        tracker = self.tracker
        stop_listening = self.cluster.store.listen("pods", tracker.on_pod)
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
            tracker.last_change = last_step
            while not tracker.all_bound():
                now = self.clock.now()
                if now - tracker.last_change >= self.scenario.settle_seconds:
                    break
                if now - last_step >= self.scenario.timeout_seconds:
                    timed_out = True
                    break
                await self.clock.sleep(0.05)
                self._report(start)
        finally:
            stop_listening()
        self._report(start)
        summary = tracker.summary(self.scenario.name, start, timed_out)
        summary.nodes, summary.capacity = self._capacity()
        summary.node_usage = node_usage(self.cluster)
        return summary

    def _capacity(self) -> tuple[int, dict[str, str]]:
        """Nodes at the end of the run and their allocatable cpu, memory and GPUs."""
        nodes = self.cluster.store.list("nodes", copy=False)
        total: dict[str, Fraction] = {}
        for node in nodes:
            allocatable = node.get("status", {}).get("allocatable", {})
            for resource in SHOWN_RESOURCES:
                if resource in allocatable:
                    value = parse_quantity(str(allocatable[resource]))
                    total[resource] = total.get(resource, Fraction(0)) + value
        shown = {r: format_quantity(v, binary=r == "memory") for r, v in total.items() if v}
        return len(nodes), shown

    def _report(self, start: float) -> None:
        if self.progress is not None:
            scheduled = self.tracker.bound()
            self.progress(scheduled, len(self.tracker.records), self.clock.now() - start)
