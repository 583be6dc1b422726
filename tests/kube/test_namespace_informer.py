"""The Namespace informer against the embedded API server over HTTP: the labels store
InterPodAffinity reads, and which changes reach the scheduler's handlers."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from troupe.api.clock import RealClock
from troupe.api.framework import NamespaceLabels
from troupe.api.objects import Namespace
from troupe.api.tasks import TaskSupervisor
from troupe.kube import HttpTransport, InformerConfig, connect
from troupe.kube.namespace_informer import NAMESPACES_PATH, namespace_informer
from troupe.sim.apiserver.server import ApiServer

FAST = InformerConfig(watch_timeout=30.0, initial_backoff=0.01, max_backoff=0.05)


class Recorder:
    """The scheduler's side of the informer: what it was told, in order."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []

    def on_namespace_add(self, namespace: Namespace) -> None:
        self.seen.append(("add", namespace.name))

    def on_namespace_update(self, old: Namespace, new: Namespace) -> None:
        self.seen.append(("update", new.name))

    def on_namespace_delete(self, namespace: Namespace) -> None:
        self.seen.append(("delete", namespace.name))


@pytest.fixture
async def http(tmp_path: Path) -> AsyncIterator[HttpTransport]:
    server = ApiServer(bookmark_interval=0.2)
    await server.start()
    api = await connect(str(server.write_kubeconfig(tmp_path / "kubeconfig")), None, False)
    try:
        yield HttpTransport(api)
    finally:
        await api.close()
        await server.stop()


async def send(
    http: HttpTransport, method: str, path: str, body: Any = None, merge: bool = False
) -> None:
    resp = await http.request(
        method,
        path,
        body=None if body is None else json.dumps(body).encode(),
        content_type="application/merge-patch+json" if merge else "application/json",
    )
    assert resp.ok, resp.body


async def eventually(check: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.02)


async def test_the_store_follows_namespace_labels_and_only_label_changes_are_passed_on(
    http: HttpTransport,
) -> None:
    store = NamespaceLabels()
    handlers = Recorder()
    informer = namespace_informer(http, RealClock(), store, handlers, config=FAST)
    assert informer.path == NAMESPACES_PATH
    tasks = TaskSupervisor("informers")
    tasks.spawn(informer.run())
    try:
        await informer.wait_synced()
        # The embedded cluster starts with the system namespaces, labelled with their
        # names as the API server does.
        assert store.labels_of("default") == {"kubernetes.io/metadata.name": "default"}
        handlers.seen.clear()

        body = {"metadata": {"name": "ml", "labels": {"team": "a"}}}
        await send(http, "POST", NAMESPACES_PATH, body)
        await eventually(lambda: store.labels_of("ml") is not None)
        assert store.labels_of("ml") == {"team": "a", "kubernetes.io/metadata.name": "ml"}

        generation = store.generation
        note = {"metadata": {"annotations": {"owner": "x"}}}
        await send(http, "PATCH", f"{NAMESPACES_PATH}/ml", note, merge=True)
        relabel = {"metadata": {"labels": {"team": "b"}}}
        await send(http, "PATCH", f"{NAMESPACES_PATH}/ml", relabel, merge=True)
        await eventually(lambda: (store.labels_of("ml") or {}).get("team") == "b")
        assert store.generation == generation + 1  # the annotation moved nothing

        await send(http, "DELETE", f"{NAMESPACES_PATH}/ml")
        await eventually(lambda: store.labels_of("ml") is None)
        assert handlers.seen == [("add", "ml"), ("update", "ml"), ("delete", "ml")]
    finally:
        informer.stop()
        await tasks.drain(timeout=2.0)
