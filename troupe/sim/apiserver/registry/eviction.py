"""``pods/eviction``: ``EvictionREST.Create`` of pkg/registry/core/pod/storage/eviction.go.

An Eviction of the wrong JSON types is the decoder's 400 (``schemas.EVICTION``).
Terminal, pending and already-deleting pods are deleted outright (``canIgnorePDB``);
otherwise the one PodDisruptionBudget selecting the pod must allow a disruption or the
answer is 429 TooManyRequests with upstream's message and DisruptionBudget cause. The
decision reads the PDB status the disruption controller (``controllers/disruption.py``)
keeps, freshly computed first; an allowed eviction takes one disruption and records the pod in
``disruptedPods``, as upstream. Called by the server's subresource handler.
"""

from __future__ import annotations

from typing import Final

from troupe.api.objects import LabelSelector as ApiLabelSelector
from troupe.api.selectors import label_selector_matches
from troupe.sim.apiserver.controllers.disruption import PDBS, compute_status, refresh
from troupe.sim.apiserver.machinery import errors
from troupe.sim.apiserver.registry.decoding import check_types
from troupe.sim.apiserver.registry.pods import TERMINAL_PHASES
from troupe.sim.apiserver.registry.schemas import EVICTION
from troupe.sim.apiserver.storage.store import Obj, Store

_VIOLATION: Final = "Cannot evict pod as it would violate the pod's disruption budget."
_MANY_PDBS: Final = (
    "This pod has more than one PodDisruptionBudget, which the eviction subresource does not "
    "support."
)


def pdb_budget(store: Store, pdb: Obj) -> tuple[int, int, int]:
    """(disruptionsAllowed, desiredHealthy, currentHealthy) of a PDB, from its status (the
    disruption controller keeps it current; computed here when it has not run yet)."""
    status = pdb.get("status") or {}
    if "disruptionsAllowed" not in status:
        status = compute_status(store, pdb)
    return (
        int(status["disruptionsAllowed"]),
        int(status.get("desiredHealthy", 0)),
        int(status.get("currentHealthy", 0)),
    )


def evict(store: Store, namespace: str, name: str, eviction: Obj) -> None:
    """Evict a pod unless a PodDisruptionBudget forbids it (429)."""
    check_types("Eviction", "v1", eviction, EVICTION)
    rt = store.resolve("pods")
    meta = eviction.get("metadata") or {}
    if meta.get("name") and meta["name"] != name:
        raise errors.bad_request("name in URL does not match name in Eviction object")
    options = eviction.get("deleteOptions") or {}
    pod = store.find(rt, namespace, name)
    if pod is None:
        raise errors.not_found(rt, name)
    phase = (pod.get("status") or {}).get("phase")
    # canIgnorePDB: terminal, pending and already-deleting pods are evicted outright.
    if phase not in (*TERMINAL_PHASES, "Pending") and not pod["metadata"].get("deletionTimestamp"):
        pdbs_rt = store.resolve(PDBS)
        refresh(store, namespace)  # decide on the status a client would read now
        labels = pod["metadata"].get("labels") or {}
        matching = [
            pdb
            for pdb in store.list(pdbs_rt, namespace, copy=False)
            if (pdb.get("spec") or {}).get("selector") is not None
            and label_selector_matches(
                ApiLabelSelector.model_validate(pdb["spec"]["selector"]), labels
            )
        ]
        if len(matching) > 1:
            raise errors.ApiError(errors.status_failure(500, "InternalError", _MANY_PDBS))
        if matching:
            pdb = matching[0]
            allowed, desired, healthy = pdb_budget(store, pdb)
            if allowed <= 0:
                why = (
                    f"The disruption budget {pdb['metadata']['name']} needs {desired} healthy "
                    f"pods and has {healthy} currently"
                )
                cause = {"reason": "DisruptionBudget", "message": why}
                raise errors.ApiError(
                    errors.status_failure(429, "TooManyRequests", _VIOLATION, {"causes": [cause]})
                )
            if "disruptionsAllowed" in (pdb.get("status") or {}):
                status = dict(pdb["status"])
                status["disruptionsAllowed"] = allowed - 1
                status["disruptedPods"] = {**(status.get("disruptedPods") or {}), name: store.now()}
                store.replace_object(
                    pdbs_rt, {**pdb, "status": status, "metadata": dict(pdb["metadata"])}, pdb
                )
    store.delete(
        rt,
        name,
        namespace,
        grace_period_seconds=options.get("gracePeriodSeconds"),
        preconditions=options.get("preconditions"),
        copy=False,
    )
