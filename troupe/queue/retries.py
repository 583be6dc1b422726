"""When waiting entities get another attempt: queueing hints, activation, the flushes.

``SchedulingQueue`` delegates to one ``Retries`` everything that moves entities
out of the unschedulable and gated pools or out of backoff:

* ``on_event``: a cluster event asks the hints of the plugins that rejected (or
  gate) each waiting entity (KEP-4247); a group moves when the hint says QUEUE
  for any of its members (KEP-4671 "Retries"; ``hints._ask`` asks every pod);
* ``activate`` and ``move_all``: forced moves;
* ``flush_backoff_completed`` / ``flush_unschedulable_leftover``: the periodic
  flushes (1 s and 30 s, as upstream), which ``run_flushes`` drives;
* ``after_attempt``: where a failed entity goes, from the events seen while it
  was in flight.

Every move re-checks that the entity is still where the list said: a member
released from the gated pool joins its group entity and may move it too. Entities
move through ``Moves`` (a pod may join its group); ``SchedulingQueue`` and
``Intake`` call in, and nothing here calls back up.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable

from troupe.api.clock import Clock
from troupe.api.events import FORCE_ACTIVATE, ClusterEvent, Resource
from troupe.api.objects import Pod
from troupe.queue.entity import GROUP_ID_PREFIX, QueuedEntity
from troupe.queue.group_table import GroupTable
from troupe.queue.hints import POD_UPDATE_LABEL, HintRegistry, Strategy
from troupe.queue.in_flight import InFlight, LoggedEvent
from troupe.queue.moves import Moves
from troupe.queue.sub_queues import SubQueues

# Event labels of scheduler_queue_incoming_pods_total (upstream framework/events.go).
BACKOFF_COMPLETE = "BackoffComplete"
UNSCHEDULABLE_TIMEOUT = "UnschedulableTimeout"

BACKOFF_FLUSH_PERIOD = 1.0
UNSCHEDULABLE_FLUSH_PERIOD = 30.0


class Retries:
    def __init__(
        self,
        queues: SubQueues,
        moves: Moves,
        in_flight: InFlight,
        groups: GroupTable,
        clock: Clock,
        max_in_unschedulable: float,
    ) -> None:
        self._queues = queues
        self._moves = moves
        self._in_flight = in_flight
        self._groups = groups
        self._clock = clock
        self._max_in_unschedulable = max_in_unschedulable
        self.hints = HintRegistry()
        # Cycle of the last cluster event of interest (upstream moveRequestCycle); used
        # for an entity handed back without a flight record.
        self.move_request_cycle = -1
        self.hint_errors = 0

    # --- cluster events -------------------------------------------------------------------

    def on_event(self, event: ClusterEvent, old: object | None, new: object | None) -> int:
        if not self.hints.is_of_interest(event):
            return 0
        self.move_request_cycle = self._in_flight.cycle
        if event.resource is Resource.WILDCARD:
            # A wildcard event carrying a pod is meant for that pod only (upstream).
            target = new.key if isinstance(new, Pod) else None
            self.move_wildcard(event, old, new, target)
            return 0
        self._in_flight.log(event, old, new)
        if self._queues.unschedulable.is_empty() and self._queues.gated.is_empty():
            return 0  # nothing waits for an event (the common case under a burst)
        plugins = {plugin for plugin, _ in self.hints.matching(event)}
        rejected = self._queues.unschedulable.rejected_by(plugins)
        gated = self._queues.gated.rejected_by(plugins)
        errors = 0
        for entity in rejected:
            if entity.queue_id not in self._queues.unschedulable:
                continue
            strategy, failed = self.hints.strategy(entity, event, old, new, entity.rejectors())
            errors += failed
            if strategy is not Strategy.SKIP:
                self._queues.unschedulable.remove(entity.queue_id)
                self._moves.requeue(entity, strategy, str(event))
        for entity in gated:
            if entity.queue_id not in self._queues.gated:
                continue
            gate = {entity.gating_plugin}
            strategy, failed = self.hints.strategy(entity, event, old, new, gate)
            errors += failed
            if strategy is not Strategy.SKIP:
                self._moves.release_gated(entity, str(event))
        self.hint_errors += errors
        return errors

    def move_wildcard(
        self, event: ClusterEvent, old: object | None, new: object | None, target: str | None
    ) -> None:
        """Retry every unschedulable entity (or the one holding pod ``target``)."""
        flight_target = self.entity_id(target) if target is not None else None
        self._in_flight.log(event, old, new, flight_target)
        for entity in self._queues.unschedulable.entities():
            if target is not None and target not in entity.pod_keys():
                continue
            if self._queues.unschedulable.remove(entity.queue_id) is not None:
                self._moves.requeue(entity, Strategy.AFTER_BACKOFF, str(event))

    def activate(self, keys: Iterable[str]) -> None:
        label = str(FORCE_ACTIVATE)
        for key in keys:
            queue_id = self.entity_id(key)
            if self._groups.flying_with(key) is not None or (
                self._queues.where(queue_id) is None and queue_id in self._in_flight
            ):
                # Retried as soon as the attempt fails.
                self._in_flight.log(FORCE_ACTIVATE, None, None, target=queue_id)
                self.move_request_cycle = self._in_flight.cycle
            elif (entity := self._queues.unschedulable.remove(queue_id)) is not None:
                self._moves.to_active(entity, label)
            elif (entity := self._queues.backoff.remove(queue_id)) is not None:
                self._moves.to_active(entity, label, admit=False)
            elif (entity := self._queues.gated.get(queue_id)) is not None:
                self._moves.release_gated(entity, label)

    def entity_id(self, pod_key: str) -> str:
        """The ``queue_id`` of the entity holding ``pod_key`` (its group's, for a member)."""
        group = self._groups.flying_with(pod_key) or self._groups.queued_with(pod_key)
        return GROUP_ID_PREFIX + group.ref.key if group is not None else pod_key

    # --- periodic flushes ------------------------------------------------------------

    def flush_backoff_completed(self) -> int:
        completed = self._queues.backoff.pop_completed()
        for entity in completed:
            if self._queues.where(entity.queue_id) is not None:
                continue  # already moved along with a member that joined it
            # PreEnqueue ran when the entity entered backoff (upstream SchedulerPopFromBackoffQ).
            self._moves.to_active(entity, BACKOFF_COMPLETE, admit=False)
        return len(completed)

    def flush_unschedulable_leftover(self) -> int:
        cutoff = self._clock.now() - self._max_in_unschedulable
        stale = self._queues.unschedulable.entered_before(cutoff)
        for entity in stale:
            if self._queues.unschedulable.remove(entity.queue_id) is not None:
                self._moves.requeue(entity, Strategy.AFTER_BACKOFF, UNSCHEDULABLE_TIMEOUT)
        for entity in self._queues.gated.entered_before(cutoff):
            if entity.queue_id in self._queues.gated:
                self._moves.release_gated(entity, UNSCHEDULABLE_TIMEOUT)
        return len(stale)

    async def run_flushes(self, stopped: asyncio.Event) -> None:
        """Run both flushes on the injected clock until ``stopped`` is set."""
        async with asyncio.TaskGroup() as tasks:
            loops = [
                tasks.create_task(
                    self._every(BACKOFF_FLUSH_PERIOD, self.flush_backoff_completed, stopped)
                ),
                tasks.create_task(
                    self._every(
                        UNSCHEDULABLE_FLUSH_PERIOD, self.flush_unschedulable_leftover, stopped
                    )
                ),
            ]
            await stopped.wait()
            for loop in loops:
                loop.cancel()

    async def _every(self, period: float, flush: Callable[[], int], stopped: asyncio.Event) -> None:
        while not stopped.is_set():
            await self._clock.sleep(period)
            flush()

    # --- verdicts ----------------------------------------------------------------------

    def after_attempt(
        self, entity: QueuedEntity, cycle: int, logged: list[LoggedEvent] | None
    ) -> Strategy:
        """How to requeue ``entity`` whose attempt, popped at ``cycle``, failed;
        ``logged``: the events seen in flight (None without a flight record)."""
        rejectors = entity.rejectors()
        if not rejectors:
            # An error, not a rejection: nothing to wait for but the backoff.
            return Strategy.AFTER_BACKOFF
        if logged is None:
            moved = self.move_request_cycle >= cycle
            return Strategy.AFTER_BACKOFF if moved else Strategy.SKIP
        # Did anything that happened during the attempt undo the rejection?
        strategy = Strategy.SKIP
        for e in logged:
            found, failed = self.hints.strategy(entity, e.event, e.old, e.new, rejectors)
            strategy = max(strategy, found)
            self.hint_errors += failed
        return strategy

    def retry_unschedulable(
        self, entity: QueuedEntity, events: Iterable[ClusterEvent], old: Pod, new: Pod
    ) -> int:
        """A pod of an entity in the unschedulable pool was updated: move the entity if
        a hint says the change may help. Returns how many hint functions raised."""
        errors_before = self.hint_errors
        strategy = Strategy.SKIP
        for event in events:
            found, failed = self.hints.strategy(entity, event, old, new, entity.rejectors())
            strategy = max(strategy, found)
            self.hint_errors += failed
        if strategy is not Strategy.SKIP:
            self._queues.unschedulable.remove(entity.queue_id)
            self._moves.requeue(entity, strategy, POD_UPDATE_LABEL)
        return self.hint_errors - errors_before
