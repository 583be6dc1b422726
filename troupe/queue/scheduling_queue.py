"""The scheduling queue: pending pods waiting for an attempt (upstream ``PriorityQueue``).

The informers of ``troupe.scheduler`` call ``add`` / ``update`` / ``delete`` for
unscheduled pods and ``on_event`` for every other cluster change;
``schedule_one`` calls ``pop``, then ``add_unschedulable_if_not_present`` when
the attempt failed or ``done`` when it succeeded. Every entity not in flight is
in exactly one sub-queue, and moves like this:

* ``add``: PreEnqueue passes -> **active**; refused -> **gated**.
* gated -> PreEnqueue again on an update of the pod, an event the gating plugin
  registered (hint QUEUE), ``activate``, or after ``max_in_unschedulable``;
  passing -> active (backoff if still backing off).
* active -> ``pop`` -> **in flight** -> ``done`` -> gone (bound).
* in flight -> ``add_unschedulable_if_not_present`` -> **backoff** after an error
  (no rejecting plugin) or when an event seen during the attempt may help (hint
  QUEUE; active at once for a PENDING plugin, or if the backoff is over);
  otherwise -> **unschedulable**.
* unschedulable -> an event with hint QUEUE, an update of the pod,
  ``move_all_to_active_or_backoff``, or ``max_in_unschedulable`` (5 min) ->
  backoff while backing off, else active; ``activate`` -> active.
* backoff -> ``flush_backoff_completed`` once the expiry passed -> active.

Entities pass PreEnqueue again when they leave the gated or unschedulable pool,
so a gang that lost members goes back to gated. Backoff is per entity, doubling
from ``initial_backoff`` to ``max_backoff`` (DESIGN.md "The dual queue").

Time comes from the injected ``Clock``; ``run`` drives the two periodic flushes
(1 s and 30 s, as upstream) on it, so tests move time with ``FakeClock.advance``.
Everything runs on one asyncio event loop: no locks.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Sequence
from typing import Literal

from troupe.api.clock import Clock
from troupe.api.events import FORCE_ACTIVATE, ClusterEvent, ClusterEventWithHint, Resource
from troupe.api.objects import Pod
from troupe.api.podinfo import PodInfo
from troupe.api.status import Status
from troupe.queue.entity import LessFunc, QueuedEntity, QueuedPodInfo
from troupe.queue.hints import POD_UPDATE_LABEL, HintRegistry, Strategy, pod_update_events
from troupe.queue.in_flight import InFlight
from troupe.queue.nominator import Nominator
from troupe.queue.sub_queues import IncomingHook, QueueName, SubQueues

# Event labels of scheduler_queue_incoming_pods_total (upstream framework/events.go).
POD_ADD = "PodAdd"
SCHEDULE_ATTEMPT_FAILURE = "ScheduleAttemptFailure"
BACKOFF_COMPLETE = "BackoffComplete"
UNSCHEDULABLE_TIMEOUT = "UnschedulableTimeout"

BACKOFF_FLUSH_PERIOD = 1.0
UNSCHEDULABLE_FLUSH_PERIOD = 30.0


class SchedulingQueue:
    def __init__(
        self,
        less: LessFunc,
        clock: Clock,
        *,
        pre_enqueue: Callable[[Pod], Status],
        initial_backoff: float = 1.0,
        max_backoff: float = 10.0,
        max_in_unschedulable: float = 300.0,
        on_incoming: IncomingHook | None = None,
    ) -> None:
        self._clock = clock
        self._max_in_unschedulable = max_in_unschedulable
        self._queues = SubQueues(
            less, clock, pre_enqueue, initial_backoff, max_backoff, on_incoming
        )
        self._in_flight = InFlight()
        self._nominator = Nominator()
        self._hints = HintRegistry()
        self._cycle = 0
        # Cycle of the last cluster event of interest (upstream moveRequestCycle); used
        # for an entity handed back without a flight record.
        self._move_request_cycle = -1
        self._stopped = asyncio.Event()
        self.hint_errors = 0
        """Hint functions that raised since start (each was taken as QUEUE)."""

    # --- informer input: unscheduled pods ------------------------------------------

    def add(self, pod: Pod) -> None:
        """A new unscheduled pod. A pod already known is treated as an update."""
        if (known := self._known_pod(pod.key)) is not None:
            self.update(known, pod)
            return
        info = PodInfo.of(pod)
        entity = QueuedPodInfo.of(info, self._clock.now())
        if self._queues.to_active(entity, POD_ADD) == "active":
            self._nominator.add(info, pod.status.nominated_node_name)

    def update(self, old: Pod, new: Pod) -> int:
        """An unscheduled pod changed; returns how many hint functions raised.

        A pod in no sub-queue and not in flight is added (upstream), so callers pass
        only pods the scheduler has not assumed; a pod that got a node is dropped.
        """
        key = new.key
        if new.spec.node_name:
            self.delete(new)
            return 0
        entity = self._queues.get(key)
        flight = self._in_flight.get(key)
        if entity is None and flight is not None and not flight.deleted:
            # Being scheduled: keep the newest version for the requeue, and log the
            # change so the failed attempt can be retried because of it.
            current = flight.latest or _pod_info_of(flight.entity)
            flight.latest = PodInfo.of(new)
            for event in pod_update_events(old, new, current.requests, flight.latest.requests):
                self._in_flight.log(self._cycle, event, old, new, target=key)
            return 0
        if entity is None:
            self.add(new)
            return 0
        if not isinstance(entity, QueuedPodInfo):
            raise TypeError(f"{entity.kind} {entity.key} is not a pod")
        info = PodInfo.of(new)
        events = pod_update_events(old, new, entity.pod_info.requests, info.requests)
        entity.replace_pod(info)
        self._nominator.update(old, info)
        if key in self._queues.active:
            self._queues.active.push(entity)  # re-sorted: priority may have changed
        elif key in self._queues.backoff:
            self._queues.backoff.add(entity)
        elif key in self._queues.gated:
            if events:
                self._queues.recheck_gated(entity, POD_UPDATE_LABEL)
        else:
            errors_before = self.hint_errors
            strategy = self._strategy_over(entity, events, old, new)
            if strategy is not Strategy.SKIP:
                self._queues.unschedulable.remove(key)
                self._queues.requeue(entity, strategy, POD_UPDATE_LABEL)
            return self.hint_errors - errors_before
        return 0

    def delete(self, pod: Pod) -> None:
        key = pod.key
        self._nominator.delete(key)
        self._queues.remove(key)
        if (flight := self._in_flight.get(key)) is not None:
            flight.deleted = True

    # --- the scheduling loop -----------------------------------------------------------

    async def pop(self) -> QueuedEntity | None:
        """The best active entity, waiting for one; None once the queue is closed."""
        entity = await self._queues.active.wait_pop()
        if entity is not None:
            self._start_flight(entity)
        return entity

    def pop_nowait(self) -> QueuedEntity | None:
        """The best active entity, or None if there is none (or the queue is closed)."""
        entity = self._queues.active.pop_nowait()
        if entity is not None:
            self._start_flight(entity)
        return entity

    def _start_flight(self, entity: QueuedEntity) -> None:
        self._cycle += 1
        entity.attempts += 1
        # The rejector sets describe the latest attempt; the failure handler fills them.
        entity.unschedulable_plugins.clear()
        entity.pending_plugins.clear()
        self._in_flight.start(entity, self._cycle)

    @property
    def scheduling_cycle(self) -> int:
        return self._cycle

    def add_unschedulable_if_not_present(
        self, entity: QueuedEntity, cycle: int
    ) -> QueueName | None:
        """Hand back an entity whose attempt (popped at ``cycle``) failed.

        Returns where it went, or None when it is dropped: its pod was deleted
        meanwhile, or it is already queued.
        """
        key = entity.key
        flight = self._in_flight.get(key)
        if flight is not None and flight.entity is not entity:
            return None  # the pod was deleted and re-created while this attempt ran
        logged = self._in_flight.events_for(flight) if flight is not None else None
        self._in_flight.end(key, entity)
        if flight is not None:
            if flight.deleted:
                return None
            if flight.latest is not None and isinstance(entity, QueuedPodInfo):
                entity.replace_pod(flight.latest)
        if key in self:
            return None
        self._queues.backoff.start_backoff(entity)
        rejectors = entity.rejectors()
        if not rejectors:
            # An error, not a rejection: nothing to wait for but the backoff.
            strategy = Strategy.AFTER_BACKOFF
        elif logged is not None:
            # Did anything that happened during the attempt undo the rejection?
            strategy = Strategy.SKIP
            for e in logged:
                found, failed = self._hints.strategy(entity, e.event, e.old, e.new, rejectors)
                strategy = max(strategy, found)
                self.hint_errors += failed
        else:
            moved = self._move_request_cycle >= cycle
            strategy = Strategy.AFTER_BACKOFF if moved else Strategy.SKIP
        return self._queues.requeue(entity, strategy, SCHEDULE_ATTEMPT_FAILURE)

    def done(self, key: str, entity: QueuedEntity | None = None) -> None:
        """The attempt on ``key`` is over (bound, or handed back). Idempotent."""
        self._in_flight.end(key, entity)

    def close(self) -> None:
        """Stop: ``pop`` returns None and ``run`` returns."""
        self._queues.active.close()
        self._stopped.set()

    # --- cluster events and queueing hints -----------------------------------------

    def register_hints(self, plugin_name: str, events: Sequence[ClusterEventWithHint]) -> None:
        self._hints.register(plugin_name, events)

    def on_event(self, event: ClusterEvent, old: object | None, new: object | None) -> int:
        """Move the entities this event may help; returns how many hints raised."""
        if not self._hints.is_of_interest(event):
            return 0
        self._move_request_cycle = self._cycle
        if event.resource is Resource.WILDCARD:
            # A wildcard event carrying a pod is meant for that pod only (upstream).
            target = new.key if isinstance(new, Pod) else None
            self._move_wildcard(event, old, new, target)
            return 0
        self._in_flight.log(self._cycle, event, old, new)
        plugins = {plugin for plugin, _ in self._hints.matching(event)}
        rejected = self._queues.unschedulable.rejected_by(plugins)
        gated = self._queues.gated.rejected_by(plugins)
        errors = 0
        for entity in rejected:
            strategy, failed = self._hints.strategy(entity, event, old, new, entity.rejectors())
            errors += failed
            if strategy is not Strategy.SKIP:
                self._queues.unschedulable.remove(entity.key)
                self._queues.requeue(entity, strategy, str(event))
        for entity in gated:
            gate = {entity.gating_plugin}
            strategy, failed = self._hints.strategy(entity, event, old, new, gate)
            errors += failed
            if strategy is not Strategy.SKIP:
                self._queues.recheck_gated(entity, str(event))
        self.hint_errors += errors
        return errors

    def move_all_to_active_or_backoff(self, event: ClusterEvent = FORCE_ACTIVATE) -> None:
        """Retry every unschedulable entity (after its backoff), whatever its hints."""
        self._move_request_cycle = self._cycle
        self._move_wildcard(event, None, None, None)

    def _move_wildcard(
        self, event: ClusterEvent, old: object | None, new: object | None, target: str | None
    ) -> None:
        self._in_flight.log(self._cycle, event, old, new, target)
        for entity in self._queues.unschedulable.entities():
            if target is None or target in entity.pod_keys():
                self._queues.unschedulable.remove(entity.key)
                self._queues.requeue(entity, Strategy.AFTER_BACKOFF, str(event))

    def activate(self, keys: Iterable[str]) -> None:
        """Force entities to the active queue now, skipping backoff (upstream ``Activate``).

        A gated entity runs PreEnqueue again; an entity in flight is retried as
        soon as its attempt fails.
        """
        label = str(FORCE_ACTIVATE)
        for key in keys:
            if (entity := self._queues.unschedulable.get(key)) is not None:
                self._queues.unschedulable.remove(key)
                self._queues.to_active(entity, label)
            elif (entity := self._queues.backoff.remove(key)) is not None:
                self._queues.to_active(entity, label, admit=False)
            elif (entity := self._queues.gated.get(key)) is not None:
                self._queues.recheck_gated(entity, label)
            elif key in self._in_flight:
                self._in_flight.log(self._cycle, FORCE_ACTIVATE, None, None, target=key)
                self._move_request_cycle = self._cycle

    # --- periodic flushes ------------------------------------------------------------

    def flush_backoff_completed(self) -> int:
        """Move entities whose backoff is over to the active queue; returns how many."""
        completed = self._queues.backoff.pop_completed()
        for entity in completed:
            # PreEnqueue ran when the entity entered backoff (upstream SchedulerPopFromBackoffQ).
            self._queues.to_active(entity, BACKOFF_COMPLETE, admit=False)
        return len(completed)

    def flush_unschedulable_leftover(self) -> int:
        """Retry entities that waited longer than ``max_in_unschedulable``; returns how many.

        Gated entities that waited as long re-run PreEnqueue, a safety net for a
        gating plugin that missed an event registration.
        """
        cutoff = self._clock.now() - self._max_in_unschedulable
        stale = self._queues.unschedulable.entered_before(cutoff)
        for entity in stale:
            self._queues.unschedulable.remove(entity.key)
            self._queues.requeue(entity, Strategy.AFTER_BACKOFF, UNSCHEDULABLE_TIMEOUT)
        for entity in self._queues.gated.entered_before(cutoff):
            self._queues.recheck_gated(entity, UNSCHEDULABLE_TIMEOUT)
        return len(stale)

    async def run(self) -> None:
        """Run both flushes on the injected clock until ``close``."""
        async with asyncio.TaskGroup() as tasks:
            loops = [
                tasks.create_task(self._every(BACKOFF_FLUSH_PERIOD, self.flush_backoff_completed)),
                tasks.create_task(
                    self._every(UNSCHEDULABLE_FLUSH_PERIOD, self.flush_unschedulable_leftover)
                ),
            ]
            await self._stopped.wait()
            for loop in loops:
                loop.cancel()

    async def _every(self, period: float, flush: Callable[[], int]) -> None:
        while not self._stopped.is_set():
            await self._clock.sleep(period)
            flush()

    # --- inspection ----------------------------------------------------------------

    def __len__(self) -> int:
        """Entities in the sub-queues (in-flight ones not counted)."""
        return len(self._queues)

    def __contains__(self, key: str) -> bool:
        return self._queues.where(key) is not None

    def get(self, key: str) -> QueuedEntity | None:
        return self._queues.get(key)

    def where(self, key: str) -> QueueName | Literal["in_flight"] | None:
        """Which sub-queue holds ``key`` ("in_flight" while being scheduled)."""
        if (queue := self._queues.where(key)) is not None:
            return queue
        flight = self._in_flight.get(key)
        return "in_flight" if flight is not None and not flight.deleted else None

    def entities(self, queue: QueueName) -> list[QueuedEntity]:
        """The entities of one sub-queue, in no particular order (debugging, tests)."""
        return self._queues.entities(queue)

    def in_flight(self) -> list[QueuedEntity]:
        """Entities being scheduled (those whose pod was deleted meanwhile excluded)."""
        return [e for e in self._in_flight.entities() if self.where(e.key) == "in_flight"]

    def pending_counts(self) -> dict[str, int]:
        """Sizes per ``scheduler_pending_pods`` queue label."""
        return self._queues.counts()

    # --- nominated pods ------------------------------------------------------------

    def add_nominated(self, info: PodInfo, node_name: str) -> None:
        self._nominator.add(info, node_name)

    def delete_nominated(self, key: str) -> None:
        self._nominator.delete(key)

    def nominated_pods_for_node(self, node_name: str) -> list[PodInfo]:
        return self._nominator.pods_for_node(node_name)

    def nominated_node(self, key: str) -> str | None:
        return self._nominator.node_of(key)

    # --- helpers -----------------------------------------------------------------------

    def _strategy_over(
        self,
        entity: QueuedEntity,
        events: Iterable[ClusterEvent],
        old: object | None,
        new: object | None,
    ) -> Strategy:
        strategy = Strategy.SKIP
        for event in events:
            found, failed = self._hints.strategy(entity, event, old, new, entity.rejectors())
            strategy = max(strategy, found)
            self.hint_errors += failed
        return strategy

    def _known_pod(self, key: str) -> Pod | None:
        entity = self._queues.get(key)
        if entity is None:
            flight = self._in_flight.get(key)
            if flight is None or flight.deleted:
                return None
            if flight.latest is not None:
                return flight.latest.pod
            entity = flight.entity
        return entity.pods()[0] if isinstance(entity, QueuedPodInfo) else None


def _pod_info_of(entity: QueuedEntity) -> PodInfo:
    if not isinstance(entity, QueuedPodInfo):
        raise TypeError(f"{entity.kind} {entity.key} is not a pod")
    return entity.pod_info
