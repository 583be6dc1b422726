"""In-process watches: ``Store.subscribe`` returns a ``Subscription``.

An async iterator of (type, object) over one ``Watcher``, with the same filtering and
selector-leaving DELETED events as HTTP watches. The simulated kubelets and scenario code
use it instead of HTTP. A subscription needs of its store only ``unwatch`` (``WatchOwner``),
so this module does not import the store.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Protocol

from troupe.sim.apiserver.machinery.meta import clone
from troupe.sim.apiserver.storage.watchers import Watcher

Obj = dict[str, Any]


class WatchOwner(Protocol):
    """What registered the watcher (``store.Store``): ends it when the subscription does."""

    def unwatch(self, watcher: Watcher) -> None: ...


class Subscription:
    """Async iterator over (type, object) of one in-process watch; ``close()`` ends it."""

    def __init__(self, store: WatchOwner, watcher: Watcher, copy: bool) -> None:
        self._store = store
        self._watcher = watcher
        self._copy = copy

    def __aiter__(self) -> AsyncIterator[tuple[str, Obj]]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[tuple[str, Obj]]:
        watcher = self._watcher
        try:
            while True:
                await watcher.wait(None)
                while watcher.queue:
                    event = watcher.queue.popleft()
                    translated = watcher.translate(event)
                    if translated is None:
                        continue
                    type_, use_prev = translated
                    obj = event.previous_at_rv() if use_prev else event.obj
                    if watcher.convert is not None:
                        obj = watcher.convert(obj)
                    yield type_, (clone(obj) if self._copy else obj)
                if watcher.closed:
                    return
        finally:
            self._store.unwatch(watcher)

    def close(self) -> None:
        self._store.unwatch(self._watcher)

    async def __aenter__(self) -> Subscription:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()
