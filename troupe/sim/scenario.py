"""Scenarios for ``troupe sim``: a cluster shape and a timeline of arrivals.

A scenario is YAML (format in ``docs/scenarios.md``)::

    name: mixed
    nodes:
      - {count: 20, cpu: "8", memory: 32Gi, zones: [a, b]}
    steps:
      - at: 0
        pods: {name: web, count: 40, cpu: 500m, memory: 512Mi, runSeconds: 5}
      - at: 2
        pods: {name: huge, count: 1, cpu: "64"}
      - at: 4
        addNodes: {count: 2, cpu: "16", namePrefix: big}
    timeoutSeconds: 60

``load_scenario`` validates it (unknown keys rejected, with the path of the bad
field); ``pod_manifests`` turns a pods step into pod objects. The runner in
``troupe.cli.sim`` plays the steps against the embedded cluster.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic.alias_generators import to_camel

SCHEDULER_NAME = "troupe-scheduler"
RUN_SECONDS_ANNOTATION = "troupe.dev/run-seconds"


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


class RemoveNodesStep(_Model):
    names: list[str] = Field(default_factory=list)
    count: int = Field(default=0, ge=0)


class Step(_Model):
    at: float = Field(default=0.0, ge=0)
    pods: PodsStep | None = None
    add_nodes: NodeGroup | None = None
    remove_nodes: RemoveNodesStep | None = None

    @model_validator(mode="after")
    def _one_action(self) -> Step:
        actions = [a for a in (self.pods, self.add_nodes, self.remove_nodes) if a is not None]
        if len(actions) != 1:
            raise ValueError("a step needs exactly one of pods, addNodes, removeNodes")
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
        problems = [f"{origin}: {_path(e['loc'])}: {e['msg']}" for e in exc.errors()]
        raise ScenarioError("\n".join(problems)) from None


def pod_manifests(step: PodsStep, first_index: int = 0) -> list[dict[str, Any]]:
    """The pods a step creates, as API objects (names ``<name>-<i>``)."""
    requests: dict[str, str] = {"cpu": step.cpu, "memory": step.memory}
    if step.gpus:
        requests["nvidia.com/gpu"] = str(step.gpus)
    annotations = {}
    if step.run_seconds is not None:
        annotations[RUN_SECONDS_ANNOTATION] = f"{step.run_seconds:g}"
    pods = []
    for i in range(first_index, first_index + step.count):
        spec: dict[str, Any] = {
            "schedulerName": step.scheduler_name,
            "containers": [
                {
                    "name": "main",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {"requests": requests, "limits": dict(requests)},
                }
            ],
        }
        if step.priority_class_name:
            spec["priorityClassName"] = step.priority_class_name
        if step.node_selector:
            spec["nodeSelector"] = step.node_selector
        if step.tolerations:
            spec["tolerations"] = step.tolerations
        pods.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": f"{step.name}-{i}",
                    "namespace": step.namespace,
                    "labels": {"app": step.name, **step.labels},
                    "annotations": annotations,
                },
                "spec": spec,
            }
        )
    return pods


DEFAULT_SCENARIO: dict[str, Any] = {
    "name": "default",
    "description": (
        "Plain pods arriving over time on 12 nodes in 3 zones; some run to completion, "
        "one pod is too large for any node, one needs a node that only arrives later."
    ),
    "nodes": [{"count": 12, "cpu": "8", "memory": "32Gi"}],
    "steps": [
        {"at": 0, "pods": {"name": "web", "count": 60, "cpu": "500m", "memory": "512Mi"}},
        {
            "at": 0.5,
            "pods": {"name": "batch", "count": 40, "cpu": "1", "memory": "1Gi", "runSeconds": 2},
        },
        {"at": 1, "pods": {"name": "huge", "count": 1, "cpu": "64", "memory": "8Gi"}},
        {"at": 1, "pods": {"name": "gpu-job", "count": 2, "cpu": "2", "gpus": 1}},
        {"at": 3, "addNodes": {"count": 2, "cpu": "16", "gpus": 4, "namePrefix": "gpu"}},
        {"at": 3.5, "pods": {"name": "api", "count": 30, "cpu": "250m", "memory": "256Mi"}},
    ],
    "timeoutSeconds": 30,
    "settleSeconds": 2,
}
