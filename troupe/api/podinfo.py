"""PodInfo: a pod with what scheduling needs computed once.

Built when a pod enters the cache or the queue, never per cycle: requests as integers,
non-zero requests for scoring, host ports, priority, and the affinity terms
(upstream ``framework.PodInfo``). Plugins read it; only the cache and queue create it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

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


@dataclass(slots=True, eq=False)
class PodInfo:
    pod: Pod
    key: PodKey
    requests: dict[str, int]
    nonzero_cpu: int
    nonzero_memory: int
    priority: int
    host_ports: tuple[HostPort, ...]
    required_affinity: tuple[PodAffinityTerm, ...] = ()
    required_anti_affinity: tuple[PodAffinityTerm, ...] = ()
    preferred_affinity: tuple[WeightedPodAffinityTerm, ...] = ()
    preferred_anti_affinity: tuple[WeightedPodAffinityTerm, ...] = ()
    # Free-form per-pod cache for plugins that precompute from the pod spec
    # (keyed by plugin name); the pod object never changes under a PodInfo.
    extra: dict[str, object] = field(default_factory=dict)

    @classmethod
    def of(cls, pod: Pod) -> PodInfo:
        cpu, memory = pod_nonzero_requests(pod)
        aff = pod.spec.affinity
        pa = aff.pod_affinity if aff else None
        paa = aff.pod_anti_affinity if aff else None
        return cls(
            pod=pod,
            key=pod.key,
            requests=pod_requests(pod),
            nonzero_cpu=cpu,
            nonzero_memory=memory,
            priority=pod.spec.priority or 0,
            host_ports=_host_ports(pod),
            required_affinity=tuple(pa.required_during_scheduling_ignored_during_execution)
            if pa
            else (),
            required_anti_affinity=tuple(paa.required_during_scheduling_ignored_during_execution)
            if paa
            else (),
            preferred_affinity=tuple(pa.preferred_during_scheduling_ignored_during_execution)
            if pa
            else (),
            preferred_anti_affinity=tuple(paa.preferred_during_scheduling_ignored_during_execution)
            if paa
            else (),
        )

    @property
    def namespace(self) -> str:
        return self.pod.metadata.namespace

    @property
    def labels(self) -> dict[str, str]:
        return self.pod.metadata.labels

    @property
    def has_affinity(self) -> bool:
        return bool(
            self.required_affinity
            or self.required_anti_affinity
            or self.preferred_affinity
            or self.preferred_anti_affinity
        )
