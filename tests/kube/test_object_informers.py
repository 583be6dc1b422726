"""Plugin-owned informers against the embedded API server: one informer per resource
for every plugin that declared it, only for what discovery says is served (the
plugins told otherwise, the daemon logging it once), each change to the plugins and
then as its cluster event, an unreadable object told once and skipped, and a plugin
whose callback raises keeping the change from no one."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import structlog.testing
from troupe.api.clock import RealClock
from troupe.api.events import Action, ClusterEvent
from troupe.api.tasks import TaskSupervisor
from troupe.api.watches import (
    ObjectKind,
    ObjectStore,
    ObjectWatch,
    RawObject,
    SharedWatch,
    share_watches,
)
from troupe.kube import HttpTransport, SharedInformers, check_reachable, connect, object_informers
from troupe.kube import informer as informer_module
from troupe.kube.object_informers import add_object_informers
from troupe.sim.apiserver.server import ApiServer

from tests.kube.fakes import FakeTransport

CONFIG_MAPS = ObjectKind("", "v1", "configmaps", "ConfigMap", True)
WIDGETS = ObjectKind("example.com", "v1", "widgets", "Widget", True)


class NoHandlers:
    """The scheduler's pod and node handlers, unused here."""

    def __getattr__(self, name: str) -> Any:
        return lambda *args: None


@dataclass
class Events:
    seen: list[tuple[ClusterEvent, str, str]] = field(default_factory=list)

    def on_object_change(self, event: ClusterEvent, old: object | None, new: object | None) -> None:
        self.seen.append((event, _name(old), _name(new)))


def _name(obj: object | None) -> str:
    return obj.metadata.name if isinstance(obj, RawObject) else "-"


@dataclass
class Plugin:
    """Records its calls; ``fail`` makes its add callback raise."""

    name: str
    calls: list[str] = field(default_factory=list)
    fail: bool = False
    unserved: list[str] = field(default_factory=list)

    def watch(self, kind: ObjectKind) -> ObjectWatch[RawObject]:
        def added(obj: RawObject) -> None:
            self.calls.append(f"add {obj.metadata.name}")
            if self.fail:
                raise RuntimeError("plugin bug")

        def updated(old: RawObject, new: RawObject) -> None:
            self.calls.append(f"update {new.metadata.name} {new.raw.get('data')}")

        def deleted(obj: RawObject) -> None:
            self.calls.append(f"delete {obj.metadata.name}")

        return ObjectWatch(
            kind, RawObject, added, updated, deleted, lambda: self.unserved.append(str(kind))
        )


@dataclass
class Api:
    server: ApiServer
    informers: SharedInformers
    tasks: TaskSupervisor


@pytest.fixture
async def api(tmp_path: Path) -> AsyncIterator[Api]:
    server = ApiServer(bookmark_interval=0.2)
    await server.start()
    client = await connect(str(server.write_kubeconfig(tmp_path / "kubeconfig")), None, False)
    await check_reachable(client)
    informers = SharedInformers(HttpTransport(client), RealClock(), NoHandlers())
    tasks = TaskSupervisor("test")
    try:
        yield Api(server, informers, tasks)
    finally:
        informers.stop()
        await tasks.cancel_all()
        await client.close()
        await server.stop()


async def eventually(check: Any, timeout: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not check():
        assert asyncio.get_running_loop().time() < deadline, "condition not reached in time"
        await asyncio.sleep(0.01)


def config_map(name: str, data: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "default"}, "data": data}


async def test_one_informer_per_resource_feeds_every_plugin_then_the_queue(api: Api) -> None:
    store = api.server.store
    store.create("configmaps", config_map("before", {"v": "0"}))
    a, b = Plugin("A", fail=True), Plugin("B")
    events = Events()
    watches = share_watches([("A", a.watch(CONFIG_MAPS)), ("B", b.watch(CONFIG_MAPS))])
    started = await add_object_informers(api.informers, RealClock(), watches, events)
    assert [w.kind for w in started] == [CONFIG_MAPS]
    # The three default informers, and one more for both plugins.
    assert [i.name for i in api.informers.informers][3:] == ["configmaps/v1"]
    api.informers.start(api.tasks)
    assert await api.informers.wait_for_sync(5)
    assert a.calls == b.calls == ["add before"]  # the initial list, before sync is reported
    store.create("configmaps", config_map("c", {"v": "1"}))
    obj = store.get("configmaps", "c", "default")
    obj["data"] = {"v": "2"}
    store.update("configmaps", obj)
    store.delete("configmaps", "c", "default")
    await eventually(lambda: len(events.seen) == 4)
    # A raises on every add; B still gets them, and so does the queue.
    assert b.calls == ["add before", "add c", "update c {'v': '2'}", "delete c"]
    assert a.calls == ["add before", "add c", "update c {'v': '2'}", "delete c"]
    assert [(str(e), old, new) for e, old, new in events.seen] == [
        ("configmaps.v1Add", "-", "before"),
        ("configmaps.v1Add", "-", "c"),
        ("configmaps.v1Update", "c", "c"),
        ("configmaps.v1Delete", "c", "-"),
    ]
    assert events.seen[2][0].action is Action.UPDATE_OTHER


async def test_an_unreadable_object_is_reported_once_and_skipped(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(informer_module, "log", structlog.get_logger("troupe.kube.informer"))
    store = api.server.store
    # Written straight into the store, as a server may hold objects from before a
    # check existed: labels that are not a map.
    bad = config_map("bad", {})
    bad["metadata"]["labels"] = ["x"]
    store.create("configmaps", bad)
    store.create("configmaps", config_map("good", {}))
    plugin = Plugin("P")
    watches = share_watches([("P", plugin.watch(CONFIG_MAPS))])
    with structlog.testing.capture_logs() as logs:
        await add_object_informers(api.informers, RealClock(), watches, Events())
        api.informers.start(api.tasks)
        assert await api.informers.wait_for_sync(5)
        again = store.get("configmaps", "bad", "default")
        again["data"] = {"still": "bad"}
        store.update("configmaps", again)
        store.create("configmaps", config_map("later", {}))
        await eventually(lambda: "add later" in plugin.calls)
    assert plugin.calls == ["add good", "add later"]
    told = [line for line in logs if line["event"] == "ignoring an object that does not parse"]
    assert [(t["informer"], t["object"], t["field"]) for t in told] == [
        ("configmaps/v1", "default/bad", "metadata.labels")
    ]


async def test_a_resource_that_is_not_served_is_not_watched_and_its_plugins_are_told(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(object_informers, "log", structlog.get_logger("troupe.kube.informer"))
    a, b = Plugin("A"), Plugin("B")
    watches = share_watches(
        [("A", a.watch(WIDGETS)), ("B", b.watch(WIDGETS)), ("B", b.watch(CONFIG_MAPS))]
    )
    with structlog.testing.capture_logs() as logs:
        started = await add_object_informers(api.informers, RealClock(), watches, Events())
    assert [w.kind for w in started] == [CONFIG_MAPS]
    assert a.unserved == b.unserved == ["widgets.example.com/v1"]
    [line] = [x for x in logs if x["log_level"] == "warning"]
    assert line["resource"] == "widgets.example.com/v1" and line["plugins"] == ["A", "B"]
    assert "widgets" not in " ".join(i.name for i in api.informers.informers)


async def test_a_store_is_filled_before_sync_is_reported(api: Api) -> None:
    api.server.store.create("configmaps", config_map("c", {"k": "v"}))
    store: ObjectStore[RawObject] = ObjectStore(CONFIG_MAPS)
    watches = share_watches([("P", store.watch(RawObject))])
    await add_object_informers(api.informers, RealClock(), watches, Events())
    api.informers.start(api.tasks)
    assert await api.informers.wait_for_sync(5)
    found = store.get("c", "default")
    assert found is not None and found.raw["data"] == {"k": "v"}


async def test_without_watches_nothing_is_asked() -> None:
    t = FakeTransport()
    informers = SharedInformers(t, RealClock(), NoHandlers())
    none: list[SharedWatch] = []
    assert await add_object_informers(informers, RealClock(), none, Events()) == []
    assert t.sent == [] and len(informers.informers) == 3
