"""Per-kind watch history and fan-out: the store publishes, watchers and listeners receive.

Each kind keeps a bounded deque of its last ``history`` events; ``floor`` is the RV from
which a watch can still resume (events after it are all kept), upstream's ``oldest-1`` of
the watch cache. ``publish`` appends one event and offers the same object to every open
watcher of the kind, then calls the synchronous listeners. Owned by ``store.Store``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

from troupe.sim.apiserver.machinery import errors
from troupe.sim.apiserver.storage.watchers import Watcher, WatchEvent

Listener = Callable[[str, dict[str, Any]], None]


class Hub:
    def __init__(self, history: int) -> None:
        self.history_size = max(1, history)
        self._history: dict[str, deque[WatchEvent]] = {}
        self._floor: dict[str, int] = {}
        self._watchers: dict[str, set[Watcher]] = {}
        self._listeners: dict[str, list[Listener]] = {}

    def floor(self, key: str) -> int:
        return self._floor.get(key, 0)

    def publish(self, key: str, event: WatchEvent) -> None:
        history = self._history.get(key)
        if history is None:
            history = self._history[key] = deque()
        if len(history) >= self.history_size:
            self._floor[key] = history.popleft().rv
        history.append(event)
        for watcher in self._watchers.get(key, ()):
            watcher.offer(event)

    def notify(self, key: str, event: WatchEvent) -> None:
        for listener in self._listeners.get(key, ()):
            listener(event.type, event.obj)

    def backlog(self, key: str, since: int) -> list[WatchEvent]:
        """Every kept event after ``since``; 410 Expired when older ones were forgotten."""
        floor = self.floor(key)
        if since < floor:
            raise errors.expired(f"too old resource version: {since} ({floor})")
        newer = [event for event in reversed(self._history.get(key, ())) if event.rv > since]
        newer.reverse()
        return newer

    def compact(self, keys: set[str], rv: int) -> None:
        for key in keys | set(self._history):
            self._history[key] = deque()
            self._floor[key] = rv

    def register(self, watcher: Watcher) -> None:
        self._watchers.setdefault(watcher.key, set()).add(watcher)

    def unregister(self, watcher: Watcher) -> None:
        watcher.close()
        self._watchers.get(watcher.key, set()).discard(watcher)

    def watcher_count(self, key: str) -> int:
        """Open watchers of one kind (a closed stream has unregistered its own)."""
        return len(self._watchers.get(key, ()))

    def close_watchers(self, key: str | None = None) -> int:
        closed = 0
        for watch_key, watchers in self._watchers.items():
            if key is None or watch_key == key:
                for watcher in list(watchers):
                    watcher.close()
                    closed += 1
        return closed

    def listen(self, key: str, callback: Listener) -> Callable[[], None]:
        listeners = self._listeners.setdefault(key, [])
        listeners.append(callback)

        def stop() -> None:
            if callback in listeners:
                listeners.remove(callback)

        return stop
