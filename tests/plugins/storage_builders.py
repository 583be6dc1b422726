"""Fluent builders for storage objects and pod volumes, for the volume plugin tests.

A case reads as a sentence::

    make_pvc("data").cls("local").request("10Gi").bound_to("pv-1").obj()
    make_pv("pv-1").cls("local").capacity("20Gi").on_host("node-1").available().obj()
    make_class("local").wait_for_first_consumer().no_provisioner().obj()
    with_claims(make_pod().name("p"), "data", ephemeral=("scratch",)).obj()

Like ``tests/plugins/builders.py``, ``obj()`` returns a deep copy, so one builder may
be finished several times with changes in between.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from troupe.api.objects import (
    AWSElasticBlockStoreVolumeSource,
    CSIVolumeSource,
    EphemeralVolumeSource,
    GCEPersistentDiskVolumeSource,
    ISCSIVolumeSource,
    LabelSelector,
    NodeSelector,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    OwnerReference,
    PersistentVolumeClaimVolumeSource,
    RBDVolumeSource,
    Volume,
)
from troupe.api.storage import (
    CSIDriver,
    CSIDriverSpec,
    CSINode,
    CSINodeDriver,
    CSIPersistentVolumeSource,
    CSIStorageCapacity,
    ObjectReference,
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
    TopologySelectorLabelRequirement,
    TopologySelectorTerm,
    VolumeAttachment,
    VolumeNodeAffinity,
    VolumeNodeResources,
)
from troupe.api.volumes import (
    ANN_BIND_COMPLETED,
    ANN_SELECTED_NODE,
    BINDING_IMMEDIATE,
    BINDING_WAIT_FOR_FIRST_CONSUMER,
    HOSTNAME_LABEL,
    NOT_SUPPORTED_PROVISIONER,
)

from tests.plugins.builders import PodBuilder

Expr = tuple[str, str, Sequence[str]]


def _term(*exprs: Expr) -> NodeSelectorTerm:
    return NodeSelectorTerm(
        match_expressions=[
            NodeSelectorRequirement.model_validate({"key": k, "operator": op, "values": list(v)})
            for k, op, v in exprs
        ]
    )


class ClaimBuilder:
    def __init__(self, name: str) -> None:
        self._pvc = PersistentVolumeClaim()
        self._pvc.metadata.name = name
        self._pvc.metadata.namespace = "default"
        self._pvc.metadata.uid = f"uid-{name}"
        self._pvc.metadata.resource_version = "1"

    def namespace(self, namespace: str) -> ClaimBuilder:
        self._pvc.metadata.namespace = namespace
        return self

    def cls(self, name: str | None) -> ClaimBuilder:
        self._pvc.spec.storage_class_name = name
        return self

    def request(self, quantity: str) -> ClaimBuilder:
        self._pvc.spec.resources.requests["storage"] = quantity
        return self

    def modes(self, *modes: str) -> ClaimBuilder:
        self._pvc.spec.access_modes = list(modes)
        return self

    def selector(self, labels: Mapping[str, str]) -> ClaimBuilder:
        self._pvc.spec.selector = LabelSelector(match_labels=dict(labels))
        return self

    def raw_selector(self, selector: LabelSelector) -> ClaimBuilder:
        self._pvc.spec.selector = selector
        return self

    def block(self) -> ClaimBuilder:
        self._pvc.spec.volume_mode = "Block"
        return self

    def bound_to(self, pv: str) -> ClaimBuilder:
        """Fully bound: ``volumeName`` and ``pv.kubernetes.io/bind-completed``."""
        self._pvc.spec.volume_name = pv
        self._pvc.metadata.annotations[ANN_BIND_COMPLETED] = "yes"
        self._pvc.status.phase = "Bound"
        return self

    def pre_bound_to(self, pv: str) -> ClaimBuilder:
        """``volumeName`` set by the user; the PV controller has not finished."""
        self._pvc.spec.volume_name = pv
        return self

    def lost(self) -> ClaimBuilder:
        self._pvc.status.phase = "Lost"
        return self

    def deleting(self) -> ClaimBuilder:
        self._pvc.metadata.deletion_timestamp = "2026-01-01T00:00:00Z"
        return self

    def selected_node(self, node: str) -> ClaimBuilder:
        self._pvc.metadata.annotations[ANN_SELECTED_NODE] = node
        return self

    def annotation(self, key: str, value: str) -> ClaimBuilder:
        self._pvc.metadata.annotations[key] = value
        return self

    def owned_by(self, pod_uid: str, controller: bool = True) -> ClaimBuilder:
        self._pvc.metadata.owner_references.append(
            OwnerReference(kind="Pod", name="owner", uid=pod_uid, controller=controller)
        )
        return self

    def version(self, resource_version: str) -> ClaimBuilder:
        self._pvc.metadata.resource_version = resource_version
        return self

    def obj(self) -> PersistentVolumeClaim:
        return self._pvc.model_copy(deep=True)


class VolumeBuilder:
    def __init__(self, name: str) -> None:
        self._pv = PersistentVolume()
        self._pv.metadata.name = name
        self._pv.metadata.uid = f"uid-{name}"
        self._pv.metadata.resource_version = "1"
        self._pv.status.phase = "Available"
        self._pv.spec.access_modes = ["ReadWriteOnce"]

    def cls(self, name: str) -> VolumeBuilder:
        self._pv.spec.storage_class_name = name
        return self

    def capacity(self, quantity: str) -> VolumeBuilder:
        self._pv.spec.capacity["storage"] = quantity
        return self

    def modes(self, *modes: str) -> VolumeBuilder:
        self._pv.spec.access_modes = list(modes)
        return self

    def phase(self, phase: str) -> VolumeBuilder:
        self._pv.status.phase = phase
        return self

    def available(self) -> VolumeBuilder:
        return self.phase("Available")

    def label(self, key: str, value: str) -> VolumeBuilder:
        self._pv.metadata.labels[key] = value
        return self

    def annotation(self, key: str, value: str) -> VolumeBuilder:
        self._pv.metadata.annotations[key] = value
        return self

    def block(self) -> VolumeBuilder:
        self._pv.spec.volume_mode = "Block"
        return self

    def deleting(self) -> VolumeBuilder:
        self._pv.metadata.deletion_timestamp = "2026-01-01T00:00:00Z"
        return self

    def affinity(self, *terms: Sequence[Expr]) -> VolumeBuilder:
        """Required node affinity: each argument is one term (its expressions AND)."""
        self._pv.spec.node_affinity = VolumeNodeAffinity(
            required=NodeSelector(node_selector_terms=[_term(*term) for term in terms])
        )
        return self

    def on_host(self, *hosts: str) -> VolumeBuilder:
        """A local PV: ``kubernetes.io/hostname In hosts``."""
        return self.affinity([(HOSTNAME_LABEL, "In", hosts)])

    def claim_ref(self, claim: str, namespace: str = "default", uid: str = "") -> VolumeBuilder:
        self._pv.spec.claim_ref = ObjectReference(
            kind="PersistentVolumeClaim", namespace=namespace, name=claim, uid=uid
        )
        return self

    def csi(self, driver: str, handle: str) -> VolumeBuilder:
        self._pv.spec.csi = CSIPersistentVolumeSource(driver=driver, volume_handle=handle)
        return self

    def version(self, resource_version: str) -> VolumeBuilder:
        self._pv.metadata.resource_version = resource_version
        return self

    def obj(self) -> PersistentVolume:
        return self._pv.model_copy(deep=True)


class ClassBuilder:
    def __init__(self, name: str) -> None:
        self._sc = StorageClass()
        self._sc.metadata.name = name
        self._sc.provisioner = "csi.example.com"
        self._sc.volume_binding_mode = BINDING_IMMEDIATE

    def wait_for_first_consumer(self) -> ClassBuilder:
        self._sc.volume_binding_mode = BINDING_WAIT_FOR_FIRST_CONSUMER
        return self

    def no_binding_mode(self) -> ClassBuilder:
        self._sc.volume_binding_mode = None
        return self

    def provisioner(self, name: str) -> ClassBuilder:
        self._sc.provisioner = name
        return self

    def no_provisioner(self) -> ClassBuilder:
        return self.provisioner(NOT_SUPPORTED_PROVISIONER)

    def allowed(self, *terms: Mapping[str, Sequence[str]]) -> ClassBuilder:
        """``allowedTopologies``: each argument is one term, key -> values."""
        self._sc.allowed_topologies = [
            TopologySelectorTerm(
                match_label_expressions=[
                    TopologySelectorLabelRequirement(key=k, values=list(v)) for k, v in term.items()
                ]
            )
            for term in terms
        ]
        return self

    def obj(self) -> StorageClass:
        return self._sc.model_copy(deep=True)


def make_pvc(name: str) -> ClaimBuilder:
    return ClaimBuilder(name)


def make_pv(name: str) -> VolumeBuilder:
    return VolumeBuilder(name)


def make_class(name: str) -> ClassBuilder:
    return ClassBuilder(name)


def csi_driver(name: str, storage_capacity: bool | None = None) -> CSIDriver:
    driver = CSIDriver(spec=CSIDriverSpec(storage_capacity=storage_capacity))
    driver.metadata.name = name
    return driver


def csi_node(name: str, **limits: int | None) -> CSINode:
    """A CSINode with one driver per keyword (``_`` in a name reads as ``.``)."""
    node = CSINode()
    node.metadata.name = name
    node.spec.drivers = [
        CSINodeDriver(
            name=driver.replace("_", "."),
            allocatable=None if count is None else VolumeNodeResources(count=count),
        )
        for driver, count in limits.items()
    ]
    return node


def capacity(
    name: str,
    storage_class: str,
    *,
    topology: Mapping[str, str] | None,
    capacity: str | None = None,
    maximum: str | None = None,
) -> CSIStorageCapacity:
    cap = CSIStorageCapacity(
        storage_class_name=storage_class,
        node_topology=None if topology is None else LabelSelector(match_labels=dict(topology)),
        capacity=capacity,
        maximum_volume_size=maximum,
    )
    cap.metadata.name = name
    cap.metadata.namespace = "kube-system"
    return cap


def attachment(
    name: str, node: str, pv: str | None, attacher: str = "csi.example.com"
) -> VolumeAttachment:
    va = VolumeAttachment()
    va.metadata.name = name
    va.spec.node_name = node
    va.spec.attacher = attacher
    va.spec.source.persistent_volume_name = pv
    return va


# --- pod volumes ----------------------------------------------------------------------


def with_claims(
    pod: PodBuilder, *claims: str, ephemeral: Sequence[str] = (), read_only: bool = False
) -> PodBuilder:
    """Add a ``persistentVolumeClaim`` volume per claim name, then a generic ephemeral
    volume per name in ``ephemeral`` (its claim is ``<pod>-<volume>``)."""
    for claim in claims:
        pod.volume(
            Volume(
                name=f"vol-{claim}",
                persistent_volume_claim=PersistentVolumeClaimVolumeSource(
                    claim_name=claim, read_only=read_only
                ),
            ),
        )
    for name in ephemeral:
        pod.volume(Volume(name=name, ephemeral=EphemeralVolumeSource()))
    return pod


def gce_disk(name: str, pd: str, read_only: bool = False) -> Volume:
    return Volume(
        name=name,
        gce_persistent_disk=GCEPersistentDiskVolumeSource(pd_name=pd, read_only=read_only),
    )


def ebs_disk(name: str, volume_id: str, read_only: bool = False) -> Volume:
    return Volume(
        name=name,
        aws_elastic_block_store=AWSElasticBlockStoreVolumeSource(
            volume_id=volume_id, read_only=read_only
        ),
    )


def rbd_disk(
    name: str, monitors: Sequence[str], image: str, pool: str = "rbd", read_only: bool = False
) -> Volume:
    return Volume(
        name=name,
        rbd=RBDVolumeSource(monitors=list(monitors), image=image, pool=pool, read_only=read_only),
    )


def iscsi_disk(name: str, iqn: str, read_only: bool = False) -> Volume:
    return Volume(name=name, iscsi=ISCSIVolumeSource(iqn=iqn, read_only=read_only))


def inline_csi(name: str, driver: str) -> Volume:
    return Volume(name=name, csi=CSIVolumeSource(driver=driver))
