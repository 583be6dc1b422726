"""VolumeZone: a pod's bound PVs must be in the node's zone and region.

Upstream ``volume_zone.go``. PreFilter reads, for each ``persistentVolumeClaim``
volume of the pod (generic ephemeral volumes are not looked at), the bound PV's
zone and region labels, both generations (``topology.kubernetes.io/*`` and
``failure-domain.beta.kubernetes.io/*``); a value may name several zones separated by
``__``. An unbound claim of a WaitForFirstConsumer class is skipped (VolumeBinding
places it); any other problem rejects the pod, UnschedulableAndUnresolvable, with
upstream's message. Filter accepts a node that has none of the four labels (a
cluster without zones); otherwise each PV label must find the node's value, under
the same key or its GA equivalent, among its zones: else
``node(s) had no available volume zone``.

``zone_mask`` is the columnar Filter: one label-column lookup per PV label, so a
pod with zonal volumes costs a few vector operations however many nodes there are.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np

from troupe.api.nodetable import BoolArray, NodeTable
from troupe.api.objects import Pod
from troupe.api.status import SKIP, Code, Status
from troupe.api.storage import PersistentVolume
from troupe.api.volumes import (
    BINDING_WAIT_FOR_FIRST_CONSUMER,
    ClaimLister,
    ClassLister,
    VolumeLister,
    claim_class,
)

ERR_NO_ZONE: Final = "node(s) had no available volume zone"

BETA_ZONE: Final = "failure-domain.beta.kubernetes.io/zone"
BETA_REGION: Final = "failure-domain.beta.kubernetes.io/region"
ZONE: Final = "topology.kubernetes.io/zone"
REGION: Final = "topology.kubernetes.io/region"
TOPOLOGY_LABELS: Final = (BETA_ZONE, BETA_REGION, ZONE, REGION)
_GA: Final = {BETA_ZONE: ZONE, BETA_REGION: REGION}
MULTI_ZONE_DELIMITER: Final = "__"


@dataclass(frozen=True, slots=True)
class PVTopology:
    """One zone or region label of a bound PV: its key and the values it allows."""

    pv_name: str
    key: str
    values: frozenset[str]


def label_zones(value: str) -> frozenset[str] | None:
    """Upstream ``LabelZonesToSet``: the ``__``-separated zones (trimmed), or None
    when one is empty (upstream then ignores the label)."""
    zones = [zone.strip() for zone in value.split(MULTI_ZONE_DELIMITER)]
    if any(not zone for zone in zones):
        return None
    return frozenset(zones)


def pv_topologies(pv: PersistentVolume) -> list[PVTopology]:
    topologies = []
    for key in TOPOLOGY_LABELS:
        value = pv.metadata.labels.get(key)
        if value is None:
            continue
        zones = label_zones(value)
        if zones is not None:
            topologies.append(PVTopology(pv.metadata.name, key, zones))
    return topologies


@dataclass(frozen=True, slots=True)
class ZoneDecision:
    """PreFilter's outcome: SKIP (nothing zonal), a rejection, or the topologies."""

    status: Status
    topologies: tuple[PVTopology, ...] = ()


def _unresolvable(message: str) -> ZoneDecision:
    return ZoneDecision(Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (message,)))


def pre_filter(
    pod: Pod, claims: ClaimLister, volumes: VolumeLister, classes: ClassLister
) -> ZoneDecision:
    """Upstream ``PreFilter`` / ``getPVbyPod``."""
    topologies: list[PVTopology] = []
    namespace = pod.metadata.namespace
    for volume in pod.spec.volumes:
        source = volume.persistent_volume_claim
        if source is None:
            continue
        name = source.claim_name
        if not name:
            return _unresolvable("PersistentVolumeClaim had no name")
        pvc = claims.get_claim(namespace, name)
        if pvc is None:
            return _unresolvable(f'persistentvolumeclaim "{name}" not found')
        pv_name = pvc.spec.volume_name
        if not pv_name:
            class_name = claim_class(pvc)
            if not class_name:
                return _unresolvable("PersistentVolumeClaim had no pv name and storageClass name")
            storage_class = classes.get_class(class_name)
            if storage_class is None:
                return _unresolvable(f'storageclass.storage.k8s.io "{class_name}" not found')
            mode = storage_class.volume_binding_mode
            if mode is None:
                return _unresolvable(f'VolumeBindingMode not set for StorageClass "{class_name}"')
            if mode == BINDING_WAIT_FOR_FIRST_CONSUMER:
                continue
            return _unresolvable("PersistentVolume had no name")
        pv = volumes.get_volume(pv_name)
        if pv is None:
            return _unresolvable(f'persistentvolume "{pv_name}" not found')
        topologies.extend(pv_topologies(pv))
    if not topologies:
        return ZoneDecision(SKIP)
    return ZoneDecision(Status(), tuple(topologies))


def node_fits(topologies: Sequence[PVTopology], labels: Mapping[str, str]) -> bool:
    """Upstream ``Filter`` on one node."""
    if not any(key in labels for key in TOPOLOGY_LABELS):
        return True
    for topology in topologies:
        value = labels.get(topology.key)
        if value is None:
            value = labels.get(_GA.get(topology.key, topology.key))
        if value is None or value not in topology.values:
            return False
    return True


def zone_mask(table: NodeTable, topologies: Sequence[PVTopology]) -> BoolArray:
    """The nodes ``node_fits`` accepts, over every slot (absent slots: False)."""
    zoned = np.zeros(table.capacity, dtype=bool)
    for key in TOPOLOGY_LABELS:
        zoned |= table.label_mask(key, lambda value: value is not None)
    fits = table.present.copy()
    for topology in topologies:
        allowed = _one_of(topology.values)
        has_key = table.label_mask(topology.key, lambda value: value is not None)
        by_key = table.label_mask(topology.key, allowed)
        by_ga = table.label_mask(_GA.get(topology.key, topology.key), allowed)
        fits &= ~zoned | np.where(has_key, by_key, by_ga)
    return fits


def _one_of(values: frozenset[str]) -> Callable[[str | None], bool]:
    def allowed(value: str | None) -> bool:
        return value in values

    return allowed
