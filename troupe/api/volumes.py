"""What the volume plugins share: a pod's claims, claim and volume facts, listers.

Called by ``troupe.plugins.volumebinding``, ``volumezone``, ``volumerestrictions`` and
``nodevolumelimits`` (plugins do not import each other, so what two of them need is
here), and later by the embedded cluster's storage controllers. Each helper follows
the upstream function it names:

* ``claim_refs`` / ``ephemeral_owner_error``: ``component-helpers/storage/ephemeral``
  (``VolumeClaimName`` is ``<pod>-<volume>``; ``VolumeIsForPod``);
* ``claim_class`` / ``volume_class``: ``GetPersistentVolumeClaimClass`` /
  ``GetPersistentVolumeClass`` (the beta annotation wins over the field);
* ``is_fully_bound``: the binder's ``isPVCFullyBound`` (``volumeName`` set and
  ``pv.kubernetes.io/bind-completed`` present);
* ``volume_fits_labels``: ``CheckNodeAffinity`` (the PV's required terms against the
  node's labels only: ``matchFields`` are not evaluated);
* ``access_modes_fit``, ``volume_mode_mismatch``, ``is_volume_bound_to_claim``,
  ``is_delay_binding``: ``component-helpers/storage/volume``;
* ``topology_terms_match``: ``v1helper.MatchTopologySelectorTerms``.

The lister Protocols are the read side the framework hands the plugins (informer
stores, or the VolumeBinding assume cache's view); ``StorageObjects`` is a plain
in-memory implementation of all of them.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, NamedTuple, Protocol

from troupe.api.objects import Pod, Volume
from troupe.api.quantity import QuantityError, parse_nanos, to_int
from troupe.api.selectors import node_selector_matches, requirement_is_valid
from troupe.api.storage import (
    CSIDriver,
    CSINode,
    CSIStorageCapacity,
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
    TopologySelectorTerm,
    VolumeAttachment,
)

ANN_BIND_COMPLETED: Final = "pv.kubernetes.io/bind-completed"
ANN_BOUND_BY_CONTROLLER: Final = "pv.kubernetes.io/bound-by-controller"
ANN_SELECTED_NODE: Final = "volume.kubernetes.io/selected-node"
ANN_BETA_STORAGE_CLASS: Final = "volume.beta.kubernetes.io/storage-class"
NOT_SUPPORTED_PROVISIONER: Final = "kubernetes.io/no-provisioner"

BINDING_IMMEDIATE: Final = "Immediate"
BINDING_WAIT_FOR_FIRST_CONSUMER: Final = "WaitForFirstConsumer"

READ_WRITE_ONCE_POD: Final = "ReadWriteOncePod"
CLAIM_LOST: Final = "Lost"
CLAIM_BOUND: Final = "Bound"
VOLUME_AVAILABLE: Final = "Available"
FILESYSTEM: Final = "Filesystem"
STORAGE: Final = "storage"
HOSTNAME_LABEL: Final = "kubernetes.io/hostname"


class VolumeError(Exception):
    """Something upstream reports as an error status (``framework.AsStatus``), not as
    a verdict on a node: the pod backs off and the message says what is wrong."""


# --- a pod's claims ----------------------------------------------------------------------


class ClaimRef(NamedTuple):
    """A pod volume backed by a claim: the claim's name and whether a generic
    ephemeral volume names it."""

    volume: Volume
    claim_name: str
    ephemeral: bool


def claim_refs(pod: Pod) -> Iterator[ClaimRef]:
    """The pod's volumes that use a claim, in ``spec.volumes`` order: a
    ``persistentVolumeClaim`` names it, a generic ``ephemeral`` volume's claim is
    ``<pod name>-<volume name>``."""
    for volume in pod.spec.volumes:
        if volume.persistent_volume_claim is not None:
            yield ClaimRef(volume, volume.persistent_volume_claim.claim_name, False)
        elif volume.ephemeral is not None:
            yield ClaimRef(volume, f"{pod.metadata.name}-{volume.name}", True)


def has_claims(pod: Pod) -> bool:
    """Whether any volume of the pod uses a claim (cheap: no pod volumes, no work)."""
    return any(
        v.persistent_volume_claim is not None or v.ephemeral is not None for v in pod.spec.volumes
    )


def ephemeral_owner_error(pod: Pod, pvc: PersistentVolumeClaim) -> str | None:
    """Upstream ``VolumeIsForPod``: the claim of a generic ephemeral volume must be in
    the pod's namespace and controlled by the pod (a controller owner reference with
    the pod's UID); otherwise the message to report."""
    meta = pvc.metadata
    controlled = any(
        ref.controller and ref.uid == pod.metadata.uid for ref in meta.owner_references
    )
    if meta.namespace == pod.metadata.namespace and controlled:
        return None
    return (
        f"PVC {meta.namespace}/{meta.name} was not created for pod "
        f"{pod.metadata.namespace}/{pod.metadata.name} (pod is not owner)"
    )


# --- claim and volume facts -----------------------------------------------------------


def claim_class(pvc: PersistentVolumeClaim) -> str:
    """The claim's class: the beta annotation, else ``spec.storageClassName``, else ""."""
    annotated = pvc.metadata.annotations.get(ANN_BETA_STORAGE_CLASS)
    if annotated is not None:
        return annotated
    return pvc.spec.storage_class_name or ""


def volume_class(pv: PersistentVolume) -> str:
    """The volume's class: the beta annotation, else ``spec.storageClassName``."""
    annotated = pv.metadata.annotations.get(ANN_BETA_STORAGE_CLASS)
    return annotated if annotated is not None else pv.spec.storage_class_name


def is_fully_bound(pvc: PersistentVolumeClaim) -> bool:
    return bool(pvc.spec.volume_name) and ANN_BIND_COMPLETED in pvc.metadata.annotations


def _quantity(text: str, what: str, field: str) -> int:
    try:
        return parse_nanos(text)
    except QuantityError as error:
        raise QuantityError(text, error.reason, f"{what}: {field}") from None


def requested_nanos(pvc: PersistentVolumeClaim) -> int:
    """The claim's ``resources.requests[storage]`` in nano-units, exact (0 when
    absent), so two quantities compare as upstream ``Quantity.Cmp``."""
    text = pvc.spec.resources.requests.get(STORAGE)
    if text is None:
        return 0
    return _quantity(text, f"persistentvolumeclaim {pvc.key}", "spec.resources.requests[storage]")


def capacity_nanos(pv: PersistentVolume) -> int:
    """The volume's ``capacity[storage]`` in nano-units, exact (0 when absent)."""
    text = pv.spec.capacity.get(STORAGE)
    if text is None:
        return 0
    return _quantity(text, f"persistentvolume {pv.name}", "spec.capacity[storage]")


def quantity_value(text: str | None) -> int:
    """Upstream ``Quantity.Value()``: whole units, rounded up (0 for None)."""
    return 0 if text is None else to_int(text)


def volume_fits_labels(pv: PersistentVolume, labels: Mapping[str, str]) -> bool:
    """``CheckNodeAffinity``: no affinity (or no required terms) fits every node."""
    affinity = pv.spec.node_affinity
    if affinity is None or affinity.required is None:
        return True
    return node_selector_matches(affinity.required, labels, "")


def access_modes_fit(pvc: PersistentVolumeClaim, pv: PersistentVolume) -> bool:
    """``CheckAccessModes``: the volume offers every mode the claim asks for."""
    offered = set(pv.spec.access_modes)
    return all(mode in offered for mode in pvc.spec.access_modes)


def volume_mode_mismatch(pvc: PersistentVolumeClaim, pv: PersistentVolume) -> bool:
    return (pvc.spec.volume_mode or FILESYSTEM) != (pv.spec.volume_mode or FILESYSTEM)


def is_volume_bound_to_claim(pv: PersistentVolume, pvc: PersistentVolumeClaim) -> bool:
    """``IsVolumeBoundToClaim``: the volume's claimRef names the claim (and its UID,
    when the claimRef has one)."""
    ref = pv.spec.claim_ref
    if ref is None:
        return False
    if ref.name != pvc.metadata.name or ref.namespace != pvc.metadata.namespace:
        return False
    return not ref.uid or ref.uid == pvc.metadata.uid


def is_delay_binding(pvc: PersistentVolumeClaim, classes: ClassLister) -> bool:
    """``IsDelayBindingMode``: the claim's class binds WaitForFirstConsumer. No class
    or a missing class is Immediate; a class without a binding mode is an error."""
    name = claim_class(pvc)
    if not name:
        return False
    storage_class = classes.get_class(name)
    if storage_class is None:
        return False
    if storage_class.volume_binding_mode is None:
        raise VolumeError(f'VolumeBindingMode not set for StorageClass "{name}"')
    return storage_class.volume_binding_mode == BINDING_WAIT_FOR_FIRST_CONSUMER


def topology_terms_match(terms: Sequence[TopologySelectorTerm], labels: Mapping[str, str]) -> bool:
    """``MatchTopologySelectorTerms``: no terms match everything; a term matches when
    every ``key In values`` requirement does; an empty or unparsable term matches
    nothing."""
    if not terms:
        return True
    for term in terms:
        if not term.match_label_expressions:
            continue
        if all(
            requirement_is_valid(req.key, "In", tuple(req.values))
            and labels.get(req.key) in req.values
            for req in term.match_label_expressions
        ):
            return True
    return False


# --- listers ---------------------------------------------------------------------------


class ClaimLister(Protocol):
    def get_claim(self, namespace: str, name: str) -> PersistentVolumeClaim | None: ...


class VolumeLister(Protocol):
    def get_volume(self, name: str) -> PersistentVolume | None: ...


class ClassLister(Protocol):
    def get_class(self, name: str) -> StorageClass | None: ...


class CSINodeLister(Protocol):
    def get_csi_node(self, name: str) -> CSINode | None: ...


class CSIDriverLister(Protocol):
    def get_csi_driver(self, name: str) -> CSIDriver | None: ...


class CapacityLister(Protocol):
    def storage_capacities(self) -> Sequence[CSIStorageCapacity]:
        """Every CSIStorageCapacity, ordered by namespace and name (upstream lists in
        no particular order; a fixed one makes the chosen capacity reproducible)."""
        ...


class AttachmentLister(Protocol):
    def attachments_on(self, node_name: str) -> Sequence[VolumeAttachment]:
        """The VolumeAttachments whose ``spec.nodeName`` is this node."""
        ...


class ClaimUsers(Protocol):
    def claim_in_use(self, namespace: str, name: str) -> bool:
        """Whether an assigned (bound or assumed) pod mounts the claim through a
        ``persistentVolumeClaim`` volume (upstream ``StorageInfos().IsPVCUsedByPods``)."""
        ...


@dataclass(slots=True)
class StorageObjects:
    """Every storage object by its key: an in-memory implementation of the listers
    above, fed with ``put``/``remove`` (by tests, or by informer events)."""

    claims: dict[tuple[str, str], PersistentVolumeClaim]
    volumes: dict[str, PersistentVolume]
    classes: dict[str, StorageClass]
    csi_nodes: dict[str, CSINode]
    csi_drivers: dict[str, CSIDriver]
    capacities: dict[tuple[str, str], CSIStorageCapacity]
    attachments: dict[str, VolumeAttachment]

    @classmethod
    def of(cls, *objects: StorageObject) -> StorageObjects:
        store = cls({}, {}, {}, {}, {}, {}, {})
        for obj in objects:
            store.put(obj)
        return store

    def put(self, obj: StorageObject) -> None:
        meta = obj.metadata
        if isinstance(obj, PersistentVolumeClaim):
            self.claims[meta.namespace, meta.name] = obj
        elif isinstance(obj, PersistentVolume):
            self.volumes[meta.name] = obj
        elif isinstance(obj, StorageClass):
            self.classes[meta.name] = obj
        elif isinstance(obj, CSINode):
            self.csi_nodes[meta.name] = obj
        elif isinstance(obj, CSIDriver):
            self.csi_drivers[meta.name] = obj
        elif isinstance(obj, CSIStorageCapacity):
            self.capacities[meta.namespace, meta.name] = obj
        else:
            self.attachments[meta.name] = obj

    def remove(self, obj: StorageObject) -> None:
        meta = obj.metadata
        if isinstance(obj, PersistentVolumeClaim):
            self.claims.pop((meta.namespace, meta.name), None)
        elif isinstance(obj, PersistentVolume):
            self.volumes.pop(meta.name, None)
        elif isinstance(obj, StorageClass):
            self.classes.pop(meta.name, None)
        elif isinstance(obj, CSINode):
            self.csi_nodes.pop(meta.name, None)
        elif isinstance(obj, CSIDriver):
            self.csi_drivers.pop(meta.name, None)
        elif isinstance(obj, CSIStorageCapacity):
            self.capacities.pop((meta.namespace, meta.name), None)
        else:
            self.attachments.pop(meta.name, None)

    def get_claim(self, namespace: str, name: str) -> PersistentVolumeClaim | None:
        return self.claims.get((namespace, name))

    def get_volume(self, name: str) -> PersistentVolume | None:
        return self.volumes.get(name)

    def get_class(self, name: str) -> StorageClass | None:
        return self.classes.get(name)

    def get_csi_node(self, name: str) -> CSINode | None:
        return self.csi_nodes.get(name)

    def get_csi_driver(self, name: str) -> CSIDriver | None:
        return self.csi_drivers.get(name)

    def storage_capacities(self) -> Sequence[CSIStorageCapacity]:
        return [self.capacities[key] for key in sorted(self.capacities)]

    def attachments_on(self, node_name: str) -> Sequence[VolumeAttachment]:
        return [
            self.attachments[name]
            for name in sorted(self.attachments)
            if self.attachments[name].spec.node_name == node_name
        ]


StorageObject = (
    PersistentVolumeClaim
    | PersistentVolume
    | StorageClass
    | CSINode
    | CSIDriver
    | CSIStorageCapacity
    | VolumeAttachment
)
