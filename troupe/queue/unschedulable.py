"""Entities waiting for a cluster event: unschedulable and gated (upstream ``unschedulablePods``).

Two pools share this shape:

* the **unschedulable pool** holds entities whose last attempt was rejected. Each
  is indexed by the plugins that rejected it (``unschedulable_plugins`` and
  ``pending_plugins``), so a cluster event only visits entities rejected by a
  plugin that registered that event (queueing hints, KEP-4247). Entities with no
  recorded plugin are found through the empty-name index.
* the **gated pool** holds entities a PreEnqueue plugin keeps out of the active
  queue (scheduling gates, a gang that has not reached ``minCount``), indexed by
  the gating plugin. Upstream keeps them in the unschedulable map flagged gated;
  a separate pool gives ``scheduler_pending_pods{queue="gated"}`` for free.

Entries are indexed by ``queue_id``. ``SchedulingQueue`` adds and removes
entities; each entry remembers when it
entered, for the leftover flush (``podMaxInUnschedulablePodsDuration``, 5 min).
The plugin sets of an entity must not change while it sits in a pool: the index
is built on ``add``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from troupe.queue.entity import QueuedEntity

_NO_PLUGIN = ""


@dataclass(slots=True)
class _Entry:
    entity: QueuedEntity
    entered: float
    plugins: tuple[str, ...]


class EntityPool:
    def __init__(self, plugins_of: Callable[[QueuedEntity], Iterable[str]]) -> None:
        self._plugins_of = plugins_of
        self._entries: dict[str, _Entry] = {}
        # plugin name -> queue ids (dicts as insertion-ordered sets, for a stable visit order)
        self._by_plugin: dict[str, dict[str, None]] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def is_empty(self) -> bool:
        """``not pool``, without a call from C to ``__len__``."""
        return not self._entries

    def __contains__(self, queue_id: str) -> bool:
        return queue_id in self._entries

    def get(self, queue_id: str) -> QueuedEntity | None:
        entry = self._entries.get(queue_id)
        return entry.entity if entry else None

    def entities(self) -> list[QueuedEntity]:
        return [entry.entity for entry in self._entries.values()]

    def entered(self, queue_id: str) -> float | None:
        entry = self._entries.get(queue_id)
        return entry.entered if entry else None

    def add(self, entity: QueuedEntity, now: float) -> None:
        """Add or replace; a replaced entity keeps its original entry time."""
        queue_id = entity.queue_id
        old = self._drop(queue_id)
        entered = old.entered if old is not None else now
        plugins = tuple(sorted(set(self._plugins_of(entity)))) or (_NO_PLUGIN,)
        self._entries[queue_id] = _Entry(entity, entered, plugins)
        for plugin in plugins:
            self._by_plugin.setdefault(plugin, {})[queue_id] = None

    def remove(self, queue_id: str) -> QueuedEntity | None:
        entry = self._drop(queue_id)
        return entry.entity if entry else None

    def _drop(self, queue_id: str) -> _Entry | None:
        entry = self._entries.pop(queue_id, None)
        if entry is None:
            return None
        for plugin in entry.plugins:
            keys = self._by_plugin[plugin]
            del keys[queue_id]
            if not keys:
                del self._by_plugin[plugin]
        return entry

    def rejected_by(self, plugins: Iterable[str]) -> list[QueuedEntity]:
        """Entities rejected by any of ``plugins``, or by no recorded plugin."""
        keys: dict[str, None] = dict(self._by_plugin.get(_NO_PLUGIN, {}))
        for plugin in plugins:
            keys.update(self._by_plugin.get(plugin, {}))
        return [self._entries[key].entity for key in keys]

    def entered_before(self, cutoff: float) -> list[QueuedEntity]:
        """Entities that entered strictly before ``cutoff``."""
        return [e.entity for e in self._entries.values() if e.entered < cutoff]


def unschedulable_pool() -> EntityPool:
    return EntityPool(lambda e: (*e.unschedulable_plugins, *e.pending_plugins))


def gated_pool() -> EntityPool:
    return EntityPool(lambda e: (e.gating_plugin,))
