"""Pydantic models of the three gang APIs' objects (only the fields troupe uses).

- ``CoschedulingPodGroup``: scheduler-plugins ``scheduling.x-k8s.io/v1alpha1``
  PodGroup (a CRD; its status is written by ``troupe.scheduler.gangs.status``);
- ``Workload``: Kubernetes 1.35 ``scheduling.k8s.io/v1alpha1`` Workload (KEP-4671),
  up to 8 embedded pod groups, each Basic or Gang;
- ``PodGroup``: Kubernetes 1.36 ``scheduling.k8s.io/v1alpha2`` standalone PodGroup
  (KEP-5832) with ``PodGroupScheduled`` conditions;
- ``WorkloadTemplates``: the 1.36 ``scheduling.k8s.io/v1alpha2`` Workload, whose
  ``spec.podGroupTemplates[]`` a PodGroup's ``spec.podGroupTemplateRef`` names;
- ``V1beta1PodGroup`` and ``V1beta1Workload``: the Kubernetes 1.37
  ``scheduling.k8s.io/v1beta1`` PodGroup (``spec.workloadRef``, the ``disruptionMode``
  union, ``schedulingConstraints``, ``resourceClaims``, ``PodGroupInitiallyScheduled``)
  and Workload. They are the same API as the v1alpha2 PodGroup (``GangApi.POD_GROUP``:
  pods join both with ``spec.schedulingGroup.podGroupName``) at a newer version; the
  informers watch one version (``gangapi_kinds.VERSIONS_OF``);
- ``CompositePodGroup``: the Kubernetes 1.37 ``scheduling.k8s.io/v1alpha3``
  CompositePodGroup (KEP-6012), a gang of groups: v1beta1 PodGroups and composites
  name it in ``spec.parentCompositePodGroupName``;
- ``V1alpha3Workload``: the 1.37 ``scheduling.k8s.io/v1alpha3`` Workload, the v1beta1
  one plus ``spec.compositePodGroupTemplates[]`` (KEP-6012), which a CompositePodGroup's
  ``spec.workloadRef`` names; watched instead of the v1beta1 Workload where served.

The gang informers (``troupe.kube.gang_informers``) parse raw JSON into
these, picking the model by API and version in ``troupe.api.gangapi_kinds``;
``troupe.api.gangapi_policy`` turns them into ``GangPolicy`` values or a
``GroupProblem``. Unknown fields are ignored, as everywhere in ``troupe.api``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Final, Literal

from pydantic import Field, model_validator

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
ScheduledOutcome = Literal["Scheduled", "Unschedulable", "SchedulerError", "Invalid"]


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
    """v1alpha2 ``podGroupTemplateRef``: upstream nests the names under ``workload``
    (``WorkloadPodGroupTemplateReference``); the flat form earlier troupe releases
    documented is read too."""

    workload_name: str = ""
    pod_group_template_name: str = ""

    @model_validator(mode="before")
    @classmethod
    def _flatten_workload(cls, data: Any) -> Any:
        if isinstance(data, dict) and isinstance(data.get("workload"), dict):
            return {**data["workload"], **{k: v for k, v in data.items() if k != "workload"}}
        return data


@kube_model
class TopologyConstraint(KubeModel):
    key: str = ""


@kube_model
class SchedulingConstraints(KubeModel):
    """KEP-5732: at most one constraint; all members in one domain of the node label."""

    topology: list[TopologyConstraint] = Field(default_factory=list)


@kube_model
class PodGroupSpec(KubeModel):
    pod_group_template_ref: PodGroupTemplateReference | None = None
    scheduling_policy: SchedulingPolicy = Field(default_factory=SchedulingPolicy)
    priority_class_name: str = ""
    priority: int | None = None
    disruption_mode: str | None = None  # Pod | PodGroup (KEP-5710)
    scheduling_constraints: SchedulingConstraints | None = None  # KEP-5732 (alpha, 1.36)


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


# --- PodGroup and Workload (scheduling.k8s.io/v1beta1, Kubernetes 1.37) ------------------
#
# Shaped so that KEP-6012's v1alpha3 CompositePodGroup (a gang of groups) and its
# Workload ``compositePodGroupTemplates`` can be added beside them: a PodGroup's parent
# is read here already, and the union members and constraints are their own models.

POD_GROUP_V1BETA1: Final = "scheduling.k8s.io/v1beta1"
# The 1.37 condition the scheduler owns: terminal once True (KEP-4671 "PodGroup status").
POD_GROUP_INITIALLY_SCHEDULED: Final = "PodGroupInitiallyScheduled"


@kube_model
class EmptyMember(KubeModel):
    """An intentionally empty union member (``single``, ``all``): its presence chooses."""


@kube_model
class DisruptionMode(KubeModel):
    """``{single: {}}`` (the default) | ``{all: {}}``: members disrupted one by one, or
    the group only as a whole."""

    single: EmptyMember | None = None
    all: EmptyMember | None = None


@kube_model
class PodGroupResourceClaim(KubeModel):
    """KEP-5729: a claim shared by the group (one of a claim or a template)."""

    name: str = ""
    resource_claim_name: str | None = None
    resource_claim_template_name: str | None = None


@kube_model
class WorkloadReference(KubeModel):
    workload_name: str = ""
    template_name: str = ""


@kube_model
class V1beta1GroupFields(KubeModel):
    """What a v1beta1 PodGroup and a PodGroupTemplate have in common."""

    scheduling_policy: SchedulingPolicy = Field(default_factory=SchedulingPolicy)
    scheduling_constraints: SchedulingConstraints | None = None
    resource_claims: list[PodGroupResourceClaim] = Field(default_factory=list)
    disruption_mode: DisruptionMode | None = None
    priority_class_name: str = ""
    priority: int | None = None
    preemption_policy: str | None = None


@kube_model
class V1beta1PodGroupSpec(V1beta1GroupFields):
    # KEP-6012: the v1alpha3 CompositePodGroup this group is a child of.
    parent_composite_pod_group_name: str | None = None
    workload_ref: WorkloadReference | None = None


@kube_model
class V1beta1PodGroup(KubeObject):
    api_version: str = POD_GROUP_V1BETA1
    kind: str = "PodGroup"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: V1beta1PodGroupSpec = Field(default_factory=V1beta1PodGroupSpec)
    status: PodGroupStatus = Field(default_factory=PodGroupStatus)


@kube_model
class V1beta1PodGroupTemplate(V1beta1GroupFields):
    name: str = ""

    @property
    def effective_policy(self) -> SchedulingPolicy:
        return self.scheduling_policy


@kube_model
class V1beta1WorkloadSpec(KubeModel):
    controller_ref: TypedLocalObjectReference | None = None
    pod_group_templates: list[V1beta1PodGroupTemplate] = Field(default_factory=list)


@kube_model
class V1beta1Workload(KubeObject):
    api_version: str = POD_GROUP_V1BETA1
    kind: str = "Workload"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: V1beta1WorkloadSpec = Field(default_factory=V1beta1WorkloadSpec)


# --- CompositePodGroup (scheduling.k8s.io/v1alpha3, Kubernetes 1.37, KEP-6012) ----------

COMPOSITE_POD_GROUP_V1ALPHA3: Final = "scheduling.k8s.io/v1alpha3"
COMPOSITE_POD_GROUPS_PLURAL: Final = "compositepodgroups"
# WorkloadMaxTreeDepth: a tree of (composite) pod groups is at most 4 levels deep,
# the leaf PodGroups included.
MAX_TREE_DEPTH: Final = 4
# The composite's condition and the reason for a bad layout. In 1.37 the root's status
# stays empty (the leaves report), so troupe never writes it (docs/gangs.md).
COMPOSITE_POD_GROUP_INITIALLY_SCHEDULED: Final = "CompositePodGroupInitiallyScheduled"
REASON_INVALID: Final = "Invalid"


@kube_model
class CompositeGangSchedulingPolicy(KubeModel):
    min_group_count: int = 0


@kube_model
class CompositeSchedulingPolicy(KubeModel):
    """One of ``basic`` (children scheduled independently) or ``gang`` (at least
    ``minGroupCount`` children, each at its own quorum, or none)."""

    basic: EmptyMember | None = None
    gang: CompositeGangSchedulingPolicy | None = None


@kube_model
class CompositePodGroupSpec(KubeModel):
    parent_composite_pod_group_name: str | None = None
    workload_ref: WorkloadReference | None = None
    scheduling_policy: CompositeSchedulingPolicy = Field(default_factory=CompositeSchedulingPolicy)
    # KEP-6012 per-level topology: every pod of the composite in one domain.
    scheduling_constraints: SchedulingConstraints | None = None
    priority_class_name: str = ""
    priority: int | None = None


@kube_model
class CompositePodGroup(KubeObject):
    api_version: str = COMPOSITE_POD_GROUP_V1ALPHA3
    kind: str = "CompositePodGroup"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: CompositePodGroupSpec = Field(default_factory=CompositePodGroupSpec)
    status: PodGroupStatus = Field(default_factory=PodGroupStatus)


# --- Workload (scheduling.k8s.io/v1alpha3, Kubernetes 1.37, KEP-6012) --------------------
#
# The same Workload as at v1beta1, plus ``spec.compositePodGroupTemplates[]``: a tree of
# composite templates (at most ``MAX_TREE_DEPTH`` levels, the leaf templates included),
# each with its own child composite and PodGroup templates. A CompositePodGroup's
# ``workloadRef.templateName`` names one of them and mirrors the tree: a root composite
# names a top-level template, a child composite or PodGroup a child template of its
# parent's (KEP-6012 "API overview"). Template names are unique in the whole Workload.

WORKLOAD_V1ALPHA3: Final = "scheduling.k8s.io/v1alpha3"


@kube_model
class CompositePodGroupTemplate(KubeModel):
    name: str = ""
    scheduling_policy: CompositeSchedulingPolicy = Field(default_factory=CompositeSchedulingPolicy)
    priority_class_name: str = ""
    priority: int | None = None
    pod_group_templates: list[V1beta1PodGroupTemplate] = Field(default_factory=list)
    composite_pod_group_templates: list[CompositePodGroupTemplate] = Field(default_factory=list)


@kube_model
class V1alpha3WorkloadSpec(V1beta1WorkloadSpec):
    composite_pod_group_templates: list[CompositePodGroupTemplate] = Field(default_factory=list)


@kube_model
class V1alpha3Workload(KubeObject):
    api_version: str = WORKLOAD_V1ALPHA3
    kind: str = "Workload"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: V1alpha3WorkloadSpec = Field(default_factory=V1alpha3WorkloadSpec)
