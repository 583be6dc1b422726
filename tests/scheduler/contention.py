"""Helpers for gang contention tests: a cluster of 1-cpu nodes, gangs of 1-cpu
members submitted in a chosen order, and finishing a gang as its pods end.

Every member requests one cpu and every node offers one, so "a gang needs 60% of
the cluster" is plain arithmetic: a gang of 6 on 10 nodes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Literal

from troupe.api.gangapi_kinds import GroupObject
from troupe.api.gangs import GangApi
from troupe.api.objects import Node, Pod
from troupe.queue.entity import QueuedGroupInfo

from tests.plugins.builders import make_node
from tests.scheduler.gang_helpers import coscheduling_group, member, native_group, workload
from tests.scheduler.harness import Harness

Order = Literal["listed", "interleaved"]
Ending = Literal["deleted", "succeeded"]


def one_cpu_nodes(n: int) -> list[Node]:
    return [
        make_node().name(f"n{i}").capacity(cpu="1", memory="8Gi", pods=110).obj() for i in range(n)
    ]


def created_at(second: int) -> str:
    return f"2026-01-01T00:00:{second:02d}Z"


API_OF = {
    "coscheduling": GangApi.COSCHEDULING,
    "workload": GangApi.WORKLOAD,
    "podgroup": GangApi.POD_GROUP,
}


def group_object(api: str, name: str, size: int, when: str) -> GroupObject:
    """The group object of ``api`` with quorum ``size``, created at ``when``."""
    obj: GroupObject
    if api == "coscheduling":
        obj = coscheduling_group(name, size, created=when)
    elif api == "workload":
        obj = workload(name, {"workers": size})
    else:
        obj = native_group(name, size)
    obj.metadata.creation_timestamp = when
    return obj


def submit(
    h: Harness,
    groups: Sequence[str],
    size: int,
    created: dict[str, str] | None = None,
    order: Order = "listed",
    api: str = "coscheduling",
) -> None:
    """Create the group objects (quorum = size) then their members, all before the
    first scheduling attempt. ``listed``: group by group in the order given;
    ``interleaved``: member 0 of every group, then member 1, ..."""
    for g in groups:
        when = (created or {}).get(g, created_at(0))
        h.handlers.on_group_add(API_OF[api], group_object(api, g, size, when))
    if order == "listed":
        for g in groups:
            h.pods(member(g, i, api=api) for i in range(size))
    else:
        for i in range(size):
            h.pods(member(g, i, api=api) for g in groups)


def bound(h: Harness, group: str) -> list[str]:
    """Keys of ``group``'s members the scheduler has bound (the recording client)."""
    return sorted(k for k, _ in h.client.bindings if k.split("/")[1].rsplit("-", 1)[0] == group)


def bound_counts(h: Harness, groups: Sequence[str]) -> dict[str, int]:
    return {g: len(bound(h, g)) for g in groups}


def cpu_in_use(h: Harness) -> int:
    """Millicores the cache accounts on all nodes (bound and assumed pods)."""
    table = h.scheduler.cache.table
    return int(table.requested[table.resource_row("cpu")].sum())


def bound_pod(h: Harness, group: str, i: int, api: str = "coscheduling") -> Pod:
    pod = member(group, i, api=api)
    node = h.client.node_of(f"default/{group}-{i}")
    assert node is not None, f"{group}-{i} was never bound"
    pod.spec.node_name = node
    return pod


def finish(h: Harness, group: str, size: int, ending: Ending, api: str = "coscheduling") -> None:
    """The informer reports ``group``'s bound members ending: deleted (job cleaned
    up) or moved to Succeeded by their kubelet (a finished job's pods stay)."""
    for i in range(size):
        pod = bound_pod(h, group, i, api)
        if ending == "deleted":
            h.handlers.on_pod_delete(pod)
        else:
            done = pod.model_copy(deep=True)
            done.status.phase = "Succeeded"
            h.handlers.on_pod_update(pod, done)


def group_entity(h: Harness, group: str) -> QueuedGroupInfo:
    entity = h.scheduler.queue.get_group(f"default/{group}")
    assert entity is not None, f"gang {group} is not queued"
    return entity


async def run_cycles(h: Harness, limit: int, watch: str = "") -> tuple[int, int]:
    """Run the scheduling loop as the daemon does, binding tasks (and Permit
    waits) getting the event loop between two cycles, with the clock stopped.

    Returns (cycles run before the active queue emptied, or ``limit``; the most
    pods whose key starts with ``watch`` held at the Permit barrier at once)."""
    held = 0
    for n in range(limit):
        if not h.scheduler.queue.pending_counts()["active"]:
            return n, held
        await h.scheduler.schedule_one()
        if watch:
            waiting = [w for w in h.scheduler.waiting.all() if w.pod.key.startswith(watch)]
            held = max(held, len(waiting))
        for _ in range(3):
            await asyncio.sleep(0)
    return limit, held
