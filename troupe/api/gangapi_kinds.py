"""Which gang API and version each troupe model stands for, and the unions of them.

``troupe.api.gangapi`` holds the models; this module the tables the gang informers
(``troupe.kube.gang_informers``, ``troupe.kube.discovery``) and the rest of troupe use to
pick a model by API and version (``MODEL_AT``, ``VERSIONS_OF``, ...), to tell which API an
object belongs to (``api_of``), and ``pod_group_templates_in`` over any template Workload.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from troupe.api.gangapi import (
    POD_GROUP_INITIALLY_SCHEDULED,
    POD_GROUP_SCHEDULED,
    POD_GROUP_V1BETA1,
    WORKLOAD_V1ALPHA3,
    CompositePodGroup,
    CompositePodGroupTemplate,
    CoschedulingPodGroup,
    PodGroup,
    PodGroupTemplate,
    V1alpha3Workload,
    V1beta1PodGroup,
    V1beta1PodGroupTemplate,
    V1beta1Workload,
    Workload,
    WorkloadTemplates,
)
from troupe.api.gangs import GangApi


def pod_group_templates_in(
    workload: WorkloadTemplates | V1beta1Workload | V1alpha3Workload,
) -> list[tuple[str, PodGroupTemplate | V1beta1PodGroupTemplate]]:
    """Every PodGroup template of ``workload`` with its path: the top-level ones, then
    (at v1alpha3) those under its composite templates, depth first."""
    top: Sequence[PodGroupTemplate | V1beta1PodGroupTemplate] = workload.spec.pod_group_templates
    found = [(f"spec.podGroupTemplates[{i}]", t) for i, t in enumerate(top)]

    def walk(path: str, templates: list[CompositePodGroupTemplate]) -> None:
        for i, composite in enumerate(templates):
            at = f"{path}[{i}]"
            found.extend(
                (f"{at}.podGroupTemplates[{j}]", t)
                for j, t in enumerate(composite.pod_group_templates)
            )
            walk(f"{at}.compositePodGroupTemplates", composite.composite_pod_group_templates)

    if isinstance(workload, V1alpha3Workload):
        walk("spec.compositePodGroupTemplates", workload.spec.composite_pod_group_templates)
    return found


NativePodGroup = PodGroup | V1beta1PodGroup
"""A standalone PodGroup at the version the cluster serves (v1alpha2 or v1beta1)."""
TemplatesObject = WorkloadTemplates | V1beta1Workload | V1alpha3Workload
"""A Workload whose ``podGroupTemplates[]`` a standalone PodGroup names (at v1alpha3
also the ``compositePodGroupTemplates[]`` a CompositePodGroup names)."""
NATIVE_POD_GROUPS: Final = (PodGroup, V1beta1PodGroup)
TEMPLATES_OBJECTS: Final = (WorkloadTemplates, V1beta1Workload, V1alpha3Workload)

GroupObject = (
    CoschedulingPodGroup
    | Workload
    | PodGroup
    | V1beta1PodGroup
    | TemplatesObject
    | CompositePodGroup
)
"""Any of the gang API objects the informers deliver: the ones that carry a group's
policy, the Workloads whose templates a PodGroup may take it from, and the
CompositePodGroups a v1beta1 PodGroup may belong to."""

MODEL_OF: Final[dict[GangApi, type[GroupObject]]] = {
    GangApi.COSCHEDULING: CoschedulingPodGroup,
    GangApi.WORKLOAD: Workload,
    GangApi.POD_GROUP: PodGroup,
}

# Each API's versions, newest first: troupe watches the first one the cluster serves
# (a real API server shows one object at every served version of its resource, so
# watching two would see every group twice).
VERSIONS_OF: Final[dict[GangApi, tuple[str, ...]]] = {
    GangApi.COSCHEDULING: (GangApi.COSCHEDULING.value,),
    GangApi.WORKLOAD: (GangApi.WORKLOAD.value,),
    GangApi.POD_GROUP: (POD_GROUP_V1BETA1, GangApi.POD_GROUP.value),
}
# The model of each API's objects at each version, and of the template Workloads
# served beside a standalone PodGroup.
MODEL_AT: Final[dict[str, type[GroupObject]]] = {
    GangApi.COSCHEDULING.value: CoschedulingPodGroup,
    GangApi.WORKLOAD.value: Workload,
    GangApi.POD_GROUP.value: PodGroup,
    POD_GROUP_V1BETA1: V1beta1PodGroup,
}
TEMPLATES_MODEL_AT: Final[dict[str, type[TemplatesObject]]] = {
    GangApi.POD_GROUP.value: WorkloadTemplates,
    POD_GROUP_V1BETA1: V1beta1Workload,
    WORKLOAD_V1ALPHA3: V1alpha3Workload,
}
# The versions of the template Workload watched beside each version of the standalone
# PodGroup, newest first: troupe watches the first the cluster serves (one version of
# the resource). At 1.37 the v1alpha3 Workload is the v1beta1 one plus its
# compositePodGroupTemplates, so it is preferred where served.
TEMPLATES_VERSIONS_OF: Final[dict[str, tuple[str, ...]]] = {
    GangApi.POD_GROUP.value: (GangApi.POD_GROUP.value,),
    POD_GROUP_V1BETA1: (WORKLOAD_V1ALPHA3, POD_GROUP_V1BETA1),
}

# Resource path segments (plural) of each API's kind.
PLURAL_OF: Final[dict[GangApi, str]] = {
    GangApi.COSCHEDULING: "podgroups",
    GangApi.WORKLOAD: "workloads",
    GangApi.POD_GROUP: "podgroups",
}


def api_of(obj: GroupObject) -> GangApi:
    """Which gang API ``obj`` belongs to (by model type; the template Workloads and the
    CompositePodGroups are delivered with the standalone PodGroup's API)."""
    if isinstance(obj, CoschedulingPodGroup):
        return GangApi.COSCHEDULING
    if isinstance(obj, Workload):
        return GangApi.WORKLOAD
    return GangApi.POD_GROUP


def scheduled_condition_type(api_version: str) -> str:
    """The condition the scheduler owns on a standalone PodGroup of ``api_version``."""
    return (
        POD_GROUP_INITIALLY_SCHEDULED if api_version == POD_GROUP_V1BETA1 else POD_GROUP_SCHEDULED
    )
