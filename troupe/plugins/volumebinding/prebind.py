"""VolumeBinding PreBind: the API writes to make, and the check to poll until the
PV controller (or a provisioner) has bound every claim.

Upstream ``BindPodVolumes``: ``bindAPIUpdate`` writes the assumed PVs (their
``claimRef``), then the assumed claims (``selected-node``), each with a full update;
then ``checkBindings`` runs every second, up to ``bindTimeoutSeconds``, on the
informer's objects (not the assumed ones: another pod may have assumed over them).
This module is the pure part: ``plan`` says what to write, ``restore_unwritten``
undoes the assumptions a failed write leaves, ``check_bindings`` judges one poll.
The plugin (wired later) performs the writes through the framework's client and
drives the poll with the injected clock.

A check is DONE when every claim is fully bound, PENDING while the controller works
(or the informer has not seen our write yet: its ``resourceVersion`` is older than
the one the write returned), FAILED with upstream's message when retrying cannot
help: a provisioner that gives up removes ``selected-node`` (``provisioning failed
for PVC "x"``), the PV controller dropped a ``claimRef``, a PV's affinity excludes
the node, or the pod or node is gone. PreBind wraps a failure, and a timeout, as
upstream: ``binding volumes: <message>`` / ``binding volumes: context deadline
exceeded``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from troupe.api.objects import Node
from troupe.api.storage import PersistentVolume, PersistentVolumeClaim
from troupe.api.volumes import ANN_SELECTED_NODE, is_fully_bound, volume_fits_labels
from troupe.plugins.volumebinding.assume import Assumed
from troupe.plugins.volumebinding.caches import VolumeCaches

TIMEOUT_MESSAGE = "binding volumes: context deadline exceeded"
POLL_INTERVAL_SECONDS = 1.0


@dataclass(frozen=True, slots=True)
class PreBindPlan:
    """The writes PreBind makes, in order: PVs first, then claims. After a write the
    plugin replaces the entry with the object the API server returned (its new
    ``resourceVersion`` is what the check waits for)."""

    volumes: tuple[PersistentVolume, ...]
    claims: tuple[PersistentVolumeClaim, ...]
    # Each PV's claim (the check reads the claim's informer object).
    volume_claims: tuple[PersistentVolumeClaim, ...]

    def written(
        self,
        volumes: tuple[PersistentVolume, ...],
        claims: tuple[PersistentVolumeClaim, ...],
    ) -> PreBindPlan:
        """The plan with the objects the writes returned."""
        return PreBindPlan(volumes, claims, self.volume_claims)


def plan(assumed: Assumed) -> PreBindPlan | None:
    """What PreBind writes for what Reserve assumed; None when every claim was bound
    already (PreBind succeeds at once)."""
    if assumed.all_bound:
        return None
    bindings = assumed.volumes.static_bindings
    return PreBindPlan(
        tuple(b.volume for b in bindings),
        tuple(p.claim for p in assumed.volumes.dynamic_provisions),
        tuple(b.claim for b in bindings),
    )


def restore_unwritten(
    plan: PreBindPlan, volumes_written: int, claims_written: int, caches: VolumeCaches
) -> None:
    """After a failed write: restore the assumptions not backed by a write (upstream
    ``bindAPIUpdate``'s deferred revert), so the cycle's next attempt starts clean."""
    for pv in plan.volumes[volumes_written:]:
        caches.pvs.restore(pv.metadata.name)
    for pvc in plan.claims[claims_written:]:
        caches.pvcs.restore(pvc.key)


class Progress(enum.Enum):
    DONE = "done"
    PENDING = "pending"
    FAILED = "failed"


@dataclass(frozen=True, slots=True)
class BindCheck:
    progress: Progress
    message: str = ""


PENDING = BindCheck(Progress.PENDING)


def _failed(message: str) -> BindCheck:
    return BindCheck(Progress.FAILED, message)


def _older(written: str, seen: str) -> bool:
    """Upstream ``CompareResourceVersion(written, seen) > 0``: the informer has not
    caught up with our write."""
    try:
        return int(written) > int(seen)
    except ValueError:
        return False


def check_bindings(
    plan: PreBindPlan,
    caches: VolumeCaches,
    *,
    pod_name: str,
    pod_exists: bool,
    node_name: str,
    node: Node | None,
) -> BindCheck:
    """One poll of upstream ``checkBindings`` for the pod bound for ``node_name``
    (``node``: that node's object, None once it is gone)."""
    if node is None:
        return _failed(f'failed to get node "{node_name}": node "{node_name}" not found')
    if not pod_exists:
        return _failed(f'pod does not exist any more: pod "{pod_name}" not found')
    labels = node.metadata.labels
    for written, claim in zip(plan.volumes, plan.volume_claims, strict=True):
        pv = caches.api_volume(written.metadata.name)
        if pv is None:
            return _failed(
                f'failed to check binding: could not find v1.PersistentVolume "{written.name}"'
            )
        pvc = caches.api_claim(claim.key)
        if pvc is None:
            return _failed(
                f'failed to check binding: could not find v1.PersistentVolumeClaim "{claim.key}"'
            )
        if _older(written.metadata.resource_version, pv.metadata.resource_version):
            return PENDING
        if not volume_fits_labels(pv, labels):
            return _failed(
                f'pv "{pv.name}" node affinity doesn\'t match node "{node_name}": '
                "no matching NodeSelectorTerms"
            )
        if pv.spec.claim_ref is None or not pv.spec.claim_ref.uid:
            return _failed(f'ClaimRef got reset for pv "{pv.name}"')
        if not is_fully_bound(pvc):
            return PENDING
    for written_claim in plan.claims:
        verdict = _check_provisioned(written_claim, node_name, labels, caches)
        if verdict is not None:
            return verdict
    return BindCheck(Progress.DONE)


def _check_provisioned(
    written: PersistentVolumeClaim, node_name: str, labels: dict[str, str], caches: VolumeCaches
) -> BindCheck | None:
    pvc = caches.api_claim(written.key)
    if pvc is None:
        return _failed(
            "failed to check provisioning pvc: could not find v1.PersistentVolumeClaim "
            f'"{written.key}"'
        )
    if _older(written.metadata.resource_version, pvc.metadata.resource_version):
        return PENDING
    name = pvc.metadata.name
    if not pvc.metadata.annotations:
        # An object with no annotations left decodes with a nil map upstream.
        return _failed(f'selectedNode annotation reset for PVC "{name}"')
    if pvc.metadata.annotations.get(ANN_SELECTED_NODE, "") != node_name:
        # A provisioner that cannot provision removes the annotation to say so.
        return _failed(f'provisioning failed for PVC "{name}"')
    if pvc.spec.volume_name:
        pv = caches.api_volume(pvc.spec.volume_name)
        if pv is None:
            return PENDING  # the informer may not have seen the new PV yet
        if not volume_fits_labels(pv, labels):
            return _failed(
                f'pv "{pv.name}" node affinity doesn\'t match node "{node_name}": '
                "no matching NodeSelectorTerms"
            )
    if not is_fully_bound(pvc):
        return PENDING
    return None


def failure_message(check: BindCheck) -> str:
    """What PreBind's error status says for a failed check."""
    return f"binding volumes: {check.message}"
