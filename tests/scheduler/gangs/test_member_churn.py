"""Gang members touched while the gang is being bound: updated, or deleted and
re-created under the same name. Neither may place a member twice nor fail an attempt."""

from __future__ import annotations

import asyncio

from troupe.api.client import ApiError
from troupe.api.gangs import GangApi

from tests.plugins.builders import make_node
from tests.scheduler.gang_helpers import coscheduling_group, member
from tests.scheduler.harness import Harness


def nodes(n: int) -> list:
    return [
        make_node().name(f"n{i}").capacity(cpu="4", memory="8Gi", pods=110).obj() for i in range(n)
    ]


async def in_flight(h: Harness, count: int) -> None:
    while len(h.scheduler.bindings) < count:
        if h.scheduler.queue.pending_counts()["active"]:
            await h.scheduler.schedule_one()
        await asyncio.sleep(0)


async def test_a_member_updated_while_in_flight_is_not_placed_again() -> None:
    h = Harness().nodes(nodes(2))
    h.client.hold = asyncio.Event()
    h.handlers.on_group_add(GangApi.COSCHEDULING, coscheduling_group("g", 3))
    pods = [member("g", i) for i in range(3)]
    h.pods(pods)
    await in_flight(h, 3)
    touched = pods[0].model_copy(deep=True)
    touched.metadata.labels["touched"] = "yes"
    h.handlers.on_pod_update(pods[0], touched)
    assert h.scheduler.queue.pending_counts()["active"] == 0, "not queued again"
    h.client.hold.set()
    await h.settle()
    assert sorted(k for k, _ in h.client.bindings) == [f"default/g-{i}" for i in range(3)]
    assert h.scheduler.stats.results["error"] == 0
    assert h.scheduler.stats.group_results["error"] == 0
    await h.close()


async def test_a_member_recreated_while_in_flight_waits_for_the_stale_binding() -> None:
    h = Harness().nodes(nodes(2))
    h.client.hold = asyncio.Event()
    h.handlers.on_group_add(GangApi.COSCHEDULING, coscheduling_group("g", 3))
    pods = [member("g", i) for i in range(3)]
    h.pods(pods)
    await in_flight(h, 3)
    # g-1 is deleted and re-created under its name while its binding is in flight;
    # the API server will refuse the stale binding on its UID precondition.
    h.client.bind_errors["default/g-1"] = [ApiError(409, "UID precondition failed")]
    h.handlers.on_pod_delete(pods[1])
    again = member("g", 1)
    again.metadata.uid = "uid-g-1-again"
    h.handlers.on_pod_add(again)
    # Its group is tried while the stale binding still holds the name: no error.
    for _ in range(3):
        if h.scheduler.queue.pending_counts()["active"]:
            await h.scheduler.schedule_one()
    assert h.scheduler.stats.group_results["error"] == 0
    h.client.hold.set()
    await h.settle()
    await h.advance(2)
    await h.settle()
    await h.advance(4)
    await h.settle()
    assert sorted(k for k, _ in h.client.bindings) == [f"default/g-{i}" for i in range(3)]
    assert h.scheduler.stats.group_results["error"] == 0
    assert h.scheduler.cache.uid_of("default/g-1") == "uid-g-1-again"
    await h.close()


async def test_a_member_refused_for_no_reported_reason_completes_the_gang() -> None:
    # A 409 the informer never explains (the pod is still ours, unbound): the member
    # is released with the gang's remainder and bound on a later attempt.
    h = Harness().nodes(nodes(2))
    h.client.bind_errors["default/g-1"] = [ApiError(409, "refused")]
    h.handlers.on_group_add(GangApi.COSCHEDULING, coscheduling_group("g", 3))
    h.pods([member("g", i) for i in range(3)])
    await h.settle()
    assert "default/g-1" not in dict(h.client.bindings)
    for _ in range(3):
        await h.advance(5)
        await h.settle()
    assert sorted(k for k, _ in h.client.bindings) == [f"default/g-{i}" for i in range(3)]
    await h.close()
