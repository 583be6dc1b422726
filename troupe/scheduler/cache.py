"""The scheduler cache: nodes and the pods that occupy them, including assumed pods.

The informers (``troupe.scheduler.informers``) report nodes and assigned pods; the
scheduling cycle *assumes* a pod onto its chosen node so the next cycle sees the
capacity taken before the binding is confirmed; the binding cycle then either
``finish_binding`` (the API accepted it) or ``forget``s it (it failed). An assumed
pod whose binding finished but whose bound state never arrives from the watch expires
after ``assumed_ttl`` seconds (``cleanup_expired``), so a lost event cannot leak
capacity forever.

Pods whose node is not (or no longer) known are kept aside and accounted again when
the node appears: node deletion never loses its pods.

All node state lives in the ``NodeTable`` (``self.table``), which is also the live
snapshot every cycle reads.

What cannot be counted is never half-counted (docs/reliability.md): a node whose
allocatable cannot be used raises QuantityError from ``add_node``/``update_node`` with
the table unchanged; an assigned pod asking more than ``MAX_AMOUNT`` of a resource is
counted as asking ``MAX_AMOUNT`` (it occupies its node whatever troupe thinks of it),
and one whose quantities do not parse is left out; ``add_pod``/``update_pod`` return
that problem for the caller to report.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import structlog

from troupe.api.clock import Clock
from troupe.api.nodetable import NodeTable
from troupe.api.objects import Node, Pod, PodKey
from troupe.api.podinfo import PodInfo
from troupe.api.quantity import AmountTooLarge, QuantityError

log = structlog.get_logger("troupe.cache")


class PlacementListener(Protocol):
    def pod_placed(self, pod: Pod) -> None: ...
    def pod_unplaced(self, pod: Pod) -> None: ...


def _accounted_alike(a: Pod, b: Pod) -> bool:
    """Whether ``b`` may replace ``a`` under its PodInfo: the metadata the PodInfo's
    record keeps (labels, terminating) is the same. A pod that starts terminating is
    accounted again, so PodTopologySpread stops counting it (kubernetes#87621)."""
    return (
        a.metadata.labels == b.metadata.labels
        and a.metadata.deletion_timestamp == b.metadata.deletion_timestamp
    )


def _assigned_info(pod: Pod) -> tuple[PodInfo | None, QuantityError | None]:
    """An assigned pod's PodInfo and what is wrong with its quantities: a request
    above ``MAX_AMOUNT`` is capped there; a malformed quantity gives no PodInfo."""
    try:
        return PodInfo.of(pod), None
    except AmountTooLarge as err:
        # Malformed quantities raise before sizes are checked: this one parses.
        return PodInfo.of(pod, cap=True), err
    except QuantityError as err:
        return None, err


@dataclass(slots=True)
class _CachedPod:
    info: PodInfo
    node_name: str
    assumed: bool
    binding_finished: bool = False
    deadline: float | None = None


class Cache:
    def __init__(
        self,
        clock: Clock,
        assumed_ttl: float = 900.0,
        table: NodeTable | None = None,
        listener: PlacementListener | None = None,
    ) -> None:
        self.table = table if table is not None else NodeTable()
        # Told of every pod that starts or stops occupying a node (bound or
        # assumed): the gang directory counts placed members this way.
        self.listener = listener
        self._clock = clock
        self._assumed_ttl = assumed_ttl
        self._pods: dict[PodKey, _CachedPod] = {}
        # Keys of the assumed pods among them, in the order they were assumed: expiry
        # checks these alone, not every pod in the cluster once a second.
        self._assumed: dict[PodKey, None] = {}
        # Pods whose node is unknown: node name -> key -> info.
        self._orphans: dict[str, dict[PodKey, PodInfo]] = {}

    # --- nodes -----------------------------------------------------------------

    def add_node(self, node: Node) -> None:
        self.table.add_node(node)
        for info in self._orphans.pop(node.metadata.name, {}).values():
            self.table.add_pod(info, node.metadata.name)

    def update_node(self, node: Node) -> None:
        if node.metadata.name in self.table.index:
            self.table.update_node(node)
        else:
            self.add_node(node)

    def remove_node(self, name: str) -> None:
        pods = self.table.remove_node(name)
        if pods:
            self._orphans[name] = {p.key: p for p in pods}

    @property
    def node_count(self) -> int:
        return self.table.size

    # --- pods from the informers -----------------------------------------------

    def add_pod(self, pod: Pod) -> QuantityError | None:
        """An assigned pod was observed (added, or updated to bound). Returns what is
        wrong with its quantities, if anything (see the module docstring)."""
        key = pod.key
        cached = self._pods.get(key)
        if cached is not None and cached.assumed and cached.node_name == pod.spec.node_name:
            # The binding we made is confirmed: keep the accounting, drop expiry,
            # and what plugins derived from the pod to place it (``extra`` is a
            # cache, recomputed if asked again), which bound pods would otherwise
            # carry for as long as they run.
            cached.assumed = False
            cached.deadline = None
            self._assumed.pop(key, None)
            cached.info.extra.clear()
            if _accounted_alike(cached.info.pod, pod):
                # Binding changes nothing the accounting derived from the spec.
                cached.info.pod = pod
                return None
            return self._reaccount(cached, pod)
        info, problem = _assigned_info(pod)
        if cached is not None:
            # Assumed elsewhere, or already known: the API server is the truth.
            self._drop(key)
        if info is not None:
            self._pods[key] = _CachedPod(info, pod.spec.node_name, assumed=False)
            self._account(info, pod.spec.node_name)
        return problem

    def update_pod(self, old: Pod, new: Pod) -> QuantityError | None:
        """A bound pod changed; returns what is wrong with its quantities, if anything."""
        cached = self._pods.get(new.key)
        if cached is None or cached.node_name != new.spec.node_name or cached.assumed:
            return self.add_pod(new)
        current = cached.info.pod
        if current.spec == new.spec and _accounted_alike(current, new):
            # A status change (Running, conditions): nothing the accounting derives
            # from the pod moved, so the table (and its generation) stays as it is.
            cached.info.pod = new
            return None
        return self._reaccount(cached, new)

    def remove_pod(self, pod: Pod) -> None:
        if pod.key in self._pods:
            self._drop(pod.key)

    def _reaccount(self, cached: _CachedPod, pod: Pod) -> QuantityError | None:
        """Account ``cached`` as its new version ``pod``, or leave it out if that
        version's quantities do not parse."""
        info, problem = _assigned_info(pod)
        if info is None:
            self._drop(pod.key)
        else:
            self._replace(cached, info)
        return problem

    def _drop(self, key: PodKey) -> None:
        cached = self._pods.pop(key)
        self._assumed.pop(key, None)
        self._unaccount(cached)

    # --- assume / forget ---------------------------------------------------------

    def assume(self, info: PodInfo, node_name: str) -> None:
        if info.key in self._pods:
            raise ValueError(f"pod {info.key} is already in the cache, cannot assume it")
        self._pods[info.key] = _CachedPod(info, node_name, assumed=True)
        self._assumed[info.key] = None
        self._account(info, node_name)

    def forget(self, info: PodInfo) -> None:
        cached = self._pods.get(info.key)
        if cached is None or not cached.assumed:
            return
        del self._pods[info.key]
        self._assumed.pop(info.key, None)
        self._unaccount(cached)

    def finish_binding(self, key: PodKey) -> None:
        cached = self._pods.get(key)
        if cached is not None and cached.assumed:
            cached.binding_finished = True
            cached.deadline = self._clock.now() + self._assumed_ttl

    def is_assumed(self, key: str) -> bool:
        cached = self._pods.get(PodKey(key))
        return cached is not None and cached.assumed

    def uid_of(self, key: str) -> str | None:
        cached = self._pods.get(PodKey(key))
        return cached.info.pod.metadata.uid if cached is not None else None

    def binding_in_flight(self, key: str) -> bool:
        """Assumed and the binding cycle has not finished yet."""
        cached = self._pods.get(PodKey(key))
        return cached is not None and cached.assumed and not cached.binding_finished

    def node_of(self, key: str) -> str | None:
        cached = self._pods.get(PodKey(key))
        return cached.node_name if cached is not None else None

    def info_of(self, key: str) -> PodInfo | None:
        """The pod as accounted (bound or assumed), or None."""
        cached = self._pods.get(PodKey(key))
        return cached.info if cached is not None else None

    def cleanup_expired(self) -> list[PodKey]:
        """Drop assumed pods whose binding finished but was never confirmed."""
        now = self._clock.now()
        expired = []
        for key in self._assumed:
            deadline = self._pods[key].deadline
            if deadline is not None and deadline <= now:
                expired.append(key)
        for key in expired:
            cached = self._pods.pop(key)
            del self._assumed[key]
            self._unaccount(cached)
            log.warning("assumed pod expired", pod=key, node=cached.node_name)
        return expired

    def __contains__(self, key: object) -> bool:
        return key in self._pods

    @property
    def pod_count(self) -> int:
        return len(self._pods)

    @property
    def assumed_count(self) -> int:
        return len(self._assumed)

    # --- accounting ----------------------------------------------------------------

    def _account(self, info: PodInfo, node_name: str) -> None:
        if self.listener is not None:
            self.listener.pod_placed(info.pod)
        if not self.table.add_pod(info, node_name):
            self._orphans.setdefault(node_name, {})[info.key] = info

    def _unaccount(self, cached: _CachedPod) -> None:
        if self.listener is not None:
            self.listener.pod_unplaced(cached.info.pod)
        if not self.table.remove_pod(cached.info, cached.node_name):
            orphans = self._orphans.get(cached.node_name)
            if orphans is not None:
                orphans.pop(cached.info.key, None)
                if not orphans:
                    del self._orphans[cached.node_name]

    def _replace(self, cached: _CachedPod, new: PodInfo) -> None:
        self._unaccount(cached)
        cached.info = new
        self._account(new, cached.node_name)
