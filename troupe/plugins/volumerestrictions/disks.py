"""In-tree disk conflicts: a node whose pods already mount the pod's disk.

Upstream ``volume_restrictions.go`` ``isVolumeConflict`` / ``satisfyVolumeConflicts``:
the same GCE PD, or the same iSCSI IQN, conflicts unless both mounts are read-only;
the same EBS volume always conflicts; RBD images conflict when they share a Ceph
monitor, the pool and the image, unless both are read-only. A conflict makes the
node Unschedulable (``node(s) had no available disk``): preempting the pod that
mounts the disk can free it.

``conflicts_on_node`` is the per-node reference. ``DiskIndex`` is the columnar path:
it keeps, per disk, on which nodes it is mounted read-write or read-only, fed as pods
are added to and removed from nodes, so a pod's conflicting nodes are a few lookups
rather than a scan of every pod. Pods without those volumes cost nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Final

import numpy as np

from troupe.api.nodetable import BoolArray, NodeTable
from troupe.api.objects import Pod, Volume

ERR_DISK_CONFLICT: Final = "node(s) had no available disk"


def needs_check(volume: Volume) -> bool:
    """Whether the volume is one of the four in-tree disks checked for conflicts."""
    return (
        volume.gce_persistent_disk is not None
        or volume.aws_elastic_block_store is not None
        or volume.rbd is not None
        or volume.iscsi is not None
    )


def is_volume_conflict(volume: Volume, existing: Pod) -> bool:
    """Upstream ``isVolumeConflict``: ``volume`` cannot be mounted next to ``existing``."""
    return any(_conflict(volume, other) for other in existing.spec.volumes)


def _conflict(volume: Volume, other: Volume) -> bool:
    gce, other_gce = volume.gce_persistent_disk, other.gce_persistent_disk
    if (
        gce is not None
        and other_gce is not None
        and gce.pd_name == other_gce.pd_name
        and not (gce.read_only and other_gce.read_only)
    ):
        return True
    ebs, other_ebs = volume.aws_elastic_block_store, other.aws_elastic_block_store
    if ebs is not None and other_ebs is not None and ebs.volume_id == other_ebs.volume_id:
        return True
    iscsi, other_iscsi = volume.iscsi, other.iscsi
    if (
        iscsi is not None
        and other_iscsi is not None
        and iscsi.iqn == other_iscsi.iqn
        and not (iscsi.read_only and other_iscsi.read_only)
    ):
        return True
    rbd, other_rbd = volume.rbd, other.rbd
    return (
        rbd is not None
        and other_rbd is not None
        and bool(set(rbd.monitors) & set(other_rbd.monitors))
        and (rbd.pool, rbd.image) == (other_rbd.pool, other_rbd.image)
        and not (rbd.read_only and other_rbd.read_only)
    )


def conflicts_on_node(pod: Pod, pods_on_node: Iterable[Pod]) -> bool:
    """Upstream ``!satisfyVolumeConflicts``: a disk of ``pod`` is taken on the node."""
    disks = [v for v in pod.spec.volumes if needs_check(v)]
    if not disks:
        return False
    return any(is_volume_conflict(v, existing) for existing in pods_on_node for v in disks)


# --- the columnar index ----------------------------------------------------------------

DiskKey = tuple[str, ...]


def _disk_keys(volume: Volume) -> Iterator[tuple[DiskKey, bool]]:
    """The identities a disk volume is known by, with its read-only flag. An RBD image
    is known once per monitor, so any shared monitor finds it."""
    if volume.gce_persistent_disk is not None:
        yield ("gce", volume.gce_persistent_disk.pd_name), volume.gce_persistent_disk.read_only
    if volume.aws_elastic_block_store is not None:
        ebs = volume.aws_elastic_block_store
        # EBS conflicts whatever the mode: count every mount as read-write.
        yield ("ebs", ebs.volume_id), False
    if volume.iscsi is not None:
        yield ("iscsi", volume.iscsi.iqn), volume.iscsi.read_only
    if volume.rbd is not None:
        rbd = volume.rbd
        for monitor in set(rbd.monitors):
            yield ("rbd", monitor, rbd.pool, rbd.image), rbd.read_only


class DiskIndex:
    """Per disk identity, per node slot: how many pods mount it [read-write, read-only].

    The owner calls ``add_pod``/``remove_pod`` exactly when it accounts a pod on a node
    or stops (the NodeTable's ``add_pod``/``remove_pod``, node removal)."""

    def __init__(self) -> None:
        self._mounts: dict[DiskKey, dict[int, list[int]]] = {}

    @classmethod
    def of_table(cls, table: NodeTable) -> DiskIndex:
        """An index of every pod the table accounts."""
        index = cls()
        for slot in table.slots():
            for info in table.pods[int(slot)].values():
                index.add_pod(int(slot), info.pod)
        return index

    def add_pod(self, slot: int, pod: Pod) -> None:
        self._update(slot, pod, 1)

    def remove_pod(self, slot: int, pod: Pod) -> None:
        self._update(slot, pod, -1)

    def _update(self, slot: int, pod: Pod, sign: int) -> None:
        for volume in pod.spec.volumes:
            if not needs_check(volume):
                continue
            for key, read_only in _disk_keys(volume):
                slots = self._mounts.setdefault(key, {})
                counts = slots.setdefault(slot, [0, 0])
                counts[1 if read_only else 0] += sign
                if counts == [0, 0]:
                    del slots[slot]
                    if not slots:
                        del self._mounts[key]

    def conflict_mask(self, pod: Pod, capacity: int) -> BoolArray:
        """The slots where a disk of ``pod`` conflicts (``conflicts_on_node``)."""
        mask = np.zeros(capacity, dtype=bool)
        for volume in pod.spec.volumes:
            if not needs_check(volume):
                continue
            for key, read_only in _disk_keys(volume):
                for slot, (writers, readers) in self._mounts.get(key, {}).items():
                    # Read-only next to read-only is allowed (not for EBS: its mounts
                    # are all counted as writers).
                    if writers or (readers and not read_only):
                        mask[slot] = True
        return mask
