"""core v1 and events.k8s.io/v1 Events are two views of one storage, as in
kube-apiserver: writes through either are read, selected and watched through both, with
upstream's field conversion; and both views are validated as the real server does."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.sim.conftest import Http

CORE = "/api/v1/namespaces/default/events"
EVENTS = "/apis/events.k8s.io/v1/namespaces/default/events"
STRATEGIC = "application/strategic-merge-patch+json"
OBSERVED = "2026-01-02T03:04:09.000000Z"
REGARDING = {"apiVersion": "v1", "kind": "Pod", "namespace": "default", "name": "web", "uid": "u1"}


def scheduled(name: str = "web.1", **fields: Any) -> dict[str, Any]:
    """An events.k8s.io/v1 Event as troupe (and kube-scheduler) write it."""
    return {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": name},
        "eventTime": "2026-01-02T03:04:05.123456Z",
        "reportingController": "troupe-scheduler",
        "reportingInstance": "troupe-0",
        "action": "Binding",
        "reason": "Scheduled",
        "regarding": REGARDING,
        "note": "Successfully assigned default/web to node-0",
        "type": "Normal",
        **fields,
    }


def legacy(name: str = "web.2") -> dict[str, Any]:
    """A core v1 Event as an old client (record.EventRecorder) writes it."""
    return {
        "metadata": {"name": name},
        "involvedObject": REGARDING,
        "reason": "Pulled",
        "message": "Container image pulled",
        "source": {"component": "kubelet", "host": "node-0"},
        "firstTimestamp": "2026-01-02T03:04:05Z",
        "lastTimestamp": "2026-01-02T03:05:05Z",
        "count": 3,
        "type": "Normal",
    }


async def test_an_events_k8s_io_event_is_a_core_event(http: Http) -> None:
    assert (await http.post(EVENTS, scheduled()))[0] == 201
    code, core = await http.get(f"{CORE}/web.1")
    assert code == 200
    assert (core["apiVersion"], core["kind"]) == ("v1", "Event")
    assert core["involvedObject"] == REGARDING
    assert core["message"] == "Successfully assigned default/web to node-0"
    assert (core["reportingComponent"], core["reportingInstance"]) == (
        "troupe-scheduler",
        "troupe-0",
    )
    assert (core["eventTime"], core["action"], core["reason"]) == (
        "2026-01-02T03:04:05.123456Z",
        "Binding",
        "Scheduled",
    )
    assert not {"regarding", "note", "reportingController"} & set(core)
    _, listed = await http.get(CORE)
    assert [e["metadata"]["name"] for e in listed["items"]] == ["web.1"]
    assert listed["kind"] == "EventList"


async def test_a_core_event_is_an_events_k8s_io_event(http: Http) -> None:
    assert (await http.post(CORE, legacy()))[0] == 201
    _, event = await http.get(f"{EVENTS}/web.2")
    assert event["apiVersion"] == "events.k8s.io/v1"
    assert event["regarding"] == REGARDING
    assert event["note"] == "Container image pulled"
    assert event["deprecatedSource"] == {"component": "kubelet", "host": "node-0"}
    assert (event["deprecatedFirstTimestamp"], event["deprecatedLastTimestamp"]) == (
        "2026-01-02T03:04:05Z",
        "2026-01-02T03:05:05Z",
    )
    assert event["deprecatedCount"] == 3
    assert not {"involvedObject", "message", "source", "count"} & set(event)


@pytest.mark.parametrize(
    ("path", "selector"),
    [
        (CORE, "involvedObject.name=web,involvedObject.uid=u1"),
        (CORE, "reportingComponent=troupe-scheduler"),
        (EVENTS, "regarding.name=web,regarding.kind=Pod"),
        (EVENTS, "reportingController=troupe-scheduler,type=Normal"),
    ],
)
async def test_field_selectors_of_each_view(http: Http, path: str, selector: str) -> None:
    await http.post(EVENTS, scheduled())
    await http.post(EVENTS, scheduled("db.1", regarding={**REGARDING, "name": "db", "uid": "u2"},
                                      reportingController="other"))  # fmt: skip
    code, listed = await http.get(path, fieldSelector=selector)
    assert code == 200, listed
    assert [e["metadata"]["name"] for e in listed["items"]] == ["web.1"]


async def test_an_unknown_field_selector_names_the_view(http: Http) -> None:
    code, body = await http.get(EVENTS, fieldSelector="involvedObject.name=web")
    assert (code, body["message"]) == (400, "field label not supported: involvedObject.name")


async def test_a_core_watch_sees_series_updates_made_through_events_k8s_io(http: Http) -> None:
    _, listed = await http.get(CORE)
    watching = asyncio.ensure_future(
        http.watch(CORE, resourceVersion=listed["metadata"]["resourceVersion"], timeoutSeconds="1")
    )
    await asyncio.sleep(0.1)
    await http.post(EVENTS, scheduled())
    series = {"series": {"count": 2, "lastObservedTime": OBSERVED}}
    code, patched = await http.patch(f"{EVENTS}/web.1", series, STRATEGIC)
    assert (code, patched["series"]["count"]) == (200, 2)
    events = await watching
    assert [(e["type"], e["object"]["apiVersion"]) for e in events] == [
        ("ADDED", "v1"),
        ("MODIFIED", "v1"),
    ]
    assert events[1]["object"]["series"] == series["series"]
    assert events[1]["object"]["message"] == "Successfully assigned default/web to node-0"


def invalid(name: str, *causes: str) -> str:
    text = ", ".join(causes)
    return f'Event.events.k8s.io "{name}" is invalid: ' + (f"[{text}]" if len(causes) > 1 else text)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        pytest.param(scheduled(reportingController=""),
                     invalid("web.1", "reportingController: Required value"),
                     id="reportingController required"),
        pytest.param(scheduled(action=""), invalid("web.1", "action: Required value"),
                     id="action required"),
        pytest.param(scheduled(note="x" * 1025),
                     invalid("web.1", 'message: Invalid value: "": can have at most 1024 '
                             "characters"), id="note longer than 1024"),
        pytest.param(scheduled(type="Fatal"),
                     invalid("web.1", 'type: Invalid value: "": has invalid value: Fatal'),
                     id="type Normal or Warning"),
        pytest.param({k: v for k, v in scheduled().items() if k != "eventTime"},
                     invalid("web.1", "eventTime: Required value"), id="eventTime required"),
        pytest.param(scheduled(series={"count": 1, "lastObservedTime": OBSERVED}),
                     invalid("web.1", 'series.count: Invalid value: "": should be at least 2'),
                     id="a series of one"),
        pytest.param(scheduled(deprecatedCount=2),
                     invalid("web.1", 'count: Invalid value: "": needs to be unset'),
                     id="deprecated fields unset"),
        pytest.param(scheduled(reportingController="troupe scheduler"),
                     invalid("web.1", 'reportingController: Invalid value: "troupe scheduler": '
                             "name part must consist of alphanumeric characters, '-', '_' or '.', "
                             "and must start and end with an alphanumeric character (e.g. "
                             "'MyName',  or 'my.name',  or '123-abc', regex used for validation "
                             "is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"),
                     id="reportingController a qualified name"),
    ],
)  # fmt: skip
async def test_events_k8s_io_validation(http: Http, body: dict[str, Any], message: str) -> None:
    code, answer = await http.post(EVENTS, body)
    assert (code, answer["reason"], answer["message"]) == (422, "Invalid", message)
    assert (await http.get(f"{EVENTS}/web.1"))[0] == 404


@pytest.mark.parametrize("stamp", ["2026-01-02T03:04:05Z", "2026-01-02 03:04:05.123456Z", "now"])
async def test_an_event_time_that_is_not_a_micro_time_is_a_bad_request(
    http: Http, stamp: str
) -> None:
    code, answer = await http.post(EVENTS, scheduled(eventTime=stamp))
    assert (code, answer["reason"]) == (400, "BadRequest")
    assert f'eventTime: parsing time "{stamp}"' in answer["message"]


async def test_only_the_series_of_an_events_k8s_io_event_may_change(http: Http) -> None:
    await http.post(EVENTS, scheduled())
    code, answer = await http.patch(f"{EVENTS}/web.1", {"note": "changed"}, STRATEGIC)
    assert (code, answer["message"]) == (
        422,
        invalid("web.1", 'note: Invalid value: "changed": field is immutable'),
    )


async def test_core_v1_keeps_its_legacy_rules(http: Http) -> None:
    # No eventTime: an old-style event, only the namespaces must agree.
    assert (await http.post(CORE, legacy()))[0] == 201
    moved = legacy("web.3")
    moved["involvedObject"] = {**REGARDING, "namespace": "kube-system"}
    code, answer = await http.post(CORE, moved)
    assert (code, answer["message"]) == (
        422,
        'Event "web.3" is invalid: involvedObject.namespace: Invalid value: "kube-system": '
        "does not match event.namespace",
    )
    # With an eventTime the reporting fields are required, named as core v1 names them.
    stamped = {**legacy("web.4"), "eventTime": "2026-01-02T03:04:05.000000Z"}
    code, answer = await http.post(CORE, stamped)
    assert code == 422
    assert answer["message"].startswith(
        'Event "web.4" is invalid: [reportingComponent: Required value, '
    )
