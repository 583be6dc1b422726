"""The background writer: events one at a time in order, status patches coalesced
and written by a few workers, bounded event buffer, failures contained."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from troupe.api.client import ApiError, Event, ObjectRef
from troupe.api.clock import FakeClock
from troupe.api.objects import Pod, PodCondition
from troupe.api.tasks import TaskSupervisor
from troupe.scheduler.cycle.writer import BackgroundWriter

from tests.plugins.builders import make_pod


class SlowClient:
    """Each write waits for ``gate``; records concurrency and order."""

    def __init__(self, fail_notes: frozenset[str] = frozenset()) -> None:
        self.gate = asyncio.Event()
        self.in_flight = {"event": 0, "status": 0}
        self.most = {"event": 0, "status": 0}
        self.events: list[str] = []
        self.statuses: list[tuple[str, str]] = []
        self.fail_notes = fail_notes

    async def _hold(self, kind: str) -> None:
        self.in_flight[kind] += 1
        self.most[kind] = max(self.most[kind], self.in_flight[kind])
        try:
            await self.gate.wait()
        finally:
            self.in_flight[kind] -= 1

    async def record_event(self, event: Event) -> None:
        await self._hold("event")
        if event.note in self.fail_notes:
            raise ApiError(500, "boom")
        self.events.append(event.note)

    async def patch_pod_status(
        self, pod: Pod, condition: PodCondition | None, nominated_node_name: str | None
    ) -> None:
        await self._hold("status")
        self.statuses.append((pod.key, condition.message if condition else ""))

    async def merge_patch(self, path: str, patch: Mapping[str, Any]) -> dict[str, Any]:
        await self._hold("status")
        return {}

    async def bind(self, pod: Pod, node_name: str) -> None:
        raise AssertionError("the writer never binds")


def event(note: str) -> Event:
    return Event(ObjectRef("Pod", "default", "p", "uid-p"), "Normal", "Scheduled", "Binding", note)


def condition(message: str) -> PodCondition:
    return PodCondition(
        type="PodScheduled", status="False", reason="Unschedulable", message=message
    )


async def test_events_are_written_one_at_a_time_in_order_beside_status_workers() -> None:
    client = SlowClient()
    writer = BackgroundWriter(client, TaskSupervisor("t"), workers=3)  # type: ignore[arg-type]
    for i in range(10):
        writer.event(event(f"e{i}"))
    for i in range(6):
        writer.pod_status(make_pod().name(f"p{i}").obj(), condition("no"), None)
    for _ in range(5):
        await asyncio.sleep(0)
    assert client.in_flight == {"event": 1, "status": 3}
    client.gate.set()
    assert await writer.flush(timeout=5)
    assert client.events == [f"e{i}" for i in range(10)]
    assert client.most == {"event": 1, "status": 3}
    assert len(client.statuses) == 6


async def test_a_pod_failing_repeatedly_is_patched_with_its_latest_condition_once() -> None:
    client = SlowClient()
    client.gate.set()
    writer = BackgroundWriter(client, TaskSupervisor("t"), workers=1)  # type: ignore[arg-type]
    pod = make_pod().name("stuck").obj()
    other = make_pod().name("other").obj()
    writer.pod_status(other, condition("first"), None)
    for attempt in range(5):
        writer.pod_status(pod, condition(f"attempt {attempt}"), None)
    assert await writer.flush(timeout=5)
    assert sorted(client.statuses) == [("default/other", "first"), ("default/stuck", "attempt 4")]


async def test_a_full_event_buffer_drops_the_oldest_and_counts_it() -> None:
    client = SlowClient()
    writer = BackgroundWriter(client, TaskSupervisor("t"), event_capacity=3)  # type: ignore[arg-type]
    for i in range(6):
        writer.event(event(f"e{i}"))
    client.gate.set()
    assert await writer.flush(timeout=5)
    # The writer had not run yet: the three oldest fell out of the buffer.
    assert client.events == ["e3", "e4", "e5"]
    assert writer.dropped_events == 3


async def test_a_failed_write_is_counted_and_the_rest_still_go_out() -> None:
    client = SlowClient(fail_notes=frozenset({"e1"}))
    client.gate.set()
    writer = BackgroundWriter(client, TaskSupervisor("t"))  # type: ignore[arg-type]
    for i in range(3):
        writer.event(event(f"e{i}"))
    assert await writer.flush(timeout=5)
    assert client.events == ["e0", "e2"]
    assert writer.failures == 1


async def test_events_wait_for_the_bindings_in_flight_and_follow_once_they_drain() -> None:
    client = SlowClient()
    client.gate.set()
    bindings = TaskSupervisor("binding")
    release = asyncio.Event()
    bindings.spawn(release.wait(), name="bind")
    writer = BackgroundWriter(client, TaskSupervisor("t"), bindings=bindings, clock=FakeClock())  # type: ignore[arg-type]
    writer.event(event("e0"))
    writer.event(event("e1"))
    for _ in range(10):
        await asyncio.sleep(0)
    assert client.events == []
    release.set()
    assert await writer.flush(timeout=5)
    assert client.events == ["e0", "e1"]


async def test_an_event_waits_for_bindings_at_most_the_hold_time() -> None:
    client = SlowClient()
    client.gate.set()
    clock = FakeClock()
    bindings = TaskSupervisor("binding")
    never = asyncio.Event()
    bindings.spawn(never.wait(), name="bind")
    writer = BackgroundWriter(
        client,
        TaskSupervisor("t"),
        bindings=bindings,
        clock=clock,
        event_hold=5.0,  # type: ignore[arg-type]
    )
    writer.event(event("old"))
    clock.advance(3.0)
    writer.event(event("new"))
    for _ in range(10):
        await asyncio.sleep(0)
    assert client.events == []
    clock.advance(2.0)  # "old" has waited 5 s; "new" only 2 s
    for _ in range(10):
        await asyncio.sleep(0)
    assert client.events == ["old"]
    clock.advance(3.0)
    for _ in range(10):
        await asyncio.sleep(0)
    assert client.events == ["old", "new"]
    never.set()
    await bindings.drain()


async def test_a_scheduled_event_is_built_when_written_in_order_with_the_others() -> None:
    recorded: list[Event] = []

    class Recorder(SlowClient):
        async def record_event(self, event: Event) -> None:
            recorded.append(event)

    writer = BackgroundWriter(Recorder(), TaskSupervisor("t"))  # type: ignore[arg-type]
    pod = make_pod().name("p").uid("uid-p").obj()
    writer.event(event("before"))
    writer.scheduled(pod, "node-1", "my-scheduler")
    writer.event(event("after"))
    assert await writer.flush(timeout=1)
    assert recorded == [
        event("before"),
        Event(
            ObjectRef("Pod", "default", "p", "uid-p"),
            "Normal",
            "Scheduled",
            "Binding",
            "Successfully assigned default/p to node-1",
            reporting_controller="my-scheduler",
        ),
        event("after"),
    ]
