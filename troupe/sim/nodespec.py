"""``NodeSpec``: a group of identical simulated nodes, and the Node objects it generates.

Each node gets the well-known labels a real kubelet sets (``kubernetes.io/hostname``,
``kubernetes.io/os``, ``kubernetes.io/arch``, ``node.kubernetes.io/instance-type``),
``topology.kubernetes.io/zone`` round-robin over ``zones`` (and the region the zones
belong to), ``troupe.dev/rack`` (racks numbered within each zone) and, when ``gpus`` > 0,
an ``nvidia.com/gpu`` capacity. Status is what a kubelet reports (clients such as the
official Python client require every ``nodeInfo`` field): Ready with no pressure
conditions, an InternalIP and Hostname address, the kubelet endpoint, and ``nodeInfo``
with stable machine, system and boot IDs derived from the node name; capacity =
allocatable. Used by ``SimCluster`` and by scenarios.
"""

from __future__ import annotations

import ipaddress
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

HOSTNAME_LABEL: Final = "kubernetes.io/hostname"
ZONE_LABEL: Final = "topology.kubernetes.io/zone"
REGION_LABEL: Final = "topology.kubernetes.io/region"
RACK_LABEL: Final = "troupe.dev/rack"
GPU_RESOURCE: Final = "nvidia.com/gpu"
KUBELET_VERSION: Final = "v1.36.0-troupe-sim"
KERNEL_VERSION: Final = "6.8.0-troupe-sim"
OS_IMAGE: Final = "troupe simulated node"
CONTAINER_RUNTIME: Final = "sim://1.0"
_ID_NAMESPACE: Final = uuid.UUID("5a6f6e3c-7d1b-4c59-9a57-7472f0b0e5e1")


@dataclass(frozen=True)
class NodeSpec:
    count: int
    cpu: str = "32"
    memory: str = "128Gi"
    pods: int = 110
    gpus: int = 0
    labels: Mapping[str, str] = field(default_factory=dict)
    # Taints as the API writes them: {"key", "value"?, "effect"}.
    taints: tuple[Mapping[str, str], ...] = ()
    name_prefix: str = "node"
    zones: tuple[str, ...] = ("zone-a",)
    # Racks per zone (0: no rack label).
    racks: int = 4
    region: str = "region-1"
    instance_type: str = "sim.large"

    def capacity(self) -> dict[str, str]:
        """``status.capacity`` of each node (= allocatable)."""
        capacity = {
            "cpu": self.cpu,
            "memory": self.memory,
            "pods": str(self.pods),
            "ephemeral-storage": "100Gi",
        }
        if self.gpus > 0:
            capacity[GPU_RESOURCE] = str(self.gpus)
        return capacity

    def node(self, index: int, now: str = "", address: str = "") -> dict[str, Any]:
        """The Node object of the ``index``-th node of this spec (``<prefix>-<index>``).

        ``now`` (RFC 3339) stamps the conditions' heartbeat and transition times;
        ``address`` is the InternalIP (default: ``internal_ip(index)``; ``SimCluster``
        numbers every node of the cluster so prefixes do not share addresses)."""
        name = f"{self.name_prefix}-{index}"
        zone = self.zones[index % len(self.zones)] if self.zones else ""
        labels = {
            HOSTNAME_LABEL: name,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            "node.kubernetes.io/instance-type": self.instance_type,
        }
        if zone:
            labels[ZONE_LABEL] = zone
            labels[REGION_LABEL] = self.region
        if self.racks > 0:
            rack = (index // max(1, len(self.zones))) % self.racks
            labels[RACK_LABEL] = f"{zone or 'rack'}-r{rack}"
        labels.update(self.labels)
        capacity = self.capacity()
        spec: dict[str, Any] = {}
        if self.taints:
            spec["taints"] = [dict(t) for t in self.taints]
        address = address or internal_ip(index)
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": labels},
            "spec": spec,
            "status": {
                "capacity": capacity,
                "allocatable": dict(capacity),
                "conditions": node_conditions(now),
                "addresses": [
                    {"type": "InternalIP", "address": address},
                    {"type": "Hostname", "address": name},
                ],
                "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
                "nodeInfo": node_info(name),
                "images": [],
            },
        }


def internal_ip(ordinal: int) -> str:
    """The ``ordinal``-th host address of 10.0.0.0/8 (10.0.0.1, 10.0.0.2, ...)."""
    return str(ipaddress.IPv4Address("10.0.0.0") + 1 + ordinal % (2**24 - 2))


def node_info(name: str) -> dict[str, str]:
    """``status.nodeInfo`` as a kubelet reports it; the identifiers are stable per name."""
    machine = uuid.uuid5(_ID_NAMESPACE, f"machine/{name}")
    return {
        "machineID": machine.hex,
        "systemUUID": str(uuid.uuid5(_ID_NAMESPACE, f"system/{name}")).upper(),
        "bootID": str(uuid.uuid5(_ID_NAMESPACE, f"boot/{name}")),
        "kernelVersion": KERNEL_VERSION,
        "osImage": OS_IMAGE,
        "containerRuntimeVersion": CONTAINER_RUNTIME,
        "kubeletVersion": KUBELET_VERSION,
        "kubeProxyVersion": "",
        "operatingSystem": "linux",
        "architecture": "amd64",
    }


def node_conditions(now: str) -> list[dict[str, str]]:
    """The kubelet's node conditions: healthy and Ready, stamped ``now`` (RFC 3339)."""
    healthy = (
        ("MemoryPressure", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
        ("DiskPressure", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
        ("PIDPressure", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
    )
    conditions = [
        {"type": kind, "status": "False", "reason": reason, "message": message}
        for kind, reason, message in healthy
    ]
    conditions.append(
        {
            "type": "Ready",
            "status": "True",
            "reason": "KubeletReady",
            "message": "kubelet is posting ready status",
        }
    )
    if now:
        for condition in conditions:
            condition["lastHeartbeatTime"] = now
            condition["lastTransitionTime"] = now
    return conditions
