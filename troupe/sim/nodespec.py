"""``NodeSpec``: a group of identical simulated nodes, and the Node objects it generates.

Each node gets the well-known labels a real kubelet sets (``kubernetes.io/hostname``,
``kubernetes.io/os``, ``kubernetes.io/arch``, ``node.kubernetes.io/instance-type``),
``topology.kubernetes.io/zone`` round-robin over ``zones`` (and the region the zones
belong to), ``troupe.dev/rack`` (racks numbered within each zone) and, when ``gpus`` > 0,
an ``nvidia.com/gpu`` capacity. Status reports Ready, capacity = allocatable. Used by
``SimCluster`` and by scenarios.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

HOSTNAME_LABEL: Final = "kubernetes.io/hostname"
ZONE_LABEL: Final = "topology.kubernetes.io/zone"
REGION_LABEL: Final = "topology.kubernetes.io/region"
RACK_LABEL: Final = "troupe.dev/rack"
GPU_RESOURCE: Final = "nvidia.com/gpu"


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

    def node(self, index: int) -> dict[str, Any]:
        """The Node object of the ``index``-th node of this spec (``<prefix>-<index>``)."""
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
        capacity = {
            "cpu": self.cpu,
            "memory": self.memory,
            "pods": str(self.pods),
            "ephemeral-storage": "100Gi",
        }
        if self.gpus > 0:
            capacity[GPU_RESOURCE] = str(self.gpus)
        spec: dict[str, Any] = {}
        if self.taints:
            spec["taints"] = [dict(t) for t in self.taints]
        address = f"10.{(index >> 16) & 255}.{(index >> 8) & 255}.{index & 255}"
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": labels},
            "spec": spec,
            "status": {
                "capacity": capacity,
                "allocatable": dict(capacity),
                "conditions": [
                    {
                        "type": "Ready",
                        "status": "True",
                        "reason": "KubeletReady",
                        "message": "kubelet is posting ready status",
                    }
                ],
                "addresses": [
                    {"type": "InternalIP", "address": address},
                    {"type": "Hostname", "address": name},
                ],
                "nodeInfo": {
                    "kubeletVersion": "v1.36.0-troupe-sim",
                    "operatingSystem": "linux",
                    "architecture": "amd64",
                    "containerRuntimeVersion": "sim://1.0",
                },
            },
        }
