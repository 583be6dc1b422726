"""PodInfo: a pod with what scheduling needs computed once; PodRecord: what outlives it.

Built when a pod enters the cache or the queue, never per cycle: requests as integers,
non-zero requests for scoring, priority (upstream ``framework.PodInfo``), and the
pod's ``PodRecord``. Plugins read it; only the cache and queue create it.

``PodRecord``, an immutable NamedTuple, is what the NodeTable's change log keeps of a
pod (``NodeTable.changes_since``): the namespace, labels, whether it is terminating,
host ports and pod (anti-)affinity terms, which is all its readers
(``troupe.api.podcounts``, NodePorts, InterPodAffinity) look at. It holds no
reference to the Pod or its PodInfo, so a deleted pod is freed while the log still
remembers it: memory is bounded by the live pods, not by the 65,536 changes the log
may keep.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

from troupe.api.objects import Pod, PodAffinityTerm, PodKey, WeightedPodAffinityTerm
from troupe.api.resources import pod_nonzero_requests, pod_requests

HostPort = tuple[str, str, int]
"""(protocol, hostIP, hostPort); hostIP "0.0.0.0" when unset."""


def _host_ports(pod: Pod) -> tuple[HostPort, ...]:
    ports: list[HostPort] = []
    for c in pod.spec.containers:
        for p in c.ports:
            if p.host_port > 0:
                ports.append((p.protocol or "TCP", p.host_ip or "0.0.0.0", p.host_port))
    return tuple(ports)


# AffinityTerms and PodRecord are NamedTuples rather than frozen dataclasses: one is
# built for every PodInfo, and a NamedTuple is built in a third of the time (a frozen
# dataclass sets each field through object.__setattr__), while reading a field costs
# the same.


class AffinityTerms(NamedTuple):
    """A pod's pod affinity and anti-affinity terms (at least one of them)."""

    required_affinity: tuple[PodAffinityTerm, ...]
    required_anti_affinity: tuple[PodAffinityTerm, ...]
    preferred_affinity: tuple[WeightedPodAffinityTerm, ...]
    preferred_anti_affinity: tuple[WeightedPodAffinityTerm, ...]
    # What a plugin compiles from the terms, by plugin name, so a pod's terms are
    # compiled once however often the change log is read (the terms never change).
    compiled: dict[str, object]

    @classmethod
    def of(cls, pod: Pod) -> AffinityTerms | None:
        aff = pod.spec.affinity
        pa = aff.pod_affinity if aff else None
        paa = aff.pod_anti_affinity if aff else None
        if pa is None and paa is None:
            return None
        required = tuple(pa.required_during_scheduling_ignored_during_execution) if pa else ()
        required_anti = (
            tuple(paa.required_during_scheduling_ignored_during_execution) if paa else ()
        )
        preferred = tuple(pa.preferred_during_scheduling_ignored_during_execution) if pa else ()
        preferred_anti = (
            tuple(paa.preferred_during_scheduling_ignored_during_execution) if paa else ()
        )
        if not (required or required_anti or preferred or preferred_anti):
            return None
        return cls(required, required_anti, preferred, preferred_anti, {})


class PodRecord(NamedTuple):
    """What the NodeTable's change log keeps of a pod; see the module docstring.

    ``labels`` is the pod's own labels mapping, shared and never modified."""

    namespace: str
    labels: Mapping[str, str]
    terminating: bool
    host_ports: tuple[HostPort, ...]
    affinity: AffinityTerms | None  # None: no pod (anti-)affinity term

    @classmethod
    def of(cls, pod: Pod) -> PodRecord:
        meta = pod.metadata
        return cls(
            meta.namespace,
            meta.labels,
            meta.deletion_timestamp is not None,
            _host_ports(pod),
            AffinityTerms.of(pod),
        )


@dataclass(slots=True, eq=False)
class PodInfo:
    """A pod and what scheduling derives from it once.

    ``pod`` may be swapped for a newer version of the same pod (a status change, the
    binding confirmed) only when nothing ``record`` or the requests derive from
    changed; otherwise the cache builds a new PodInfo."""

    pod: Pod
    key: PodKey
    requests: dict[str, int]
    nonzero_cpu: int
    nonzero_memory: int
    priority: int
    record: PodRecord
    # Free-form per-pod cache for plugins that precompute from the pod spec
    # (keyed by plugin name); the spec never changes under a PodInfo.
    extra: dict[str, object] = field(default_factory=dict)
    # From ``record``, which never changes under a PodInfo. Attributes, not
    # properties: the NodeTable and the batch signature read them for every pod
    # placed, and a property is a Python call each time.
    host_ports: tuple[HostPort, ...] = field(init=False, repr=False)
    has_affinity: bool = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.host_ports = self.record.host_ports
        self.has_affinity = self.record.affinity is not None

    @classmethod
    def of(cls, pod: Pod, *, cap: bool = False) -> PodInfo:
        """Raises QuantityError for a malformed quantity, and AmountTooLarge for a
        request above ``MAX_AMOUNT`` unless ``cap`` (an assigned pod: counted as
        ``MAX_AMOUNT``, troupe.api.resources)."""
        cpu, memory = pod_nonzero_requests(pod)
        return cls(
            pod=pod,
            key=pod.key,
            requests=pod_requests(pod, cap=cap),
            nonzero_cpu=cpu,
            nonzero_memory=memory,
            priority=pod.spec.priority or 0,
            record=PodRecord.of(pod),
        )

    @property
    def namespace(self) -> str:
        return self.pod.metadata.namespace

    @property
    def labels(self) -> dict[str, str]:
        return self.pod.metadata.labels
