"""VolumeBinding PreFilter: is every claim of the pod usable, and which are bound?

Upstream ``volume_binding.go`` ``podHasPVCs`` + ``PreFilter`` and ``binder.go``
``GetPodVolumeClaims``. Each claim of the pod (a ``persistentVolumeClaim`` volume, or
the ``<pod>-<volume>`` claim of a generic ephemeral volume) must exist, not be Lost,
not be being deleted, and, for an ephemeral volume, be owned by the pod; the first
that is not rejects the pod, UnschedulableAndUnresolvable, with upstream's message.
The claims are then sorted into bound (``volumeName`` set and
``pv.kubernetes.io/bind-completed``), unbound of a WaitForFirstConsumer class
(Filter decides their node) and unbound Immediate (pre-bound included): the last
reject the pod until the PV controller binds them.

Claims are read from the PVC assume cache's latest view (upstream reads the informer
lister first, then the cache; the two differ only by an assumed ``selected-node``).
"""

from __future__ import annotations

from dataclasses import dataclass

from troupe.api.objects import Pod
from troupe.api.status import SKIP, Code, Status
from troupe.api.storage import PersistentVolume, PersistentVolumeClaim
from troupe.api.volumes import (
    CLAIM_LOST,
    VolumeError,
    claim_class,
    claim_refs,
    ephemeral_owner_error,
    is_delay_binding,
    is_fully_bound,
)
from troupe.plugins.volumebinding.model import ERR_UNBOUND_IMMEDIATE, Listers, PodClaims


@dataclass(frozen=True, slots=True)
class PreFilterDecision:
    """SKIP (no claims), SUCCESS with the sorted ``claims``, an
    UNSCHEDULABLE_AND_UNRESOLVABLE verdict, or an ERROR."""

    status: Status
    claims: PodClaims | None = None


def _unusable(pod: Pod, listers: Listers) -> str | None:
    """Upstream ``podHasPVCs``: why the first unusable claim cannot be used."""
    namespace = pod.metadata.namespace
    for ref in claim_refs(pod):
        pvc = listers.claims.get_claim(namespace, ref.claim_name)
        if pvc is None:
            if ref.ephemeral:
                return (
                    "waiting for ephemeral volume controller to create the "
                    f'persistentvolumeclaim "{ref.claim_name}"'
                )
            return f'persistentvolumeclaim "{ref.claim_name}" not found'
        name = pvc.metadata.name
        if pvc.status.phase == CLAIM_LOST:
            return (
                f'persistentvolumeclaim "{name}" bound to non-existent '
                f'persistentvolume "{pvc.spec.volume_name}"'
            )
        if pvc.metadata.deletion_timestamp is not None:
            return f'persistentvolumeclaim "{name}" is being deleted'
        if ref.ephemeral:
            owner_error = ephemeral_owner_error(pod, pvc)
            if owner_error is not None:
                return owner_error
    return None


def sort_claims(pod: Pod, listers: Listers) -> PodClaims:
    """Upstream ``GetPodVolumeClaims``. Raises ``VolumeError`` when a claim vanished
    since it was checked, a generic ephemeral claim is not the pod's, or a class has
    no binding mode."""
    bound: list[PersistentVolumeClaim] = []
    delayed: list[PersistentVolumeClaim] = []
    immediate: list[PersistentVolumeClaim] = []
    namespace = pod.metadata.namespace
    for ref in claim_refs(pod):
        pvc = listers.claims.get_claim(namespace, ref.claim_name)
        if pvc is None:
            key = f"{namespace}/{ref.claim_name}"
            raise VolumeError(
                f'error getting PVC "{key}": could not find v1.PersistentVolumeClaim "{key}"'
            )
        if ref.ephemeral:
            owner_error = ephemeral_owner_error(pod, pvc)
            if owner_error is not None:
                raise VolumeError(owner_error)
        if is_fully_bound(pvc):
            bound.append(pvc)
        elif is_delay_binding(pvc, listers.classes) and not pvc.spec.volume_name:
            delayed.append(pvc)
        else:
            immediate.append(pvc)
    candidates: dict[str, tuple[PersistentVolume, ...]] = {}
    for pvc in delayed:
        name = claim_class(pvc)
        if name not in candidates:
            candidates[name] = tuple(listers.volumes.volumes_of_class(name))
    return PodClaims(tuple(bound), tuple(delayed), tuple(immediate), candidates)


def pre_filter(pod: Pod, listers: Listers) -> PreFilterDecision:
    """VolumeBinding's PreFilter verdict for ``pod``."""
    if not pod.spec.volumes:
        return PreFilterDecision(SKIP)
    reason = _unusable(pod, listers)
    if reason is not None:
        return PreFilterDecision(Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (reason,)))
    if next(claim_refs(pod), None) is None:
        return PreFilterDecision(SKIP)
    try:
        claims = sort_claims(pod, listers)
    except VolumeError as error:
        return PreFilterDecision(Status.from_error(error))
    if claims.immediate:
        return PreFilterDecision(
            Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (ERR_UNBOUND_IMMEDIATE,))
        )
    return PreFilterDecision(Status(), claims)
