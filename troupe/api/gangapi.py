"""Pydantic models of the three gang APIs' objects (only the fields troupe uses).

- ``CoschedulingPodGroup``: scheduler-plugins ``scheduling.x-k8s.io/v1alpha1``
  PodGroup (a CRD; its status is written by ``troupe.scheduler.gangs.status``);
- ``Workload``: Kubernetes 1.35 ``scheduling.k8s.io/v1alpha1`` Workload (KEP-4671),
  up to 8 embedded pod groups, each Basic or Gang;
- ``PodGroup``: Kubernetes 1.36 ``scheduling.k8s.io/v1alpha2`` standalone PodGroup
  (KEP-5832) with ``PodGroupScheduled`` conditions;
- ``WorkloadTemplates``: the 1.36 ``scheduling.k8s.io/v1alpha2`` Workload, whose
  ``spec.podGroupTemplates[]`` a PodGroup's ``spec.podGroupTemplateRef`` names.

The gang informers (``troupe.kube.gang_informers``) parse raw JSON into
these; ``troupe.api.gangapi_policy`` turns them into ``GangPolicy`` values or a
``GroupProblem``. Unknown fields are ignored, as everywhere in ``troupe.api``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Final, Literal

from pydantic import Field

from troupe.api.gangs import GangApi
from troupe.api.objects import KubeModel, KubeObject, ObjectMeta, ResourceMap, kube_model

# WorkloadMaxPodGroups (KEP-4671 "API").
WORKLOAD_MAX_POD_GROUPS: Final = 8

# scheduler-plugins PodGroupPhase values.
PHASE_PENDING: Final = "Pending"
PHASE_SCHEDULING: Final = "Scheduling"
PHASE_RUNNING: Final = "Running"
PHASE_UNKNOWN: Final = "Unknown"
PHASE_FINISHED: Final = "Finished"
PHASE_FAILED: Final = "Failed"

# The v1alpha2 PodGroup condition the scheduler owns (KEP-5832 "PodGroup Status
# Lifecycle") and its reasons.
POD_GROUP_SCHEDULED: Final = "PodGroupScheduled"
ScheduledOutcome = Literal["Scheduled", "Unschedulable", "SchedulerError"]


def parse_time(value: str | None) -> float:
    """A ``metav1.Time`` (RFC 3339) as epoch seconds; 0.0 when absent or unreadable
    (such an object sorts first, as an unset creationTimestamp does upstream)."""
    if not value:
        return 0.0
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0


# --- scheduler-plugins PodGroup (scheduling.x-k8s.io/v1alpha1) ------------------------


@kube_model
class CoschedulingPodGroupSpec(KubeModel):
    # Absent reads as 0, which the policy check reports (the CRD requires >= 1).
    min_member: int = 0
    min_resources: ResourceMap = Field(default_factory=dict)
    schedule_timeout_seconds: int | None = None


@kube_model
class CoschedulingPodGroupStatus(KubeModel):
    phase: str = ""
    occupied_by: str = ""
    running: int = 0
    succeeded: int = 0
    failed: int = 0
    schedule_start_time: str | None = None


@kube_model
class CoschedulingPodGroup(KubeObject):
    api_version: str = GangApi.COSCHEDULING.value
    kind: str = "PodGroup"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: CoschedulingPodGroupSpec = Field(default_factory=CoschedulingPodGroupSpec)
    status: CoschedulingPodGroupStatus = Field(default_factory=CoschedulingPodGroupStatus)


# --- the Basic | Gang policy union shared by both native APIs ---------------------------


@kube_model
class BasicSchedulingPolicy(KubeModel):
    """Empty on purpose: its presence selects the Basic policy (KEP-4671)."""


@kube_model
class GangSchedulingPolicy(KubeModel):
    min_count: int = 0


@kube_model
class SchedulingPolicy(KubeModel):
    """``PodGroupPolicy`` (v1alpha1) / ``schedulingPolicy`` (v1alpha2): one of
    ``basic`` or ``gang``."""

    basic: BasicSchedulingPolicy | None = None
    gang: GangSchedulingPolicy | None = None


# --- Workload (scheduling.k8s.io/v1alpha1) ---------------------------------------------


@kube_model
class TypedLocalObjectReference(KubeModel):
    api_group: str = ""
    kind: str = ""
    name: str = ""


@kube_model
class WorkloadPodGroup(KubeModel):
    name: str = ""
    policy: SchedulingPolicy = Field(default_factory=SchedulingPolicy)


@kube_model
class WorkloadSpec(KubeModel):
    controller_ref: TypedLocalObjectReference | None = None
    pod_groups: list[WorkloadPodGroup] = Field(default_factory=list)


@kube_model
class Workload(KubeObject):
    api_version: str = GangApi.WORKLOAD.value
    kind: str = "Workload"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: WorkloadSpec = Field(default_factory=WorkloadSpec)


# --- PodGroup (scheduling.k8s.io/v1alpha2) -----------------------------------------------


@kube_model
class PodGroupTemplateReference(KubeModel):
    workload_name: str = ""
    pod_group_template_name: str = ""


@kube_model
class PodGroupSpec(KubeModel):
    pod_group_template_ref: PodGroupTemplateReference | None = None
    scheduling_policy: SchedulingPolicy = Field(default_factory=SchedulingPolicy)
    priority_class_name: str = ""
    priority: int | None = None
    disruption_mode: str | None = None  # Pod | PodGroup (KEP-5710)


@kube_model
class Condition(KubeModel):
    """``metav1.Condition``."""

    type: str
    status: str  # True | False | Unknown
    reason: str = ""
    message: str = ""
    last_transition_time: str = ""
    observed_generation: int | None = None


@kube_model
class PodGroupStatus(KubeModel):
    conditions: list[Condition] = Field(default_factory=list)


@kube_model
class PodGroup(KubeObject):
    api_version: str = GangApi.POD_GROUP.value
    kind: str = "PodGroup"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: PodGroupSpec = Field(default_factory=PodGroupSpec)
    status: PodGroupStatus = Field(default_factory=PodGroupStatus)


# --- Workload (scheduling.k8s.io/v1alpha2): templates for standalone PodGroups ------------


@kube_model
class PodGroupTemplate(KubeModel):
    name: str = ""
    scheduling_policy: SchedulingPolicy | None = None
    # KEP-5832 keeps KEP-4671's PodGroup shape for templates: its ``policy`` field
    # is read too.
    policy: SchedulingPolicy | None = None

    @property
    def effective_policy(self) -> SchedulingPolicy:
        return self.scheduling_policy or self.policy or SchedulingPolicy()


@kube_model
class WorkloadTemplatesSpec(KubeModel):
    pod_group_templates: list[PodGroupTemplate] = Field(default_factory=list)


@kube_model
class WorkloadTemplates(KubeObject):
    api_version: str = GangApi.POD_GROUP.value
    kind: str = "Workload"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: WorkloadTemplatesSpec = Field(default_factory=WorkloadTemplatesSpec)


WORKLOAD_TEMPLATES_PLURAL: Final = "workloads"

GroupObject = CoschedulingPodGroup | Workload | PodGroup | WorkloadTemplates
"""Any of the gang API objects the informers deliver: the three that carry a group's
policy, and the v1alpha2 Workload whose templates a PodGroup may take it from."""

MODEL_OF: Final[dict[GangApi, type[GroupObject]]] = {
    GangApi.COSCHEDULING: CoschedulingPodGroup,
    GangApi.WORKLOAD: Workload,
    GangApi.POD_GROUP: PodGroup,
}

# Resource path segments (plural) of each API's kind.
PLURAL_OF: Final[dict[GangApi, str]] = {
    GangApi.COSCHEDULING: "podgroups",
    GangApi.WORKLOAD: "workloads",
    GangApi.POD_GROUP: "podgroups",
}


def api_of(obj: GroupObject) -> GangApi:
    """Which gang API ``obj`` belongs to (by model type; the v1alpha2 Workload is
    served beside the v1alpha2 PodGroup)."""
    if isinstance(obj, CoschedulingPodGroup):
        return GangApi.COSCHEDULING
    if isinstance(obj, Workload):
        return GangApi.WORKLOAD
    return GangApi.POD_GROUP
