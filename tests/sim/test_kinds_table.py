"""The table of built-in kinds (``registry/kinds.py``) is the one place a resource is
declared: an entry with a strategy is served and its strategy governs API writes."""

from __future__ import annotations

import pytest
from troupe.sim.apiserver import ApiError, ResourceType, Store
from troupe.sim.apiserver.machinery.content import name_is_dns_label
from troupe.sim.apiserver.machinery.field import Cause, required
from troupe.sim.apiserver.registry.bootstrap import new_store
from troupe.sim.apiserver.registry.generic import GenericStrategy
from troupe.sim.apiserver.registry.kinds import BUILTIN_KINDS, Served
from troupe.sim.apiserver.storage.store import Obj

WIDGETS = ResourceType("example.troupe.dev", "v1", "Widget", "widgets", True)


class WidgetStrategy(GenericStrategy):
    def causes(
        self, store: Store, rt: ResourceType, obj: Obj, old: Obj | None, subresource: str | None
    ) -> list[Cause]:
        return [] if "size" in obj else [required("size")]


def test_an_entry_is_all_a_new_kind_needs() -> None:
    store = new_store(kinds=(*BUILTIN_KINDS, Served(WIDGETS, WidgetStrategy)))
    assert store.registry.lookup("example.troupe.dev", "v1", "widgets") == WIDGETS
    store.create("widgets.example.troupe.dev", {"metadata": {"name": "w"}, "size": 1})
    with pytest.raises(ApiError) as refused:
        store.create(WIDGETS, {"metadata": {"name": "x"}}, validate=True)
    assert (
        refused.value.status["message"]
        == 'Widget.example.troupe.dev "x" is invalid: size: Required value'
    )
    # Its names follow the rule declared with it.
    dotted = new_store(kinds=(*BUILTIN_KINDS, Served(WIDGETS, names=name_is_dns_label)))
    with pytest.raises(ApiError) as label:
        dotted.create(WIDGETS, {"metadata": {"name": "a.b"}}, validate=True)
    assert 'metadata.name: Invalid value: "a.b": must not contain dots' in str(label.value)


def test_one_storage_has_one_strategy() -> None:
    twice = (*BUILTIN_KINDS, Served(WIDGETS, WidgetStrategy), Served(WIDGETS, GenericStrategy))
    with pytest.raises(ValueError, match="two strategies declared for the storage of widgets"):
        new_store(kinds=twice)


def test_every_declared_strategy_is_on_a_storage_version() -> None:
    for served in BUILTIN_KINDS:
        if served.strategy is not None:
            assert not served.resource.shares_storage_of, served.resource
