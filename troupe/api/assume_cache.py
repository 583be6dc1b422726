"""AssumeCache: informer objects with in-memory assumptions on top.

Upstream ``pkg/scheduler/util/assumecache``, which VolumeBinding (PV ``claimRef``s and
PVC ``selected-node`` annotations, ``troupe.plugins.volumebinding.caches``) and
DynamicResources (in-flight claim allocations) build on. For each object it keeps two
versions: the informer's (``get_api``) and the latest (``get``), which is the
informer's or an assumed copy.

* An informer add or update replaces both, but only when its ``resourceVersion`` is
  newer than the latest one's: a resync (same version) does not drop an assumption,
  while a real update (the API server wrote the object, possibly because of the
  assumption) does.
* ``assume`` replaces only the latest; it refuses an object the cache does not know
  or one older than the latest (``out of sync``).
* ``restore`` puts the informer's version back as the latest.
* A delete forgets the object and its assumption.

Not thread-safe: the scheduling cycle and the informer handlers run on one event loop.
Resource versions must parse as integers, as upstream requires; an informer object
whose version does not parse is refused with an error naming it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Generic, TypeVar

from troupe.api.objects import ObjectMeta

T = TypeVar("T")


class AssumeCacheError(Exception):
    """An ``assume`` the cache refuses, or an object it cannot key or version."""


@dataclass(slots=True)
class _Entry(Generic[T]):
    latest: T
    api: T


class AssumeCache(Generic[T]):
    def __init__(
        self,
        description: str,
        *,
        metadata: Callable[[T], ObjectMeta],
        index: Callable[[T], str] | None = None,
    ) -> None:
        """``description`` names the kind in errors (``v1.PersistentVolume``);
        ``index`` maps an object to the value ``list`` selects by (a PV's class)."""
        self.description = description
        self._metadata = metadata
        self._index = index
        self._entries: dict[str, _Entry[T]] = {}
        # index value -> keys, over the latest objects
        self._by_index: dict[str, set[str]] = {}

    # --- keys and versions ---------------------------------------------------------

    def key_of(self, obj: T) -> str:
        """``namespace/name``, or ``name`` for cluster-scoped objects."""
        meta = self._metadata(obj)
        if not meta.name:
            raise AssumeCacheError(f"{self.description} has no name")
        return f"{meta.namespace}/{meta.name}" if meta.namespace else meta.name

    def _version(self, key: str, obj: T) -> int:
        text = self._metadata(obj).resource_version
        try:
            return int(text)
        except ValueError:
            raise AssumeCacheError(
                f'error parsing ResourceVersion "{text}" for {self.description} "{key}"'
            ) from None

    # --- informer side ---------------------------------------------------------------

    def add(self, obj: T) -> bool:
        """An informer add (or update): store ``obj`` as both versions unless the
        stored latest is as new. Returns whether it was stored."""
        key = self.key_of(obj)
        version = self._version(key, obj)
        entry = self._entries.get(key)
        if entry is not None:
            if version <= self._version(key, entry.latest):
                return False
            self._unindex(key, entry.latest)
        self._entries[key] = _Entry(obj, obj)
        self._reindex(key, obj)
        return True

    def update(self, old: T | None, new: T) -> bool:
        return self.add(new)

    def delete(self, obj: T) -> None:
        key = self.key_of(obj)
        entry = self._entries.pop(key, None)
        if entry is not None:
            self._unindex(key, entry.latest)

    # --- reading ---------------------------------------------------------------------

    def get(self, key: str) -> T | None:
        """The latest version: assumed, or the informer's."""
        entry = self._entries.get(key)
        return None if entry is None else entry.latest

    def get_api(self, key: str) -> T | None:
        """The informer's version, whatever is assumed."""
        entry = self._entries.get(key)
        return None if entry is None else entry.api

    def is_assumed(self, key: str) -> bool:
        entry = self._entries.get(key)
        return entry is not None and entry.latest is not entry.api

    def list(self, index_value: str | None = None) -> list[T]:
        """The latest version of every object (with ``index_value``, of those the
        index maps to it), ordered by key."""
        if index_value is None:
            keys: Iterable[str] = self._entries
        elif self._index is None:
            raise AssumeCacheError(f"the {self.description} cache has no index")
        else:
            keys = self._by_index.get(index_value, ())
        return [self._entries[key].latest for key in sorted(keys)]

    def __len__(self) -> int:
        return len(self._entries)

    # --- assumptions -------------------------------------------------------------------

    def assume(self, obj: T) -> None:
        """Make ``obj`` the latest version in memory only. The object must be known and
        not older than the latest version."""
        key = self.key_of(obj)
        entry = self._entries.get(key)
        if entry is None:
            raise AssumeCacheError(f'could not find {self.description} "{key}"')
        new_version = self._version(key, obj)
        stored_version = self._version(key, entry.latest)
        if new_version < stored_version:
            raise AssumeCacheError(
                f'{self.description} "{key}" is out of sync '
                f"(stored: {stored_version}, assume: {new_version})"
            )
        self._unindex(key, entry.latest)
        entry.latest = obj
        self._reindex(key, obj)

    def restore(self, key: str) -> None:
        """Make the informer's version the latest again (nothing if unknown: it may
        have been deleted since)."""
        entry = self._entries.get(key)
        if entry is None or entry.latest is entry.api:
            return
        self._unindex(key, entry.latest)
        entry.latest = entry.api
        self._reindex(key, entry.api)

    # --- index -------------------------------------------------------------------------

    def _reindex(self, key: str, obj: T) -> None:
        if self._index is not None:
            self._by_index.setdefault(self._index(obj), set()).add(key)

    def _unindex(self, key: str, obj: T) -> None:
        if self._index is None:
            return
        value = self._index(obj)
        keys = self._by_index.get(value)
        if keys is not None:
            keys.discard(key)
            if not keys:
                del self._by_index[value]
