"""VolumeBinding Score: StorageCapacityScoring (KEP-4049, upstream ``scorer.go`` and
``VolumeBinding.Score``).

For the node's ``PodVolumes`` (what Filter found there), requested and capacity are
summed per storage class: from the static bindings (the claim's request, the PV's
capacity, grouped by the PV's ``spec.storageClassName``) when there are any, else
from the claims to provision (their requests, against the capacity of the
CSIStorageCapacity that admitted each; not summed, since two claims of a class share
one pool). Each class's utilization
``requested * 100 / capacity`` (100 when the capacity is 0 or too small) maps through
the args' shape; the node's score is the classes' mean, rounded half away from zero.

Upstream reads a provision's class from ``spec.storageClassName`` and dereferences
the capacity's ``capacity`` (a claim classed by the beta annotation, or a capacity
with only ``maximumVolumeSize``, would crash it); here the class is
``claim_class`` and a missing capacity counts as 0.
"""

from __future__ import annotations

from troupe.api.scoring import FunctionShape
from troupe.api.storage import PersistentVolumeClaim
from troupe.api.volumes import STORAGE, claim_class, quantity_value
from troupe.plugins.volumebinding.model import PodVolumes

MAX_UTILIZATION = 100


def _request(pvc: PersistentVolumeClaim) -> int:
    return quantity_value(pvc.spec.resources.requests.get(STORAGE))


def class_resources(volumes: PodVolumes) -> dict[str, tuple[int, int]]:
    """Per class: (requested, capacity) in bytes, as upstream's ``classResourceMap``."""
    resources: dict[str, tuple[int, int]] = {}
    if volumes.static_bindings:
        for binding in volumes.static_bindings:
            name = binding.volume.spec.storage_class_name
            requested, capacity = resources.get(name, (0, 0))
            resources[name] = (
                requested + _request(binding.claim),
                capacity + quantity_value(binding.volume.spec.capacity.get(STORAGE)),
            )
        return resources
    for provision in volumes.dynamic_provisions:
        if provision.capacity is None:
            continue
        name = claim_class(provision.claim)
        requested, _ = resources.get(name, (0, 0))
        resources[name] = (
            requested + _request(provision.claim),
            quantity_value(provision.capacity.capacity),
        )
    return resources


def score(volumes: PodVolumes, shape: FunctionShape) -> int:
    """The node's StorageCapacityScoring score (0 when no class is measured)."""
    resources = class_resources(volumes)
    if not resources:
        return 0
    total = 0
    for requested, capacity in resources.values():
        if capacity == 0 or requested > capacity:
            utilization = MAX_UTILIZATION
        else:
            utilization = requested * MAX_UTILIZATION // capacity
        total += shape.at(utilization)
    # math.Round(total / n) for non-negative values, in integers.
    n = len(resources)
    return (2 * total + n) // (2 * n)
