"""Queueing hints: which cluster events may make a rejected entity schedulable (KEP-4247).

Plugins register, through ``EnqueueExtensions.events_to_register``, the events
that could undo their rejection, each with an optional hint function. The
scheduler hands them to ``SchedulingQueue.register_hints``; the queue asks this
registry, for an incoming event, which plugins care and what their hints say
about a given entity, and turns the answers into a ``Strategy``:

* SKIP: no plugin that rejected the entity expects this event to help;
* AFTER_BACKOFF: retry, once the entity's backoff is over;
* IMMEDIATELY: a plugin that answered PENDING says go: retry now, no backoff.

A hint that raises counts as QUEUE, so a buggy hint can only cost an extra
attempt, never strand a pod (upstream does the same); the caller gets the number
of such errors to log and count.

``pod_update_events`` classifies an update of an unscheduled pod into the
``Pod`` update actions of upstream ``PodSchedulingPropertiesChange``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from enum import IntEnum

from troupe.api.events import (
    Action,
    ClusterEvent,
    ClusterEventWithHint,
    QueueingHint,
    QueueingHintFn,
    Resource,
)
from troupe.api.objects import Pod
from troupe.queue.entity import QueuedEntity

POD_UPDATE_LABEL = "PodUpdate"

POD_SPEC_CHANGED = ClusterEvent(Resource.WILDCARD, Action.ALL, POD_UPDATE_LABEL)
"""Logged for a pod whose spec changed: that pod is retried whatever its hints say.

Upstream (without hints) requeues on any change but status; with hints it
requeues only when a rejecting plugin registered the Pod update. troupe keeps the
stricter rule for spec changes, which are rare on pending pods (tolerations,
resources, gates) and likely relevant, so a plugin missing a registration cannot
leave a pod waiting for the 5-minute flush after its owner fixed it.
"""

Registration = tuple[str, QueueingHintFn | None]
"""(plugin name, hint function or None for always-QUEUE)."""


class Strategy(IntEnum):
    SKIP = 0
    AFTER_BACKOFF = 1
    IMMEDIATELY = 2


_IDENTITY_CACHE = 256


class HintRegistry:
    def __init__(self) -> None:
        self._registered: list[tuple[str, ClusterEventWithHint]] = []
        self._matching: dict[ClusterEvent, tuple[Registration, ...]] = {}
        # The same, by the event object's identity (the object kept with its answer,
        # so its id is not reused meanwhile): hashing a ClusterEvent calls its Python
        # __hash__ and its Action's, and every informer event asks.
        self._by_identity: dict[int, tuple[ClusterEvent, tuple[Registration, ...]]] = {}

    def register(self, plugin: str, events: Sequence[ClusterEventWithHint]) -> None:
        self._registered.extend((plugin, e) for e in events)
        self._matching.clear()
        self._by_identity.clear()

    def matching(self, incoming: ClusterEvent) -> tuple[Registration, ...]:
        """Registrations that cover ``incoming`` (cached per event)."""
        hit = self._by_identity.get(id(incoming))
        if hit is not None and hit[0] is incoming:
            return hit[1]
        found = self._matching.get(incoming)
        if found is None:
            found = tuple(
                (plugin, reg.hint)
                for plugin, reg in self._registered
                if reg.event.matches(incoming)
            )
            self._matching[incoming] = found
        if len(self._by_identity) >= _IDENTITY_CACHE:
            self._by_identity.clear()  # events made per call would pile up
        self._by_identity[id(incoming)] = (incoming, found)
        return found

    def is_of_interest(self, incoming: ClusterEvent) -> bool:
        return incoming.resource is Resource.WILDCARD or bool(self.matching(incoming))

    def strategy(
        self,
        entity: QueuedEntity,
        incoming: ClusterEvent,
        old: object | None,
        new: object | None,
        rejectors: frozenset[str] | set[str],
    ) -> tuple[Strategy, int]:
        """How to requeue ``entity`` (rejected by ``rejectors``) after ``incoming``;
        also the number of hint functions that raised."""
        if not rejectors or incoming.resource is Resource.WILDCARD:
            # No plugin to ask (an error, not a rejection), or a wildcard event
            # (force activation, unschedulable timeout): retry after backoff.
            return Strategy.AFTER_BACKOFF, 0
        pending = entity.pending_plugins
        strategy = Strategy.SKIP
        errors = 0
        for plugin, hint in self.matching(incoming):
            if plugin not in rejectors:
                continue
            queue, failed = _ask(hint, entity, old, new)
            errors += failed
            if not queue:
                continue
            if plugin in pending:
                return Strategy.IMMEDIATELY, errors
            strategy = Strategy.AFTER_BACKOFF
            if not pending:
                # Only a pending plugin could still upgrade the answer.
                return strategy, errors
        return strategy, errors


def _ask(
    hint: QueueingHintFn | None, entity: QueuedEntity, old: object | None, new: object | None
) -> tuple[bool, int]:
    """(QUEUE for any of the entity's pods, number of hint calls that raised)."""
    if hint is None:
        return True, 0
    for pod in entity.pods():
        try:
            answer = hint(pod, old, new)
        except Exception:
            return True, 1
        if answer is QueueingHint.QUEUE:
            return True, 0
    return False, 0


def _scaled_down(old: Mapping[str, int], new: Mapping[str, int]) -> bool:
    return any(name not in new or new[name] < value for name, value in old.items())


def pod_update_events(
    old: Pod, new: Pod, old_requests: Mapping[str, int], new_requests: Mapping[str, int]
) -> list[ClusterEvent]:
    """The events an update of an unscheduled pod amounts to; none for a status-only change.

    Status is ignored (upstream ``isPodUpdated``): the scheduler's own
    ``PodScheduled=False`` condition must not requeue the pod it just failed.
    """
    actions: list[Action] = []
    if old.metadata.labels != new.metadata.labels:
        actions.append(Action.UPDATE_POD_LABEL)
    if _scaled_down(old_requests, new_requests):
        actions.append(Action.UPDATE_POD_SCALE_DOWN)
    if old.spec.scheduling_gates and not new.spec.scheduling_gates:
        actions.append(Action.UPDATE_POD_SCHEDULING_GATES_ELIMINATED)
    if old.spec.tolerations != new.spec.tolerations:
        actions.append(Action.UPDATE_POD_TOLERATIONS)
    spec_changed = old.spec != new.spec
    if not actions and (spec_changed or _metadata_changed(old, new)):
        actions.append(Action.UPDATE_OTHER)
    events = [ClusterEvent(Resource.POD, action, POD_UPDATE_LABEL) for action in actions]
    if spec_changed:
        events.append(POD_SPEC_CHANGED)
    return events


_VOLATILE_METADATA = {"resource_version", "generation"}


def _metadata_changed(old: Pod, new: Pod) -> bool:
    return old.metadata.model_dump(exclude=_VOLATILE_METADATA) != new.metadata.model_dump(
        exclude=_VOLATILE_METADATA
    )
