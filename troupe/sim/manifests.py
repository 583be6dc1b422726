"""The API objects a scenario step creates (``troupe.sim.scenario`` is the model).

``pod_manifests`` turns a pods step into pod objects, ``gang_manifests`` a gang step
into its group object and member pods, and ``composite_manifests`` a composite step
into a v1alpha3 CompositePodGroup and its v1beta1 PodGroups. ``GANG_KINDS`` and
``COMPOSITE_KIND`` are the store kinds the group objects are created as.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from troupe.api.gangs import POD_GROUP_LABEL
from troupe.api.topology import PREFERRED_ANNOTATION, REQUIRED_ANNOTATION
from troupe.sim.scenario import SCHEDULER_NAME, CompositeStep, GangStep, PodsStep

RUN_SECONDS_ANNOTATION = "troupe.dev/run-seconds"

# Store kind of each gang API's group object (docs/gangs.md "Grouping pods").
GANG_KINDS: Final[dict[str, str]] = {
    "coscheduling": "podgroups.scheduling.x-k8s.io",
    "workload": "workloads.v1alpha1.scheduling.k8s.io",
    "podgroup": "podgroups.scheduling.k8s.io",
}
# The one gang pod group a scenario's Workload declares (pods name it in workloadRef).
WORKLOAD_POD_GROUP: Final = "workers"
COMPOSITE_KIND: Final = "compositepodgroups.scheduling.k8s.io"


def _pod(
    name: str,
    namespace: str,
    labels: dict[str, str],
    step: PodsStep | GangStep,
    spec_fields: dict[str, Any],
) -> dict[str, Any]:
    requests: dict[str, str] = {"cpu": step.cpu, "memory": step.memory}
    if step.gpus:
        requests["nvidia.com/gpu"] = str(step.gpus)
    annotations = {}
    if step.run_seconds is not None:
        annotations[RUN_SECONDS_ANNOTATION] = f"{step.run_seconds:g}"
    spec: dict[str, Any] = {
        "schedulerName": SCHEDULER_NAME,
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
    spec.update(spec_fields)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": labels,
            "annotations": annotations,
        },
        "spec": spec,
    }


def pod_manifests(step: PodsStep, first_index: int = 0) -> list[dict[str, Any]]:
    """The pods a step creates, as API objects (names ``<name>-<i>``)."""
    extra: dict[str, Any] = {"schedulerName": step.scheduler_name}
    if step.node_selector:
        extra["nodeSelector"] = step.node_selector
    if step.tolerations:
        extra["tolerations"] = step.tolerations
    return [
        _pod(f"{step.name}-{i}", step.namespace, {"app": step.name, **step.labels}, step, extra)
        for i in range(first_index, first_index + step.count)
    ]


@dataclass(frozen=True, slots=True)
class GangManifests:
    """What a gang step creates: the group object (store kind ``kind``), then its pods."""

    kind: str
    group: dict[str, Any]
    pods: list[dict[str, Any]]


def gang_manifests(step: GangStep, parent: str = "") -> GangManifests:
    """The group object of ``step.api`` and the ``size`` member pods naming it
    (``parent``: the CompositePodGroup a v1beta1 PodGroup is a child of)."""
    meta: dict[str, Any] = {"name": step.name, "namespace": step.namespace}
    gang = {"minCount": step.quorum}
    labels = {"app": step.name}
    membership: dict[str, Any] = {}
    if step.api == "coscheduling":
        spec: dict[str, Any] = {"minMember": step.quorum}
        if step.min_resources:
            spec["minResources"] = {k: str(v) for k, v in step.min_resources.items()}
        group = {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup", "spec": spec}
        labels[POD_GROUP_LABEL] = step.name
    elif step.api == "workload":
        group = {
            "apiVersion": "scheduling.k8s.io/v1alpha1",
            "kind": "Workload",
            "spec": {"podGroups": [{"name": WORKLOAD_POD_GROUP, "policy": {"gang": gang}}]},
        }
        membership["workloadRef"] = {"name": step.name, "podGroup": WORKLOAD_POD_GROUP}
    else:
        spec = {"schedulingPolicy": {"gang": gang}}
        if step.priority_class_name:
            # KEP-5832: the group's own priority orders it in the queue.
            spec["priorityClassName"] = step.priority_class_name
        if parent:
            spec["parentCompositePodGroupName"] = parent
        if step.topology is not None and step.topology.required:
            spec["schedulingConstraints"] = {"topology": [{"key": step.topology.required}]}
        version = f"scheduling.k8s.io/{step.api_version}"
        group = {"apiVersion": version, "kind": "PodGroup", "spec": spec}
        membership["schedulingGroup"] = {"podGroupName": step.name}
    annotations = _topology_annotations(step)
    if annotations:
        meta["annotations"] = annotations
    pods = [
        _pod(f"{step.name}-{i}", step.namespace, dict(labels), step, membership)
        for i in range(step.size)
    ]
    return GangManifests(GANG_KINDS[step.api], {**group, "metadata": meta}, pods)


def _topology_annotations(step: GangStep) -> dict[str, str]:
    """troupe's topology annotations of the gang's group object: the preferred levels,
    and the required one where the API has no ``schedulingConstraints``."""
    if step.topology is None:
        return {}
    out = {}
    if step.topology.required and step.api != "podgroup":
        out[REQUIRED_ANNOTATION] = step.topology.required
    if step.topology.preferred:
        out[PREFERRED_ANNOTATION] = ",".join(step.topology.preferred)
    return out


def composite_manifests(step: CompositeStep) -> tuple[dict[str, Any], list[GangManifests]]:
    """The CompositePodGroup of ``step`` and, for each child, its PodGroup and pods."""
    policy: dict[str, Any] = (
        {"gang": {"minGroupCount": step.min_group_count}}
        if step.min_group_count is not None
        else {"basic": {}}
    )
    composite = {
        "apiVersion": "scheduling.k8s.io/v1alpha3",
        "kind": "CompositePodGroup",
        "metadata": {"name": step.name, "namespace": step.namespace},
        "spec": {
            # KEP-6012: required; a scenario's composite stands for its own Workload.
            "workloadRef": {"workloadName": step.name, "templateName": step.name},
            "schedulingPolicy": policy,
        },
    }
    return composite, [gang_manifests(leaf, parent=step.name) for leaf in step.leaves()]
