"""CSI attach limits on one node, as upstream ``CSILimits.Filter``.

A pod's attachable volumes are its ``persistentVolumeClaim`` and generic ephemeral
volumes, each known by ``<driver>/<volumeHandle>``: a bound claim's CSI PV gives
both; an unbound claim (or one whose PV is missing) counts under its class's
provisioner with a handle made from a per-scheduler random prefix and the claim's
key, so it is never confused with a real volume; a claim without a class, or whose
class is missing, or whose PV is not CSI, is not counted. The node's attached
volumes are those of its pods (each unique name once) plus its VolumeAttachments not
already among them (a volume being detached still takes a slot); the new pod's
volumes already attached through another pod do not count again. Where
``attached + new`` of some driver exceeds the node's limit for it (the CSINode's
``drivers[].allocatable.count``, or a legacy ``attachable-volumes-*`` allocatable),
the node is Unschedulable: ``node(s) exceed max volume count``.

As upstream, a new pod's volume that is only attached through a VolumeAttachment is
counted twice, and claim names are compared within the pod's namespace. Not done:
in-tree volumes (GCE PD, EBS, Azure Disk, Cinder) are not translated to their CSI
drivers, so they are not counted (upstream counts them once migrated).
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final

from troupe.api.objects import Node, Pod
from troupe.api.quantity import QuantityError, to_int
from troupe.api.storage import CSINode, PersistentVolumeClaim, VolumeAttachment
from troupe.api.volumes import (
    ClaimLister,
    ClassLister,
    VolumeError,
    VolumeLister,
    claim_class,
    claim_refs,
    ephemeral_owner_error,
)

ERR_MAX_VOLUME_COUNT: Final = "node(s) exceed max volume count"
ATTACHABLE_PREFIX: Final = "attachable-volumes-"
CSI_ATTACH_LIMIT_PREFIX: Final = "attachable-volumes-csi-"
_RESOURCE_NAME_LIMIT: Final = 63

VolumeKeys = dict[str, str]
"""Unique volume name (``driver/handle``) -> the limit key of its driver."""


class ClaimNotFound(Exception):
    """A claim the pod needs does not exist: the pod is unresolvable until it does."""


def attach_limit_key(driver: str) -> str:
    """Upstream ``GetCSIAttachLimitKey``: ``attachable-volumes-csi-<driver>``, with a
    long driver name cut and hashed to stay a valid resource name."""
    if len(CSI_ATTACH_LIMIT_PREFIX) + len(driver) >= _RESOURCE_NAME_LIMIT:
        digest = hashlib.sha1(driver.encode(), usedforsecurity=False).hexdigest()[:16]
        return CSI_ATTACH_LIMIT_PREFIX + driver[:23] + digest
    return CSI_ATTACH_LIMIT_PREFIX + driver


def needs_check(pod: Pod) -> bool:
    """PreFilter: only claim-backed volumes can be CSI attachments here (no pod
    volumes: nothing to do)."""
    return any(
        v.persistent_volume_claim is not None or v.ephemeral is not None for v in pod.spec.volumes
    )


def node_limits(node: Node, csi_node: CSINode | None) -> dict[str, int]:
    """Upstream ``getVolumeLimits``: the node's ``attachable-volumes-*`` allocatable,
    overridden by its CSINode's ``allocatable.count`` per driver."""
    limits: dict[str, int] = {}
    for name, quantity in node.status.allocatable.items():
        if name.startswith(ATTACHABLE_PREFIX):
            try:
                limits[name] = to_int(quantity)
            except QuantityError as error:
                raise QuantityError(
                    quantity, error.reason, f"node {node.name}: status.allocatable[{name}]"
                ) from None
    if csi_node is not None:
        for driver in csi_node.spec.drivers:
            if driver.allocatable is not None and driver.allocatable.count is not None:
                limits[attach_limit_key(driver.name)] = driver.allocatable.count
    return limits


@dataclass(frozen=True, slots=True)
class VolumeResolver:
    """Names a pod's and a node's attachable volumes from the listers."""

    claims: ClaimLister
    volumes: VolumeLister
    classes: ClassLister
    # Upstream draws 32 random characters per scheduler; tests fix it.
    unbound_prefix: str = field(default_factory=lambda: secrets.token_hex(16))

    def pod_volumes(self, pod: Pod, *, new_pod: bool) -> VolumeKeys:
        """Upstream ``filterAttachableVolumes``. For the pod being scheduled a missing
        claim raises ``ClaimNotFound``; for pods already on the node it is skipped."""
        result: VolumeKeys = {}
        namespace = pod.metadata.namespace
        for ref in claim_refs(pod):
            if not ref.claim_name:
                raise VolumeError("PersistentVolumeClaim had no name")
            pvc = self.claims.get_claim(namespace, ref.claim_name)
            if pvc is None:
                if new_pod:
                    raise ClaimNotFound(
                        f"looking up PVC {namespace}/{ref.claim_name}: "
                        f'persistentvolumeclaim "{ref.claim_name}" not found'
                    )
                continue
            if ref.ephemeral:
                error = ephemeral_owner_error(pod, pvc)
                if error is not None:
                    raise VolumeError(error)
            driver, handle = self._driver_and_handle(pvc)
            if driver and handle:
                result[f"{driver}/{handle}"] = attach_limit_key(driver)
        return result

    def _driver_and_handle(self, pvc: PersistentVolumeClaim) -> tuple[str, str]:
        """Upstream ``getCSIDriverInfo`` / ``getCSIDriverInfoFromSC``."""
        if pvc.spec.volume_name:
            pv = self.volumes.get_volume(pvc.spec.volume_name)
            if pv is not None:
                csi = pv.spec.csi
                return ("", "") if csi is None else (csi.driver, csi.volume_handle)
        name = claim_class(pvc)
        storage_class = self.classes.get_class(name) if name else None
        if storage_class is None:
            return "", ""
        handle = f"{self.unbound_prefix}-{pvc.metadata.namespace}/{pvc.metadata.name}"
        return storage_class.provisioner, handle

    def attachment_volumes(self, attachments: Iterable[VolumeAttachment]) -> VolumeKeys:
        """Upstream ``getNodeVolumeAttachmentInfo``: each attachment of a CSI PV, by
        its attacher and the PV's handle."""
        result: VolumeKeys = {}
        for va in attachments:
            pv_name = va.spec.source.persistent_volume_name
            if not va.spec.attacher or pv_name is None:
                continue
            pv = self.volumes.get_volume(pv_name)
            if pv is None or pv.spec.csi is None:
                continue
            unique = f"{va.spec.attacher}/{pv.spec.csi.volume_handle}"
            result[unique] = attach_limit_key(va.spec.attacher)
        return result


def exceeds(
    new: VolumeKeys, by_pods: VolumeKeys, by_attachments: VolumeKeys, limits: Mapping[str, int]
) -> bool:
    """Whether adding ``new`` to the node's volumes passes a driver's limit."""
    attached: dict[str, int] = {}
    for key in by_pods.values():
        attached[key] = attached.get(key, 0) + 1
    for unique, key in by_attachments.items():
        if unique not in by_pods:
            attached[key] = attached.get(key, 0) + 1
    adding: dict[str, int] = {}
    for unique, key in new.items():
        if unique not in by_pods:
            adding[key] = adding.get(key, 0) + 1
    return any(
        key in limits and attached.get(key, 0) + count > limits[key]
        for key, count in adding.items()
    )


def node_exceeds(
    new: VolumeKeys,
    *,
    node: Node,
    csi_node: CSINode | None,
    pods_on_node: Iterable[Pod],
    attachments: Iterable[VolumeAttachment],
    resolver: VolumeResolver,
) -> bool:
    """Upstream ``Filter`` on one node for a pod whose volumes are ``new``."""
    if not new:
        return False
    limits = node_limits(node, csi_node)
    if not limits:
        return False
    by_pods: VolumeKeys = {}
    for pod in pods_on_node:
        by_pods.update(resolver.pod_volumes(pod, new_pod=False))
    return exceeds(new, by_pods, resolver.attachment_volumes(attachments), limits)
