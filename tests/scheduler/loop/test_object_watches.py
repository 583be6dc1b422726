"""The composition root reads what plugins watch once and merges it across profiles,
and a watched object's change reaches the queue as its cluster event: the pod a
plugin rejected for want of the object is retried when the hint says so."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from pydantic import BaseModel
from troupe.api.cycle import CycleState
from troupe.api.events import Action, ClusterEventWithHint, QueueingHint
from troupe.api.framework import Handle, PreFilterResult
from troupe.api.nodetable import NodeTable
from troupe.api.objects import ObjectMeta, Pod
from troupe.api.podinfo import PodInfo
from troupe.api.status import SUCCESS, Status
from troupe.api.watches import ObjectKind, ObjectStore, ObjectWatch, RawObject, WatchConflict
from troupe.plugins.registry import Registry, default_registry, plugin_spec

from tests.plugins.builders import make_node, make_pod
from tests.scheduler.harness import Harness

CONFIG_MAPS = ObjectKind("", "v1", "configmaps", "ConfigMap", True)


class NeedsConfigMap:
    """Rejects a pod until a ConfigMap named like it exists in its namespace."""

    name = "NeedsConfigMap"
    model: type[Any] = RawObject

    def __init__(self, args: BaseModel | None, handle: Handle) -> None:
        self.store: ObjectStore[Any] = ObjectStore(CONFIG_MAPS)

    def watched_objects(self) -> Sequence[ObjectWatch[Any]]:
        return [self.store.watch(self.model)]

    def events_to_register(self) -> Sequence[ClusterEventWithHint]:
        def hint(pod: Pod, old: object | None, new: object | None) -> QueueingHint:
            named = isinstance(new, RawObject) and new.metadata.name == pod.metadata.name
            return QueueingHint.QUEUE if named else QueueingHint.SKIP

        return [ClusterEventWithHint(CONFIG_MAPS.event(Action.ADD), hint)]

    def pre_filter(
        self, state: CycleState, pod: PodInfo, table: NodeTable
    ) -> tuple[PreFilterResult | None, Status]:
        m = pod.pod.metadata
        if self.store.get(m.name, m.namespace) is None:
            return None, Status.unresolvable("no configmap")
        return None, SUCCESS


class OtherModel(NeedsConfigMap):
    name = "OtherModel"
    model = ObjectMeta


def registry(*plugins: type) -> Registry:
    r = default_registry()
    for plugin in plugins:
        r.register(plugin_spec(plugin, in_default_profile=True))
    return r


def test_a_profile_without_watching_plugins_watches_nothing() -> None:
    assert Harness().parts.object_watches == []


def test_every_profiles_declarations_of_a_resource_share_one_watch() -> None:
    profiles = [{"schedulerName": "a"}, {"schedulerName": "b"}]
    h = Harness({"profiles": profiles}, registry=registry(NeedsConfigMap))
    [shared] = h.parts.object_watches
    assert shared.kind == CONFIG_MAPS and shared.model is RawObject
    assert shared.declared_by == ["NeedsConfigMap (profile a)", "NeedsConfigMap (profile b)"]


def test_two_models_of_one_resource_fail_the_build_naming_both_plugins() -> None:
    with pytest.raises(WatchConflict, match=r"OtherModel \(profile troupe-scheduler\) parses"):
        Harness(registry=registry(NeedsConfigMap, OtherModel))


async def test_a_watched_objects_event_requeues_the_pod_its_hint_releases() -> None:
    h = Harness(registry=registry(NeedsConfigMap)).nodes(
        [make_node().name("n1").capacity(cpu="4", memory="8Gi", pods=10).obj()]
    )
    h.pods([make_pod().name(n).req(cpu="1").scheduler_name("troupe-scheduler").obj() for n in "pq"])
    await h.settle()
    assert h.client.bindings == []
    [plugin] = [
        p
        for f in h.parts.profiles.values()
        for p in f.plugins.values()
        if isinstance(p, NeedsConfigMap)
    ]
    [watch] = plugin.watched_objects()
    # What the plugin's informer does: the plugin's callback, then the cluster event.
    obj = RawObject.of({"metadata": {"name": "p", "namespace": "default"}})
    watch.on_add(obj)
    h.handlers.on_object_change(CONFIG_MAPS.event(Action.ADD), None, obj)
    await h.advance(10)  # past the backoff
    await h.settle()
    assert [key for key, _ in h.client.bindings] == ["default/p"]  # q's hint said SKIP
