"""The read side of the object store: ``StoreReads``, the base class of ``store.Store``.

It holds what every read and watch looks at: the objects per kind key, the global
resourceVersion, the watch ``Hub`` (history, watchers, listeners) and the snapshots of
paged lists; and serves gets, lists (paged or not), watches resuming from a
resourceVersion and in-process subscriptions. Writes, and the per-kind strategies around
them, are ``store.Store``'s.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Mapping
from typing import Any

from troupe.sim.apiserver.machinery import errors
from troupe.sim.apiserver.machinery.meta import clone
from troupe.sim.apiserver.machinery.resources import Registry, ResourceType
from troupe.sim.apiserver.machinery.selectors import (
    FieldSelector,
    LabelSelector,
    parse_field_selector,
    parse_label_selector,
)
from troupe.sim.apiserver.storage.conversion import storage_fields, to_view, view_converter
from troupe.sim.apiserver.storage.hub import Hub
from troupe.sim.apiserver.storage.paging import Snapshots, paginate
from troupe.sim.apiserver.storage.subscription import Subscription
from troupe.sim.apiserver.storage.watchers import ADDED, Watcher, WatchEvent

Obj = dict[str, Any]


def _selectors(
    label_selector: str | Mapping[str, str] | LabelSelector | None,
    field_selector: str | FieldSelector | None,
) -> tuple[LabelSelector, FieldSelector]:
    """Selectors as given, or parsed from their query-string form."""
    labels = (
        label_selector
        if isinstance(label_selector, LabelSelector)
        else parse_label_selector(label_selector)
    )
    fields = (
        field_selector
        if isinstance(field_selector, FieldSelector)
        else parse_field_selector(field_selector or None)
    )
    return labels, fields


def object_index(namespace: str, name: str) -> str:
    """The key of an object among its kind's: ``namespace/name``, or ``name``."""
    return f"{namespace}/{name}" if namespace else name


class StoreReads:
    """The objects and their history, and every way of reading them; ``store.Store``
    adds the writes."""

    def __init__(self, registry: Registry, history: int) -> None:
        self.registry = registry
        self.hub = Hub(history)
        self._rv = 0
        self._objects: dict[str, dict[str, Obj]] = {}
        self._snapshots = Snapshots()

    # --- plumbing ----------------------------------------------------------------------

    @property
    def resource_version(self) -> int:
        return self._rv

    def resolve(self, kind: str | ResourceType) -> ResourceType:
        return kind if isinstance(kind, ResourceType) else self.registry.resolve(kind)

    def objects(self, rt: ResourceType) -> dict[str, Obj]:
        return self._objects.setdefault(rt.key, {})

    def floor(self, key: str) -> int:
        return self.hub.floor(key)

    def compact(self) -> None:
        """Forget every event and continue snapshot: any older RV now gets 410 Expired."""
        self.hub.compact(set(self._objects), self._rv)
        self._snapshots.clear()

    # --- reads -------------------------------------------------------------------------

    def get(
        self,
        kind: str | ResourceType,
        name: str,
        namespace: str | None = None,
        *,
        copy: bool = True,
    ) -> Obj:
        rt = self.resolve(kind)
        obj = self.objects(rt).get(object_index(namespace or "" if rt.namespaced else "", name))
        if obj is None:
            raise errors.not_found(rt, name)
        obj = to_view(rt, obj)
        return clone(obj) if copy else obj

    def find(self, rt: ResourceType, namespace: str, name: str) -> Obj | None:
        return self.objects(rt).get(object_index(namespace if rt.namespaced else "", name))

    def _select(
        self, rt: ResourceType, namespace: str | None, labels: LabelSelector, fields: FieldSelector
    ) -> list[tuple[str, Obj]]:
        selected: list[tuple[str, Obj]] = []
        fields = storage_fields(rt, fields)
        for index, obj in self.objects(rt).items():
            meta = obj["metadata"]
            if namespace is not None and rt.namespaced and meta.get("namespace") != namespace:
                continue
            if not labels.empty and not labels.matches(meta.get("labels")):
                continue
            if not fields.empty and not fields.matches(obj):
                continue
            selected.append((index, obj))
        selected.sort(key=lambda pair: pair[0])
        return selected

    def list(
        self,
        kind: str | ResourceType,
        namespace: str | None = None,
        label_selector: str | Mapping[str, str] | LabelSelector | None = None,
        field_selector: str | FieldSelector | None = None,
        *,
        copy: bool = True,
    ) -> list[Obj]:
        rt = self.resolve(kind)
        labels, fields = _selectors(label_selector, field_selector)
        items = [to_view(rt, obj) for _, obj in self._select(rt, namespace, labels, fields)]
        return [clone(obj) for obj in items] if copy else items

    def list_page(
        self,
        rt: ResourceType,
        namespace: str | None,
        labels: LabelSelector,
        fields: FieldSelector,
        limit: int,
        continue_token: str,
    ) -> tuple[builtins.list[Obj], int, str, int | None]:
        """(items, list RV, next continue token or "", remainingItemCount or None)."""
        items, rv, token, remaining = paginate(
            self._snapshots,
            lambda: self._select(rt, namespace, labels, fields),
            self._rv,
            self.floor(rt.key),
            limit,
            continue_token,
        )
        return [to_view(rt, obj) for obj in items], rv, token, remaining

    # --- watches -----------------------------------------------------------------------

    def watch(
        self,
        kind: str | ResourceType,
        namespace: str | None = None,
        label_selector: str | Mapping[str, str] | LabelSelector | None = None,
        field_selector: str | FieldSelector | None = None,
        resource_version: str | None = None,
    ) -> Watcher:
        """Open a watcher: synthetic ADDED events for "" / "0" / None, else history after RV.

        Raises ``ApiError`` 410 when the RV is older than the kept history, 504 ("Too
        large resource version") when it is newer than the store's, 400 when it is not
        a resourceVersion.
        """
        rt = self.resolve(kind)
        labels, fields = _selectors(label_selector, field_selector)
        watcher = Watcher(
            rt.key,
            namespace if rt.namespaced else None,
            labels,
            storage_fields(rt, fields),
            view_converter(rt),
        )
        if resource_version in (None, "", "0"):
            for _, obj in self._select(rt, watcher.namespace, labels, fields):
                watcher.queue.append(WatchEvent(ADDED, self._rv, obj, None))
        else:
            text = str(resource_version)
            if not text.isascii() or not text.isdigit():
                raise errors.bad_request(f"invalid resource version: {resource_version}")
            since = int(text)
            if since > self._rv:
                # Nothing this server wrote has that version: a client resuming from
                # another server's history (the embedded server's versions restart
                # at 1) must relist, not wait unnoticed.
                raise errors.too_large_resource_version(since, self._rv)
            watcher.queue.extend(self.hub.backlog(rt.key, since))
        self.hub.register(watcher)
        return watcher

    def unwatch(self, watcher: Watcher) -> None:
        self.hub.unregister(watcher)

    def close_watchers(self, key: str | None = None) -> int:
        """Close every watcher (of one kind): their streams end. Returns how many."""
        return self.hub.close_watchers(key)

    def subscribe(
        self,
        kind: str,
        namespace: str | None = None,
        label_selector: str | Mapping[str, str] | None = None,
        field_selector: str | None = None,
        *,
        initial: bool = False,
        copy: bool = True,
    ) -> Subscription:
        """An in-process watch: ``async for type_, obj in store.subscribe("pods")``.

        ``initial`` first yields ADDED for every current object (like RV "0"); otherwise
        only changes after now. With ``copy=False`` objects are the store's own (read-only).
        """
        rv = None if initial else str(self._rv)
        return Subscription(
            self, self.watch(kind, namespace, label_selector, field_selector, rv), copy
        )

    def listen(self, kind: str, callback: Callable[[str, Obj], None]) -> Callable[[], None]:
        """Call ``callback(type, obj)`` synchronously after every change of a kind (objects
        are the store's own: read-only). Returns the function that stops it."""
        return self.hub.listen(self.resolve(kind).key, callback)
