"""Informer logic on a scripted transport: reconcile, watch events, 410, backoff."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
import structlog.testing
from hypothesis import given, settings
from hypothesis import strategies as st
from troupe.api.client import ApiError
from troupe.api.clock import FakeClock
from troupe.api.objects import ObjectMeta, Pod, PodSpec
from troupe.api.quantity import QuantityError
from troupe.kube import informer as informer_module
from troupe.kube.informer import Informer, InformerConfig, _Gone

from tests.kube.fakes import FakeTransport, ScriptedWatch, reply

PODS = "/api/v1/pods"


def pod(name: str, rv: str, uid: str = "", node: str = "") -> Pod:
    return Pod(
        metadata=ObjectMeta(
            name=name, namespace="ns", uid=uid or f"uid-{name}", resource_version=rv
        ),
        spec=PodSpec(node_name=node),
    )


def event(kind: str, obj: Pod | dict[str, Any]) -> bytes:
    body = obj if isinstance(obj, dict) else obj.model_dump(mode="json", by_alias=True)
    return json.dumps({"type": kind, "object": body}).encode() + b"\n"


def page(pods: list[Pod], rv: str, cont: str = "") -> Any:
    return reply(
        200,
        {
            "kind": "PodList",
            "apiVersion": "v1",
            "metadata": {"resourceVersion": rv, "continue": cont},
            "items": [p.model_dump(mode="json", by_alias=True) for p in pods],
        },
    )


class Recorder:
    """Handler calls as readable strings, e.g. "add p@1", "update p@1->2", "delete p@2"."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def add(self, p: Pod) -> None:
        self.calls.append(f"add {p.metadata.name}@{p.metadata.resource_version}")

    def update(self, old: Pod, new: Pod) -> None:
        self.calls.append(
            f"update {new.metadata.name}@{old.metadata.resource_version}"
            f"->{new.metadata.resource_version}"
        )

    def delete(self, p: Pod) -> None:
        self.calls.append(f"delete {p.metadata.name}@{p.metadata.resource_version}")


def informer(t: FakeTransport, clock: FakeClock | None = None) -> tuple[Informer[Pod], Recorder]:
    rec = Recorder()
    inf = Informer(
        t,
        PODS,
        Pod,
        clock or FakeClock(),
        on_add=rec.add,
        on_update=rec.update,
        on_delete=rec.delete,
        config=InformerConfig(page_size=2, watch_timeout=10.0),
    )
    return inf, rec


def stored(inf: Informer[Pod]) -> dict[str, str]:
    return {k: v.metadata.resource_version for k, v in inf.store.items()}


# --- reconcile (what a relist emits) --------------------------------------------------------


@pytest.mark.parametrize(
    ("before", "listed", "calls"),
    [
        pytest.param([], [pod("a", "1")], ["add a@1"], id="a new object is added"),
        pytest.param([pod("a", "1")], [pod("a", "1")], [], id="an unchanged object is silent"),
        pytest.param(
            [pod("a", "1")],
            [pod("a", "2")],
            ["update a@1->2"],
            id="a changed resourceVersion is an update",
        ),
        pytest.param([pod("a", "1")], [], ["delete a@1"], id="a vanished object is deleted"),
        pytest.param(
            [pod("a", "1", uid="x")],
            [pod("a", "3", uid="y")],
            ["delete a@1", "add a@3"],
            id="same name with a new uid is delete then add, never an update",
        ),
        pytest.param(
            [pod("a", "1"), pod("b", "1")],
            [pod("b", "2"), pod("c", "2")],
            ["delete a@1", "update b@1->2", "add c@2"],
            id="deletes come first, then updates and adds",
        ),
    ],
)
def test_reconcile(before: list[Pod], listed: list[Pod], calls: list[str]) -> None:
    inf, rec = informer(FakeTransport())
    inf.reconcile({f"ns/{p.metadata.name}": p for p in before})
    rec.calls.clear()
    inf.reconcile({f"ns/{p.metadata.name}": p for p in listed})
    assert rec.calls == calls
    assert stored(inf) == {f"ns/{p.metadata.name}": p.metadata.resource_version for p in listed}


States = st.dictionaries(
    st.sampled_from("abcdef"), st.tuples(st.integers(1, 3), st.sampled_from("xy")), max_size=6
)


@settings(max_examples=200, deadline=None)
@given(before=States, after=States)
def test_replaying_the_relist_calls_turns_the_old_store_into_the_new(
    before: dict[str, tuple[int, str]], after: dict[str, tuple[int, str]]
) -> None:
    """A handler that keeps its own copy from the calls ends equal to the listing, and
    no object is added twice or deleted when absent (nothing double-counted)."""
    inf, _ = informer(FakeTransport())
    mirror: dict[str, str] = {}

    def add(p: Pod) -> None:
        assert p.metadata.name not in mirror
        mirror[p.metadata.name] = p.metadata.resource_version

    def update(old: Pod, new: Pod) -> None:
        assert mirror[old.metadata.name] == old.metadata.resource_version
        assert old.metadata.resource_version != new.metadata.resource_version
        mirror[new.metadata.name] = new.metadata.resource_version

    def delete(p: Pod) -> None:
        assert mirror.pop(p.metadata.name) == p.metadata.resource_version

    def objs(state: dict[str, tuple[int, str]]) -> dict[str, Pod]:
        return {f"ns/{n}": pod(n, f"{rv}{uid}", uid=uid) for n, (rv, uid) in state.items()}

    inf._on_add, inf._on_update, inf._on_delete = add, update, delete
    inf.reconcile(objs(before))
    inf.reconcile(objs(after))
    assert mirror == {n: f"{rv}{uid}" for n, (rv, uid) in after.items()}


# --- watch events ---------------------------------------------------------------------------


def test_watch_events_update_the_store_and_call_handlers_once() -> None:
    inf, rec = informer(FakeTransport())
    for line in [
        event("ADDED", pod("a", "1")),
        event("ADDED", pod("a", "1")),  # replayed: nothing new
        event("MODIFIED", pod("a", "2")),
        event("MODIFIED", pod("b", "3")),  # never seen added: it is an add
        event("BOOKMARK", {"kind": "Pod", "metadata": {"resourceVersion": "9"}}),
        event("DELETED", pod("a", "4")),
        event("DELETED", pod("zz", "5")),  # unknown: no call
    ]:
        inf.apply(line)
    assert rec.calls == ["add a@1", "update a@1->2", "add b@3", "delete a@2"]
    assert stored(inf) == {"ns/b": "3"}
    assert inf.resource_version == "5"


def test_a_bookmark_only_moves_the_resource_version() -> None:
    inf, rec = informer(FakeTransport())
    inf.apply(event("BOOKMARK", {"kind": "Pod", "metadata": {"resourceVersion": "42"}}))
    assert rec.calls == [] and inf.store == {} and inf.resource_version == "42"


@pytest.mark.parametrize(
    ("status", "raises"),
    [
        pytest.param(
            {"kind": "Status", "code": 410, "reason": "Expired"},
            _Gone,
            id="an in-stream 410 means relist",
        ),
        pytest.param(
            {"kind": "Status", "code": 500, "message": "boom"},
            ApiError,
            id="another in-stream error means reconnect",
        ),
    ],
)
def test_in_stream_errors(status: dict[str, Any], raises: type[Exception]) -> None:
    inf, _ = informer(FakeTransport())
    with pytest.raises(raises):
        inf.apply(event("ERROR", status))


def test_a_failing_handler_is_counted_and_does_not_stop_the_informer() -> None:
    def boom(p: Pod) -> None:
        raise RuntimeError("handler bug")

    inf = Informer(FakeTransport(), PODS, Pod, FakeClock(), on_add=boom)
    inf.apply(event("ADDED", pod("a", "1")))
    inf.apply(event("ADDED", pod("b", "1")))
    assert inf.counters.handler_errors == 2 and set(inf.store) == {"ns/a", "ns/b"}


def test_an_object_whose_quantities_do_not_parse_is_one_line_naming_the_field(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A fresh module logger: one a test before this cached under its own logging
    # configuration would bypass capture_logs.
    monkeypatch.setattr(informer_module, "log", structlog.get_logger("troupe.kube.informer"))

    # A user's mistake (a request of "1x", a negative limit), not a bug: no traceback.
    def refuse(p: Pod) -> None:
        raise QuantityError("1x", "bad suffix", f"pod {p.key}: spec.containers[0].cpu")

    inf = Informer(FakeTransport(), PODS, Pod, FakeClock(), on_add=refuse)
    with structlog.testing.capture_logs() as logs:
        inf.apply(event("ADDED", pod("a", "1")))
    assert inf.counters.handler_errors == 1 and set(inf.store) == {"ns/a"}
    [line] = logs
    assert line["event"] == "ignoring an object whose quantities do not parse"
    assert line["log_level"] == "error" and "exc_info" not in line
    assert line["error"] == "pod ns/a: spec.containers[0].cpu: invalid quantity '1x': bad suffix"


def bad_pod(name: str, rv: str) -> dict[str, Any]:
    """A pod whose container ports are not a list (a field of a type troupe rejects)."""
    body = pod(name, rv).model_dump(mode="json", by_alias=True)
    body["spec"]["containers"] = [{"name": "c", "ports": "eighty"}]
    return body


async def test_an_object_that_does_not_parse_is_left_out_of_the_list_and_the_rest_synced() -> None:
    t = FakeTransport()
    good = [p.model_dump(mode="json", by_alias=True) for p in (pod("a", "1"), pod("b", "2"))]
    t.script(
        "GET",
        PODS,
        reply(
            200,
            {
                "kind": "PodList",
                "metadata": {"resourceVersion": "10"},
                "items": [good[0], bad_pod("bad", "3"), good[1]],
            },
        ),
    )
    t.watches.append(ScriptedWatch(lines=[], block=asyncio.Event()))
    inf, rec = informer(t)
    task = asyncio.create_task(inf.run())
    await spin()
    assert inf.has_synced
    assert rec.calls == ["add a@1", "add b@2"]
    assert inf.counters.invalid == 1 and inf.resource_version == "10"
    inf.stop()
    await task


def test_a_watch_event_that_does_not_parse_is_skipped_and_a_known_object_forgotten() -> None:
    inf, rec = informer(FakeTransport())
    inf.apply(event("ADDED", pod("a", "1")))
    inf.apply(event("ADDED", bad_pod("new", "2")))  # never known: nothing to tell
    inf.apply(event("MODIFIED", bad_pod("a", "3")))  # known: it can no longer be read
    inf.apply(event("ADDED", pod("b", "4")))  # the stream goes on
    assert rec.calls == ["add a@1", "delete a@1", "add b@4"]
    assert stored(inf) == {"ns/b": "4"}
    assert inf.counters.invalid == 2 and inf.resource_version == "4"


def _unreadable_logged(logs: list[dict[str, Any]]) -> list[str]:
    return [
        f"{line['object']} {line['field']}"
        for line in logs
        if line["event"] == "ignoring an object that does not parse"
    ]


def bad_list(rv: str, *bodies: dict[str, Any]) -> Any:
    return reply(200, {"kind": "PodList", "metadata": {"resourceVersion": rv}, "items": bodies})


async def test_an_unreadable_object_is_reported_once_per_problem(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(informer_module, "log", structlog.get_logger("troupe.kube.informer"))
    t = FakeTransport()
    other = bad_pod("bad", "3")
    other["spec"]["containers"] = "none"  # another field of the wrong type
    t.script("GET", PODS, bad_list("10", bad_pod("bad", "3")), bad_list("12", bad_pod("bad", "3")))
    inf, rec = informer(t)
    with structlog.testing.capture_logs() as logs:
        await inf._list_and_reconcile()
        inf.apply(event("MODIFIED", bad_pod("bad", "11")))  # the same problem
        await inf._list_and_reconcile()  # a relist (after a 410) still sees it
        assert _unreadable_logged(logs) == ["ns/bad spec.containers.0.ports"]
        inf.apply(event("MODIFIED", other))  # a new problem is told
        inf.apply(event("MODIFIED", pod("bad", "14")))  # readable again
        inf.apply(event("MODIFIED", bad_pod("bad", "15")))  # and unreadable again: told
        inf.apply(event("DELETED", bad_pod("bad", "16")))  # gone: nothing to tell
        inf.apply(event("ADDED", bad_pod("bad", "17")))  # a new object of that name
    assert _unreadable_logged(logs) == [
        "ns/bad spec.containers.0.ports",
        "ns/bad spec.containers",
        "ns/bad spec.containers.0.ports",
        "ns/bad spec.containers.0.ports",
    ]
    assert rec.calls == ["add bad@14", "delete bad@14"]
    assert inf.counters.invalid == 7


# --- the list/watch loop --------------------------------------------------------------------


async def spin(times: int = 30) -> None:
    for _ in range(times):
        await asyncio.sleep(0)


async def test_paginated_list_then_watch_from_its_resource_version() -> None:
    t = FakeTransport()
    t.script(
        "GET",
        PODS,
        page([pod("a", "1"), pod("b", "2")], "10", cont="c1"),
        page([pod("c", "3")], "10"),
    )
    release = asyncio.Event()
    t.watches.append(ScriptedWatch(lines=[event("ADDED", pod("d", "11"))], block=release))
    inf, rec = informer(t)
    task = asyncio.create_task(inf.run())
    await spin()
    assert inf.has_synced and inf.healthy
    assert [s.query for s in t.calls("GET", PODS)] == [
        {"limit": "2"},
        {"limit": "2", "continue": "c1"},
    ]
    query = t.watch_queries[0]
    assert query["resourceVersion"] == "10" and query["allowWatchBookmarks"] == "true"
    assert 10 <= int(query["timeoutSeconds"]) < 20
    assert t.watch_timeouts[0] == int(query["timeoutSeconds"]) + inf.config.watch_grace
    assert rec.calls == ["add a@1", "add b@2", "add c@3", "add d@11"]
    inf.stop()
    await task
    assert not inf.healthy


@pytest.mark.parametrize(
    "gone",
    [
        pytest.param(ScriptedWatch(status=410), id="410 on the watch request"),
        pytest.param(
            ScriptedWatch(
                lines=[event("ERROR", {"kind": "Status", "status": "Failure", "code": 410})]
            ),
            id="410 as an in-stream ERROR event",
        ),
        pytest.param(
            ScriptedWatch(
                lines=[
                    event(
                        "ERROR",
                        {
                            "kind": "Status",
                            "status": "Failure",
                            "reason": "Timeout",
                            "message": "Too large resource version: 50, current: 9",
                            "code": 504,
                        },
                    )
                ]
            ),
            id="504 too large resource version as an in-stream ERROR event",
        ),
    ],
)
async def test_gone_relists_and_emits_only_the_difference(gone: ScriptedWatch) -> None:
    t = FakeTransport()
    t.script(
        "GET",
        PODS,
        page([pod("a", "1"), pod("b", "1")], "5"),
        page([pod("b", "7"), pod("c", "8")], "9"),
    )
    t.watches.append(ScriptedWatch(lines=[event("MODIFIED", pod("a", "3"))]))
    t.watches.append(gone)
    inf, rec = informer(t)
    task = asyncio.create_task(inf.run())
    await spin(60)
    assert rec.calls == [
        "add a@1",
        "add b@1",
        "update a@1->3",
        # relist at rv 9: a vanished while we were not watching, b changed, c is new
        "delete a@3",
        "update b@1->7",
        "add c@8",
    ]
    assert inf.counters.relists_on_gone == 1
    assert t.watch_queries[-1]["resourceVersion"] == "9"
    inf.stop()
    await task


async def test_errors_back_off_on_the_clock_then_resume_from_the_last_version() -> None:
    t = FakeTransport()
    clock = FakeClock()
    t.script("GET", PODS, ApiError(0, "connection refused"), page([pod("a", "1")], "5"))
    t.watches.append(
        ScriptedWatch(
            lines=[event("MODIFIED", pod("a", "6"))], then_raise=ApiError(0, "connection reset")
        )
    )
    inf, rec = informer(t, clock)
    task = asyncio.create_task(inf.run())
    await spin()
    assert not inf.has_synced and clock.sleepers == 1  # backing off, not spinning
    clock.advance(1.6)  # first backoff is at most 0.8 s × 2
    await spin()
    assert inf.has_synced and rec.calls == ["add a@1", "update a@1->6"]
    assert clock.sleepers == 1 and inf.counters.failures == 2
    clock.advance(3.2)
    await spin()
    # Reconnected from the last version seen, without a relist.
    assert t.watch_queries[-1]["resourceVersion"] == "6"
    assert len(t.calls("GET", PODS)) == 2
    assert inf.healthy
    inf.stop()
    await task


async def test_unhealthy_when_the_server_stays_unreachable() -> None:
    t = FakeTransport()
    clock = FakeClock()
    t.default = reply(503)
    inf, _ = informer(t, clock)
    task = asyncio.create_task(inf.run())
    for _ in range(10):
        await spin()
        clock.advance(10)
    assert not inf.has_synced and not inf.healthy
    inf.stop()
    await task


async def test_an_empty_watch_closing_at_once_is_backed_off() -> None:
    t = FakeTransport()
    clock = FakeClock()
    t.script("GET", PODS, page([], "1"))
    t.watches.extend([ScriptedWatch(), ScriptedWatch()])
    inf, _ = informer(t, clock)
    task = asyncio.create_task(inf.run())
    await spin()
    assert len(t.watch_queries) == 1 and clock.sleepers == 1
    inf.stop()
    await task
