"""Per-driver attach counts as per-node arrays (DESIGN.md "Fast paths stay columnar").

``AttachTable`` keeps, for every node slot, the unique volumes its pods use and its
VolumeAttachments, and from them one int array per driver limit key: how many
distinct volumes of that driver the node holds (``limits.exceeds``'s ``attached``).
With the limits as arrays too, the NodeVolumeLimits verdict for a pod over a mask of
candidate nodes is a few vector operations per driver the pod uses, plus a lookup of
the nodes where one of its volumes is already attached. A pod without claim volumes
never gets here (PreFilter skips it).

The owner feeds it: ``set_pod`` when a pod is accounted on a node (and again when
what its claims resolve to changes: a claim bound, a PV created), ``remove_pod``
when it leaves, ``set_attachments`` when a node's VolumeAttachments change,
``set_limits`` when its CSINode (or allocatable) changes. ``tests/plugins`` check the
mask against the per-node reference ``limits.exceeds``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

import numpy as np

from troupe.api.nodetable import BoolArray, IntArray
from troupe.plugins.nodevolumelimits.limits import VolumeKeys

_NO_LIMIT = -1


class AttachTable:
    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._pods: dict[tuple[int, str], VolumeKeys] = {}
        # slot -> unique name -> (limit key, how many pods use it)
        self._by_pods: dict[int, dict[str, tuple[str, int]]] = {}
        self._by_attachments: dict[int, VolumeKeys] = {}
        # unique name -> slots whose pods use it
        self._where: dict[str, set[int]] = {}
        self._attached: dict[str, IntArray] = {}
        self._limits: dict[str, IntArray] = {}

    # --- feeding ---------------------------------------------------------------------

    def grow(self, capacity: int) -> None:
        """Follow the NodeTable when it grows."""
        if capacity <= self.capacity:
            return
        pad = capacity - self.capacity
        for arrays, fill in ((self._attached, 0), (self._limits, _NO_LIMIT)):
            for key, array in arrays.items():
                arrays[key] = np.concatenate([array, np.full(pad, fill, dtype=np.int64)])
        self.capacity = capacity

    def set_pod(self, slot: int, pod_key: str, volumes: VolumeKeys) -> None:
        """The pod ``pod_key`` on ``slot`` uses ``volumes`` (replacing what it used)."""
        old_attached = self._node_counts(slot)
        previous = self._pods.pop((slot, pod_key), None)
        node = self._by_pods.setdefault(slot, {})
        for unique in previous or {}:
            key, users = node[unique]
            if users == 1:
                del node[unique]
                self._where[unique].discard(slot)
                if not self._where[unique]:
                    del self._where[unique]
            else:
                node[unique] = (key, users - 1)
        if volumes:
            self._pods[slot, pod_key] = dict(volumes)
            for unique, key in volumes.items():
                _, users = node.get(unique, (key, 0))
                node[unique] = (key, users + 1)
                self._where.setdefault(unique, set()).add(slot)
        self._recount(slot, old_attached)

    def remove_pod(self, slot: int, pod_key: str) -> None:
        self.set_pod(slot, pod_key, {})

    def set_attachments(self, slot: int, volumes: VolumeKeys) -> None:
        old_attached = self._node_counts(slot)
        self._by_attachments[slot] = dict(volumes)
        self._recount(slot, old_attached)

    def set_limits(self, slot: int, limits: Mapping[str, int]) -> None:
        """The node's limits by key (``limits.node_limits``); others are unlimited."""
        for array in self._limits.values():
            array[slot] = _NO_LIMIT
        for key, limit in limits.items():
            self._array(self._limits, key, _NO_LIMIT)[slot] = limit

    def clear_slot(self, slot: int) -> None:
        """The node left: forget its pods, attachments and limits."""
        for pod_slot, pod_key in [k for k in self._pods if k[0] == slot]:
            self.remove_pod(pod_slot, pod_key)
        self.set_attachments(slot, {})
        self.set_limits(slot, {})

    # --- reading -----------------------------------------------------------------------

    def attached(self, key: str) -> IntArray:
        """How many distinct volumes of the driver with limit ``key`` each node holds."""
        return self._attached.get(key, np.zeros(self.capacity, dtype=np.int64))

    def exceeds_mask(self, new: VolumeKeys, candidates: BoolArray) -> BoolArray:
        """The candidate nodes where adding ``new`` passes a driver's limit."""
        result = np.zeros(self.capacity, dtype=bool)
        by_key: dict[str, list[str]] = {}
        for unique, key in new.items():
            by_key.setdefault(key, []).append(unique)
        for key, uniques in by_key.items():
            limit = self._limits.get(key)
            if limit is None:
                continue
            adding = np.full(self.capacity, len(uniques), dtype=np.int64)
            for unique in uniques:
                for slot in self._where.get(unique, ()):
                    adding[slot] -= 1
            result |= (limit >= 0) & (adding > 0) & (self.attached(key) + adding > limit)
        return result & candidates

    # --- bookkeeping -------------------------------------------------------------------

    def _node_counts(self, slot: int) -> Counter[str]:
        """Distinct volumes per limit key on ``slot``: its pods' plus the attachments
        not among them."""
        pods = self._by_pods.get(slot, {})
        counts: Counter[str] = Counter(key for key, _ in pods.values())
        for unique, key in self._by_attachments.get(slot, {}).items():
            if unique not in pods:
                counts[key] += 1
        return counts

    def _recount(self, slot: int, old: Counter[str]) -> None:
        new = self._node_counts(slot)
        for key in old.keys() | new.keys():
            self._array(self._attached, key, 0)[slot] += new[key] - old[key]

    def _array(self, arrays: dict[str, IntArray], key: str, fill: int) -> IntArray:
        array = arrays.get(key)
        if array is None:
            array = arrays[key] = np.full(self.capacity, fill, dtype=np.int64)
        return array
