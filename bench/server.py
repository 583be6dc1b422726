"""The embedded API server as a separate process for benchmarks.

``python -m bench.server --nodes N --existing-pods E --pods P --kubeconfig F`` creates
N nodes (4 CPU, 32Gi, 110 pods), E pods already bound round-robin and P unbound pods
for ``troupe-scheduler`` (100m / 500Mi, the scheduler_perf pod template), writes a
kubeconfig, prints ``READY`` and serves until stdin closes. A separate process so
the API server and the scheduler each get a core, as in a real control plane.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

from troupe.sim.apiserver.server import ApiServer


def node(i: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": f"node-{i}",
            "labels": {
                "kubernetes.io/hostname": f"node-{i}",
                "topology.kubernetes.io/zone": f"zone-{i % 3}",
            },
        },
        "status": {
            "capacity": {"cpu": "4", "memory": "32Gi", "pods": "110"},
            "allocatable": {"cpu": "4", "memory": "32Gi", "pods": "110"},
        },
    }


def pod(name: str, node_name: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {
        "schedulerName": "troupe-scheduler",
        "containers": [
            {
                "name": "c",
                "image": "pause",
                "resources": {"requests": {"cpu": "100m", "memory": "500Mi"}},
            }
        ],
    }
    if node_name:
        spec["nodeName"] = node_name
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "bench"},
        "spec": spec,
    }


async def serve(args: argparse.Namespace) -> None:
    server = ApiServer("127.0.0.1", 0, bookmark_interval=30.0, history=200_000)
    await server.start()
    store = server.store
    store.create(
        "namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "bench"}}
    )
    for i in range(args.nodes):
        store.create("nodes", node(i), copy=False)
    for i in range(args.existing_pods):
        store.create("pods", pod(f"existing-{i}", f"node-{i % args.nodes}"), copy=False)
    for i in range(args.pods):
        store.create("pods", pod(f"pod-{i}"), copy=False)
    server.write_kubeconfig(args.kubeconfig)
    print("READY", flush=True)
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, sys.stdin.read)
    await server.stop()


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--nodes", type=int, required=True)
    p.add_argument("--existing-pods", type=int, required=True)
    p.add_argument("--pods", type=int, required=True)
    p.add_argument("--kubeconfig", required=True)
    import uvloop

    uvloop.run(serve(p.parse_args()))


if __name__ == "__main__":
    main()
