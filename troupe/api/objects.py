"""Pydantic models of the Kubernetes objects troupe reads.

Only the fields the scheduler uses are modelled; unknown fields are ignored, so a
newer API server never breaks parsing. Objects are parsed from raw JSON
(``Pod.model_validate_json``) by the informers in ``troupe.scheduler`` and by the
embedded cluster; field names follow the Kubernetes JSON (camelCase aliases).

Treat instances as immutable: an update from the API server is a new object.
Resource quantities are kept as the strings the API server sent; ``troupe.api.quantity``
turns them into integers.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Annotated, Any, ClassVar, Literal, NewType, Self, TypeVar, dataclass_transform

import pydantic.dataclasses
from pydantic import ConfigDict, Field
from pydantic.alias_generators import to_camel
from pydantic_core import SchemaSerializer, SchemaValidator

PodKey = NewType("PodKey", str)
"""``namespace/name`` of a pod."""

NodeName = NewType("NodeName", str)


# YAML and some clients send bare numbers (``cpu: 2``); the API keeps strings. The
# coercion runs inside pydantic-core (a Python validator here was a call back into
# Python for every quantity of every pod parsed). A float read from JSON is written
# without a trailing ".0" ("1e3" -> "1000", where a Python float gives "1000.0"): the
# same quantity either way.
QuantityStr = Annotated[str, Field(coerce_numbers_to_str=True)]
ResourceMap = dict[str, QuantityStr]

_KUBE_CONFIG = ConfigDict(
    extra="ignore",
    populate_by_name=True,
    alias_generator=to_camel,
    serialize_by_alias=True,
)

M = TypeVar("M", bound="KubeModel")


class KubeModel:
    """Base of every API model: camelCase JSON, unknown fields ignored.

    Models are pydantic dataclasses with ``__slots__`` (``@kube_model``), not
    ``BaseModel``s: the cache and the informers hold one Pod per pod in the cluster,
    and a BaseModel instance carries a ``__dict__`` and a set of the fields it was
    given, for the pod and for every object nested in it. The scheduler_perf pod as
    the API server returns it takes 7.3 KB as BaseModels and 2.0 KB as slotted
    dataclasses, and parses no slower (docs/benchmarks.md "Memory at scale"). The
    ``BaseModel`` methods troupe uses keep their names and meaning here.
    """

    __slots__ = ()
    __pydantic_validator__: ClassVar[SchemaValidator]
    __pydantic_serializer__: ClassVar[SchemaSerializer]
    _field_names: ClassVar[tuple[str, ...]]

    @classmethod
    def model_validate(cls, obj: object) -> Self:
        return cls.__pydantic_validator__.validate_python(obj)  # type: ignore[no-any-return]

    @classmethod
    def model_validate_json(cls, data: str | bytes) -> Self:
        return cls.__pydantic_validator__.validate_json(data)  # type: ignore[no-any-return]

    def model_dump(self, **options: Any) -> dict[str, Any]:
        """The JSON-like dict (camelCase keys); ``exclude``, ``exclude_none``, ... as
        ``BaseModel.model_dump``."""
        return self.__pydantic_serializer__.to_python(self, **options)  # type: ignore[no-any-return]

    def model_dump_json(self, **options: Any) -> str:
        return self.__pydantic_serializer__.to_json(self, **options).decode()

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        """A copy with ``update`` (field names) set, unvalidated, as ``BaseModel.model_copy``."""
        if deep:
            new = copy.deepcopy(self)
        else:
            new = object.__new__(type(self))
            self._copy_fields(new)
        for name, value in (update or {}).items():
            object.__setattr__(new, name, value)
        return new

    def _copy_fields(self, new: Self) -> None:
        """Set every field of ``new`` to this object's (replaced per class by
        ``kube_model`` with straight-line attribute copies)."""
        for name in self._field_names:
            object.__setattr__(new, name, getattr(self, name))


class KubeObject(KubeModel):
    """A top-level object (Pod, Node, a PodGroup, ...): what informers store, and can
    be weakly referenced, so a test can tell that a deleted one was freed."""

    __slots__ = ("__weakref__",)


@dataclass_transform(kw_only_default=True, field_specifiers=(Field,))
def kube_model(cls: type[M]) -> type[M]:
    """Make ``cls`` (a ``KubeModel`` subclass) a slotted pydantic dataclass."""
    model = pydantic.dataclasses.dataclass(config=_KUBE_CONFIG, slots=True, kw_only=True)(cls)
    names = tuple(model.__dataclass_fields__)
    model._field_names = names  # type: ignore[attr-defined]
    if model.__setattr__ is object.__setattr__:
        model._copy_fields = _field_copier(names)  # type: ignore[attr-defined]
    return model  # type: ignore[return-value]


def _field_copier(names: tuple[str, ...]) -> Callable[[Any, Any], None]:
    """``new.a = self.a; new.b = self.b; ...`` compiled once for a class: a shallow
    copy of a PodSpec (21 fields) is then a few slot stores, about three times faster
    than a loop of ``object.__setattr__(new, name, getattr(self, name))``."""
    body = "".join(f"    new.{name} = self.{name}\n" for name in names) or "    pass\n"
    namespace: dict[str, Any] = {}
    exec(f"def _copy_fields(self, new):\n{body}", namespace)
    copier: Callable[[Any, Any], None] = namespace["_copy_fields"]
    return copier


@kube_model
class OwnerReference(KubeModel):
    api_version: str = ""
    kind: str = ""
    name: str = ""
    uid: str = ""
    controller: bool | None = None


@kube_model
class ObjectMeta(KubeModel):
    name: str = ""
    generate_name: str = ""
    namespace: str = ""
    uid: str = ""
    resource_version: str = ""
    generation: int = 0
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    creation_timestamp: str | None = None
    deletion_timestamp: str | None = None
    owner_references: list[OwnerReference] = Field(default_factory=list)


# --- selectors -------------------------------------------------------------------

LabelSelectorOperator = Literal["In", "NotIn", "Exists", "DoesNotExist"]
NodeSelectorOperator = Literal["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]


@kube_model
class LabelSelectorRequirement(KubeModel):
    key: str
    operator: LabelSelectorOperator
    values: list[str] = Field(default_factory=list)


@kube_model
class LabelSelector(KubeModel):
    match_labels: dict[str, str] = Field(default_factory=dict)
    match_expressions: list[LabelSelectorRequirement] = Field(default_factory=list)


@kube_model
class NodeSelectorRequirement(KubeModel):
    key: str
    operator: NodeSelectorOperator
    values: list[str] = Field(default_factory=list)


@kube_model
class NodeSelectorTerm(KubeModel):
    match_expressions: list[NodeSelectorRequirement] = Field(default_factory=list)
    match_fields: list[NodeSelectorRequirement] = Field(default_factory=list)


@kube_model
class NodeSelector(KubeModel):
    node_selector_terms: list[NodeSelectorTerm] = Field(default_factory=list)


@kube_model
class PreferredSchedulingTerm(KubeModel):
    weight: int
    preference: NodeSelectorTerm


@kube_model
class NodeAffinity(KubeModel):
    required_during_scheduling_ignored_during_execution: NodeSelector | None = None
    preferred_during_scheduling_ignored_during_execution: list[PreferredSchedulingTerm] = Field(
        default_factory=list
    )


@kube_model
class PodAffinityTerm(KubeModel):
    label_selector: LabelSelector | None = None
    namespaces: list[str] = Field(default_factory=list)
    namespace_selector: LabelSelector | None = None
    topology_key: str = ""
    match_label_keys: list[str] = Field(default_factory=list)
    mismatch_label_keys: list[str] = Field(default_factory=list)


@kube_model
class WeightedPodAffinityTerm(KubeModel):
    weight: int
    pod_affinity_term: PodAffinityTerm


@kube_model
class PodAffinity(KubeModel):
    required_during_scheduling_ignored_during_execution: list[PodAffinityTerm] = Field(
        default_factory=list
    )
    preferred_during_scheduling_ignored_during_execution: list[WeightedPodAffinityTerm] = Field(
        default_factory=list
    )


@kube_model
class Affinity(KubeModel):
    node_affinity: NodeAffinity | None = None
    pod_affinity: PodAffinity | None = None
    pod_anti_affinity: PodAffinity | None = None


# --- taints ------------------------------------------------------------------------

TaintEffect = Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]


@kube_model
class Taint(KubeModel):
    key: str
    value: str = ""
    effect: TaintEffect


@kube_model
class Toleration(KubeModel):
    key: str = ""
    # Any string: "" means Equal, and an operator troupe does not know (e.g. the Gt/Lt
    # of Kubernetes 1.35's TaintTolerationComparisonOperators) tolerates nothing
    # (``troupe.api.selectors.tolerates``) instead of failing the whole pod's parse.
    operator: str = "Equal"
    value: str = ""
    effect: Literal["", "NoSchedule", "PreferNoSchedule", "NoExecute"] = ""
    toleration_seconds: int | None = None


# --- pods --------------------------------------------------------------------------


@kube_model
class ResourceRequirements(KubeModel):
    requests: ResourceMap = Field(default_factory=dict)
    limits: ResourceMap = Field(default_factory=dict)


@kube_model
class ContainerPort(KubeModel):
    container_port: int = 0
    host_port: int = 0
    host_ip: str = Field(default="", alias="hostIP")
    protocol: str = "TCP"


@kube_model
class Container(KubeModel):
    name: str = ""
    image: str = ""
    resources: ResourceRequirements = Field(default_factory=ResourceRequirements)
    ports: list[ContainerPort] = Field(default_factory=list)
    # "Always" on an init container makes it a restartable sidecar (KEP-753).
    restart_policy: str | None = None


@kube_model
class TopologySpreadConstraint(KubeModel):
    max_skew: int
    topology_key: str
    when_unsatisfiable: Literal["DoNotSchedule", "ScheduleAnyway"]
    label_selector: LabelSelector | None = None
    min_domains: int | None = None
    node_affinity_policy: Literal["Honor", "Ignore"] | None = None
    node_taints_policy: Literal["Honor", "Ignore"] | None = None
    match_label_keys: list[str] = Field(default_factory=list)


@kube_model
class PodSchedulingGate(KubeModel):
    name: str


@kube_model
class WorkloadReference(KubeModel):
    """``spec.workloadRef`` (KEP-4671, Kubernetes 1.35 ``scheduling.k8s.io/v1alpha1``)."""

    name: str = ""
    pod_group: str = ""
    pod_group_replica_key: str = ""


@kube_model
class SchedulingGroup(KubeModel):
    """``spec.schedulingGroup`` (KEP-5832, Kubernetes 1.36)."""

    pod_group_name: str = ""


# --- pod volumes ----------------------------------------------------------------------
# Only the sources the volume plugins read (troupe.plugins.volumebinding, volumezone,
# volumerestrictions, nodevolumelimits): claims, generic ephemeral volumes, the in-tree
# disks whose conflicts VolumeRestrictions checks, and inline CSI volumes. Every other
# source (configMap, secret, projected, emptyDir, ...) parses to a Volume with all of
# these None and is ignored by them.


@kube_model
class PersistentVolumeClaimVolumeSource(KubeModel):
    claim_name: str = ""
    read_only: bool = False


@kube_model
class EphemeralVolumeSource(KubeModel):
    """A generic ephemeral volume: only its presence matters to scheduling, since the
    ephemeral volume controller creates its claim, named ``<pod>-<volume>``."""


@kube_model
class GCEPersistentDiskVolumeSource(KubeModel):
    pd_name: str = ""
    read_only: bool = False


@kube_model
class AWSElasticBlockStoreVolumeSource(KubeModel):
    volume_id: str = Field(default="", alias="volumeID")
    read_only: bool = False


@kube_model
class RBDVolumeSource(KubeModel):
    monitors: list[str] = Field(default_factory=list)
    image: str = ""
    # The API server defaults the pool to "rbd".
    pool: str = "rbd"
    read_only: bool = False


@kube_model
class ISCSIVolumeSource(KubeModel):
    iqn: str = ""
    target_portal: str = ""
    lun: int = 0
    read_only: bool = False


@kube_model
class CSIVolumeSource(KubeModel):
    driver: str = ""
    read_only: bool | None = None


@kube_model
class Volume(KubeModel):
    name: str = ""
    persistent_volume_claim: PersistentVolumeClaimVolumeSource | None = None
    ephemeral: EphemeralVolumeSource | None = None
    gce_persistent_disk: GCEPersistentDiskVolumeSource | None = None
    aws_elastic_block_store: AWSElasticBlockStoreVolumeSource | None = None
    rbd: RBDVolumeSource | None = None
    iscsi: ISCSIVolumeSource | None = None
    csi: CSIVolumeSource | None = None


@kube_model
class PodSpec(KubeModel):
    node_name: str = ""
    scheduler_name: str = "default-scheduler"
    priority: int | None = None
    priority_class_name: str = ""
    preemption_policy: str | None = None
    containers: list[Container] = Field(default_factory=list)
    init_containers: list[Container] = Field(default_factory=list)
    overhead: ResourceMap = Field(default_factory=dict)
    node_selector: dict[str, str] = Field(default_factory=dict)
    affinity: Affinity | None = None
    tolerations: list[Toleration] = Field(default_factory=list)
    scheduling_gates: list[PodSchedulingGate] = Field(default_factory=list)
    topology_spread_constraints: list[TopologySpreadConstraint] = Field(default_factory=list)
    host_network: bool = False
    termination_grace_period_seconds: int | None = None
    workload_ref: WorkloadReference | None = None
    scheduling_group: SchedulingGroup | None = None
    # A tuple, so a pod without volumes shares the empty default: nothing is built
    # for it when it is parsed (docs/benchmarks.md "Pod volumes").
    volumes: tuple[Volume, ...] = ()


@kube_model
class PodCondition(KubeModel):
    type: str
    status: str
    reason: str = ""
    message: str = ""
    last_transition_time: str | None = None
    last_probe_time: str | None = None


@kube_model
class PodStatus(KubeModel):
    phase: str = "Pending"
    conditions: list[PodCondition] = Field(default_factory=list)
    nominated_node_name: str = ""
    start_time: str | None = None


@kube_model
class Pod(KubeObject):
    api_version: str = "v1"
    kind: str = "Pod"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: PodSpec = Field(default_factory=PodSpec)
    status: PodStatus = Field(default_factory=PodStatus)

    @property
    def key(self) -> PodKey:
        return PodKey(f"{self.metadata.namespace}/{self.metadata.name}")

    @property
    def is_terminal(self) -> bool:
        return self.status.phase in ("Succeeded", "Failed")


# --- nodes -------------------------------------------------------------------------


@kube_model
class NodeSpec(KubeModel):
    unschedulable: bool = False
    taints: list[Taint] = Field(default_factory=list)


@kube_model
class NodeStatus(KubeModel):
    capacity: ResourceMap = Field(default_factory=dict)
    allocatable: ResourceMap = Field(default_factory=dict)


@kube_model
class Node(KubeObject):
    api_version: str = "v1"
    kind: str = "Node"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: NodeSpec = Field(default_factory=NodeSpec)
    status: NodeStatus = Field(default_factory=NodeStatus)

    @property
    def name(self) -> NodeName:
        return NodeName(self.metadata.name)


# --- priority classes ---------------------------------------------------------------


@kube_model
class PriorityClass(KubeObject):
    api_version: str = "scheduling.k8s.io/v1"
    kind: str = "PriorityClass"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    value: int = 0
    global_default: bool = False
    preemption_policy: str | None = None


# --- namespaces ------------------------------------------------------------------------


@kube_model
class Namespace(KubeObject):
    """A namespace: only its name and labels, what a pod affinity term's
    ``namespaceSelector`` is matched against."""

    api_version: str = "v1"
    kind: str = "Namespace"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)

    @property
    def name(self) -> str:
        return self.metadata.name
