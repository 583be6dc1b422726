"""Watch events and watchers: the fan-out half of the store.

Every write appends one ``WatchEvent`` to its kind's bounded history and hands the same
event object to every open ``Watcher`` of that kind (fan-out by reference). A watcher
filters lazily when it drains its queue, applying its namespace and selectors the way
upstream's cacher does (``cacheWatcher.convertToWatchEvent``): an object that stops
matching is sent as DELETED, one that starts matching as ADDED. Each event serializes
its object at most once per (object, apiVersion), however many watchers send it.

Used by ``store.Store`` (producer), ``endpoints.watch.serve_watch`` (HTTP streams) and
``subscription.Subscription`` (in-process subscribers).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from typing import Any, Final

from troupe.sim.apiserver.machinery.encoding import dumps
from troupe.sim.apiserver.machinery.selectors import FieldSelector, LabelSelector

ADDED: Final = "ADDED"
MODIFIED: Final = "MODIFIED"
DELETED: Final = "DELETED"

# A watcher that falls this far behind is closed, as upstream closes unresponsive
# watchers; the client re-watches from its last resourceVersion.
MAX_BACKLOG: Final = 200_000


def with_resource_version(obj: dict[str, Any], rv: str) -> dict[str, Any]:
    return {**obj, "metadata": {**obj["metadata"], "resourceVersion": rv}}


class WatchEvent:
    """One change of one object; ``prev`` is the object before the change (None for ADDED)."""

    __slots__ = ("_encoded", "obj", "prev", "rv", "type")

    def __init__(
        self, type_: str, rv: int, obj: dict[str, Any], prev: dict[str, Any] | None
    ) -> None:
        self.type = type_
        self.rv = rv
        self.obj = obj
        self.prev = prev
        self._encoded: dict[tuple[str, bool, str], bytes] = {}

    def previous_at_rv(self) -> dict[str, Any]:
        """The previous object stamped with this event's RV (selector-leaving DELETED)."""
        assert self.prev is not None
        return with_resource_version(self.prev, str(self.rv))

    def line(
        self,
        type_: str,
        use_prev: bool,
        api_version: str,
        convert: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
    ) -> bytes:
        """The newline-terminated JSON of this event as ``type_`` carrying obj or prev,
        as ``api_version`` shows it (``convert``: the view's converter, if any)."""
        key = (type_, use_prev, api_version)
        line = self._encoded.get(key)
        if line is None:
            obj = self.previous_at_rv() if use_prev else self.obj
            if convert is not None:
                obj = convert(obj)
            elif obj.get("apiVersion") != api_version:
                obj = {**obj, "apiVersion": api_version}
            line = b'{"type":"' + type_.encode() + b'","object":' + dumps(obj) + b"}\n"
            self._encoded[key] = line
        return line


Translation = tuple[str, bool] | None


class Watcher:
    """One open watch on one kind: a queue of events plus the filter to apply."""

    __slots__ = (
        "_waiter",
        "closed",
        "convert",
        "fields",
        "key",
        "labels",
        "namespace",
        "overflowed",
        "queue",
    )

    def __init__(
        self,
        key: str,
        namespace: str | None,
        labels: LabelSelector,
        fields: FieldSelector,
        convert: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
    ) -> None:
        self.key = key
        # Stored objects -> the watched version (conversion.view_converter); None: as is.
        self.convert = convert
        self.namespace = namespace
        self.labels = labels
        self.fields = fields
        self.queue: deque[WatchEvent] = deque()
        self.closed = False
        self.overflowed = False
        self._waiter: asyncio.Future[None] | None = None

    def matches(self, obj: dict[str, Any]) -> bool:
        if self.namespace is not None and obj["metadata"].get("namespace") != self.namespace:
            return False
        if not self.labels.empty and not self.labels.matches(obj["metadata"].get("labels")):
            return False
        return self.fields.empty or self.fields.matches(obj)

    def translate(self, event: WatchEvent) -> Translation:
        """(type to send, send the previous object) or None when the event is filtered out."""
        if event.type == MODIFIED:
            now = self.matches(event.obj)
            before = event.prev is not None and self.matches(event.prev)
            if now:
                return (MODIFIED, False) if before else (ADDED, False)
            return (DELETED, True) if before else None
        return (event.type, False) if self.matches(event.obj) else None

    def offer(self, event: WatchEvent) -> None:
        if self.closed:
            return
        if len(self.queue) >= MAX_BACKLOG:
            self.overflowed = True
            self.close()
            return
        self.queue.append(event)
        self.wake()

    def wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def close(self) -> None:
        self.closed = True
        self.wake()

    async def wait(self, timeout: float | None) -> None:
        """Return when an event is queued, the watcher closes, or ``timeout`` passes."""
        if self.queue or self.closed:
            return
        loop = asyncio.get_running_loop()
        waiter = loop.create_future()
        self._waiter = waiter
        handle = loop.call_later(timeout, _resolve, waiter) if timeout is not None else None
        try:
            await waiter
        finally:
            self._waiter = None
            if handle is not None:
                handle.cancel()


def _resolve(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


EventHook = Callable[[str, WatchEvent], None]
