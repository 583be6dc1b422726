"""The PV and PVC assume caches VolumeBinding reads its claims and volumes from.

Upstream ``assume_cache.go`` (``PVAssumeCache`` indexed by storage class,
``PVCAssumeCache`` keyed ``namespace/name``) over ``troupe.api.assume_cache``. The
plugin feeds both from its PV and PVC informer events (``add``/``update``/``delete``);
Reserve assumes PVs with a ``claimRef`` and claims with ``selected-node``, so the
next pods' PreFilter and Filter see them taken; Unreserve restores them; an informer
update with a newer ``resourceVersion`` (the PV controller's or PreBind's write)
replaces the assumption.

``VolumeCaches`` offers the latest views as the listers ``model.Listers`` wants, and
the informer views PreBind polls.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from troupe.api.assume_cache import AssumeCache
from troupe.api.storage import PersistentVolume, PersistentVolumeClaim
from troupe.api.volumes import volume_class


def _pv_cache() -> AssumeCache[PersistentVolume]:
    return AssumeCache("v1.PersistentVolume", metadata=lambda pv: pv.metadata, index=volume_class)


def _pvc_cache() -> AssumeCache[PersistentVolumeClaim]:
    return AssumeCache("v1.PersistentVolumeClaim", metadata=lambda pvc: pvc.metadata)


@dataclass(slots=True)
class VolumeCaches:
    """Both assume caches, and the listers reading them."""

    pvs: AssumeCache[PersistentVolume] = field(default_factory=_pv_cache)
    pvcs: AssumeCache[PersistentVolumeClaim] = field(default_factory=_pvc_cache)

    # --- latest views (assumptions included): the scheduling cycle's listers --------

    def get_claim(self, namespace: str, name: str) -> PersistentVolumeClaim | None:
        return self.pvcs.get(f"{namespace}/{name}")

    def get_volume(self, name: str) -> PersistentVolume | None:
        return self.pvs.get(name)

    def volumes_of_class(self, class_name: str) -> Sequence[PersistentVolume]:
        return self.pvs.list(class_name)

    # --- informer views: what PreBind checks ---------------------------------------

    def api_claim(self, key: str) -> PersistentVolumeClaim | None:
        return self.pvcs.get_api(key)

    def api_volume(self, name: str) -> PersistentVolume | None:
        return self.pvs.get_api(name)
