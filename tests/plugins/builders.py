"""Fluent builders for pods, nodes and NodeTables used by the plugin tests.

Every plugin test (``tests/plugins/test_*.py``) builds its objects here so a case
reads as a sentence::

    make_pod().name("p").req(cpu="1", memory="1Gi").toleration("gpu").obj()
    make_node().name("n1").capacity(cpu="4", memory="8Gi", pods=110).label("zone", "a").obj()
    table_of([n1, n2], pods_on={"n1": [running]})

Builders mutate a private object and ``obj()`` returns a deep copy, so one builder
may be finished several times with further changes in between.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Literal

from troupe.api.nodetable import NodeTable
from troupe.api.objects import (
    Affinity,
    Container,
    ContainerPort,
    LabelSelector,
    LabelSelectorRequirement,
    Node,
    NodeAffinity,
    NodeSelector,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    Pod,
    PodAffinity,
    PodAffinityTerm,
    PodSchedulingGate,
    PreferredSchedulingTerm,
    SchedulingGroup,
    Taint,
    TaintEffect,
    Toleration,
    TopologySpreadConstraint,
    Volume,
    WeightedPodAffinityTerm,
    WorkloadReference,
)
from troupe.api.podinfo import PodInfo

Expr = tuple[str, str, Sequence[str]]
"""(key, operator, values) of a node selector requirement, e.g. ("zone", "In", ["a"])."""

Selector = Mapping[str, str] | LabelSelector


def _label_selector(selector: Selector | None) -> LabelSelector | None:
    if selector is None or isinstance(selector, LabelSelector):
        return selector
    return LabelSelector(match_labels=dict(selector))


def label_selector(
    match_labels: Mapping[str, str] | None = None, *exprs: tuple[str, str, Sequence[str]]
) -> LabelSelector:
    """A LabelSelector from labels and (key, operator, values) expressions."""
    return LabelSelector(
        match_labels=dict(match_labels or {}),
        match_expressions=[
            LabelSelectorRequirement.model_validate({"key": k, "operator": op, "values": list(v)})
            for k, op, v in exprs
        ],
    )


def _requirements(exprs: Iterable[Expr]) -> list[NodeSelectorRequirement]:
    return [
        NodeSelectorRequirement.model_validate({"key": k, "operator": op, "values": list(v)})
        for k, op, v in exprs
    ]


def _quantities(
    cpu: str | None, memory: str | None, other: Mapping[str, str | int]
) -> dict[str, str]:
    out: dict[str, str] = {}
    if cpu is not None:
        out["cpu"] = str(cpu)
    if memory is not None:
        out["memory"] = str(memory)
    for name, value in other.items():
        out[name] = str(value)
    return out


class PodBuilder:
    def __init__(self) -> None:
        self._pod = Pod()
        self._pod.metadata.name = "pod"
        self._pod.metadata.namespace = "default"
        self._pod.metadata.uid = "uid-pod"
        self._uid_set = False

    # --- metadata ------------------------------------------------------------------

    def name(self, name: str) -> PodBuilder:
        self._pod.metadata.name = name
        if not self._uid_set:
            self._pod.metadata.uid = f"uid-{name}"
        return self

    def namespace(self, namespace: str) -> PodBuilder:
        self._pod.metadata.namespace = namespace
        return self

    def uid(self, uid: str) -> PodBuilder:
        self._pod.metadata.uid = uid
        self._uid_set = True
        return self

    def label(self, key: str, value: str) -> PodBuilder:
        self._pod.metadata.labels[key] = value
        return self

    def labels(self, labels: Mapping[str, str]) -> PodBuilder:
        self._pod.metadata.labels.update(labels)
        return self

    def created(self, timestamp: str) -> PodBuilder:
        self._pod.metadata.creation_timestamp = timestamp
        return self

    def terminating(self, timestamp: str = "2024-01-01T00:00:00Z") -> PodBuilder:
        self._pod.metadata.deletion_timestamp = timestamp
        return self

    # --- resources -----------------------------------------------------------------

    def req(
        self, cpu: str | None = None, memory: str | None = None, **other: str | int
    ) -> PodBuilder:
        """Add a container requesting these quantities (each call: one container).

        Extended resources whose names are not identifiers go through ``resources``."""
        return self.resources(_quantities(cpu, memory, other))

    def resources(self, requests: Mapping[str, str | int]) -> PodBuilder:
        c = Container(name=f"c{len(self._pod.spec.containers)}")
        c.resources.requests = {k: str(v) for k, v in requests.items()}
        self._pod.spec.containers.append(c)
        return self

    def init_req(
        self,
        cpu: str | None = None,
        memory: str | None = None,
        *,
        sidecar: bool = False,
        **other: str | int,
    ) -> PodBuilder:
        """Add an init container (a restartable sidecar when ``sidecar``)."""
        c = Container(name=f"init{len(self._pod.spec.init_containers)}")
        c.resources.requests = _quantities(cpu, memory, other)
        if sidecar:
            c.restart_policy = "Always"
        self._pod.spec.init_containers.append(c)
        return self

    def overhead(self, cpu: str | None = None, memory: str | None = None) -> PodBuilder:
        self._pod.spec.overhead = _quantities(cpu, memory, {})
        return self

    def host_port(self, port: int, protocol: str = "TCP", host_ip: str = "") -> PodBuilder:
        """Add a host port to the first container (created if the pod has none)."""
        if not self._pod.spec.containers:
            self._pod.spec.containers.append(Container(name="c0"))
        self._pod.spec.containers[0].ports.append(
            ContainerPort.model_validate(
                {"containerPort": port, "hostPort": port, "protocol": protocol, "hostIP": host_ip}
            )
        )
        return self

    # --- placement -----------------------------------------------------------------

    def node(self, node_name: str) -> PodBuilder:
        """``spec.nodeName``: the pod is bound (or asks for this node)."""
        self._pod.spec.node_name = node_name
        return self

    def scheduler_name(self, name: str) -> PodBuilder:
        self._pod.spec.scheduler_name = name
        return self

    def priority(self, value: int) -> PodBuilder:
        self._pod.spec.priority = value
        return self

    def priority_class(self, name: str) -> PodBuilder:
        self._pod.spec.priority_class_name = name
        return self

    def preemption_policy(self, policy: str) -> PodBuilder:
        self._pod.spec.preemption_policy = policy
        return self

    def node_selector(self, selector: Mapping[str, str] | None = None, **labels: str) -> PodBuilder:
        self._pod.spec.node_selector.update(selector or {})
        self._pod.spec.node_selector.update(labels)
        return self

    def toleration(
        self,
        key: str = "",
        value: str = "",
        effect: Literal["", "NoSchedule", "PreferNoSchedule", "NoExecute"] = "",
        operator: Literal["Equal", "Exists"] | None = None,
    ) -> PodBuilder:
        """Tolerate ``key``; ``operator`` defaults to Equal with a value, else Exists."""
        op: Literal["Equal", "Exists"] = operator or ("Equal" if value else "Exists")
        self._pod.spec.tolerations.append(
            Toleration(key=key, value=value, effect=effect, operator=op)
        )
        return self

    def _node_affinity(self) -> NodeAffinity:
        aff = self._affinity()
        if aff.node_affinity is None:
            aff.node_affinity = NodeAffinity()
        return aff.node_affinity

    def _affinity(self) -> Affinity:
        if self._pod.spec.affinity is None:
            self._pod.spec.affinity = Affinity()
        return self._pod.spec.affinity

    def node_affinity_term(self, *exprs: Expr, fields: Iterable[Expr] = ()) -> PodBuilder:
        """Add a required node selector term (terms OR, expressions within AND)."""
        na = self._node_affinity()
        if na.required_during_scheduling_ignored_during_execution is None:
            na.required_during_scheduling_ignored_during_execution = NodeSelector()
        na.required_during_scheduling_ignored_during_execution.node_selector_terms.append(
            NodeSelectorTerm(
                match_expressions=_requirements(exprs), match_fields=_requirements(fields)
            )
        )
        return self

    def node_affinity_in(self, key: str, *values: str) -> PodBuilder:
        """Shorthand: a required term ``key In values``."""
        return self.node_affinity_term((key, "In", values))

    def preferred_node_term(
        self, weight: int, *exprs: Expr, fields: Iterable[Expr] = ()
    ) -> PodBuilder:
        self._node_affinity().preferred_during_scheduling_ignored_during_execution.append(
            PreferredSchedulingTerm(
                weight=weight,
                preference=NodeSelectorTerm(
                    match_expressions=_requirements(exprs), match_fields=_requirements(fields)
                ),
            )
        )
        return self

    def _pod_affinity_term(
        self,
        anti: bool,
        topology_key: str,
        selector: Selector | None,
        weight: int | None,
        namespaces: Iterable[str],
        namespace_selector: Selector | None,
        match_label_keys: Iterable[str],
        mismatch_label_keys: Iterable[str],
    ) -> PodBuilder:
        term = PodAffinityTerm(
            label_selector=_label_selector(selector),
            namespaces=list(namespaces),
            namespace_selector=_label_selector(namespace_selector),
            topology_key=topology_key,
            match_label_keys=list(match_label_keys),
            mismatch_label_keys=list(mismatch_label_keys),
        )
        aff = self._affinity()
        if anti:
            if aff.pod_anti_affinity is None:
                aff.pod_anti_affinity = PodAffinity()
            group = aff.pod_anti_affinity
        else:
            if aff.pod_affinity is None:
                aff.pod_affinity = PodAffinity()
            group = aff.pod_affinity
        if weight is None:
            group.required_during_scheduling_ignored_during_execution.append(term)
        else:
            group.preferred_during_scheduling_ignored_during_execution.append(
                WeightedPodAffinityTerm(weight=weight, pod_affinity_term=term)
            )
        return self

    def pod_affinity(
        self,
        topology_key: str,
        selector: Selector | None,
        *,
        weight: int | None = None,
        namespaces: Iterable[str] = (),
        namespace_selector: Selector | None = None,
        match_label_keys: Iterable[str] = (),
        mismatch_label_keys: Iterable[str] = (),
    ) -> PodBuilder:
        """A pod affinity term (required, or preferred with ``weight``).

        ``selector``: match labels as a dict, or a full LabelSelector."""
        return self._pod_affinity_term(
            False, topology_key, selector, weight, namespaces, namespace_selector,
            match_label_keys, mismatch_label_keys,
        )  # fmt: skip

    def pod_anti_affinity(
        self,
        topology_key: str,
        selector: Selector | None,
        *,
        weight: int | None = None,
        namespaces: Iterable[str] = (),
        namespace_selector: Selector | None = None,
        match_label_keys: Iterable[str] = (),
        mismatch_label_keys: Iterable[str] = (),
    ) -> PodBuilder:
        """A pod anti-affinity term (required, or preferred with ``weight``)."""
        return self._pod_affinity_term(
            True, topology_key, selector, weight, namespaces, namespace_selector,
            match_label_keys, mismatch_label_keys,
        )  # fmt: skip

    def spread_constraint(
        self,
        max_skew: int,
        topology_key: str,
        selector: Selector | None,
        *,
        when: Literal["DoNotSchedule", "ScheduleAnyway"] = "DoNotSchedule",
        min_domains: int | None = None,
        node_affinity_policy: Literal["Honor", "Ignore"] | None = None,
        node_taints_policy: Literal["Honor", "Ignore"] | None = None,
        match_label_keys: Iterable[str] = (),
    ) -> PodBuilder:
        self._pod.spec.topology_spread_constraints.append(
            TopologySpreadConstraint(
                max_skew=max_skew,
                topology_key=topology_key,
                when_unsatisfiable=when,
                label_selector=_label_selector(selector),
                min_domains=min_domains,
                node_affinity_policy=node_affinity_policy,
                node_taints_policy=node_taints_policy,
                match_label_keys=list(match_label_keys),
            )
        )
        return self

    # --- lifecycle -----------------------------------------------------------------

    def scheduling_gates(self, *gates: str) -> PodBuilder:
        self._pod.spec.scheduling_gates = [PodSchedulingGate(name=g) for g in gates]
        return self

    def workload_ref(self, name: str, pod_group: str = "", replica_key: str = "") -> PodBuilder:
        self._pod.spec.workload_ref = WorkloadReference(
            name=name, pod_group=pod_group, pod_group_replica_key=replica_key
        )
        return self

    def scheduling_group(self, pod_group_name: str) -> PodBuilder:
        self._pod.spec.scheduling_group = SchedulingGroup(pod_group_name=pod_group_name)
        return self

    def volume(self, volume: Volume) -> PodBuilder:
        """Add a volume to ``spec.volumes`` (``tests/plugins/storage_builders.py``
        builds the kinds the volume plugins read)."""
        self._pod.spec.volumes = (*self._pod.spec.volumes, volume)
        return self

    def host_network(self) -> PodBuilder:
        self._pod.spec.host_network = True
        return self

    def phase(self, phase: str) -> PodBuilder:
        self._pod.status.phase = phase
        return self

    def nominated(self, node_name: str) -> PodBuilder:
        self._pod.status.nominated_node_name = node_name
        return self

    # --- finishing -----------------------------------------------------------------

    def obj(self) -> Pod:
        return self._pod.model_copy(deep=True)

    def info(self) -> PodInfo:
        return PodInfo.of(self.obj())


class NodeBuilder:
    def __init__(self) -> None:
        self._node = Node()
        self._node.metadata.name = "node"
        self._node.metadata.uid = "uid-node"

    def name(self, name: str) -> NodeBuilder:
        self._node.metadata.name = name
        self._node.metadata.uid = f"uid-{name}"
        return self

    def capacity(
        self,
        cpu: str | None = None,
        memory: str | None = None,
        pods: int | str | None = None,
        **other: str | int,
    ) -> NodeBuilder:
        """Set capacity and allocatable alike (use ``allocatable`` to differ)."""
        extra: dict[str, str | int] = dict(other)
        if pods is not None:
            extra["pods"] = pods
        quantities = _quantities(cpu, memory, extra)
        self._node.status.capacity.update(quantities)
        self._node.status.allocatable.update(quantities)
        return self

    def resource(self, name: str, quantity: str | int) -> NodeBuilder:
        """Capacity and allocatable of one (e.g. extended) resource."""
        self._node.status.capacity[name] = str(quantity)
        self._node.status.allocatable[name] = str(quantity)
        return self

    def allocatable(self, quantities: Mapping[str, str | int]) -> NodeBuilder:
        self._node.status.allocatable.update({k: str(v) for k, v in quantities.items()})
        return self

    def label(self, key: str, value: str) -> NodeBuilder:
        self._node.metadata.labels[key] = value
        return self

    def labels(self, labels: Mapping[str, str]) -> NodeBuilder:
        self._node.metadata.labels.update(labels)
        return self

    def taint(self, key: str, value: str = "", effect: TaintEffect = "NoSchedule") -> NodeBuilder:
        self._node.spec.taints.append(Taint(key=key, value=value, effect=effect))
        return self

    def unschedulable(self, value: bool = True) -> NodeBuilder:
        self._node.spec.unschedulable = value
        return self

    def obj(self) -> Node:
        return self._node.model_copy(deep=True)


def make_pod() -> PodBuilder:
    return PodBuilder()


def make_node() -> NodeBuilder:
    return NodeBuilder()


def table_of(
    nodes: Iterable[Node],
    pods_on: Mapping[str, Iterable[Pod | PodInfo]] | None = None,
    capacity: int = 64,
) -> NodeTable:
    """A NodeTable holding ``nodes`` with ``pods_on[node name]`` accounted on each.

    ``capacity`` defaults above the node count so tests also meet free slots."""
    table = NodeTable(capacity)
    for node in nodes:
        table.add_node(node)
    for node_name, pods in (pods_on or {}).items():
        for pod in pods:
            info = pod if isinstance(pod, PodInfo) else PodInfo.of(pod)
            if not table.add_pod(info, node_name):
                raise KeyError(f"pods_on names node {node_name!r}, which is not in the table")
    return table
