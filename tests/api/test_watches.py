"""What a plugin declares about the API objects it watches: kinds and their cluster
events, raw objects, the ready store, and how declarations merge into one watch per
resource (two versions or two models of one resource are refused, naming both)."""

from __future__ import annotations

from typing import Any

import pytest
from troupe.api.events import Action, ClusterEvent, Resource
from troupe.api.objects import ObjectMeta
from troupe.api.watches import (
    PERSISTENT_VOLUME_CLAIMS,
    RESOURCE_CLAIMS,
    ObjectKind,
    ObjectStore,
    ObjectWatch,
    RawObject,
    WatchConflict,
    share_watches,
)

CONFIG_MAPS = ObjectKind("", "v1", "configmaps", "ConfigMap", True)


@pytest.mark.parametrize(
    ("kind", "resource", "label"),
    [
        (PERSISTENT_VOLUME_CLAIMS, Resource.PERSISTENT_VOLUME_CLAIM, "PersistentVolumeClaimAdd"),
        (RESOURCE_CLAIMS, Resource.RESOURCE_CLAIM, "ResourceClaimAdd"),
        (CONFIG_MAPS, "configmaps.v1", "configmaps.v1Add"),
        (
            ObjectKind("example.com", "v2", "widgets", "Widget", False),
            "widgets.v2.example.com",
            "widgets.v2.example.comAdd",
        ),
    ],
)
def test_a_kind_is_reported_under_upstreams_event_resource_name(
    kind: ObjectKind, resource: str, label: str
) -> None:
    assert kind.event_resource == resource
    assert kind.event(Action.ADD) == ClusterEvent(resource, Action.ADD, label)


def test_a_registration_matches_the_kinds_events_only() -> None:
    registered = PERSISTENT_VOLUME_CLAIMS.event(Action.ADD | Action.UPDATE)
    assert registered.matches(PERSISTENT_VOLUME_CLAIMS.event(Action.UPDATE_OTHER))
    assert registered.matches(PERSISTENT_VOLUME_CLAIMS.event(Action.ADD))
    assert not registered.matches(PERSISTENT_VOLUME_CLAIMS.event(Action.DELETE))
    assert not registered.matches(CONFIG_MAPS.event(Action.ADD))
    assert ClusterEvent(Resource.WILDCARD, Action.ALL).matches(CONFIG_MAPS.event(Action.ADD))
    assert str(PERSISTENT_VOLUME_CLAIMS.event(Action.DELETE)) == "PersistentVolumeClaimDelete"


def test_a_raw_object_keeps_the_whole_json_and_parses_its_metadata() -> None:
    body = {"apiVersion": "v1", "metadata": {"name": "c", "namespace": "ns"}, "data": [1]}
    raw = RawObject.of(body)
    assert raw.metadata.name == "c" and raw.metadata.namespace == "ns"
    assert raw.raw == body
    assert RawObject.model_validate_json(b'{"metadata":{"name":"x"}}').raw == {
        "metadata": {"name": "x"}
    }


def test_the_store_follows_its_watch() -> None:
    store: ObjectStore[RawObject] = ObjectStore(CONFIG_MAPS)
    changes: list[tuple[Any, Any]] = []
    watch = store.watch(RawObject, on_change=lambda old, new: changes.append((old, new)))
    a = RawObject.of({"metadata": {"name": "a", "namespace": "ns", "resourceVersion": "1"}})
    a2 = RawObject.of({"metadata": {"name": "a", "namespace": "ns", "resourceVersion": "2"}})
    watch.on_add(a)
    watch.on_update(a, a2)
    assert store.get("a", "ns") is a2 and len(store) == 1 and store.generation == 2
    watch.on_delete(a2)
    assert store.get("a", "ns") is None and list(store) == []
    assert changes == [(None, a), (a, a2), (a2, None)]
    assert store.served
    assert watch.on_unserved is not None
    watch.on_unserved()
    assert not store.served


def _watch(kind: ObjectKind, model: type[Any] = RawObject) -> ObjectWatch[Any]:
    def ignore(*_: Any) -> None:
        return None

    return ObjectWatch(kind, model, ignore, ignore, ignore)


def test_declarations_of_one_resource_share_one_watch_in_declaration_order() -> None:
    a, b, c = _watch(CONFIG_MAPS), _watch(PERSISTENT_VOLUME_CLAIMS), _watch(CONFIG_MAPS)
    shared = share_watches([("A", a), ("B", b), ("C", c)])
    assert [(s.kind, s.declared_by) for s in shared] == [
        (CONFIG_MAPS, ["A", "C"]),
        (PERSISTENT_VOLUME_CLAIMS, ["B"]),
    ]
    assert [w for _, w in shared[0].watches] == [a, c]


def test_two_versions_of_one_resource_are_refused_naming_both_plugins() -> None:
    v1beta2 = ObjectKind("resource.k8s.io", "v1beta2", "resourceclaims", "ResourceClaim", True)
    with pytest.raises(WatchConflict, match=r"B watches resourceclaims\.resource\.k8s\.io/v1beta2"):
        share_watches([("A", _watch(RESOURCE_CLAIMS)), ("B", _watch(v1beta2))])


def test_two_models_of_one_resource_are_refused() -> None:
    with pytest.raises(WatchConflict, match=r"B parses configmaps/v1 into .*ObjectMeta but A"):
        share_watches([("A", _watch(CONFIG_MAPS)), ("B", _watch(CONFIG_MAPS, ObjectMeta))])
