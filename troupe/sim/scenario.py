"""Scenarios for ``troupe sim``: a cluster shape and a timeline of arrivals.

A scenario is YAML (format in ``docs/scenarios.md``)::

    name: mixed
    nodes:
      - {count: 20, cpu: "8", memory: 32Gi, zones: [a, b]}
    steps:
      - at: 0
        pods: {name: web, count: 40, cpu: 500m, memory: 512Mi, runSeconds: 5}
      - at: 1
        gang: {name: train, size: 8, api: podgroup, cpu: "2", gpus: 1, runSeconds: 3}
      - at: 2
        pods: {name: huge, count: 1, cpu: "64"}
      - at: 4
        addNodes: {count: 2, cpu: "16", namePrefix: big}
      - at: 5
        composite:
          name: spark
          minGroupCount: 2
          groups:
            - {name: driver, size: 1}
            - {name: workers, size: 8, minMember: 6}
    timeoutSeconds: 60

This module holds the scenario model and ``load_scenario``, which validates it (unknown
keys rejected, with the path of the bad field), and the built-in ``DEFAULT_SCENARIO``.
``troupe.sim.manifests`` turns steps into the API objects they create;
``troupe.sim.runner`` plays the steps against the embedded cluster (``troupe sim``,
the sim integration tests).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic.alias_generators import to_camel

from troupe.api.selectors import qualified_name_errors
from troupe.sim.nodespec import RACK_LABEL

SCHEDULER_NAME = "troupe-scheduler"

GangApiName = Literal["coscheduling", "workload", "podgroup"]

# PodGroup versions a gang step may use (api: podgroup): 1.36's and 1.37's.
PodGroupVersion = Literal["v1alpha2", "v1beta1"]


class ScenarioError(ValueError):
    pass


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, alias_generator=to_camel)


class TaintSpec(_Model):
    key: str
    value: str = ""
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] = "NoSchedule"


class NodeGroup(_Model):
    count: int = Field(ge=0)
    cpu: str = "8"
    memory: str = "32Gi"
    pods: int = Field(default=110, ge=1)
    gpus: int = Field(default=0, ge=0)
    name_prefix: str = "node"
    zones: list[str] = Field(default_factory=lambda: ["zone-a", "zone-b", "zone-c"])
    racks: int = Field(default=0, ge=0)
    labels: dict[str, str] = Field(default_factory=dict)
    taints: list[TaintSpec] = Field(default_factory=list)


class PodsStep(_Model):
    name: str
    count: int = Field(default=1, ge=1)
    namespace: str = "default"
    cpu: str = "100m"
    memory: str = "128Mi"
    gpus: int = Field(default=0, ge=0)
    priority_class_name: str = ""
    run_seconds: float | None = Field(default=None, gt=0)
    scheduler_name: str = SCHEDULER_NAME
    node_selector: dict[str, str] = Field(default_factory=dict)
    labels: dict[str, str] = Field(default_factory=dict)
    tolerations: list[dict[str, Any]] = Field(default_factory=list)


class TopologySpec(_Model):
    """The node labels a gang must (``required``: one domain of it) and would rather
    (``preferred``, outermost first, inside the required one) stay in
    (``troupe.api.topology``; docs/scenarios.md "Topology")."""

    required: str = ""
    preferred: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _label_keys(self) -> TopologySpec:
        named = [("required", self.required)] if self.required else []
        named += [(f"preferred[{i}]", key) for i, key in enumerate(self.preferred)]
        if not named:
            raise ValueError("give required, preferred or both")
        errors = [e for where, key in named for e in qualified_name_errors(key, where)]
        if errors:
            raise ValueError("; ".join(errors))
        keys = [key for _, key in named]
        if len(set(keys)) != len(keys):
            raise ValueError(f"a label may be named once: {keys}")
        return self

    @property
    def keys(self) -> tuple[str, ...]:
        """The levels, outermost first."""
        return ((self.required,) if self.required else ()) + tuple(self.preferred)


class GangStep(_Model):
    """A group object of one gang API and its ``size`` member pods."""

    name: str
    size: int = Field(ge=1)
    # Absent: every member is required. Above ``size`` is allowed on purpose: the
    # gang then waits for members that never come, as upstream's would.
    min_member: int | None = Field(default=None, ge=1)
    api: GangApiName = "coscheduling"
    namespace: str = "default"
    cpu: str = "100m"
    memory: str = "128Mi"
    gpus: int = Field(default=0, ge=0)
    run_seconds: float | None = Field(default=None, gt=0)
    priority_class_name: str = ""
    min_resources: dict[str, str | int] | None = None
    # The PodGroup's version (api: podgroup only).
    api_version: PodGroupVersion = "v1alpha2"
    # Topology-aware placement (KEP-5732): a PodGroup's schedulingConstraints for
    # the required level, troupe's annotations otherwise.
    topology: TopologySpec | None = None

    @model_validator(mode="after")
    def _min_resources_needs_coscheduling(self) -> GangStep:
        if self.min_resources is not None and self.api != "coscheduling":
            raise ValueError(
                f"minResources: only the scheduler-plugins PodGroup (api: coscheduling) "
                f"has it, not api: {self.api}"
            )
        if "api_version" in self.model_fields_set and self.api != "podgroup":
            raise ValueError(f"apiVersion: only api: podgroup has versions, not api: {self.api}")
        return self

    @property
    def api_label(self) -> str:
        """How the summary names the gang's API."""
        if self.api == "podgroup" and self.api_version != "v1alpha2":
            return f"podgroup/{self.api_version}"
        return self.api

    @property
    def quorum(self) -> int:
        return self.size if self.min_member is None else self.min_member

    @property
    def topology_keys(self) -> tuple[str, ...]:
        """The node labels the gang is placed by, outermost first (none: anywhere)."""
        return self.topology.keys if self.topology is not None else ()


class CompositeStep(_Model):
    """A v1alpha3 CompositePodGroup (KEP-6012) and its child v1beta1 PodGroups, each a
    gang step of its own (``api`` and ``apiVersion`` are implied)."""

    name: str
    namespace: str = "default"
    # Absent: the basic policy (children scheduled independently).
    min_group_count: int | None = Field(default=None, ge=1)
    groups: list[GangStep] = Field(min_length=1, max_length=8)

    @model_validator(mode="after")
    def _groups_are_pod_groups(self) -> CompositeStep:
        for i, group in enumerate(self.groups):
            for name in ("api", "api_version", "namespace", "min_resources"):
                if name in group.model_fields_set:
                    raise ValueError(
                        f"groups[{i}].{to_camel(name)}: implied (a v1beta1 PodGroup in "
                        "the composite's namespace)"
                    )
        return self

    def leaves(self) -> list[GangStep]:
        """The children as the gang steps they are."""
        update = {"api": "podgroup", "api_version": "v1beta1", "namespace": self.namespace}
        return [g.model_copy(update=update) for g in self.groups]


class RemoveNodesStep(_Model):
    names: list[str] = Field(default_factory=list)
    count: int = Field(default=0, ge=0)


class Step(_Model):
    at: float = Field(default=0.0, ge=0)
    pods: PodsStep | None = None
    gang: GangStep | None = None
    composite: CompositeStep | None = None
    add_nodes: NodeGroup | None = None
    remove_nodes: RemoveNodesStep | None = None

    @model_validator(mode="after")
    def _one_action(self) -> Step:
        actions = (self.pods, self.gang, self.composite, self.add_nodes, self.remove_nodes)
        if sum(a is not None for a in actions) != 1:
            raise ValueError(
                "a step needs exactly one of pods, gang, composite, addNodes, removeNodes"
            )
        return self


class Scenario(_Model):
    name: str = "scenario"
    description: str = ""
    nodes: list[NodeGroup] = Field(default_factory=list)
    steps: list[Step] = Field(default_factory=list)
    # Stop waiting for pods this long after the last step.
    timeout_seconds: float = Field(default=60.0, gt=0)
    # Consider the run settled when nothing changed for this long after the last step.
    settle_seconds: float = Field(default=3.0, gt=0)

    @model_validator(mode="after")
    def _unique_pod_names(self) -> Scenario:
        # A gang's pods are <name>-0..size-1 and its group object is <name>: a second
        # gang, or a pods step, of the same name in the namespace would collide.
        owner: dict[tuple[str, str], str] = {}
        for i, step in enumerate(self.steps):
            named: list[tuple[str, GangStep | PodsStep | CompositeStep]] = []
            if step.gang is not None:
                named.append((f"steps[{i}].gang.name", step.gang))
            if step.pods is not None:
                named.append((f"steps[{i}].pods.name", step.pods))
            if step.composite is not None:
                named.append((f"steps[{i}].composite.name", step.composite))
                named += [
                    (f"steps[{i}].composite.groups[{j}].name", leaf)
                    for j, leaf in enumerate(step.composite.leaves())
                ]
            for where, action in named:
                key = (action.namespace, action.name)
                first = owner.setdefault(key, where)
                pods_only = where.endswith("pods.name") and first.endswith("pods.name")
                if first != where and not pods_only:
                    raise ValueError(f"{where}: {action.name!r} is already used by {first}")
        return self


def _path(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def load_scenario(source: str | Path | dict[str, Any], origin: str = "scenario") -> Scenario:
    """Parse a scenario from a file path, YAML text or a mapping."""
    if isinstance(source, Path):
        origin = str(source)
        try:
            source = source.read_text()
        except OSError as exc:
            raise ScenarioError(f"{origin}: cannot read: {exc.strerror}") from exc
    if isinstance(source, str):
        try:
            source = yaml.safe_load(source) or {}
        except yaml.YAMLError as exc:
            raise ScenarioError(f"{origin}: invalid YAML: {exc}") from exc
    if not isinstance(source, dict):
        raise ScenarioError(f"{origin}: a scenario must be a mapping")
    try:
        return Scenario.model_validate(source)
    except ValidationError as exc:
        problems = []
        for e in exc.errors():
            # Our own checks raise ValueError, which pydantic prefixes.
            message = e["msg"].removeprefix("Value error, ")
            where = _path(e["loc"])
            problems.append(f"{origin}: {where}: {message}" if where else f"{origin}: {message}")
        raise ScenarioError("\n".join(problems)) from None


_GPU_WORKER: Final = {"cpu": "1", "memory": "4Gi", "gpus": 2}

DEFAULT_SCENARIO: dict[str, Any] = {
    "name": "default",
    "description": (
        "Plain pods arriving over time on 10 CPU nodes and 4 GPU nodes (32 GPUs), one "
        "too large for any node; two small gangs that fit; 'pretrain' (a 1.37 v1beta1 "
        "PodGroup) holds 24 GPUs for 2 s while 'finetune', which needs all 32, waits "
        "holding nothing and is then placed whole; 'giant' asks for 40 GPUs and never "
        "fits; 'spark' is a CompositePodGroup of a driver and workers placed together; "
        "'allreduce' (a v1beta1 PodGroup with a topology constraint) lands in one rack."
    ),
    # Two racks per zone (troupe.dev/rack=zone-a-r0 ...), GPU nodes racked with the others.
    "nodes": [
        {"count": 10, "cpu": "8", "memory": "32Gi", "racks": 2},
        {"count": 4, "cpu": "16", "memory": "64Gi", "gpus": 8, "namePrefix": "gpu", "racks": 2},
    ],
    "steps": [
        {"at": 0, "pods": {"name": "web", "count": 40, "cpu": "500m", "memory": "512Mi"}},
        {
            "at": 0,
            "pods": {"name": "batch", "count": 30, "cpu": "1", "memory": "1Gi", "runSeconds": 1},
        },
        {"at": 0.2, "gang": {"name": "etl", "size": 6, "cpu": "1", "runSeconds": 1}},
        {"at": 0.2, "gang": {"name": "eval", "size": 4, "api": "workload", "cpu": "2"}},
        # KEP-5732: every member in one rack (spreading would usually use several).
        {
            "at": 0.2,
            "gang": {
                "name": "allreduce",
                "size": 4,
                "api": "podgroup",
                "apiVersion": "v1beta1",
                "cpu": "2",
                "topology": {"required": RACK_LABEL},
            },
        },
        {"at": 0.5, "pods": {"name": "huge", "count": 1, "cpu": "64", "memory": "8Gi"}},
        {
            "at": 0.5,
            "gang": {
                "name": "pretrain",
                "size": 12,
                "api": "podgroup",
                "apiVersion": "v1beta1",
                "runSeconds": 2,
                **_GPU_WORKER,
            },
        },
        # A role quorum (KEP-6012): a driver of one and 8 workers of which 6 must
        # start, both or nothing.
        {
            "at": 0.5,
            "composite": {
                "name": "spark",
                "minGroupCount": 2,
                "groups": [
                    {"name": "spark-driver", "size": 1, "cpu": "1"},
                    {"name": "spark-workers", "size": 8, "minMember": 6, "cpu": "1"},
                ],
            },
        },
        # Submitted while pretrain runs. Not at once: a retry triggered by pretrain's
        # first finished pod would fail and double finetune's backoff (1 s -> 2 s, as
        # upstream's podInitialBackoffSeconds); submitted here, its first backoff ends
        # after all of pretrain has finished.
        {"at": 2, "gang": {"name": "finetune", "size": 16, "api": "podgroup", **_GPU_WORKER}},
        {"at": 2.1, "gang": {"name": "giant", "size": 20, **_GPU_WORKER}},
        {"at": 3.2, "pods": {"name": "api", "count": 20, "cpu": "250m", "memory": "256Mi"}},
    ],
    "timeoutSeconds": 30,
    "settleSeconds": 2,
}
