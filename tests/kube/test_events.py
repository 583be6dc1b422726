"""Event recording: the events.k8s.io/v1 body, series aggregation, spam filter, failures."""

from __future__ import annotations

import asyncio
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from troupe.api.client import ApiError, Event, ObjectRef
from troupe.api.clock import FakeClock
from troupe.kube.events import (
    NOTE_LIMIT,
    EventPolicy,
    EventRecorder,
    micro_time,
    truncate_note,
)
from troupe.kube.ratelimit import TokenBucket
from troupe.kube.retry import RetryPolicy
from troupe.kube.transport import STRATEGIC_MERGE_PATCH

from tests.kube.fakes import FakeTransport, reply

EVENTS = "/apis/events.k8s.io/v1/namespaces/ns/events"
POD = ObjectRef("Pod", "ns", "p", "u-1")
FAILED_FIELDS = ("Warning", "FailedScheduling", "Scheduling", "0/3 nodes are available.")
FAILED = Event(POD, *FAILED_FIELDS)
MICRO = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$")


def recorder(
    t: FakeTransport, clock: FakeClock, policy: EventPolicy | None = None
) -> EventRecorder:
    return EventRecorder(
        t,
        clock,
        reporting_controller="troupe-scheduler",
        reporting_instance="troupe-scheduler-host",
        limiter=TokenBucket(-1, 1, clock),
        retry=RetryPolicy(max_attempts=2, initial_backoff=0.0, max_backoff=0.0, jitter=0.0),
        policy=policy,
    )


@pytest.mark.parametrize(
    ("wall", "text"),
    [
        pytest.param(0.0, "1970-01-01T00:00:00.000000Z", id="the epoch keeps six zero digits"),
        pytest.param(1_800_000_000.25, "2027-01-15T08:00:00.250000Z", id="a quarter second"),
        pytest.param(1_700_000_000.000001, "2023-11-14T22:13:20.000001Z", id="one microsecond"),
    ],
)
def test_micro_time(wall: float, text: str) -> None:
    assert micro_time(wall) == text


@settings(max_examples=100, deadline=None)
@given(st.floats(0, 4_000_000_000, allow_nan=False))
def test_micro_time_always_has_the_fraction(wall: float) -> None:
    assert MICRO.match(micro_time(wall))


@settings(max_examples=100, deadline=None)
@given(st.text(min_size=0, max_size=1500))
def test_notes_fit_the_byte_limit_and_keep_short_notes(note: str) -> None:
    out = truncate_note(note)
    assert len(out.encode()) <= NOTE_LIMIT
    if len(note.encode()) <= NOTE_LIMIT:
        assert out == note
    else:
        assert out.endswith(" ...")


async def test_first_event_is_created_with_every_required_field() -> None:
    t, clock = FakeTransport(), FakeClock()
    await recorder(t, clock).record(FAILED)
    [sent] = t.sent
    assert (sent.method, sent.path) == ("POST", EVENTS)
    body = sent.json()
    name = body["metadata"].pop("name")
    assert re.fullmatch(r"p\.[0-9a-f]+", name)
    assert body == {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"namespace": "ns"},
        "eventTime": "2027-01-15T08:00:00.000000Z",
        "reportingController": "troupe-scheduler",
        "reportingInstance": "troupe-scheduler-host",
        "action": "Scheduling",
        "reason": "FailedScheduling",
        "regarding": {
            "kind": "Pod",
            "namespace": "ns",
            "name": "p",
            "uid": "u-1",
            "apiVersion": "v1",
        },
        "note": "0/3 nodes are available.",
        "type": "Warning",
    }


async def test_events_about_cluster_scoped_objects_go_to_the_default_namespace() -> None:
    t, clock = FakeTransport(), FakeClock()
    node = Event(ObjectRef("Node", "", "n1", "u-n"), "Normal", "Reason", "Action", "x")
    await recorder(t, clock).record(node)
    assert t.sent[0].path == "/apis/events.k8s.io/v1/namespaces/default/events"
    assert "namespace" not in t.sent[0].json()["regarding"]


async def test_repeats_become_a_series_written_like_client_go() -> None:
    t, clock = FakeTransport(), FakeClock()
    rec = recorder(t, clock)
    await rec.record(FAILED)
    name = t.sent[0].json()["metadata"]["name"]
    clock.advance(10)
    await rec.record(FAILED)
    # The first repeat patches the series at once.
    patch = t.sent[1]
    assert (patch.method, patch.path, patch.content_type) == (
        "PATCH",
        f"{EVENTS}/{name}",
        STRATEGIC_MERGE_PATCH,
    )
    assert patch.json() == {
        "series": {"count": 2, "lastObservedTime": "2027-01-15T08:00:10.000000Z"}
    }
    # Later repeats only count in memory ...
    for _ in range(3):
        clock.advance(30)
        await rec.record(FAILED)
    await rec.flush()
    assert len(t.sent) == 2
    # ... until the series has gone unwritten for the refresh interval.
    for _ in range(int(rec.policy.refresh_every // 60)):
        clock.advance(60)
        await rec.record(FAILED)
    await rec.flush()
    assert len(t.sent) == 3
    assert t.sent[-1].json()["series"]["count"] == 5 + rec.policy.refresh_every // 60
    assert rec.counters.created == 1 and rec.counters.series_writes == 2


async def test_a_series_that_ends_gets_its_final_count_and_is_forgotten() -> None:
    t, clock = FakeTransport(), FakeClock()
    rec = recorder(t, clock)
    for _ in range(4):
        await rec.record(FAILED)
        clock.advance(1)
    assert len(t.sent) == 2  # create + first series patch
    clock.advance(rec.policy.finish_after)
    await rec.flush()
    assert t.sent[-1].json()["series"]["count"] == 4
    assert len(rec) == 0
    # The same event afterwards starts a new event object.
    await rec.record(FAILED)
    assert t.sent[-1].method == "POST"
    assert t.sent[-1].json()["metadata"]["name"] != t.sent[0].json()["metadata"]["name"]


async def test_a_flush_forgets_the_series_that_ended_and_keeps_the_one_that_repeats() -> None:
    t, clock = FakeTransport(), FakeClock()
    rec = recorder(t, clock)
    pods = [Event(ObjectRef("Pod", "ns", f"p{i}", f"u-{i}"), *FAILED_FIELDS) for i in range(3)]
    for event in pods:
        await rec.record(event)
        clock.advance(1)
    clock.advance(rec.policy.finish_after - 10)
    await rec.record(pods[0])  # the oldest takes a repeat (written at once) ...
    await rec.record(pods[0])  # ... and another, counted in memory
    clock.advance(20)
    await rec.flush()
    assert len(rec) == 1  # p1 and p2 ended; p0 goes on
    clock.advance(rec.policy.finish_after)
    await rec.flush()
    assert len(rec) == 0
    final = t.sent[-1]
    assert final.method == "PATCH" and "/events/p0." in final.path
    assert final.json()["series"]["count"] == 3


@pytest.mark.parametrize(
    "other",
    [
        pytest.param(
            Event(POD, "Warning", "FailedScheduling", "Scheduling", "0/4 nodes"),
            id="a different note is a new event",
        ),
        pytest.param(
            Event(
                ObjectRef("Pod", "ns", "p", "u-2"),
                "Warning",
                "FailedScheduling",
                "Scheduling",
                FAILED.note,
            ),
            id="a recreated pod (new uid) is a new event",
        ),
        pytest.param(
            Event(POD, "Normal", "Scheduled", "Binding", FAILED.note),
            id="a different reason is a new event",
        ),
    ],
)
async def test_non_isomorphic_events_are_not_aggregated(other: Event) -> None:
    t, clock = FakeTransport(), FakeClock()
    rec = recorder(t, clock)
    await rec.record(FAILED)
    await rec.record(other)
    assert [s.method for s in t.sent] == ["POST", "POST"]


async def test_the_per_object_spam_filter_allows_25_then_one_per_5_minutes() -> None:
    t, clock = FakeTransport(), FakeClock()
    rec = recorder(t, clock)
    for i in range(30):
        await rec.record(Event(POD, "Warning", "FailedScheduling", "Scheduling", f"note {i}"))
    assert len(t.calls("POST")) == 25
    assert rec.counters.spam_dropped == 5
    clock.advance(300)
    await rec.record(Event(POD, "Warning", "FailedScheduling", "Scheduling", "later"))
    assert len(t.calls("POST")) == 26
    # Another object has its own budget.
    other = ObjectRef("Pod", "ns", "q", "u-q")
    await rec.record(Event(other, "Warning", "FailedScheduling", "Scheduling", "x"))
    assert len(t.calls("POST")) == 27


async def test_write_failures_are_counted_never_raised() -> None:
    t, clock = FakeTransport(), FakeClock()
    t.script("POST", EVENTS, reply(500), reply(500), reply(403))
    rec = recorder(t, clock)
    await rec.record(FAILED)
    await rec.record(Event(POD, "Normal", "Scheduled", "Binding", "ok"))
    assert rec.counters.failed == 2 and rec.counters.created == 0
    assert len(rec) == 0  # a failed create is not aggregated into


async def test_a_series_whose_event_vanished_is_recreated_with_the_count() -> None:
    t, clock = FakeTransport(), FakeClock()
    rec = recorder(t, clock)
    await rec.record(FAILED)
    name = t.sent[0].json()["metadata"]["name"]
    t.script("PATCH", f"{EVENTS}/{name}", reply(404))
    await rec.record(FAILED)
    recreated = t.sent[-1]
    assert recreated.method == "POST"
    assert recreated.json()["series"] == {
        "count": 2,
        "lastObservedTime": "2027-01-15T08:00:00.000000Z",
    }
    assert recreated.json()["metadata"]["name"] != name
    assert rec.counters.failed == 0


async def test_a_repeat_during_the_create_is_written_when_the_create_lands() -> None:
    t, clock = FakeTransport(), FakeClock()
    rec = recorder(t, clock)
    first = asyncio.create_task(rec.record(FAILED))
    await asyncio.sleep(0)  # the POST is in flight
    await rec.record(FAILED)
    await first
    assert [s.method for s in t.sent] == ["POST", "PATCH"]
    assert t.sent[1].json()["series"]["count"] == 2


async def test_transport_errors_while_recording_are_swallowed() -> None:
    t, clock = FakeTransport(), FakeClock()
    t.script("POST", EVENTS, ApiError(0, "refused"), ApiError(0, "refused"))
    rec = recorder(t, clock)
    await rec.record(FAILED)
    assert rec.counters.failed == 1


async def test_the_flush_loop_writes_ended_series_on_its_tick() -> None:
    t, clock = FakeTransport(), FakeClock()
    rec = recorder(t, clock, EventPolicy(tick=60.0, finish_after=120.0))
    for _ in range(3):
        await rec.record(FAILED)
    loop = asyncio.create_task(rec.run())
    await asyncio.sleep(0)
    for _ in range(3):
        clock.advance(60.0)
        for _ in range(10):
            await asyncio.sleep(0)
    assert t.sent[-1].json()["series"]["count"] == 3 and len(rec) == 0
    loop.cancel()
    with pytest.raises(asyncio.CancelledError):
        await loop


async def test_a_deleted_pods_series_are_forgotten_at_once() -> None:
    t, clock = FakeTransport(), FakeClock()
    rec = recorder(t, clock)
    other = Event(ObjectRef("Pod", "ns", "q", "u-q"), *FAILED_FIELDS)
    await rec.record(FAILED)
    await rec.record(Event(POD, "Normal", "Scheduled", "Binding", "assigned"))
    await rec.record(other)
    assert len(rec) == 3
    rec.forget(POD)
    assert len(rec) == 1  # the other pod's series stays
    rec.forget(POD)  # a second delete (or one for a pod without events) is harmless
    await rec.flush()
    assert len(rec) == 1 and [s.method for s in t.sent] == ["POST"] * 3
    # The deleted pod's spam-filter budget went with it: a (racing) event about it
    # starts from a full bucket.
    for i in range(25):
        await rec.record(Event(POD, "Warning", "FailedScheduling", "Scheduling", f"n{i}"))
    rec.forget(POD)
    for i in range(25):
        await rec.record(Event(POD, "Warning", "FailedScheduling", "Scheduling", f"m{i}"))
    assert rec.counters.spam_dropped == 0


async def test_a_deleted_pods_series_with_unwritten_repeats_gets_its_final_count() -> None:
    t, clock = FakeTransport(), FakeClock()
    rec = recorder(t, clock)
    for _ in range(4):
        await rec.record(FAILED)  # create, the series patch at once, two more in memory
        clock.advance(1)
    other = Event(ObjectRef("Pod", "ns", "q", "u-q"), *FAILED_FIELDS)
    await rec.record(other)  # recorded last: behind the deleted pod's series
    assert len(t.sent) == 3
    rec.forget(POD)
    await rec.flush()  # the next flush writes the final count, then forgets it
    final = t.sent[-1]
    assert final.method == "PATCH" and final.json()["series"]["count"] == 4
    assert len(rec) == 1


async def test_series_that_end_or_are_evicted_leave_no_index_behind() -> None:
    t, clock = FakeTransport(), FakeClock()
    rec = recorder(t, clock, EventPolicy(max_series=2))
    refs = [ObjectRef("Pod", "ns", f"p{i}", f"u-{i}") for i in range(4)]
    for ref in refs:
        await rec.record(Event(ref, *FAILED_FIELDS))
    assert len(rec) == 2 and len(rec._by_object) == 2  # two evicted
    clock.advance(rec.policy.finish_after)
    await rec.flush()
    assert len(rec) == 0 and not rec._by_object
