"""No pod or group stops the loop: an attempt that raises fails alone.

The failed entity is logged with its traceback, counted as an error, stripped of
whatever its attempt assumed, and retried after backoff; the loop goes on.
"""

from __future__ import annotations

from typing import Any

from troupe.api.gangs import GangApi

from tests.plugins.builders import make_node, make_pod
from tests.scheduler.gang_helpers import coscheduling_group, member
from tests.scheduler.harness import Harness


def nodes(n: int) -> list[Any]:
    return [
        make_node().name(f"n{i}").capacity(cpu="2", memory="8Gi", pods=110).obj() for i in range(n)
    ]


def pod(name: str) -> Any:
    return (
        make_pod()
        .name(name)
        .uid(f"uid-{name}")
        .req(cpu="100m")
        .scheduler_name("troupe-scheduler")
        .obj()
    )


def requested_cpu(h: Harness) -> int:
    table = h.scheduler.cache.table
    return int(table.requested[table.resource_row("cpu")].sum())


async def test_a_pod_whose_attempt_raises_is_retried_and_the_others_go_on() -> None:
    h = Harness().nodes(nodes(2))
    cycle = h.parts.pod_cycle
    original = cycle.run
    raised: list[str] = []

    async def run(fwk: Any, entity: Any, attempt: int) -> None:
        if entity.pod_info.pod.metadata.name == "bad" and not raised:
            raised.append(entity.key)
            raise RuntimeError("unexpected")
        await original(fwk, entity, attempt)

    cycle.run = run  # type: ignore[method-assign]
    h.pods([pod("bad"), pod("good")])
    await h.settle()
    assert raised == ["default/bad"]
    assert [k for k, _ in h.client.bindings] == ["default/good"]
    assert h.scheduler.stats.results["error"] == 1
    # Retried after backoff.
    await h.advance(2)
    await h.settle()
    assert sorted(k for k, _ in h.client.bindings) == ["default/bad", "default/good"]
    await h.close()


async def test_a_gang_whose_placement_raises_holds_nothing_and_is_retried() -> None:
    h = Harness().nodes(nodes(2))
    placer = h.parts.group_cycle.algorithm.placer
    original = placer._reserve
    calls: list[str] = []

    def reserve(fwk: Any, p: Any, placed: Any, failures: Any, assumed: bool = False) -> None:
        calls.append(p.info.key)
        if len(calls) == 3:
            raise RuntimeError("unexpected")
        original(fwk, p, placed, failures, assumed)

    placer._reserve = reserve  # type: ignore[method-assign]
    h.handlers.on_group_add(GangApi.COSCHEDULING, coscheduling_group("train", 4))
    h.pods(member("train", i, cpu="500m") for i in range(4))
    await h.settle()
    assert h.client.bindings == []
    assert requested_cpu(h) == 0  # the two members placed before the error are undone
    assert h.scheduler.cache.assumed_count == 0
    assert h.scheduler.stats.group_results["error"] == 1
    await h.advance(2)
    await h.settle()
    assert len(h.client.bindings) == 4
    await h.close()
