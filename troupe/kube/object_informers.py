"""Informers for the API objects plugins watch (``troupe.api.watches``).

The daemon calls ``add_object_informers`` once at start-up, before its
``SharedInformers`` start, with the plugins' declarations merged into one
``SharedWatch`` per resource (``share_watches``, done when the scheduler is built),
and does not call it at all when no plugin watches anything, so a profile without
such a plugin pays no request. It asks API discovery which resources the server
serves (``served_kinds``, one request per group version) and adds one ``Informer``
per served resource, whose objects are parsed into the declared model and whose
list/watch, paging, bookmarks, 410 relists and unreadable-object handling are the
ones every informer has. A resource the server does not serve is not watched: the
daemon logs it once and each plugin that declared it is told (``on_unserved``).

Each change goes to every plugin that declared the resource, in declaration order
(one plugin's callback that raises is logged and does not keep the change from the
others), then to ``events.on_object_change`` as the ``ClusterEvent`` of its kind
(ADD, UPDATE_OTHER, DELETE), so the queue can release the pods the plugins' queueing
hints say it may help. Callbacks run in the informer's task on the event loop,
never during a scheduling cycle. Upstream builds such informers from its plugins'
``EventsToRegister`` (``pkg/scheduler/eventhandlers.go``, ``addAllEventHandlers``).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import structlog

from troupe.api.clock import Clock
from troupe.api.events import Action, ClusterEvent
from troupe.api.quantity import QuantityError
from troupe.api.watches import ObjectKind, SharedWatch
from troupe.kube.discovery import served_kinds
from troupe.kube.informer import Informer, InformerConfig
from troupe.kube.shared import SharedInformers
from troupe.kube.transport import Transport

log = structlog.get_logger("troupe.kube.informer")


class ObjectEvents(Protocol):
    """Who hears of every change once the plugins have it (``ClusterEventHandlers``)."""

    def on_object_change(
        self, event: ClusterEvent, old: object | None, new: object | None
    ) -> None: ...


def list_path(kind: ObjectKind) -> str:
    """List + watch path of every object of ``kind`` (all namespaces)."""
    if kind.group:
        return f"/apis/{kind.group}/{kind.version}/{kind.resource}"
    return f"/api/{kind.version}/{kind.resource}"


async def add_object_informers(
    shared: SharedInformers,
    clock: Clock,
    watches: Sequence[SharedWatch],
    events: ObjectEvents,
    *,
    config: InformerConfig | None = None,
    rng: random.Random | None = None,
) -> list[SharedWatch]:
    """Add an informer per served resource of ``watches`` to ``shared`` (before
    ``shared.start``), tell the plugins of the others; the watches started."""
    if not watches:
        return []
    served = await served_kinds(shared.transport, [w.kind for w in watches])
    started: list[SharedWatch] = []
    for watch in watches:
        if watch.kind in served:
            shared.add(
                object_informer(shared.transport, clock, watch, events, config=config, rng=rng)
            )
            started.append(watch)
            continue
        log.warning(
            "plugins watch a resource the API server does not serve; it is not watched",
            resource=str(watch.kind),
            kind=watch.kind.kind,
            plugins=watch.declared_by,
        )
        for who, declared in watch.watches:
            if declared.on_unserved is not None:
                _deliver(who, watch.kind, declared.on_unserved)
    return started


def object_informer(
    transport: Transport,
    clock: Clock,
    watch: SharedWatch,
    events: ObjectEvents,
    *,
    config: InformerConfig | None = None,
    rng: random.Random | None = None,
) -> Informer[Any]:
    """An informer of every object of ``watch.kind``, delivering to its plugins and
    then to ``events``."""
    kind, plugins = watch.kind, watch.watches
    added_event, updated_event, deleted_event = (
        kind.event(Action.ADD),
        kind.event(Action.UPDATE_OTHER),
        kind.event(Action.DELETE),
    )

    def added(obj: Any) -> None:
        for who, declared in plugins:
            _deliver(who, kind, declared.on_add, obj)
        events.on_object_change(added_event, None, obj)

    def updated(old: Any, new: Any) -> None:
        for who, declared in plugins:
            _deliver(who, kind, declared.on_update, old, new)
        events.on_object_change(updated_event, old, new)

    def deleted(obj: Any) -> None:
        for who, declared in plugins:
            _deliver(who, kind, declared.on_delete, obj)
        events.on_object_change(deleted_event, obj, None)

    return Informer(
        transport,
        list_path(kind),
        watch.model,
        clock,
        on_add=added,
        on_update=updated,
        on_delete=deleted,
        config=config,
        rng=rng,
        name=str(kind),
    )


def _deliver(who: str, kind: ObjectKind, callback: Callable[..., None], *args: Any) -> None:
    """Call one plugin's callback; what it raises is logged, never passed on."""
    try:
        callback(*args)
    except QuantityError as exc:
        # An object whose amounts do not parse: the user's mistake, told without a
        # traceback (as the informers' own handlers tell it).
        log.error(
            "ignoring an object whose quantities do not parse",
            plugin=who,
            resource=str(kind),
            error=str(exc),
        )
    except Exception as exc:
        log.error(
            "plugin's object handler failed",
            plugin=who,
            resource=str(kind),
            handler=getattr(callback, "__name__", repr(callback)),
            error=repr(exc),
            exc_info=exc,
        )
