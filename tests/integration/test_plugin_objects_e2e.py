"""A plugin that needs API objects the engine does not keep, end to end through the
embedded API server with nothing in troupe/scheduler naming it.

``TicketGate`` (defined here, not in troupe/plugins) watches ConfigMaps through
``WatchesObjects``: a pod annotated ``troupe.test/ticket: <name>`` is rejected by its
PreFilter until the ConfigMap ``<name>`` in the pod's namespace says ``open: "yes"``; its
queueing hint releases the pod when that ConfigMap changes; its PreBind writes who
used the ticket onto the ConfigMap through the generic object client. The tests
check: the plugin's informer has listed before the first pod is scheduled; a
ConfigMap change becomes its cluster event and requeues the rejected pod; a
ConfigMap that does not parse is reported once and skipped; a replica without the
lease writes nothing in PreBind."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import pytest
import structlog.testing
from pydantic import BaseModel
from troupe.api.client import WriteFenced
from troupe.api.clock import RealClock
from troupe.api.config import config_document, load_config
from troupe.api.cycle import CycleState
from troupe.api.events import Action, ClusterEventWithHint, QueueingHint
from troupe.api.framework import Handle, PreFilterResult
from troupe.api.nodetable import NodeTable
from troupe.api.objects import Pod
from troupe.api.podinfo import PodInfo
from troupe.api.status import SUCCESS, Code, Status
from troupe.api.watches import ObjectKind, ObjectStore, ObjectWatch, RawObject
from troupe.kube import informer as informer_module
from troupe.kube.fence import WriteFence
from troupe.plugins.registry import catalog, default_registry, plugin_spec
from troupe.scheduler.service.daemon import Connection, SchedulerDaemon
from troupe.sim.cluster import SimCluster

from tests.integration.conftest import Bindings, eventually, pod

CONFIG_MAPS = ObjectKind("", "v1", "configmaps", "ConfigMap", True)
TICKET = "troupe.test/ticket"
USED_BY = "troupe.test/used-by"


class TicketGate:
    name = "TicketGate"
    # What every instance saw, for the tests to read (one daemon per test).
    seen: ClassVar[list[str]] = []

    def __init__(self, args: BaseModel | None, handle: Handle) -> None:
        self._client = handle.client
        self.tickets: ObjectStore[RawObject] = ObjectStore(CONFIG_MAPS)

    # --- WatchesObjects ------------------------------------------------------------

    def watched_objects(self) -> Sequence[ObjectWatch[Any]]:
        return [self.tickets.watch(RawObject)]

    # --- EnqueueExtensions -----------------------------------------------------------

    def events_to_register(self) -> Sequence[ClusterEventWithHint]:
        return [ClusterEventWithHint(CONFIG_MAPS.event(Action.ADD | Action.UPDATE), self._hint)]

    def _hint(self, pod: Pod, old: object | None, new: object | None) -> QueueingHint:
        assert isinstance(new, RawObject)
        mine = (new.metadata.namespace, new.metadata.name) == (
            pod.metadata.namespace,
            pod.metadata.annotations.get(TICKET),
        )
        self.seen.append(f"hint {new.metadata.name} {'QUEUE' if mine and _open(new) else 'SKIP'}")
        return QueueingHint.QUEUE if mine and _open(new) else QueueingHint.SKIP

    # --- PreFilter, PreBind ----------------------------------------------------------

    def pre_filter(
        self, state: CycleState, pod: PodInfo, table: NodeTable
    ) -> tuple[PreFilterResult | None, Status]:
        name = pod.pod.metadata.annotations.get(TICKET)
        if name is None:
            return None, Status(Code.SKIP)
        ticket = self.tickets.get(name, pod.pod.metadata.namespace)
        self.seen.append(f"prefilter {pod.key} sees {len(self.tickets)} configmaps")
        if ticket is None or not _open(ticket):
            return None, Status.unresolvable(f'ticket "{name}" is not open')
        return None, SUCCESS

    async def pre_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        name = pod.pod.metadata.annotations.get(TICKET)
        if name is None:
            return SUCCESS
        patch = {"metadata": {"annotations": {USED_BY: f"{pod.key} on {node_name}"}}}
        try:
            await self._client.patch_object(
                CONFIG_MAPS, name, patch, namespace=pod.pod.metadata.namespace
            )
        except WriteFenced:
            self.seen.append(f"prebind {pod.key} fenced")
            raise
        self.seen.append(f"prebind {pod.key} wrote")
        return SUCCESS


def _open(ticket: RawObject) -> bool:
    data = ticket.raw.get("data")
    return isinstance(data, dict) and data.get("open") == "yes"


@pytest.fixture
async def start(cluster: SimCluster, tmp_path: Path) -> Any:
    """Start a daemon whose default profile includes TicketGate."""
    TicketGate.seen.clear()
    daemons: list[SchedulerDaemon] = []

    async def run(**options: Any) -> SchedulerDaemon:
        registry = default_registry()
        registry.register(plugin_spec(TicketGate, in_default_profile=True))
        resolved = load_config(config_document(), catalog(registry))
        kubeconfig = cluster.write_kubeconfig(tmp_path / f"kubeconfig-{len(daemons)}")
        daemon = SchedulerDaemon(
            resolved,
            Connection(kubeconfig=str(kubeconfig)),
            registry=registry,
            seed=1,
            sync_timeout=10,
            **options,
        )
        await daemon.start()
        daemons.append(daemon)
        return daemon

    yield run
    for daemon in daemons:
        await daemon.stop(grace=1)


def ticket(name: str, open_: str = "yes", **meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "default", **meta},
        "data": {"open": open_},
    }


def with_ticket(name: str, ticket_name: str) -> dict[str, Any]:
    return pod(name, metadata={"annotations": {TICKET: ticket_name}})


def used_by(cluster: SimCluster, name: str) -> str | None:
    stored = cluster.store.get("configmaps", name, "default")
    return stored["metadata"].get("annotations", {}).get(USED_BY)


async def test_the_plugins_informer_lists_before_scheduling_and_prebind_writes_the_object(
    cluster: SimCluster, start: Any
) -> None:
    bindings = Bindings(cluster)
    cluster.store.create("configmaps", ticket("t1"))
    cluster.store.create("pods", with_ticket("p", "t1"))
    daemon = await start()
    assert [str(w.kind) for w in daemon.watched_objects] == ["configmaps/v1"]
    await eventually(lambda: "default/p" in bindings.node, timeout=20, what="p bound")
    # Its first PreFilter already saw the ticket listed before the daemon scheduled.
    first = next(s for s in TicketGate.seen if s.startswith("prefilter"))
    assert first == "prefilter default/p sees 1 configmaps"
    assert used_by(cluster, "t1") == f"default/p on {bindings.node['default/p']}"


def incoming(daemon: SchedulerDaemon, event: str) -> float:
    registry = daemon.metrics_registry
    return sum(
        registry.get_sample_value(
            "scheduler_queue_incoming_pods_total", {"queue": queue, "event": event}
        )
        or 0.0
        for queue in ("active", "backoff")
    )


async def test_an_object_change_requeues_the_pod_the_plugin_rejected(
    cluster: SimCluster, start: Any
) -> None:
    bindings = Bindings(cluster)
    daemon = await start()
    cluster.store.create("pods", with_ticket("waits", "t2"))
    await eventually(
        lambda: "prefilter default/waits sees 0 configmaps" in TicketGate.seen,
        timeout=20,
        what="the pod tried and rejected",
    )
    # Another ConfigMap, and the ticket still closed: the hint says SKIP for both.
    cluster.store.create("configmaps", ticket("other"))
    cluster.store.create("configmaps", ticket("t2", open_="no"))
    await eventually(lambda: "hint t2 SKIP" in TicketGate.seen, timeout=20, what="hint asked")
    assert "hint other SKIP" in TicketGate.seen
    assert "default/waits" not in bindings.node
    # Opening it is a ConfigMap update: the pod leaves the unschedulable pool at once
    # (not at the five-minute flush) and binds.
    opened = cluster.store.get("configmaps", "t2", "default")
    opened["data"]["open"] = "yes"
    cluster.store.update("configmaps", opened)
    await eventually(lambda: "default/waits" in bindings.node, timeout=20, what="bound")
    assert "hint t2 QUEUE" in TicketGate.seen
    assert incoming(daemon, "configmaps.v1Update") == 1
    assert used_by(cluster, "t2") is not None


async def test_a_configmap_that_does_not_parse_is_reported_once_and_skipped(
    cluster: SimCluster, start: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(informer_module, "log", structlog.get_logger("troupe.kube.informer"))
    bindings = Bindings(cluster)
    # Stored as a real server might hold it from before a check existed.
    cluster.store.create("configmaps", ticket("broken", labels=["not", "a", "map"]))
    with structlog.testing.capture_logs() as logs:
        await start()
        broken = cluster.store.get("configmaps", "broken", "default")
        broken["data"]["open"] = "no"  # another version, the same problem
        cluster.store.update("configmaps", broken)
        cluster.store.create("configmaps", ticket("fine"))
        cluster.store.create("pods", with_ticket("ok", "fine"))
        await eventually(lambda: "default/ok" in bindings.node, timeout=20, what="ok bound")
    told = [
        (line["object"], line["field"])
        for line in logs
        if line["event"] == "ignoring an object that does not parse"
    ]
    assert told == [("default/broken", "metadata.labels")]


async def test_a_replica_without_the_lease_writes_nothing_in_prebind(
    cluster: SimCluster, start: Any
) -> None:
    bindings = Bindings(cluster)
    clock = RealClock()
    fence = WriteFence(clock)
    fence.open(clock.now(), 3600.0)
    daemon = await start(fence=fence)
    cluster.store.create("configmaps", ticket("t3"))
    await eventually(
        lambda: any(len(t.tickets) for t in _plugins(daemon)), timeout=20, what="ticket seen"
    )
    fence.close("the lease is lost")
    cluster.store.create("pods", with_ticket("fenced", "t3"))
    await eventually(
        lambda: "prefilter default/fenced sees 1 configmaps" in TicketGate.seen,
        timeout=20,
        what="the pod placed",
    )
    await eventually(
        lambda: "prebind default/fenced fenced" in TicketGate.seen,
        timeout=20,
        what="PreBind's write fenced",
    )
    assert _fenced(daemon) > 0
    assert used_by(cluster, "t3") is None
    assert "default/fenced" not in bindings.node
    # Leading again: the same PreBind now writes, and the pod binds.
    fence.open(clock.now(), 3600.0)
    await eventually(lambda: "default/fenced" in bindings.node, timeout=30, what="bound")
    assert used_by(cluster, "t3") == f"default/fenced on {bindings.node['default/fenced']}"


def _plugins(daemon: SchedulerDaemon) -> list[TicketGate]:
    assert daemon.wired is not None
    return [
        plugin
        for fwk in daemon.wired.profiles.values()
        for plugin in fwk.plugins.values()
        if isinstance(plugin, TicketGate)
    ]


def _fenced(daemon: SchedulerDaemon) -> int:
    assert daemon.client is not None
    transport = daemon.client.transport
    return int(getattr(transport, "fenced", 0))
