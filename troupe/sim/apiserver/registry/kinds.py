"""Every built-in kind the embedded API server serves, and the strategy that stores it.

This is the one place to add a resource: a ``Served`` entry naming its ``ResourceType``
(group, version, kind, plural, scope, short names, subresources, field selectors, ...)
and, on the entry of its storage version, its strategy (a ``GenericStrategy`` subclass:
types, defaults, validation, update and delete rules) and the rule its names follow
(upstream's ``ValidateNameFunc`` for the kind: a DNS subdomain unless said otherwise).
Routing, discovery, OpenAPI, tables, the store and ``bootstrap.new_store`` all read this
table; nothing else names a kind. A kind with no rules of its own leaves ``strategy``
empty and gets ``GenericStrategy``.
Versions that share another's storage (``shares_storage_of``, or the same kind key)
declare no strategy: their writes go through the storage version's.

Custom resources are not here: a CustomResourceDefinition registers its kinds when it
is created (``crds.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from troupe.sim.apiserver.machinery.content import (
    NameRule,
    name_is_dns1035_label,
    name_is_dns_label,
    path_segment_name,
)
from troupe.sim.apiserver.machinery.resources import ResourceType
from troupe.sim.apiserver.registry.composites import CompositePodGroupStrategy
from troupe.sim.apiserver.registry.crds import CRDStrategy
from troupe.sim.apiserver.registry.events import EventStrategy
from troupe.sim.apiserver.registry.generic import GenericStrategy
from troupe.sim.apiserver.registry.leases import LeaseStrategy
from troupe.sim.apiserver.registry.namespaces import NamespaceStrategy
from troupe.sim.apiserver.registry.nodes import NodeStrategy
from troupe.sim.apiserver.registry.podgroups import PodGroupStrategy
from troupe.sim.apiserver.registry.pods import PodStrategy
from troupe.sim.apiserver.registry.priorityclasses import (
    DisruptionBudgetStrategy,
    PriorityClassStrategy,
)
from troupe.sim.apiserver.registry.rbac import BindingStrategy
from troupe.sim.apiserver.registry.workloads import WorkloadStrategy


@dataclass(frozen=True, slots=True)
class Served:
    """One served (group, version, resource); on its storage version, the strategy
    and the rule names must follow (None: ``GenericStrategy``, a DNS subdomain)."""

    resource: ResourceType
    strategy: type[GenericStrategy] | None = None
    names: NameRule | None = None


def _core(kind: str, plural: str, namespaced: bool = True, **kw: Any) -> ResourceType:
    return ResourceType("", "v1", kind, plural, namespaced, **kw)


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
_SCHEDULING: Final = "scheduling.k8s.io"
_RBAC: Final = "rbac.authorization.k8s.io"

# Core v1, and the two kinds listed with it before the scheduling group.
_CORE: Final[tuple[Served, ...]] = (
    Served(
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
        NamespaceStrategy,
        names=name_is_dns_label,
    ),
    Served(
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
        NodeStrategy,
    ),
    Served(
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
        PodStrategy,
    ),
    Served(
        _core(
            "Event",
            "events",
            short_names=("ev",),
            field_labels=EVENT_FIELDS,
            own_field_conversion=True,
            allow_create_on_update=True,
        ),
        EventStrategy,
    ),
    Served(_core("ConfigMap", "configmaps", short_names=("cm",))),
    # What kube-scheduler's informers list besides pods and nodes, and what volume and
    # topology-spread plugins read; stored as given, no controller acts on them.
    Served(
        _core(
            "Service",
            "services",
            short_names=("svc",),
            subresources=("status",),
            field_labels=("spec.clusterIP", "spec.type"),
            own_field_conversion=True,
            categories=("all",),
        ),
        names=name_is_dns1035_label,
    ),
    Served(
        _core(
            "ReplicationController",
            "replicationcontrollers",
            short_names=("rc",),
            subresources=("status",),
            field_labels=("status.replicas",),
            own_field_conversion=True,
            categories=("all",),
        )
    ),
    Served(
        _core(
            "PersistentVolume",
            "persistentvolumes",
            False,
            short_names=("pv",),
            subresources=("status",),
            initial_phase="Pending",
            stamps_phase_transition=True,
        )
    ),
    Served(
        _core(
            "PersistentVolumeClaim",
            "persistentvolumeclaims",
            short_names=("pvc",),
            subresources=("status",),
            initial_phase="Pending",
        )
    ),
    Served(
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
        )
    ),
    Served(
        ResourceType(
            "coordination.k8s.io", "v1", "Lease", "leases", True, allow_create_on_update=True
        ),
        LeaseStrategy,
    ),
)

_SCHEDULING_KINDS: Final[tuple[Served, ...]] = (
    Served(
        ResourceType(
            _SCHEDULING, "v1", "PriorityClass", "priorityclasses", False, short_names=("pc",)
        ),
        PriorityClassStrategy,
    ),
    Served(
        ResourceType(_SCHEDULING, "v1alpha1", "Workload", "workloads", True, versioned_key=True),
        WorkloadStrategy,
    ),
    # Kubernetes 1.37: one Workload and one PodGroup served at v1beta1 and v1alpha2 (and
    # the Workload at v1alpha3), stored in the v1beta1 shape (the first registered
    # version is the storage one) plus the Workload's compositePodGroupTemplates.
    Served(
        ResourceType(_SCHEDULING, "v1beta1", "Workload", "workloads", True, versioned_key=True),
        WorkloadStrategy,
    ),
    Served(
        ResourceType(
            _SCHEDULING,
            "v1alpha2",
            "Workload",
            "workloads",
            True,
            shares_storage_of="workloads.v1beta1.scheduling.k8s.io",
        )
    ),
    # Kubernetes 1.37: the same Workload at v1alpha3, the only version with
    # compositePodGroupTemplates (KEP-6012).
    Served(
        ResourceType(
            _SCHEDULING,
            "v1alpha3",
            "Workload",
            "workloads",
            True,
            shares_storage_of="workloads.v1beta1.scheduling.k8s.io",
        )
    ),
    Served(
        ResourceType(
            _SCHEDULING, "v1beta1", "PodGroup", "podgroups", True, subresources=("status",)
        ),
        PodGroupStrategy,
    ),
    Served(
        ResourceType(
            _SCHEDULING, "v1alpha2", "PodGroup", "podgroups", True, subresources=("status",)
        )
    ),
    # Kubernetes 1.37: the CompositePodGroup (KEP-6012) is served at v1alpha3 only.
    Served(
        ResourceType(
            _SCHEDULING,
            "v1alpha3",
            "CompositePodGroup",
            "compositepodgroups",
            True,
            subresources=("status",),
        ),
        CompositePodGroupStrategy,
    ),
)

_GROUPS: Final[tuple[Served, ...]] = (
    Served(
        ResourceType(
            "policy",
            "v1",
            "PodDisruptionBudget",
            "poddisruptionbudgets",
            True,
            short_names=("pdb",),
            subresources=("status",),
        ),
        DisruptionBudgetStrategy,
    ),
    *(
        Served(
            ResourceType(
                "apps",
                "v1",
                kind,
                plural,
                True,
                short_names=(short,),
                subresources=("status",),
                categories=("all",),
            ),
            names=names,
        )
        for kind, plural, short, names in (
            ("Deployment", "deployments", "deploy", None),
            ("ReplicaSet", "replicasets", "rs", None),
            # ValidateStatefulSetName: its pods are named <set>-<ordinal>.
            ("StatefulSet", "statefulsets", "sts", name_is_dns_label),
        )
    ),
    Served(
        ResourceType(
            "storage.k8s.io", "v1", "StorageClass", "storageclasses", False, short_names=("sc",)
        )
    ),
    Served(ResourceType("storage.k8s.io", "v1", "CSINode", "csinodes", False)),
    Served(ResourceType("storage.k8s.io", "v1", "CSIDriver", "csidrivers", False)),
    Served(
        ResourceType("storage.k8s.io", "v1", "CSIStorageCapacity", "csistoragecapacities", True)
    ),
    Served(
        ResourceType(
            "storage.k8s.io",
            "v1",
            "VolumeAttachment",
            "volumeattachments",
            False,
            subresources=("status",),
        )
    ),
    # Dynamic resource allocation, GA (resource.k8s.io/v1) since Kubernetes 1.34.
    Served(ResourceType("resource.k8s.io", "v1", "DeviceClass", "deviceclasses", False)),
    Served(
        ResourceType(
            "resource.k8s.io",
            "v1",
            "ResourceClaim",
            "resourceclaims",
            True,
            subresources=("status",),
        )
    ),
    Served(
        ResourceType(
            "resource.k8s.io", "v1", "ResourceClaimTemplate", "resourceclaimtemplates", True
        )
    ),
    Served(
        ResourceType(
            "resource.k8s.io",
            "v1",
            "ResourceSlice",
            "resourceslices",
            False,
            field_labels=("spec.nodeName", "spec.driver"),
            own_field_conversion=True,
            field_error_names_kind=True,
        )
    ),
    # RBAC objects, stored only: requests are not authorized against them, but
    # SubjectAccessReviews are evaluated against them (``auth/authorizer.py``).
    # ValidateRBACName: any path segment ("system:auth-delegator").
    Served(ResourceType(_RBAC, "v1", "Role", "roles", True), names=path_segment_name),
    Served(
        ResourceType(_RBAC, "v1", "RoleBinding", "rolebindings", True),
        BindingStrategy,
        names=path_segment_name,
    ),
    Served(
        ResourceType(_RBAC, "v1", "ClusterRole", "clusterroles", False), names=path_segment_name
    ),
    Served(
        ResourceType(_RBAC, "v1", "ClusterRoleBinding", "clusterrolebindings", False),
        BindingStrategy,
        names=path_segment_name,
    ),
    # Create-only reviews, answered without storing anything (``endpoints/reviews.py``).
    Served(
        ResourceType(
            "authentication.k8s.io", "v1", "TokenReview", "tokenreviews", False, verbs=("create",)
        )
    ),
    Served(
        ResourceType(
            "authorization.k8s.io",
            "v1",
            "SubjectAccessReview",
            "subjectaccessreviews",
            False,
            verbs=("create",),
        )
    ),
    Served(
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
        CRDStrategy,
    ),
)

BUILTIN_KINDS: Final[tuple[Served, ...]] = (*_CORE, *_SCHEDULING_KINDS, *_GROUPS)
