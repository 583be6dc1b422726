"""VolumeBinding Reserve and Unreserve: assume the chosen node's volumes, or undo.

Upstream ``AssumePodVolumes`` / ``RevertAssumedPodVolumes``. For the node Filter
chose (``model.PodVolumes``): each static binding's PV is assumed with a ``claimRef``
to its claim (upstream ``GetBindVolumeToClaim``, which also sets
``pv.kubernetes.io/bound-by-controller`` when the PV was not pre-bound), and each
claim to provision is assumed with ``volume.kubernetes.io/selected-node``. Later pods
read the caches' latest views, so they neither get the same PV nor another node for
the claim. When every claim of the pod is already bound, nothing is assumed and
PreBind has nothing to do. A refused assumption undoes those made before it.

In a gang, each member's Reserve assumes on top of the previous members'; undoing
the gang reverts every member's ``Assumed`` (revert order does not matter: each
restore goes back to the informer's object).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from troupe.api.assume_cache import AssumeCacheError
from troupe.api.objects import Pod
from troupe.api.storage import ObjectReference, PersistentVolume, PersistentVolumeClaim
from troupe.api.volumes import (
    ANN_BOUND_BY_CONTROLLER,
    ANN_SELECTED_NODE,
    VolumeError,
    claim_refs,
    ephemeral_owner_error,
    is_fully_bound,
    is_volume_bound_to_claim,
)
from troupe.plugins.volumebinding.caches import VolumeCaches
from troupe.plugins.volumebinding.model import BindingInfo, DynamicProvision, PodVolumes


@dataclass(frozen=True, slots=True)
class Assumed:
    """Reserve's outcome: whether the pod's claims were all bound already, and the
    assumed objects (the PVs with their claimRef, the claims with selected-node)
    PreBind writes and Unreserve reverts."""

    all_bound: bool
    volumes: PodVolumes = field(default_factory=PodVolumes)


def all_claims_bound(pod: Pod, caches: VolumeCaches) -> bool:
    """Upstream ``arePodVolumesBound``: every claim of the pod is fully bound (a
    missing claim, or an ephemeral claim not the pod's, is not)."""
    namespace = pod.metadata.namespace
    for ref in claim_refs(pod):
        pvc = caches.get_claim(namespace, ref.claim_name)
        if pvc is None or not is_fully_bound(pvc):
            return False
        if ref.ephemeral and ephemeral_owner_error(pod, pvc) is not None:
            return False
    return True


def bind_volume_to_claim(
    pv: PersistentVolume, pvc: PersistentVolumeClaim
) -> tuple[PersistentVolume, bool]:
    """Upstream ``GetBindVolumeToClaim``: a copy of ``pv`` bound to ``pvc``, and
    whether anything changed."""
    pre_bound = is_volume_bound_to_claim(pv, pvc)
    meta = pvc.metadata
    ref = pv.spec.claim_ref
    spec = pv.spec
    dirty = False
    if ref is None or (ref.name, ref.namespace, ref.uid) != (meta.name, meta.namespace, meta.uid):
        claim_ref = ObjectReference(
            api_version="v1",
            kind="PersistentVolumeClaim",
            namespace=meta.namespace,
            name=meta.name,
            uid=meta.uid,
            resource_version=meta.resource_version,
        )
        spec = spec.model_copy(update={"claim_ref": claim_ref})
        dirty = True
    metadata = pv.metadata
    if not pre_bound and ANN_BOUND_BY_CONTROLLER not in metadata.annotations:
        annotations = {**metadata.annotations, ANN_BOUND_BY_CONTROLLER: "yes"}
        metadata = metadata.model_copy(update={"annotations": annotations})
        dirty = True
    return pv.model_copy(update={"spec": spec, "metadata": metadata}), dirty


def with_selected_node(pvc: PersistentVolumeClaim, node_name: str) -> PersistentVolumeClaim:
    annotations = {**pvc.metadata.annotations, ANN_SELECTED_NODE: node_name}
    metadata = pvc.metadata.model_copy(update={"annotations": annotations})
    return pvc.model_copy(update={"metadata": metadata})


def assume_pod_volumes(
    pod: Pod, node_name: str, volumes: PodVolumes, caches: VolumeCaches
) -> Assumed:
    """Reserve: assume ``volumes`` (Filter's findings for ``node_name``). Raises
    ``VolumeError`` (after undoing its own assumptions) when the cache refuses one."""
    if all_claims_bound(pod, caches):
        return Assumed(all_bound=True)
    bindings: list[BindingInfo] = []
    provisions: list[DynamicProvision] = []
    try:
        for binding in volumes.static_bindings:
            pv, dirty = bind_volume_to_claim(binding.volume, binding.claim)
            if dirty:
                caches.pvs.assume(pv)
            bindings.append(BindingInfo(binding.claim, pv))
        for provision in volumes.dynamic_provisions:
            pvc = with_selected_node(provision.claim, node_name)
            caches.pvcs.assume(pvc)
            provisions.append(DynamicProvision(pvc, provision.capacity))
    except AssumeCacheError as error:
        revert_assumed(PodVolumes(tuple(bindings), tuple(provisions)), caches)
        raise VolumeError(str(error)) from None
    return Assumed(False, PodVolumes(tuple(bindings), tuple(provisions)))


def revert_assumed(volumes: PodVolumes, caches: VolumeCaches) -> None:
    """Unreserve: the informer's objects again for every PV and claim assumed."""
    for binding in volumes.static_bindings:
        caches.pvs.restore(binding.volume.metadata.name)
    for provision in volumes.dynamic_provisions:
        caches.pvcs.restore(provision.claim.key)
