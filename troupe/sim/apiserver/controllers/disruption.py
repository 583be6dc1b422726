"""PodDisruptionBudget status, computed from the matching pods as kube-controller-manager's
disruption controller does (pkg/controller/disruption).

For each PDB: ``expectedPods`` (the embedded cluster runs no workload controllers, so
every matching pod counts as its own controller of scale 1: the number of matching
pods; 0 when neither minAvailable nor maxUnavailable is set, as upstream),
``desiredHealthy`` (``minAvailable``, or ``expectedPods - maxUnavailable``;
percentages scaled on ``expectedPods`` and rounded up), ``currentHealthy`` (matching
pods that are Ready, not being deleted and not in ``disruptedPods``),
``disruptionsAllowed = max(0, currentHealthy - desiredHealthy)``, ``observedGeneration``
and the ``DisruptionAllowed`` condition (SufficientPods / InsufficientPods).
``disruptedPods`` entries written by the eviction subresource are kept until their pod is
being deleted or gone, or for two minutes (checked when the status is next computed).

``DisruptionController`` follows pod and PDB changes in the store and recomputes the PDBs
of a changed namespace once per event-loop iteration (coalesced; at once when no loop
runs). ``registry.eviction.evict`` calls ``refresh`` first, so an eviction and the status a client
reads agree. Installed by ``registry.bootstrap.new_store``.
"""

from __future__ import annotations

import asyncio
from typing import Any, Final

from pydantic import ValidationError

from troupe.api.objects import LabelSelector as ApiLabelSelector
from troupe.api.selectors import label_selector_matches
from troupe.sim.apiserver.machinery.meta import parse_rfc3339
from troupe.sim.apiserver.storage.store import Obj, Store

PDBS: Final = "poddisruptionbudgets.policy"
DELETION_TIMEOUT: Final = 120.0  # seconds a disrupted pod may take to start deleting


def pod_is_healthy(pod: Obj) -> bool:
    """Counted by the disruption controller: Ready and not being deleted."""
    if pod["metadata"].get("deletionTimestamp"):
        return False
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def scaled(value: int | str, total: int, round_up: bool) -> int:
    """``intstr.GetScaledValueFromIntOrPercent``."""
    if isinstance(value, int):
        return value
    text = str(value)
    if text.endswith("%"):
        percent = int(text[:-1])
        whole, rest = divmod(percent * total, 100)
        return whole + (1 if round_up and rest else 0)
    return int(text)


def pods_of(store: Store, pdb: Obj) -> list[Obj]:
    """The pods in the PDB's namespace its selector matches (none for no or a bad one)."""
    raw = (pdb.get("spec") or {}).get("selector")
    if raw is None:
        return []
    try:
        selector = ApiLabelSelector.model_validate(raw)
    except ValidationError:
        return []
    namespace = pdb["metadata"].get("namespace")
    return [
        p
        for p in store.list("pods", namespace, copy=False)
        if label_selector_matches(selector, p["metadata"].get("labels") or {})
    ]


def compute_status(store: Store, pdb: Obj) -> dict[str, Any]:
    """The status the disruption controller would write for ``pdb`` now."""
    pods = pods_of(store, pdb)
    old = pdb.get("status") or {}
    now = store.clock.wall()
    disrupted = {
        name: stamp
        for name, stamp in (old.get("disruptedPods") or {}).items()
        if any(
            p["metadata"]["name"] == name and not p["metadata"].get("deletionTimestamp")
            for p in pods
        )
        and parse_rfc3339(stamp) + DELETION_TIMEOUT >= now
    }
    spec = pdb.get("spec") or {}
    # getExpectedPodCount: with neither field set nothing is expected or desired.
    has_budget = spec.get("maxUnavailable") is not None or spec.get("minAvailable") is not None
    expected = len(pods) if has_budget else 0
    healthy = sum(1 for p in pods if pod_is_healthy(p) and p["metadata"]["name"] not in disrupted)
    generation = int(pdb["metadata"].get("generation", 1))
    try:
        if spec.get("maxUnavailable") is not None:
            desired = max(0, expected - scaled(spec["maxUnavailable"], expected, True))
        elif spec.get("minAvailable") is not None:
            desired = scaled(spec["minAvailable"], expected, True)
        else:
            desired = 0
    except ValueError:
        desired = expected  # a malformed value protects every pod
    allowed = max(0, healthy - desired)
    status: dict[str, Any] = {}
    if disrupted:
        status["disruptedPods"] = disrupted
    status.update(
        disruptionsAllowed=allowed,
        currentHealthy=healthy,
        desiredHealthy=desired,
        expectedPods=expected,
        observedGeneration=generation,
        conditions=[_condition(old, allowed > 0, store.now(), generation)],
    )
    return status


def _condition(old: dict[str, Any], sufficient: bool, now: str, generation: int) -> dict[str, Any]:
    previous: dict[str, Any] = next(
        (c for c in old.get("conditions") or [] if c.get("type") == "DisruptionAllowed"), {}
    )
    state = "True" if sufficient else "False"
    return {
        "type": "DisruptionAllowed",
        "status": state,
        "reason": "SufficientPods" if sufficient else "InsufficientPods",
        "message": "",
        "lastTransitionTime": (
            previous.get("lastTransitionTime", now) if previous.get("status") == state else now
        ),
        "observedGeneration": generation,
    }


def refresh(store: Store, namespace: str) -> None:
    """Recompute and store the status of every PDB in ``namespace`` (no-op writes are
    dropped by the store)."""
    rt = store.resolve(PDBS)
    for pdb in store.list(rt, namespace, copy=False):
        status = compute_status(store, pdb)
        if status != pdb.get("status"):
            new = {**pdb, "metadata": dict(pdb["metadata"]), "status": status}
            store.replace_object(rt, new, pdb)


class DisruptionController:
    """Keeps PDB statuses current as pods and PDBs change."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._dirty: set[str] = set()
        self._scheduled = False
        self._pdbs = store.resolve(PDBS)
        store.listen("pods", self._changed)
        store.listen(PDBS, self._changed)

    def _changed(self, type_: str, obj: Obj) -> None:
        namespace = obj["metadata"].get("namespace", "")
        if namespace in self._dirty or not self.store.objects(self._pdbs):
            return
        if not self.store.list(self._pdbs, namespace, copy=False):
            return
        self._dirty.add(namespace)
        if self._scheduled:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.flush()
            return
        self._scheduled = True
        loop.call_soon(self.flush)

    def flush(self) -> None:
        self._scheduled = False
        while self._dirty:
            refresh(self.store, self._dirty.pop())
