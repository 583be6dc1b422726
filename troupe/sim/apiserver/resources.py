"""The registry of resource types the embedded API server serves.

One ``ResourceType`` per (group, version, plural): its kind, list kind, scope, short
names, subresources and the field selectors it supports. The server routes requests,
builds discovery documents and validates field selectors from it; the store keys its
objects by ``ResourceType.key``. Creating a CustomResourceDefinition registers new types
here (``Registry.add``) and deleting it removes them.

Kind keys (``KindKey``) name a stored resource for in-process callers: the plural for
core v1 (``"pods"``), ``"<plural>.<group>"`` otherwise (``"podgroups.scheduling.x-k8s.io"``)
and ``"<plural>.<version>.<group>"`` where one group serves the same plural at several
versions with different schemas (the two built-in ``workloads.scheduling.k8s.io``).
events.k8s.io/v1 Events share the core ``"events"`` storage (``shares_storage_of``); the
alias ``"events.events.k8s.io"`` still resolves to their type. The v1alpha2 and v1alpha3
Workloads share the v1beta1 Workload's storage, and both PodGroup versions share
``"podgroups.scheduling.k8s.io"`` (``conversion.py`` converts); a kind key with a version
(``"workloads.v1alpha2.scheduling.k8s.io"``) names that version's view.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Final, NewType

KindKey = NewType("KindKey", str)

STANDARD_VERBS: Final = (
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
)
SUBRESOURCE_VERBS: Final = {
    "status": ("get", "patch", "update"),
    "binding": ("create",),
    "eviction": ("create",),
}
SUBRESOURCE_KINDS: Final = {
    "binding": ("", "v1", "Binding"),
    "eviction": ("policy", "v1", "Eviction"),
}
META_FIELDS: Final = ("metadata.name", "metadata.namespace")


@dataclass(frozen=True, slots=True)
class ResourceType:
    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    subresources: tuple[str, ...] = ()
    # Field selectors beyond metadata.name/namespace (the type's field label conversion).
    field_labels: tuple[str, ...] = ()
    # Core kinds with their own field label conversion answer an unknown field with
    # "field label not supported: X"; the default conversion with "X is not a known ...".
    own_field_conversion: bool = False
    # Some own conversions name the kind: "field label not supported for <gvk>: X".
    field_error_names_kind: bool = False
    categories: tuple[str, ...] = ()
    allow_create_on_update: bool = False
    allow_unconditional_update: bool = True
    # DELETE answers with the object (genericregistry.Store.ReturnDeletedObject).
    return_deleted_object: bool = False
    # Distinct storage for one plural served at several versions with different schemas.
    versioned_key: bool = False
    # Nodes keep the status they are registered with; other kinds with a status
    # subresource start with an empty one (their strategies' PrepareForCreate).
    keeps_status_on_create: bool = False
    # The status.phase a new object starts in (PersistentVolumes and claims: Pending);
    # with ``stamps_phase_transition`` also status.lastPhaseTransitionTime (PVs).
    initial_phase: str = ""
    stamps_phase_transition: bool = False
    # Built into the server (strategic merge patch allowed), not from a CRD.
    builtin: bool = True
    # Another type's kind key whose storage this one shares (a view converted by
    # conversion.py): events.k8s.io/v1 Events are core v1 Events.
    shares_storage_of: str = ""
    # The verbs discovery advertises; ``("create",)`` for the review kinds, which are
    # answered by ``ApiServer.reviews`` (``reviews.py``) and never stored.
    verbs: tuple[str, ...] = STANDARD_VERBS
    key: KindKey = field(init=False)

    def __post_init__(self) -> None:
        if self.shares_storage_of:
            key = self.shares_storage_of
        elif not self.group:
            key = self.plural
        elif self.versioned_key:
            key = f"{self.plural}.{self.version}.{self.group}"
        else:
            key = f"{self.plural}.{self.group}"
        object.__setattr__(self, "key", KindKey(key))

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def list_kind(self) -> str:
        return self.kind + "List"

    @property
    def singular(self) -> str:
        return self.kind.lower()

    @property
    def group_resource(self) -> str:
        """``schema.GroupResource.String()``: ``pods`` or ``priorityclasses.scheduling.k8s.io``."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def has_status(self) -> bool:
        return "status" in self.subresources

    def storage_key(self, namespace: str, name: str) -> str:
        """The etcd key upstream would use (it appears in storage error messages)."""
        prefix = (
            f"/registry/{self.group}/{self.plural}" if self.group else f"/registry/{self.plural}"
        )
        return f"{prefix}/{namespace}/{name}" if self.namespaced else f"{prefix}/{name}"

    def supports_field(self, label: str) -> bool:
        return label in META_FIELDS or label in self.field_labels

    def field_error(self, label: str) -> str:
        if self.field_error_names_kind:
            return f"field label not supported for {self.api_version}, Kind={self.kind}: {label}"
        if self.own_field_conversion:
            return f"field label not supported: {label}"
        return (
            f'"{label}" is not a known field selector: only "metadata.name", "metadata.namespace"'
        )


def _core(kind: str, plural: str, namespaced: bool = True, **kw: object) -> ResourceType:
    return ResourceType("", "v1", kind, plural, namespaced, **kw)  # type: ignore[arg-type]


POD_FIELDS: Final = (
    "spec.nodeName",
    "spec.schedulerName",
    "spec.restartPolicy",
    "spec.serviceAccountName",
    "spec.hostNetwork",
    "status.phase",
    "status.podIP",
    "status.nominatedNodeName",
)
# The selectable fields of events.k8s.io/v1 Events (translated to EVENT_FIELDS).
EVENTS_V1_FIELDS: Final = (
    "regarding.kind",
    "regarding.namespace",
    "regarding.name",
    "regarding.uid",
    "regarding.apiVersion",
    "regarding.resourceVersion",
    "regarding.fieldPath",
    "reason",
    "reportingController",
    "source",
    "type",
)
EVENT_FIELDS: Final = (
    "involvedObject.kind",
    "involvedObject.namespace",
    "involvedObject.name",
    "involvedObject.uid",
    "involvedObject.apiVersion",
    "involvedObject.resourceVersion",
    "involvedObject.fieldPath",
    "reason",
    "reportingComponent",
    "source",
    "type",
)

BUILTIN_TYPES: Final[tuple[ResourceType, ...]] = (
    _core(
        "Namespace",
        "namespaces",
        False,
        short_names=("ns",),
        subresources=("status",),
        field_labels=("status.phase",),
        own_field_conversion=True,
        return_deleted_object=True,
    ),
    _core(
        "Node",
        "nodes",
        False,
        keeps_status_on_create=True,
        short_names=("no",),
        subresources=("status",),
        field_labels=("spec.unschedulable",),
        own_field_conversion=True,
    ),
    _core(
        "Pod",
        "pods",
        short_names=("po",),
        subresources=("binding", "eviction", "status"),
        field_labels=POD_FIELDS,
        own_field_conversion=True,
        categories=("all",),
        return_deleted_object=True,
    ),
    _core(
        "Event",
        "events",
        short_names=("ev",),
        field_labels=EVENT_FIELDS,
        own_field_conversion=True,
        allow_create_on_update=True,
    ),
    _core("ConfigMap", "configmaps", short_names=("cm",)),
    # What kube-scheduler's informers list besides pods and nodes, and what volume and
    # topology-spread plugins read; stored as given, no controller acts on them.
    _core(
        "Service",
        "services",
        short_names=("svc",),
        subresources=("status",),
        field_labels=("spec.clusterIP", "spec.type"),
        own_field_conversion=True,
        categories=("all",),
    ),
    _core(
        "ReplicationController",
        "replicationcontrollers",
        short_names=("rc",),
        subresources=("status",),
        field_labels=("status.replicas",),
        own_field_conversion=True,
        categories=("all",),
    ),
    _core(
        "PersistentVolume",
        "persistentvolumes",
        False,
        short_names=("pv",),
        subresources=("status",),
        initial_phase="Pending",
        stamps_phase_transition=True,
    ),
    _core(
        "PersistentVolumeClaim",
        "persistentvolumeclaims",
        short_names=("pvc",),
        subresources=("status",),
        initial_phase="Pending",
    ),
    ResourceType(
        "events.k8s.io",
        "v1",
        "Event",
        "events",
        True,
        short_names=("ev",),
        field_labels=EVENTS_V1_FIELDS,
        own_field_conversion=True,
        allow_create_on_update=True,
        shares_storage_of="events",
    ),
    ResourceType("coordination.k8s.io", "v1", "Lease", "leases", True, allow_create_on_update=True),
    ResourceType(
        "scheduling.k8s.io", "v1", "PriorityClass", "priorityclasses", False, short_names=("pc",)
    ),
    ResourceType(
        "scheduling.k8s.io", "v1alpha1", "Workload", "workloads", True, versioned_key=True
    ),
    # Kubernetes 1.37: one Workload and one PodGroup served at v1beta1 and v1alpha2 (and
    # the Workload at v1alpha3), stored in the v1beta1 shape (the first registered
    # version is the storage one) plus the Workload's compositePodGroupTemplates.
    ResourceType("scheduling.k8s.io", "v1beta1", "Workload", "workloads", True, versioned_key=True),
    ResourceType(
        "scheduling.k8s.io",
        "v1alpha2",
        "Workload",
        "workloads",
        True,
        shares_storage_of="workloads.v1beta1.scheduling.k8s.io",
    ),
    # Kubernetes 1.37: the same Workload at v1alpha3, the only version with
    # compositePodGroupTemplates (KEP-6012).
    ResourceType(
        "scheduling.k8s.io",
        "v1alpha3",
        "Workload",
        "workloads",
        True,
        shares_storage_of="workloads.v1beta1.scheduling.k8s.io",
    ),
    ResourceType(
        "scheduling.k8s.io", "v1beta1", "PodGroup", "podgroups", True, subresources=("status",)
    ),
    ResourceType(
        "scheduling.k8s.io", "v1alpha2", "PodGroup", "podgroups", True, subresources=("status",)
    ),
    # Kubernetes 1.37: the CompositePodGroup (KEP-6012) is served at v1alpha3 only.
    ResourceType(
        "scheduling.k8s.io",
        "v1alpha3",
        "CompositePodGroup",
        "compositepodgroups",
        True,
        subresources=("status",),
    ),
    ResourceType(
        "policy",
        "v1",
        "PodDisruptionBudget",
        "poddisruptionbudgets",
        True,
        short_names=("pdb",),
        subresources=("status",),
    ),
    *(
        ResourceType(
            "apps",
            "v1",
            kind,
            plural,
            True,
            short_names=(short,),
            subresources=("status",),
            categories=("all",),
        )
        for kind, plural, short in (
            ("Deployment", "deployments", "deploy"),
            ("ReplicaSet", "replicasets", "rs"),
            ("StatefulSet", "statefulsets", "sts"),
        )
    ),
    ResourceType(
        "storage.k8s.io", "v1", "StorageClass", "storageclasses", False, short_names=("sc",)
    ),
    ResourceType("storage.k8s.io", "v1", "CSINode", "csinodes", False),
    ResourceType("storage.k8s.io", "v1", "CSIDriver", "csidrivers", False),
    ResourceType("storage.k8s.io", "v1", "CSIStorageCapacity", "csistoragecapacities", True),
    ResourceType(
        "storage.k8s.io",
        "v1",
        "VolumeAttachment",
        "volumeattachments",
        False,
        subresources=("status",),
    ),
    # Dynamic resource allocation, GA (resource.k8s.io/v1) since Kubernetes 1.34.
    ResourceType("resource.k8s.io", "v1", "DeviceClass", "deviceclasses", False),
    ResourceType(
        "resource.k8s.io", "v1", "ResourceClaim", "resourceclaims", True, subresources=("status",)
    ),
    ResourceType("resource.k8s.io", "v1", "ResourceClaimTemplate", "resourceclaimtemplates", True),
    ResourceType(
        "resource.k8s.io",
        "v1",
        "ResourceSlice",
        "resourceslices",
        False,
        field_labels=("spec.nodeName", "spec.driver"),
        own_field_conversion=True,
        field_error_names_kind=True,
    ),
    # RBAC objects, stored only: requests are not authorized against them, but
    # SubjectAccessReviews are evaluated against them (``rbac.py``).
    ResourceType("rbac.authorization.k8s.io", "v1", "Role", "roles", True),
    ResourceType("rbac.authorization.k8s.io", "v1", "RoleBinding", "rolebindings", True),
    ResourceType("rbac.authorization.k8s.io", "v1", "ClusterRole", "clusterroles", False),
    ResourceType(
        "rbac.authorization.k8s.io", "v1", "ClusterRoleBinding", "clusterrolebindings", False
    ),
    # Create-only reviews, answered without storing anything (``reviews.py``).
    ResourceType(
        "authentication.k8s.io", "v1", "TokenReview", "tokenreviews", False, verbs=("create",)
    ),
    ResourceType(
        "authorization.k8s.io",
        "v1",
        "SubjectAccessReview",
        "subjectaccessreviews",
        False,
        verbs=("create",),
    ),
    ResourceType(
        "apiextensions.k8s.io",
        "v1",
        "CustomResourceDefinition",
        "customresourcedefinitions",
        False,
        short_names=("crd", "crds"),
        subresources=("status",),
        categories=("api-extensions",),
        return_deleted_object=True,
    ),
)


class Registry:
    """Served types by (group, version, plural) and by kind key; CRDs come and go."""

    def __init__(self, types: Iterable[ResourceType] = BUILTIN_TYPES) -> None:
        self._by_gvr: dict[tuple[str, str, str], ResourceType] = {}
        self._by_key: dict[str, list[ResourceType]] = {}
        # "<plural>.<group>" of types that share another's storage key.
        self._aliases: dict[str, ResourceType] = {}
        for rt in types:
            self.add(rt)

    def add(self, rt: ResourceType) -> None:
        self._by_gvr[(rt.group, rt.version, rt.plural)] = rt
        self._by_key.setdefault(rt.key, []).append(rt)
        if rt.shares_storage_of:
            # The first view keeps the alias (``workloads.scheduling.k8s.io``: v1alpha2).
            self._aliases.setdefault(f"{rt.plural}.{rt.group}", rt)

    def remove(self, rt: ResourceType) -> None:
        self._by_gvr.pop((rt.group, rt.version, rt.plural), None)
        served = self._by_key.get(rt.key, [])
        if rt in served:
            served.remove(rt)
        if not served:
            self._by_key.pop(rt.key, None)

    def lookup(self, group: str, version: str, plural: str) -> ResourceType | None:
        return self._by_gvr.get((group, version, plural))

    def resolve(self, name: str) -> ResourceType:
        """A kind key or alias (``pods``, ``podgroups.scheduling.x-k8s.io``,
        ``workloads.v1alpha2.scheduling.k8s.io``) to its storage version's type."""
        served = self._by_key.get(name)
        if served:
            return served[0]
        alias = self._aliases.get(name)
        if alias is not None:
            return alias
        plural, _, rest = name.partition(".")
        version, _, group = rest.partition(".")
        rt = self._by_gvr.get((group, version, plural))
        if rt is None:
            raise KeyError(f"no served resource type {name!r}")
        return rt

    def versions_of(self, key: KindKey) -> list[ResourceType]:
        return list(self._by_key.get(key, []))

    def __iter__(self) -> Iterator[ResourceType]:
        return iter(list(self._by_gvr.values()))

    def has_key(self, key: str) -> bool:
        return key in self._by_key
