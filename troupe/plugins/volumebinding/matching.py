"""Static PV matching and dynamic provisioning checks for unbound claims.

Upstream ``component-helpers/storage/volume`` ``FindMatchingVolume`` (the scheduler
path: a node is given) and ``binder.go`` ``findMatchingVolumes``,
``checkVolumeProvisions``, ``hasEnoughCapacity``:

* static matching takes the claims by ascending request and gives each the smallest
  PV of its class that is Available, large enough, of the same volume mode and
  VolumeAttributesClass, not being deleted, matching the claim's selector, offering
  its access modes and whose node affinity admits the node, and that no earlier claim
  of the pod took; a PV pre-bound to the claim (``claimRef``) is taken whenever it is
  seen, or ends the search without a match if it does not admit the node;
* a claim left over can be provisioned when its class has a provisioner (not ""
  nor ``kubernetes.io/no-provisioner``), the node satisfies ``allowedTopologies``,
  and, when the provisioner's CSIDriver tracks capacity (``storageCapacity: true``),
  some CSIStorageCapacity of the class whose ``nodeTopology`` selects the node
  offers ``maximumVolumeSize`` (else ``capacity``) at least the request.

Ties are broken the same way every time (PVs by name, capacities by namespace/name)
where upstream takes whatever order its informer index yields. The node enters as a
predicate (``fits``: does this PV's affinity admit it) and its labels, so the
columnar Filter (``filter_batch``) can run the same code once per group of nodes
that see the same PVs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from troupe.api.objects import LabelSelector
from troupe.api.selectors import label_selector_matches, validate_label_selector
from troupe.api.storage import (
    CSIStorageCapacity,
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
)
from troupe.api.volumes import (
    NOT_SUPPORTED_PROVISIONER,
    STORAGE,
    VOLUME_AVAILABLE,
    VolumeError,
    access_modes_fit,
    capacity_nanos,
    claim_class,
    is_volume_bound_to_claim,
    quantity_value,
    requested_nanos,
    topology_terms_match,
    volume_class,
    volume_mode_mismatch,
)
from troupe.plugins.volumebinding.model import BindingInfo, Listers

Fits = Callable[[PersistentVolume], bool]
"""Whether a PV's node affinity admits the node being evaluated."""


def _selector_error(pvc: PersistentVolumeClaim, selector: LabelSelector) -> VolumeError | None:
    errors = validate_label_selector(selector, "spec.selector")
    if not errors:
        return None
    return VolumeError(
        f"error creating internal label selector for claim: {pvc.key}: {'; '.join(errors)}"
    )


def find_matching_volume(
    pvc: PersistentVolumeClaim,
    volumes: Sequence[PersistentVolume],
    fits: Fits,
    excluded: Mapping[str, object],
) -> PersistentVolume | None:
    """Upstream ``FindMatchingVolume`` on the scheduler path (``volumes`` in name
    order). Raises ``VolumeError`` for a claim selector that does not parse."""
    selector = pvc.spec.selector
    if selector is not None:
        error = _selector_error(pvc, selector)
        if error is not None:
            raise error
    requested = requested_nanos(pvc)
    requested_class = claim_class(pvc)
    claim_vac = pvc.spec.volume_attributes_class_name or ""
    smallest: PersistentVolume | None = None
    smallest_size = 0
    for pv in volumes:
        if pv.metadata.name in excluded:
            continue
        bound_here = is_volume_bound_to_claim(pv, pvc)
        if pv.spec.claim_ref is not None and not bound_here:
            continue
        size = capacity_nanos(pv)
        if size < requested or volume_mode_mismatch(pvc, pv):
            continue
        if (pv.spec.volume_attributes_class_name or "") != claim_vac:
            continue
        if pv.metadata.deletion_timestamp is not None:
            continue
        admits_node = fits(pv)
        if bound_here:
            # A PV pre-bound to the claim is its only candidate.
            return pv if admits_node else None
        if pv.status.phase != VOLUME_AVAILABLE:
            continue
        if selector is not None and not label_selector_matches(selector, pv.metadata.labels):
            continue
        if volume_class(pv) != requested_class or not admits_node:
            continue
        if not access_modes_fit(pvc, pv):
            continue
        if smallest is None or size < smallest_size:
            smallest, smallest_size = pv, size
    return smallest


def by_request(claims: Sequence[PersistentVolumeClaim]) -> list[PersistentVolumeClaim]:
    """Claims by ascending storage request (stable, as Go's sort for a pod's few)."""
    return sorted(claims, key=requested_nanos)


@dataclass(frozen=True, slots=True)
class StaticMatch:
    """Upstream ``findMatchingVolumes``: whether every claim found a PV, the
    bindings found, and the claims left for provisioning (in request order)."""

    all_found: bool
    bindings: tuple[BindingInfo, ...]
    unmatched: tuple[PersistentVolumeClaim, ...]


def match_volumes(
    claims: Sequence[PersistentVolumeClaim],
    candidates: Mapping[str, Sequence[PersistentVolume]],
    fits: Fits,
) -> StaticMatch:
    """Give each claim (smallest request first) the smallest fitting PV nobody took."""
    chosen: dict[str, PersistentVolume] = {}
    bindings: list[BindingInfo] = []
    unmatched: list[PersistentVolumeClaim] = []
    for pvc in by_request(claims):
        pv = find_matching_volume(pvc, candidates.get(claim_class(pvc), ()), fits, chosen)
        if pv is None:
            unmatched.append(pvc)
            continue
        chosen[pv.metadata.name] = pv
        bindings.append(BindingInfo(pvc, pv))
    return StaticMatch(not unmatched, tuple(bindings), tuple(unmatched))


# --- provisioning --------------------------------------------------------------------


def capacity_limit(capacity: CSIStorageCapacity) -> str | None:
    """Upstream ``volumeLimit``: ``maximumVolumeSize`` when set, else ``capacity``."""
    if capacity.maximum_volume_size is not None:
        return capacity.maximum_volume_size
    return capacity.capacity


@dataclass(frozen=True, slots=True)
class ProvisionRule:
    """What decides, node by node, whether a claim can be provisioned there.

    ``error``: the check fails outright (upstream returns an error); ``provisioner``
    "" means the class cannot provision; ``capacities`` is None when capacity is not
    checked, else the class's capacities large enough, in lister order (the node needs
    one whose ``nodeTopology`` selects it)."""

    claim: PersistentVolumeClaim
    error: str | None = None
    storage_class: StorageClass | None = None
    capacities: tuple[CSIStorageCapacity, ...] | None = None

    @property
    def can_provision(self) -> bool:
        sc = self.storage_class
        return sc is not None and sc.provisioner not in ("", NOT_SUPPORTED_PROVISIONER)

    def topology_fits(self, labels: Mapping[str, str]) -> bool:
        assert self.storage_class is not None
        return topology_terms_match(self.storage_class.allowed_topologies, labels)

    def capacity_for(self, labels: Mapping[str, str]) -> tuple[bool, CSIStorageCapacity | None]:
        """Whether the node has room, and the first capacity that says so."""
        if self.capacities is None:
            return True, None
        for capacity in self.capacities:
            if capacity.node_topology is not None and label_selector_matches(
                capacity.node_topology, labels
            ):
                return True, capacity
        return False, None


def provision_rule(pvc: PersistentVolumeClaim, listers: Listers) -> ProvisionRule:
    """The node-independent half of upstream ``checkVolumeProvisions`` and
    ``hasEnoughCapacity`` for one claim."""
    name = claim_class(pvc)
    if not name:
        return ProvisionRule(pvc, error=f'no class for claim "{pvc.key}"')
    storage_class = listers.classes.get_class(name)
    if storage_class is None:
        return ProvisionRule(pvc, error=f'failed to find storage class "{name}"')
    rule = ProvisionRule(pvc, storage_class=storage_class)
    if not rule.can_provision:
        return rule
    request = pvc.spec.resources.requests.get(STORAGE)
    if request is None:
        return rule
    driver = listers.drivers.get_csi_driver(storage_class.provisioner)
    if driver is None or not driver.spec.storage_capacity:
        return rule
    size = quantity_value(request)
    fitting = tuple(
        capacity
        for capacity in listers.capacities.storage_capacities()
        if capacity.storage_class_name == name
        and (limit := capacity_limit(capacity)) is not None
        and quantity_value(limit) >= size
    )
    return ProvisionRule(pvc, storage_class=storage_class, capacities=fitting)
