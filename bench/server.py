"""The embedded API server as a separate process for benchmarks.

``python -m bench.server --nodes N --existing-pods E --pods P --kubeconfig F`` creates
N nodes (4 CPU, 32Gi, 110 pods), E pods already bound round-robin and P unbound pods
for ``troupe-scheduler`` (100m / 500Mi, the scheduler_perf pod template), writes a
kubeconfig, prints ``READY`` and serves until stdin closes. A separate process so
the API server and the scheduler each get a core, as in a real control plane.

``--kubelets`` runs a simulated kubelet for every node (``troupe.sim.kubelet``): bound
pods go Running, run-to-completion pods (annotation ``troupe.dev/run-seconds``)
Succeeded, and graceful deletes finish. ``--pod-group-crd`` installs the
scheduler-plugins PodGroup CRD without creating any gang (``bench.soak`` creates them
over HTTP).

``--gangs G --gang-size S`` adds G scheduler-plugins PodGroups
(``scheduling.x-k8s.io/v1alpha1``, ``minMember`` S, the CRD installed first) named
``gang-0000``..., each with S member pods labelled
``scheduling.x-k8s.io/pod-group`` (``--gang-cpu``, default 100m, and
``--gang-memory`` each). ``--gang-required KEY`` and ``--gang-preferred KEY[,KEY...]``
put troupe's topology annotations (``topology.troupe.dev/required`` and
``topology.troupe.dev/preferred``, ``troupe.api.topology``) on every PodGroup.
``bench.e2e`` starts the plain form (its own launcher); ``bench.gang`` uses
``ServerProcess``.

Nodes carry ``topology.kubernetes.io/zone`` round-robin over ``--zones`` (default 3,
``zone-0``...) and, with ``--racks R``, ``troupe.dev/rack`` numbered within each zone as
``troupe.sim.nodespec.NodeSpec`` numbers them (node ``i`` is in zone ``i % Z`` and rack
``(i // Z) % R``, value ``zone-<z>-r<n>``): 5000 nodes, 5 zones and 20 racks make 100
racks of 50 nodes.

Preemption (``bench.preemption``): ``--priority-classes low=100,high=1000`` creates
those PriorityClasses; ``--existing-cpu`` and ``--existing-priority-class`` set the
already-bound pods' CPU request and class; ``--existing-running`` writes them a Running
status (as their kubelet would have) so the simulated kubelets leave them alone; and
``--existing-gangs G --existing-gang-size S`` makes the first G x S of them the members
of G v1beta1 PodGroups (``low-gang-0000``..., ``scheduling.k8s.io/v1beta1``, gang
``minCount`` S, ``disruptionMode: {all: {}}``, ``spec.priority`` from
``--existing-priority-class``), consecutive pods of one gang bound round-robin like the
others (``existing_group``). ``--gang-api v1beta1`` makes the ``--gangs`` v1beta1
PodGroups too (spec ``schedulingPolicy.gang.minCount``, members joined by
``spec.schedulingGroup.podGroupName``), with ``--gang-priority-class`` on the members
and its value as the group's ``spec.priority``, and ``--gang-required KEY`` as
``spec.schedulingConstraints.topology``.

``--scheduler-name NAME`` puts ``schedulerName: NAME`` on the pending pods and gang
members (default ``troupe-scheduler``; ``bench.peer`` runs another scheduler on the same
workloads) and ``--pod-cpu`` sets the pending pods' CPU request (default 100m).

``--latency SECONDS`` holds every request that long before the server handles it
(``ApiServer.faults.delay`` on every path), as an API server that far away or that
slow would: a binding then takes at least that long (``bench e2e --latency``). Watch
streams, once open, are not held.

``--profile FILE`` runs cProfile from ``READY`` until stdin closes and writes the stats
to FILE (``bench e2e --profile-server``). ``ServerProcess.cpu_seconds()`` is the
process's CPU time so far (Linux ``/proc``), read by ``bench e2e`` for CPU per pod.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
from pathlib import Path
from typing import Any

from troupe.api.clock import RealClock
from troupe.api.gangs import POD_GROUP_LABEL
from troupe.api.topology import PREFERRED_ANNOTATION, REQUIRED_ANNOTATION
from troupe.sim.apiserver.server import ApiServer
from troupe.sim.crds import POD_GROUP_CRD
from troupe.sim.kubelet import Kubelets
from troupe.sim.nodespec import RACK_LABEL, ZONE_LABEL

NAMESPACE = "bench"


def node(i: int, zones: int = 3, racks: int = 0) -> dict[str, Any]:
    zone = f"zone-{i % zones}"
    labels = {"kubernetes.io/hostname": f"node-{i}", ZONE_LABEL: zone}
    if racks > 0:
        labels[RACK_LABEL] = f"{zone}-r{(i // zones) % racks}"
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": f"node-{i}", "labels": labels},
        "status": {
            "capacity": {"cpu": "4", "memory": "32Gi", "pods": "110"},
            "allocatable": {"cpu": "4", "memory": "32Gi", "pods": "110"},
        },
    }


def pod(
    name: str,
    node_name: str = "",
    *,
    memory: str = "500Mi",
    cpu: str = "100m",
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    priority_class: str = "",
    pod_group: str = "",
    scheduler_name: str = "troupe-scheduler",
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "schedulerName": scheduler_name,
        "containers": [
            {
                "name": "c",
                "image": "pause",
                "resources": {"requests": {"cpu": cpu, "memory": memory}},
            }
        ],
    }
    if node_name:
        spec["nodeName"] = node_name
    if priority_class:
        spec["priorityClassName"] = priority_class
    if pod_group:
        spec["schedulingGroup"] = {"podGroupName": pod_group}
    metadata: dict[str, Any] = {"name": name, "namespace": NAMESPACE}
    if labels:
        metadata["labels"] = labels
    if annotations:
        metadata["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def v1beta1_pod_group(
    name: str,
    min_count: int,
    *,
    priority: int | None = None,
    disrupt_all: bool = False,
    topology: str = "",
) -> dict[str, Any]:
    """A Kubernetes 1.37 ``scheduling.k8s.io/v1beta1`` PodGroup with a gang policy."""
    spec: dict[str, Any] = {"schedulingPolicy": {"gang": {"minCount": min_count}}}
    if priority is not None:
        spec["priority"] = priority
    if disrupt_all:
        spec["disruptionMode"] = {"all": {}}
    if topology:
        spec["schedulingConstraints"] = {"topology": [{"key": topology}]}
    return {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": spec,
    }


def low_gang_name(g: int) -> str:
    return f"low-gang-{g:04d}"


def existing_group(i: int, gangs: int, size: int) -> str:
    """The v1beta1 PodGroup already-bound pod ``existing-<i>`` belongs to ("" for a
    single pod): the first ``gangs`` x ``size`` pods, ``size`` consecutive per gang."""
    return low_gang_name(i // size) if size > 0 and i < gangs * size else ""


def priority_classes(text: str) -> dict[str, int]:
    """``low=100,high=1000`` -> {name: value}."""
    out: dict[str, int] = {}
    for item in filter(None, (t.strip() for t in text.split(","))):
        name, _, value = item.partition("=")
        out[name] = int(value)
    return out


def running_status() -> dict[str, Any]:
    """A started pod's status, enough for the simulated kubelet to leave it be."""
    return {
        "phase": "Running",
        "conditions": [
            {"type": t, "status": "True"}
            for t in ("Initialized", "Ready", "ContainersReady", "PodScheduled")
        ],
    }


def gang_name(g: int) -> str:
    # Zero-padded so that name order is creation order (both QueueSorts break
    # creation-time ties by key).
    return f"gang-{g:04d}"


def pod_group(
    name: str,
    min_member: int,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "namespace": NAMESPACE}
    if labels:
        metadata["labels"] = labels
    if annotations:
        metadata["annotations"] = annotations
    return {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": metadata,
        "spec": {"minMember": min_member},
    }


def gang_members(
    name: str,
    size: int,
    memory: str,
    cpu: str = "100m",
    priority_class: str = "",
    v1beta1: bool = False,
    scheduler_name: str = "troupe-scheduler",
) -> list[dict[str, Any]]:
    """A gang's member pods: labelled for a scheduler-plugins PodGroup, or joined to a
    v1beta1 PodGroup by ``spec.schedulingGroup``."""
    return [
        pod(
            f"{name}-{i:04d}",
            memory=memory,
            cpu=cpu,
            labels=None if v1beta1 else {POD_GROUP_LABEL: name},
            priority_class=priority_class,
            pod_group=name if v1beta1 else "",
            scheduler_name=scheduler_name,
        )
        for i in range(size)
    ]


def topology_annotations(required: str, preferred: str) -> dict[str, str]:
    """troupe's topology annotations for a gang object (none when both are empty)."""
    annotations = {}
    if required:
        annotations[REQUIRED_ANNOTATION] = required
    if preferred:
        annotations[PREFERRED_ANNOTATION] = preferred
    return annotations


async def serve(args: argparse.Namespace) -> None:
    server = ApiServer("127.0.0.1", 0, bookmark_interval=30.0, history=200_000)
    await server.start()
    if args.latency > 0:
        server.faults.delay("*", "", args.latency, times=-1)
    store = server.store
    store.create(
        "namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
    )
    if args.gangs or args.pod_group_crd:
        store.create("customresourcedefinitions.apiextensions.k8s.io", POD_GROUP_CRD)
    classes = priority_classes(args.priority_classes)
    for name, value in classes.items():
        pc: dict[str, Any] = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass"}
        pc |= {"metadata": {"name": name}, "value": value}
        store.create("priorityclasses.scheduling.k8s.io", pc, copy=False)
    for i in range(args.nodes):
        store.create("nodes", node(i, args.zones, args.racks), copy=False)
    existing_class = args.existing_priority_class
    for g in range(args.existing_gangs):
        group = v1beta1_pod_group(
            low_gang_name(g),
            args.existing_gang_size,
            priority=classes.get(existing_class),
            disrupt_all=True,
        )
        store.create("podgroups.scheduling.k8s.io", group, copy=False)
    for i in range(args.existing_pods):
        existing = pod(
            f"existing-{i}",
            f"node-{i % args.nodes}",
            cpu=args.existing_cpu,
            priority_class=existing_class,
            pod_group=existing_group(i, args.existing_gangs, args.existing_gang_size),
        )
        created = store.create("pods", existing, copy=False)
        if args.existing_running:
            store.update("pods", {**created, "status": running_status()}, subresource="status")
    for i in range(args.pods):
        plain = pod(f"pod-{i}", cpu=args.pod_cpu, scheduler_name=args.scheduler_name)
        store.create("pods", plain, copy=False)
    annotations = topology_annotations(args.gang_required, args.gang_preferred)
    v1beta1 = args.gang_api == "v1beta1"
    for g in range(args.gangs):
        name = gang_name(g)
        if v1beta1:
            group = v1beta1_pod_group(
                name,
                args.gang_size,
                priority=classes.get(args.gang_priority_class),
                topology=args.gang_required,
            )
            store.create("podgroups.scheduling.k8s.io", group, copy=False)
        else:
            group = pod_group(name, args.gang_size, annotations=dict(annotations))
            store.create("podgroups.scheduling.x-k8s.io", group, copy=False)
        members = gang_members(
            name,
            args.gang_size,
            args.gang_memory,
            args.gang_cpu,
            priority_class=args.gang_priority_class,
            v1beta1=v1beta1,
            scheduler_name=args.scheduler_name,
        )
        for member in members:
            store.create("pods", member, copy=False)
    # The kubelets take every node as they start (troupe.sim.kubelet).
    kubelets = Kubelets(store, RealClock(), heartbeat=None)
    kubelets_task = asyncio.create_task(kubelets.run()) if args.kubelets else None
    server.write_kubeconfig(args.kubeconfig)
    profile = None
    if args.profile:
        import cProfile

        profile = cProfile.Profile()
        profile.enable()
    print("READY", flush=True)
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, sys.stdin.read)
    if profile is not None:
        profile.disable()
        profile.dump_stats(args.profile)
    if kubelets_task is not None:
        kubelets_task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await kubelets_task
    await server.stop()


class ServerProcess:
    """Runs ``python -m bench.server <argv> --kubeconfig <path>`` until the context
    exits (closing its stdin stops it)."""

    def __init__(self, argv: list[str], kubeconfig: Path, start_timeout: float = 300.0) -> None:
        self.argv, self.kubeconfig, self.start_timeout = argv, kubeconfig, start_timeout
        self.proc: asyncio.subprocess.Process | None = None

    async def __aenter__(self) -> ServerProcess:
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "bench.server",
            *self.argv,
            "--kubeconfig",
            str(self.kubeconfig),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        assert self.proc.stdout is not None
        try:
            line = await asyncio.wait_for(self.proc.stdout.readline(), self.start_timeout)
        except TimeoutError:
            line = b""
        if line.strip() != b"READY":
            await self.__aexit__()
            raise RuntimeError(f"bench server did not start: {line!r}")
        return self

    def cpu_seconds(self) -> float:
        """User + system CPU seconds the server process has used so far (0.0 where
        ``/proc`` is not available)."""
        assert self.proc is not None
        try:
            stat = Path(f"/proc/{self.proc.pid}/stat").read_text()
        except OSError:
            return 0.0
        # The fields after the command name (in parentheses, which may hold spaces):
        # utime and stime are the 12th and 13th of them, in clock ticks.
        fields = stat[stat.rindex(")") + 2 :].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    async def __aexit__(self, *exc: object) -> None:
        if self.proc is not None and self.proc.stdin is not None:
            self.proc.stdin.close()
            try:
                await asyncio.wait_for(self.proc.wait(), 10)
            except TimeoutError:
                self.proc.kill()
                await self.proc.wait()


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--nodes", type=int, required=True)
    p.add_argument("--existing-pods", type=int, default=0)
    p.add_argument("--pods", type=int, default=0)
    p.add_argument("--pod-cpu", default="100m", help="CPU request of a pending pod")
    p.add_argument("--scheduler-name", default="troupe-scheduler", help="of every pending pod")
    p.add_argument("--gangs", type=int, default=0, help="scheduler-plugins PodGroups to create")
    p.add_argument("--gang-size", type=int, default=0, help="members (and minMember) per gang")
    p.add_argument("--gang-memory", default="128Mi", help="memory request of a gang member")
    p.add_argument("--gang-cpu", default="100m", help="CPU request of a gang member")
    p.add_argument("--gang-required", default="", help="required topology label of every gang")
    p.add_argument("--gang-preferred", default="", help="preferred topology keys, outermost first")
    p.add_argument("--zones", type=int, default=3, help="zones, round-robin over the nodes")
    p.add_argument("--racks", type=int, default=0, help="racks per zone (0: no rack label)")
    p.add_argument("--gang-api", choices=("coscheduling", "v1beta1"), default="coscheduling")
    p.add_argument("--gang-priority-class", default="", help="priorityClassName of gang members")
    p.add_argument("--priority-classes", default="", help="NAME=VALUE,... to create")
    p.add_argument("--existing-cpu", default="100m", help="CPU request of a bound pod")
    p.add_argument("--existing-priority-class", default="", help="priorityClassName, bound pods")
    p.add_argument("--existing-running", action="store_true", help="bound pods start Running")
    p.add_argument("--existing-gangs", type=int, default=0, help="v1beta1 `all` gangs, bound")
    p.add_argument("--existing-gang-size", type=int, default=8, help="members per bound gang")
    p.add_argument("--kubelets", action="store_true", help="simulated kubelets on every node")
    p.add_argument("--pod-group-crd", action="store_true", help="install the PodGroup CRD")
    p.add_argument("--latency", type=float, default=0.0, help="seconds every request is held")
    p.add_argument("--kubeconfig", required=True)
    p.add_argument("--profile", default="", help="cProfile from READY to exit into this file")
    import uvloop

    uvloop.run(serve(p.parse_args()))


if __name__ == "__main__":
    main()
