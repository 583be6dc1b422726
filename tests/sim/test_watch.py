"""Watch streams of the embedded API server against upstream's cacher behaviour: initial
ADDED events, resuming from a resourceVersion, 410 Expired as an in-stream ERROR,
bookmarks, timeoutSeconds, and selector-leaving DELETED events."""

from __future__ import annotations

import asyncio
import time
from unittest import mock

import pytest
from aiohttp.test_utils import make_mocked_request
from kubernetes_asyncio import client, watch
from kubernetes_asyncio.client.exceptions import ApiException
from troupe.sim.apiserver import ApiServer
from troupe.sim.apiserver.endpoints.watch import WatchStreams, serve_watch
from troupe.sim.apiserver.machinery.selectors import parse_field_selector, parse_label_selector

from tests.sim.conftest import Http, pod

PODS = "/api/v1/namespaces/default/pods"


def summary(events: list[dict]) -> list[tuple[str, str]]:
    return [(e["type"], e["object"]["metadata"].get("name", "")) for e in events]


async def later(delay: float, coro: object) -> None:
    await asyncio.sleep(delay)
    await coro  # type: ignore[misc]


@pytest.mark.parametrize("rv", ["0", ""], ids=["resourceVersion 0", "no resourceVersion"])
async def test_watch_without_a_version_replays_current_objects_then_streams(
    http: Http, rv: str
) -> None:
    await http.post(PODS, pod("old"))
    params = {"timeoutSeconds": "1"} | ({"resourceVersion": rv} if rv else {})
    watching = asyncio.ensure_future(http.watch(PODS, **params))
    await later(0.2, http.post(PODS, pod("new")))
    assert summary(await watching) == [("ADDED", "old"), ("ADDED", "new")]


async def test_watch_from_a_version_sends_every_later_event(http: Http) -> None:
    _, created = await http.post(PODS, pod("a"))
    since = created["metadata"]["resourceVersion"]
    await http.patch(
        f"{PODS}/a", {"metadata": {"labels": {"x": "1"}}}, "application/merge-patch+json"
    )
    await http.post(PODS, pod("b"))
    await http.delete(f"{PODS}/b")
    events = await http.watch(PODS, resourceVersion=since, timeoutSeconds="1")
    assert summary(events) == [("MODIFIED", "a"), ("ADDED", "b"), ("DELETED", "b")]
    rvs = [int(e["object"]["metadata"]["resourceVersion"]) for e in events]
    assert rvs == sorted(rvs) and rvs[0] > int(since)


async def test_version_older_than_compaction_is_one_error_event(
    http: Http, server: ApiServer
) -> None:
    _, created = await http.post(PODS, pod("a"))
    await http.post(PODS, pod("b"))
    server.faults.compact()
    since = created["metadata"]["resourceVersion"]
    events = await http.watch(PODS, resourceVersion=since, timeoutSeconds="5")
    floor = server.store.resource_version
    assert events == [
        {
            "type": "ERROR",
            "object": {
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Failure",
                "message": f"too old resource version: {since} ({floor})",
                "reason": "Expired",
                "code": 410,
            },
        }
    ]


async def test_bounded_history_expires_versions_that_fell_out() -> None:
    server = ApiServer(history=3)
    store = server.store
    first = store.create("pods", pod("p0"))["metadata"]["resourceVersion"]
    for i in range(1, 6):
        store.create("pods", pod(f"p{i}"))
    with pytest.raises(Exception, match="too old resource version") as raised:
        store.watch("pods", resource_version=first)
    assert getattr(raised.value, "code", None) == 410
    recent = str(store.resource_version - 2)
    assert len(store.watch("pods", resource_version=recent).queue) == 2


async def test_bookmarks_carry_only_the_resource_version(http: Http, server: ApiServer) -> None:
    events = await http.watch(
        PODS, resourceVersion="0", allowWatchBookmarks="true", timeoutSeconds="1"
    )
    bookmarks = [e for e in events if e["type"] == "BOOKMARK"]
    assert len(bookmarks) >= 2
    assert bookmarks[-1]["object"] == {
        "kind": "Pod",
        "apiVersion": "v1",
        "metadata": {"resourceVersion": str(server.store.resource_version)},
    }


async def test_no_bookmarks_unless_asked(http: Http) -> None:
    assert await http.watch(PODS, resourceVersion="0", timeoutSeconds="1") == []


async def test_initial_events_end_with_an_annotated_bookmark(http: Http) -> None:
    await http.post(PODS, pod("a"))
    events = await http.watch(
        PODS,
        sendInitialEvents="true",
        resourceVersionMatch="NotOlderThan",
        allowWatchBookmarks="true",
        timeoutSeconds="1",
    )
    assert events[0]["type"] == "ADDED"
    assert events[1]["type"] == "BOOKMARK"
    assert events[1]["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}


async def test_timeout_seconds_ends_the_stream_cleanly(http: Http) -> None:
    started = time.monotonic()
    assert await http.watch(PODS, resourceVersion="0", timeoutSeconds="1") == []
    assert 0.25 <= time.monotonic() - started < 2


async def test_object_leaving_the_selector_is_deleted_and_returning_is_added(http: Http) -> None:
    _, created = await http.post(PODS, pod("a", {"app": "web"}))
    relabel = "application/merge-patch+json"
    watching = asyncio.ensure_future(
        http.watch(PODS, labelSelector="app=web", resourceVersion="0", timeoutSeconds="1")
    )
    await later(0.2, http.patch(f"{PODS}/a", {"metadata": {"labels": {"app": "db"}}}, relabel))
    await http.patch(f"{PODS}/a", {"metadata": {"labels": {"app": "web"}}}, relabel)
    events = await watching
    assert summary(events) == [("ADDED", "a"), ("DELETED", "a"), ("ADDED", "a")]
    deleted = events[1]["object"]["metadata"]
    # As the cacher does: the previous state (still matching) stamped with the new version.
    assert deleted["labels"] == {"app": "web"}
    assert int(deleted["resourceVersion"]) > int(created["metadata"]["resourceVersion"])


async def test_field_selector_applies_to_watches(http: Http) -> None:
    watching = asyncio.ensure_future(
        http.watch("/api/v1/pods", fieldSelector="spec.nodeName=n1", timeoutSeconds="1")
    )
    await later(0.2, http.post(PODS, pod("elsewhere", nodeName="n2")))
    await http.post(PODS, pod("here", nodeName="n1"))
    assert summary(await watching) == [("ADDED", "here")]


async def test_many_watchers_all_receive_every_event(http: Http) -> None:
    watchers = [
        asyncio.ensure_future(http.watch(PODS, resourceVersion="0", timeoutSeconds="1"))
        for _ in range(40)
    ]
    await asyncio.sleep(0.3)
    for i in range(5):
        await http.post(PODS, pod(f"p{i}"))
    results = await asyncio.gather(*watchers)
    assert all(len(events) == 5 for events in results)


async def test_kubernetes_asyncio_watch_raises_410_after_compaction(
    http: Http, server: ApiServer, kube: client.ApiClient
) -> None:
    _, created = await http.post(PODS, pod("a"))
    await http.post(PODS, pod("b"))
    server.faults.compact()
    v1 = client.CoreV1Api(kube)
    with pytest.raises(ApiException) as raised:
        async with watch.Watch() as w:
            async for _ in w.stream(
                v1.list_namespaced_pod,
                "default",
                resource_version=created["metadata"]["resourceVersion"],
                timeout_seconds=2,
                _request_timeout=5,
            ):
                pass
    assert raised.value.status == 410


async def test_kubernetes_asyncio_watch_sees_bookmarks_and_events(
    http: Http, kube: client.ApiClient
) -> None:
    v1 = client.CoreV1Api(kube)
    seen: list[str] = []

    async def consume() -> None:
        async with watch.Watch() as w:
            async for event in w.stream(
                v1.list_namespaced_pod,
                "default",
                resource_version="0",
                allow_watch_bookmarks=True,
                timeout_seconds=1,
                _request_timeout=5,
            ):
                seen.append(event["type"])

    consuming = asyncio.ensure_future(consume())
    await later(0.3, http.post(PODS, pod("a")))
    await consuming
    assert "ADDED" in seen and "BOOKMARK" in seen


async def test_cancelling_a_watch_handler_cancels_it_and_closes_the_watcher() -> None:
    # Server shutdown cancels the handlers of open streams: the cancellation must reach
    # the task (not be swallowed into a normal return) and the watcher must be released.
    server = ApiServer()
    transport = mock.Mock()
    transport.is_closing.return_value = False
    request = make_mocked_request("GET", PODS + "?watch=true", transport=transport)
    streams = WatchStreams()
    store = server.store
    rt = store.resolve("pods")
    labels, fields = parse_label_selector(None), parse_field_selector(None)
    task = asyncio.ensure_future(
        serve_watch(
            request, store, rt, None, labels, fields, bookmark_interval=60.0, streams=streams
        )
    )
    while not streams.open:
        await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert task.cancelled()
    assert streams.open == {}
    assert store.hub.watcher_count(rt.key) == 0
