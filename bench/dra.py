"""The DRA allocator in process: per-node allocation cost and a gang of GPU pods.

``python -m bench dra [--nodes 512] [--gpus 8] [--pods 64] [--per-pod 8] [--rounds 5]``

The cluster: ``--nodes`` nodes, each with one ResourceSlice of ``--gpus`` GPUs of driver
``gpu.example.com`` (attributes model, index, numa, uuid; capacity memory 80Gi), and the
DeviceClass ``gpu.example.com`` (``device.driver == "gpu.example.com"``). A pod has one
ResourceClaim for ``--per-pod`` GPUs of that class with the selector
``model == "h100" && memory.compareTo(quantity("40Gi")) >= 0``.

Figures (medians over ``--rounds``; microseconds per call, milliseconds per gang):

- ``allocate_free_node_us``: one claim on a node whose GPUs are all free, with the CEL
  results cached (warm) and ``..._cold_us`` with a fresh CEL environment and inventory;
- ``allocate_short_node_us``: a node with one GPU fewer than the claim asks for (the
  search tries every combination and fails); ``allocate_held_node_us``: every GPU held;
- ``quickcheck_node_us``: ``DeviceCounts.may_fit`` on one node (warm);
- the gang: ``--pods`` pods placed one after another, each one's allocation in flight for
  the next (``AllocatedDevices.with_results``), nodes scanned in order:
  ``gang_ms`` prunes with the quick check and allocates on the first node it passes;
  ``gang_filter_all_ms`` runs the quick check on every node and the allocator on every
  node that passes, as a Filter over all nodes would; ``gang_exact_only_ms`` runs the
  allocator on node after node with no quick check; ``gang_cold_ms`` is ``gang_ms`` from a
  fresh CEL environment and inventory (the first cycle after a start or a slice change).

The last line is the figures as JSON. Figures only; nothing is asserted about speed.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from troupe.api.dra.cel import CelEnvironment
from troupe.api.dra.objects import DeviceClass, ResourceClaim, ResourceSlice
from troupe.api.objects import Node
from troupe.plugins.dynamicresources import (
    AllocatedDevices,
    Allocator,
    Demand,
    DeviceCounts,
    DeviceID,
    Inventory,
)

DRIVER = "gpu.example.com"
SELECTOR = (
    f'device.attributes["{DRIVER}"].model == "h100" && '
    f'device.capacity["{DRIVER}"].memory.compareTo(quantity("40Gi")) >= 0'
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--nodes", type=int, default=512)
    parser.add_argument("--gpus", type=int, default=8, help="GPUs per node")
    parser.add_argument("--pods", type=int, default=64, help="pods in the gang")
    parser.add_argument("--per-pod", type=int, default=8, help="GPUs per pod")
    parser.add_argument("--rounds", type=int, default=5)


@dataclass(frozen=True)
class Cluster:
    nodes: list[Node]
    slices: list[ResourceSlice]
    classes: dict[str, DeviceClass]
    claim: ResourceClaim


def build(nodes: int, gpus: int, per_pod: int) -> Cluster:
    node_objects = [
        Node.model_validate({"metadata": {"name": f"node-{i:04}"}}) for i in range(nodes)
    ]
    slices = [_slice(n.metadata.name, gpus, version=str(i + 1)) for i, n in enumerate(node_objects)]
    device_class = DeviceClass.model_validate(
        {
            "metadata": {"name": DRIVER},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
        }
    )
    claim = ResourceClaim.model_validate(
        {
            "metadata": {"name": "gpus", "namespace": "bench"},
            "spec": {
                "devices": {
                    "requests": [
                        {
                            "name": "gpus",
                            "exactly": {
                                "deviceClassName": DRIVER,
                                "count": per_pod,
                                "selectors": [{"cel": {"expression": SELECTOR}}],
                            },
                        }
                    ]
                }
            },
        }
    )
    return Cluster(node_objects, slices, {DRIVER: device_class}, claim)


def _slice(node: str, gpus: int, version: str) -> ResourceSlice:
    devices = [
        {
            "name": f"gpu-{g}",
            "attributes": {
                "model": {"string": "h100"},
                "index": {"int": g},
                "numa": {"int": g * 2 // gpus},
                "uuid": {"string": f"{node}-{g}"},
            },
            "capacity": {"memory": {"value": "80Gi"}},
        }
        for g in range(gpus)
    ]
    return ResourceSlice.model_validate(
        {
            "metadata": {"name": f"{node}-gpus", "resourceVersion": version},
            "spec": {
                "driver": DRIVER,
                "pool": {"name": node, "resourceSliceCount": 1},
                "nodeName": node,
                "devices": devices,
            },
        }
    )


def _median_us(call: Callable[[], object], rounds: int, number: int) -> float:
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(number):
            call()
        samples.append((time.perf_counter() - start) / number * 1e6)
    return statistics.median(samples)


def per_node(cluster: Cluster, rounds: int) -> dict[str, float]:
    cel = CelEnvironment()
    inventory = Inventory(cluster.slices)
    free, other = cluster.nodes[0], cluster.nodes[1]
    claims = [cluster.claim]
    alloc = Allocator(cluster.classes, inventory, AllocatedDevices(), cel)
    alloc.allocate(free, claims)  # warm the CEL results
    gpus = len(cluster.slices[1].spec.devices)
    held = [DeviceID(DRIVER, other.metadata.name, f"gpu-{g}") for g in range(gpus)]
    short = Allocator(cluster.classes, inventory, AllocatedDevices(frozenset(held[:1])), cel)
    full = Allocator(cluster.classes, inventory, AllocatedDevices(frozenset(held)), cel)
    short.allocate(other, claims)
    counts = DeviceCounts(cluster.classes, inventory, cel)
    demand = Demand.of(claims)
    counts.may_fit(free, demand, AllocatedDevices())

    def cold() -> None:
        fresh = Allocator(
            cluster.classes, Inventory(cluster.slices[:1]), AllocatedDevices(), CelEnvironment()
        )
        fresh.allocate(free, claims)

    return {
        "allocate_free_node_us": _median_us(lambda: alloc.allocate(free, claims), rounds, 200),
        "allocate_free_node_cold_us": _median_us(cold, rounds, 20),
        "allocate_short_node_us": _median_us(lambda: short.allocate(other, claims), rounds, 50),
        "allocate_held_node_us": _median_us(lambda: full.allocate(other, claims), rounds, 200),
        "quickcheck_node_us": _median_us(
            lambda: counts.may_fit(free, demand, AllocatedDevices()), rounds, 2000
        ),
        "allocate_short_node_steps": float(short.last_steps),
    }


@dataclass
class Gang:
    """Places the gang's pods one after another; counts what it did."""

    cluster: Cluster
    cel: CelEnvironment
    inventory: Inventory
    quick: bool
    pods: int
    filter_all: bool = False
    allocations: int = 0

    def run(self) -> int:
        claims = [self.cluster.claim]
        demand = Demand.of(claims)
        counts = DeviceCounts(self.cluster.classes, self.inventory, self.cel)
        allocated = AllocatedDevices()
        placed = 0
        for _ in range(self.pods):
            alloc = Allocator(self.cluster.classes, self.inventory, allocated, self.cel)
            chosen = None
            for node in self.cluster.nodes:
                if self.quick and not counts.may_fit(node, demand, allocated):
                    continue
                self.allocations += 1
                results = alloc.allocate(node, claims)
                if results is not None and chosen is None:
                    chosen = results
                    if not self.filter_all:
                        break
            if chosen is not None:
                allocated = allocated.with_results(chosen)
                placed += 1
        return placed


def gang(cluster: Cluster, pods: int, rounds: int) -> dict[str, Any]:
    warm_cel, warm_inventory = CelEnvironment(), Inventory(cluster.slices)
    Gang(cluster, warm_cel, warm_inventory, quick=True, pods=pods).run()  # warm

    def timed(make: Callable[[], Gang]) -> tuple[float, int, int]:
        samples, placed, allocations = [], 0, 0
        for _ in range(rounds):
            g = make()
            start = time.perf_counter()
            placed = g.run()
            samples.append((time.perf_counter() - start) * 1e3)
            allocations = g.allocations
        return statistics.median(samples), placed, allocations

    quick, placed, quick_allocs = timed(
        lambda: Gang(cluster, warm_cel, warm_inventory, quick=True, pods=pods)
    )
    filter_all, _, filter_allocs = timed(
        lambda: Gang(cluster, warm_cel, warm_inventory, quick=True, filter_all=True, pods=pods)
    )
    exact, _, exact_allocs = timed(
        lambda: Gang(cluster, warm_cel, warm_inventory, quick=False, pods=pods)
    )
    cold, _, _ = timed(
        lambda: Gang(cluster, CelEnvironment(), Inventory(cluster.slices), quick=True, pods=pods)
    )
    return {
        "gang_pods_placed": placed,
        "gang_ms": quick,
        "gang_allocate_calls": quick_allocs,
        "gang_filter_all_ms": filter_all,
        "gang_filter_all_allocate_calls": filter_allocs,
        "gang_exact_only_ms": exact,
        "gang_exact_only_allocate_calls": exact_allocs,
        "gang_cold_ms": cold,
    }


def run(args: argparse.Namespace) -> int:
    cluster = build(args.nodes, args.gpus, args.per_pod)
    result: dict[str, Any] = {
        "nodes": args.nodes,
        "gpus_per_node": args.gpus,
        "pods": args.pods,
        "gpus_per_pod": args.per_pod,
        "rounds": args.rounds,
    }
    result.update(per_node(cluster, args.rounds))
    result.update(gang(cluster, args.pods, args.rounds))
    for key, value in result.items():
        print(f"{key}: {value:.1f}" if isinstance(value, float) else f"{key}: {value}")
    print(json.dumps(result))
    return 0
