"""The values VolumeBinding's decisions pass around, and the listers they read.

Upstream ``binder.go``'s ``PodVolumeClaims`` (a pod's claims as PreFilter sorted
them), ``BindingInfo`` / ``DynamicProvision`` / ``PodVolumes`` (what Filter found for
one node: static PVs to bind, claims to provision) and its ``ConflictReasons``. The
decision modules (``claims``, ``binder``, ``filter_batch``, ``scorer``, ``assume``,
``prebind``) take these values and a ``Listers`` bundle and return new values; the
plugin class (wired later) keeps them in its CycleState.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, Protocol

from troupe.api.storage import CSIStorageCapacity, PersistentVolume, PersistentVolumeClaim
from troupe.api.volumes import (
    CapacityLister,
    ClaimLister,
    ClassLister,
    CSIDriverLister,
    VolumeLister,
)

# Filter reasons (upstream ConflictReason), in the order a node collects them.
ERR_NODE_CONFLICT: Final = "node(s) had volume node affinity conflict"
ERR_BIND_CONFLICT: Final = "node(s) didn't find available persistent volumes to bind"
ERR_NOT_ENOUGH_SPACE: Final = "node(s) did not have enough free storage"
ERR_PV_NOT_EXIST: Final = (
    "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
)
REASON_ORDER: Final = (ERR_NODE_CONFLICT, ERR_BIND_CONFLICT, ERR_NOT_ENOUGH_SPACE, ERR_PV_NOT_EXIST)

# PreFilter reason for a pod whose Immediate claims are not bound yet.
ERR_UNBOUND_IMMEDIATE: Final = "pod has unbound immediate PersistentVolumeClaims"


class VolumeIndex(VolumeLister, Protocol):
    """PVs by name and by class: the PV assume cache's latest view (assumed claimRefs
    included), so PVs chosen for earlier pods are not offered again."""

    def volumes_of_class(self, class_name: str) -> Sequence[PersistentVolume]: ...


@dataclass(frozen=True, slots=True)
class Listers:
    """What VolumeBinding's scheduling-cycle decisions read. ``claims`` and
    ``volumes`` are the assume caches' latest views; the others informer stores."""

    claims: ClaimLister
    volumes: VolumeIndex
    classes: ClassLister
    drivers: CSIDriverLister
    capacities: CapacityLister


@dataclass(frozen=True, slots=True)
class PodClaims:
    """A pod's claims as PreFilter sorted them (upstream ``PodVolumeClaims``)."""

    bound: tuple[PersistentVolumeClaim, ...] = ()
    # Unbound, of a WaitForFirstConsumer class: the scheduler picks their node.
    delayed: tuple[PersistentVolumeClaim, ...] = ()
    # Unbound, Immediate (pre-bound ones included): they should be bound already.
    immediate: tuple[PersistentVolumeClaim, ...] = ()
    # The PVs of each delayed claim's class, read once for every node.
    candidates: Mapping[str, tuple[PersistentVolume, ...]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class BindingInfo:
    """A static binding: ``claim`` will be bound to the existing ``volume``."""

    claim: PersistentVolumeClaim
    volume: PersistentVolume


@dataclass(frozen=True, slots=True)
class DynamicProvision:
    """A claim to provision on the node; ``capacity`` is the CSIStorageCapacity that
    admitted it when the driver tracks capacity (the score reads it)."""

    claim: PersistentVolumeClaim
    capacity: CSIStorageCapacity | None = None


@dataclass(frozen=True, slots=True)
class PodVolumes:
    """What the pod's unbound claims need on one node."""

    static_bindings: tuple[BindingInfo, ...] = ()
    dynamic_provisions: tuple[DynamicProvision, ...] = ()


@dataclass(frozen=True, slots=True)
class NodeVolumes:
    """Filter's verdict on one node: the reasons it does not fit (empty: it fits),
    in ``REASON_ORDER``, and what binding there would take."""

    reasons: tuple[str, ...] = ()
    volumes: PodVolumes = field(default_factory=PodVolumes)

    @property
    def fits(self) -> bool:
        return not self.reasons
