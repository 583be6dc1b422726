"""Building VolumeBinding's listers from a list of objects, for the tests here."""

from __future__ import annotations

from troupe.api.storage import PersistentVolume, PersistentVolumeClaim
from troupe.api.volumes import StorageObject, StorageObjects
from troupe.plugins.volumebinding.caches import VolumeCaches
from troupe.plugins.volumebinding.model import Listers


def listers_of(*objects: StorageObject) -> tuple[Listers, VolumeCaches]:
    """PVs and PVCs go through the assume caches (as informer objects), the rest
    into a plain store; returns the listers and the caches."""
    caches = VolumeCaches()
    store = StorageObjects.of()
    for obj in objects:
        if isinstance(obj, PersistentVolume):
            caches.pvs.add(obj)
        elif isinstance(obj, PersistentVolumeClaim):
            caches.pvcs.add(obj)
        else:
            store.put(obj)
    return Listers(caches, caches, store, store, store), caches
