"""Permit WAIT: allow, reject and timeout on the injected clock."""

from __future__ import annotations

import asyncio

from troupe.api.clock import FakeClock
from troupe.api.podinfo import PodInfo
from troupe.api.status import Code
from troupe.api.tasks import TaskSupervisor
from troupe.scheduler.framework.waiting_pods import WaitingPods

from tests.plugins.builders import make_pod


def waiting_pods() -> tuple[WaitingPods, FakeClock, TaskSupervisor]:
    clock = FakeClock()
    timers = TaskSupervisor("timers")
    return WaitingPods(clock, timers), clock, timers


async def test_a_pod_is_released_only_when_every_waiting_plugin_allows_it() -> None:
    pods, _, timers = waiting_pods()
    w = pods.add(PodInfo.of(make_pod().name("p").obj()), {"A": 10, "B": 10})
    w.allow("A")
    await asyncio.sleep(0)
    assert not w.done
    w.allow("B")
    assert (await w.wait()).is_success
    for _ in range(3):  # the cancellation takes a few loop turns to land
        await asyncio.sleep(0)
    assert len(timers) == 0  # the timeout timer was cancelled


async def test_a_rejection_carries_the_plugin_and_message() -> None:
    pods, _, _ = waiting_pods()
    w = pods.add(PodInfo.of(make_pod().name("p").obj()), {"Gang": 10})
    w.reject("Gang", "sibling failed")
    status = await w.wait()
    assert (status.code, status.plugin, status.message) == (
        Code.UNSCHEDULABLE,
        "Gang",
        "sibling failed",
    )


async def test_the_earliest_plugin_timeout_rejects_the_pod() -> None:
    pods, clock, _ = waiting_pods()
    w = pods.add(PodInfo.of(make_pod().name("p").obj()), {"Slow": 60, "Fast": 5})
    await asyncio.sleep(0)
    clock.advance(4)
    await asyncio.sleep(0)
    assert not w.done
    clock.advance(1)
    status = await w.wait()
    assert status.plugin == "Fast"
    assert status.message == "rejected due to timeout after waiting 5s at plugin Fast"
