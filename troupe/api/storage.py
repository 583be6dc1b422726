"""Pydantic models of the storage objects the volume plugins read.

PersistentVolume and PersistentVolumeClaim (core/v1), StorageClass, CSINode,
CSIDriver, CSIStorageCapacity and VolumeAttachment (storage.k8s.io/v1), as
``troupe.api.objects`` models the pods and nodes: only the fields the scheduler's
volume plugins (``troupe.plugins.volumebinding``, ``volumezone``,
``volumerestrictions``, ``nodevolumelimits``) use, camelCase JSON, unknown fields
ignored, slotted dataclasses. The embedded cluster (``troupe.sim``, which may import
only ``troupe.api``) parses and serves the same models.

Field meanings follow upstream ``k8s.io/api/core/v1`` and ``k8s.io/api/storage/v1``.
Where the API server applies a default (a PV's reclaim policy, an RBD pool), the
model's default is that value; where upstream keeps a pointer whose ``nil`` means
something (``volumeBindingMode``, ``storageClassName`` of a claim, CSIDriver's
``storageCapacity``), the model keeps ``None``.
"""

from __future__ import annotations

from pydantic import Field

from troupe.api.objects import (
    KubeModel,
    KubeObject,
    LabelSelector,
    NodeSelector,
    ObjectMeta,
    QuantityStr,
    ResourceMap,
    kube_model,
)

# --- persistent volumes ------------------------------------------------------------


@kube_model
class ObjectReference(KubeModel):
    """A PV's ``spec.claimRef``."""

    api_version: str = ""
    kind: str = ""
    namespace: str = ""
    name: str = ""
    uid: str = ""
    resource_version: str = ""


@kube_model
class VolumeNodeAffinity(KubeModel):
    required: NodeSelector | None = None


@kube_model
class CSIPersistentVolumeSource(KubeModel):
    driver: str = ""
    volume_handle: str = ""
    read_only: bool = False


@kube_model
class PersistentVolumeSpec(KubeModel):
    capacity: ResourceMap = Field(default_factory=dict)
    access_modes: list[str] = Field(default_factory=list)
    claim_ref: ObjectReference | None = None
    # The API server defaults a PV's policy to Retain (a provisioned one gets its
    # class's policy, Delete unless the class says otherwise).
    persistent_volume_reclaim_policy: str = "Retain"
    storage_class_name: str = ""
    node_affinity: VolumeNodeAffinity | None = None
    # None reads as Filesystem (upstream CheckVolumeModeMismatches).
    volume_mode: str | None = None
    volume_attributes_class_name: str | None = None
    csi: CSIPersistentVolumeSource | None = None


@kube_model
class PersistentVolumeStatus(KubeModel):
    phase: str = "Pending"


@kube_model
class PersistentVolume(KubeObject):
    api_version: str = "v1"
    kind: str = "PersistentVolume"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: PersistentVolumeSpec = Field(default_factory=PersistentVolumeSpec)
    status: PersistentVolumeStatus = Field(default_factory=PersistentVolumeStatus)

    @property
    def name(self) -> str:
        return self.metadata.name


# --- persistent volume claims --------------------------------------------------------


@kube_model
class VolumeResourceRequirements(KubeModel):
    requests: ResourceMap = Field(default_factory=dict)
    limits: ResourceMap = Field(default_factory=dict)


@kube_model
class PersistentVolumeClaimSpec(KubeModel):
    access_modes: list[str] = Field(default_factory=list)
    selector: LabelSelector | None = None
    resources: VolumeResourceRequirements = Field(default_factory=VolumeResourceRequirements)
    volume_name: str = ""
    # None: no class asked for ("" is a request for no class; both read as "" in
    # upstream GetPersistentVolumeClaimClass, but the defaulting admission plugin
    # treats them differently).
    storage_class_name: str | None = None
    volume_mode: str | None = None
    volume_attributes_class_name: str | None = None


@kube_model
class PersistentVolumeClaimStatus(KubeModel):
    phase: str = "Pending"


@kube_model
class PersistentVolumeClaim(KubeObject):
    api_version: str = "v1"
    kind: str = "PersistentVolumeClaim"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: PersistentVolumeClaimSpec = Field(default_factory=PersistentVolumeClaimSpec)
    status: PersistentVolumeClaimStatus = Field(default_factory=PersistentVolumeClaimStatus)

    @property
    def key(self) -> str:
        """``namespace/name``, the assume cache's and the listers' key."""
        return f"{self.metadata.namespace}/{self.metadata.name}"


# --- storage classes -------------------------------------------------------------------


@kube_model
class TopologySelectorLabelRequirement(KubeModel):
    key: str
    values: list[str] = Field(default_factory=list)


@kube_model
class TopologySelectorTerm(KubeModel):
    match_label_expressions: list[TopologySelectorLabelRequirement] = Field(default_factory=list)


@kube_model
class StorageClass(KubeObject):
    api_version: str = "storage.k8s.io/v1"
    kind: str = "StorageClass"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    provisioner: str = ""
    parameters: dict[str, str] = Field(default_factory=dict)
    reclaim_policy: str | None = None
    # The API server defaults it to Immediate; None is an object that skipped
    # defaulting, which upstream reports as an error.
    volume_binding_mode: str | None = None
    allowed_topologies: list[TopologySelectorTerm] = Field(default_factory=list)

    @property
    def name(self) -> str:
        return self.metadata.name


# --- CSI -------------------------------------------------------------------------------


@kube_model
class VolumeNodeResources(KubeModel):
    count: int | None = None


@kube_model
class CSINodeDriver(KubeModel):
    name: str
    node_id: str = Field(default="", alias="nodeID")
    topology_keys: list[str] = Field(default_factory=list)
    allocatable: VolumeNodeResources | None = None


@kube_model
class CSINodeSpec(KubeModel):
    drivers: list[CSINodeDriver] = Field(default_factory=list)


@kube_model
class CSINode(KubeObject):
    """Named like its node."""

    api_version: str = "storage.k8s.io/v1"
    kind: str = "CSINode"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: CSINodeSpec = Field(default_factory=CSINodeSpec)

    @property
    def name(self) -> str:
        return self.metadata.name


@kube_model
class CSIDriverSpec(KubeModel):
    attach_required: bool | None = None
    storage_capacity: bool | None = None


@kube_model
class CSIDriver(KubeObject):
    api_version: str = "storage.k8s.io/v1"
    kind: str = "CSIDriver"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: CSIDriverSpec = Field(default_factory=CSIDriverSpec)

    @property
    def name(self) -> str:
        return self.metadata.name


@kube_model
class CSIStorageCapacity(KubeObject):
    """What a CSI driver can still provision for one class in one topology segment."""

    api_version: str = "storage.k8s.io/v1"
    kind: str = "CSIStorageCapacity"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    storage_class_name: str = ""
    # None: no node has access (upstream nodeHasAccess).
    node_topology: LabelSelector | None = None
    capacity: QuantityStr | None = None
    maximum_volume_size: QuantityStr | None = None


@kube_model
class VolumeAttachmentSource(KubeModel):
    persistent_volume_name: str | None = None


@kube_model
class VolumeAttachmentSpec(KubeModel):
    attacher: str = ""
    node_name: str = ""
    source: VolumeAttachmentSource = Field(default_factory=VolumeAttachmentSource)


@kube_model
class VolumeAttachmentStatus(KubeModel):
    attached: bool = False


@kube_model
class VolumeAttachment(KubeObject):
    api_version: str = "storage.k8s.io/v1"
    kind: str = "VolumeAttachment"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: VolumeAttachmentSpec = Field(default_factory=VolumeAttachmentSpec)
    status: VolumeAttachmentStatus = Field(default_factory=VolumeAttachmentStatus)
