"""The scheduling queue: pods and pod groups waiting for an attempt (upstream ``PriorityQueue``).

The informers of ``troupe.scheduler`` call ``add`` / ``update`` / ``delete`` for
unscheduled pods, ``group_changed`` when a group object (PodGroup, Workload)
changes, and ``on_event`` for every other cluster change; ``schedule_one`` calls
``pop``, then ``done`` when every pod of the entity was placed, or
``add_unschedulable_if_not_present`` (a group: ``requeue_group_remainder``) when
the attempt failed. One queue holds two kinds of entity (KEP-4671 alternative 3):
single pods, and the pending members of a gang as one ``QueuedGroupInfo``
(``group_table`` says which pod goes where). Every entity not in flight is in
exactly one sub-queue, and moves like this:

* ``add``: PreEnqueue passes -> **active**; refused -> **gated**. A group entity's
  PreEnqueue is the gang check (group object exists, no problem, quorum); its
  members first pass their own PreEnqueue, or wait gated alone.
* gated -> PreEnqueue again on an update of a pod, an event the gating plugin
  registered (hint QUEUE), ``activate``, ``group_changed``, a member arriving, or
  after ``max_in_unschedulable``; passing -> active (backoff if still backing off).
* active -> ``pop`` -> **in flight** -> ``done`` -> gone (bound).
* in flight -> ``add_unschedulable_if_not_present`` -> **backoff** after an error
  (no rejecting plugin) or when an event seen during the attempt may help (hint
  QUEUE; active at once for a PENDING plugin, or if the backoff is over);
  otherwise -> **unschedulable**. A group comes back with only the members that
  were not placed, plus members that arrived during the attempt.
* unschedulable -> an event with hint QUEUE (for a group: for any member,
  KEP-4671 "Retries"), an update of a pod, ``move_all_to_active_or_backoff``, or
  ``max_in_unschedulable`` (5 min) -> backoff while backing off, else active;
  ``activate`` -> active.
* backoff -> ``flush_backoff_completed`` once the expiry passed -> active.

Entities pass PreEnqueue again when they leave the gated or unschedulable pool,
so a gang that lost members goes back to gated. Backoff is per entity, doubling
from ``initial_backoff`` to ``max_backoff`` (DESIGN.md "The dual queue").

This class builds the parts (the package docstring lists them; every call goes
down), runs the scheduling loop's side (pop, done, hand-back) itself and answers
questions. Time comes from the injected ``Clock``; ``run`` drives the periodic
flushes on it, so tests move time with ``FakeClock.advance``. One asyncio event
loop: no locks.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Sequence
from typing import Literal

from troupe.api.clock import Clock
from troupe.api.events import FORCE_ACTIVATE, ClusterEvent, ClusterEventWithHint
from troupe.api.gangs import GroupDirectory, GroupRef, NoGroups
from troupe.api.objects import Pod
from troupe.api.podinfo import PodInfo
from troupe.api.status import Status
from troupe.queue.entity import (
    GROUP_ID_PREFIX,
    EntityKind,
    LessFunc,
    QueuedEntity,
    QueuedGroupInfo,
    QueuedPodInfo,
    SortKey,
)
from troupe.queue.group_table import GroupTable
from troupe.queue.hints import POD_UPDATE_LABEL, Strategy
from troupe.queue.in_flight import InFlight
from troupe.queue.intake import Intake
from troupe.queue.moves import Moves
from troupe.queue.nominator import Nominator
from troupe.queue.pre_enqueue import EntityGate
from troupe.queue.retries import Retries
from troupe.queue.sub_queues import IncomingHook, QueueName, SubQueues

SCHEDULE_ATTEMPT_FAILURE = "ScheduleAttemptFailure"
"""Incoming-event label of an entity handed back after a failed attempt."""

QUEUES: tuple[QueueName, ...] = ("active", "backoff", "unschedulable", "gated")
KINDS: tuple[EntityKind, ...] = ("pod", "podgroup")

_NO_GROUPS = NoGroups()


def _no_group(pod: Pod) -> GroupRef | None:
    return None


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
        group_of: Callable[[Pod], GroupRef | None] = _no_group,
        groups: GroupDirectory = _NO_GROUPS,
        nominator: Nominator | None = None,
        sort_key: SortKey | None = None,
    ) -> None:
        """``sort_key``: QueueSort's ``less`` as a key, when its plugin offers one
        (the active queue then compares keys)."""
        self._clock = clock
        self._in_flight = InFlight()
        self._queues = SubQueues(
            less,
            clock,
            EntityGate(pre_enqueue, groups, self._in_flight),
            initial_backoff,
            max_backoff,
            on_incoming,
            sort_key,
        )
        self._groups = GroupTable(
            self._queues, self._in_flight, groups, group_of, pre_enqueue, clock
        )
        self._moves = Moves(self._queues, self._groups)
        self._retries = Retries(
            self._queues, self._moves, self._in_flight, self._groups, clock, max_in_unschedulable
        )
        # Given by the scheduler when Filter must see the nominations too.
        self._nominator = nominator if nominator is not None else Nominator()
        self._intake = Intake(
            self._queues,
            self._moves,
            self._in_flight,
            self._groups,
            self._retries,
            self._nominator,
            clock,
        )
        self._stopped = asyncio.Event()

    @property
    def hint_errors(self) -> int:
        """Hint functions that raised since start (each was taken as QUEUE)."""
        return self._retries.hint_errors

    # --- informer input --------------------------------------------------------------

    def add(self, pod: Pod) -> None:
        """A new unscheduled pod. A pod already known is treated as an update."""
        self._intake.add(pod)

    def update(self, old: Pod, new: Pod) -> int:
        """An unscheduled pod changed; returns how many hint functions raised.

        A pod in no sub-queue and not in flight is added (upstream), so callers pass
        only pods the scheduler has not assumed; a pod that got a node is dropped; a
        queued pod whose group changed moves to its new group.
        """
        return self._intake.update(old, new)

    def delete(self, pod: Pod) -> None:
        self._intake.delete(pod)

    def group_changed(self, target: GroupRef | str) -> None:
        """A group object appeared, changed or was deleted: re-run the gang checks of
        its entities (a deleted group gates them again) and follow policy changes.

        ``target`` is a ``GroupRef`` or an object key (``namespace/name``: every group
        of that object, e.g. each replica of a Workload). Also call it when the
        group's placed count changes outside the queue (members bound or deleted).
        """
        self._intake.group_changed(target)

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
        entity.attempts += 1
        # The rejector sets describe the latest attempt; the failure handler fills them.
        entity.unschedulable_plugins.clear()
        entity.pending_plugins.clear()
        self._in_flight.start(entity)
        if isinstance(entity, QueuedGroupInfo):
            self._groups.start_flight(entity)

    @property
    def scheduling_cycle(self) -> int:
        return self._in_flight.cycle

    def add_unschedulable_if_not_present(
        self, entity: QueuedEntity, cycle: int
    ) -> QueueName | None:
        """Hand back an entity whose attempt (popped at ``cycle``) failed.

        Returns where it went, or None when it is dropped: its pod was deleted
        meanwhile, or it is already queued. A group comes back whole.
        """
        if isinstance(entity, QueuedGroupInfo):
            return self.requeue_group_remainder(
                entity,
                list(entity.members),
                cycle,
                unschedulable_plugins=entity.unschedulable_plugins,
                pending_plugins=entity.pending_plugins,
            )
        key = entity.queue_id
        flight = self._in_flight.get(key)
        if entity.withdrawn or (flight is not None and flight.entity is not entity):
            # The pod was deleted (and perhaps re-created) while this attempt ran.
            self._in_flight.end(key, entity)
            return None
        logged = self._in_flight.events_for(flight) if flight is not None else None
        self._in_flight.end(key, entity)
        if flight is not None and flight.latest is not None and isinstance(entity, QueuedPodInfo):
            entity.replace_pod(flight.latest)
        if (flight is not None and flight.deleted) or self._queues.where(key) is not None:
            self._groups.forget_if_gone(key)
            return None
        self._queues.backoff.start_backoff(entity)
        strategy = self._retries.after_attempt(entity, cycle, logged)
        return self._moves.requeue(entity, strategy, SCHEDULE_ATTEMPT_FAILURE)

    def requeue_group_remainder(
        self,
        entity: QueuedGroupInfo,
        remaining_member_keys: Iterable[str],
        cycle: int,
        *,
        unschedulable_plugins: Iterable[str],
        pending_plugins: Iterable[str] = (),
    ) -> QueueName | None:
        """End a group attempt (popped at ``cycle``) in which the members
        ``remaining_member_keys`` were not placed; every other member was (assumed).

        The remainder goes back like a failed pod (backoff or unschedulable pool,
        hints over the events seen in flight, backoff per group entity), merged with
        the members that arrived during the attempt. Returns where it went; None
        when nothing is left (all placed or deleted) or it is already queued.
        """
        queue_id = entity.queue_id
        flight = self._in_flight.get(queue_id)
        own = flight is not None and flight.entity is entity
        logged = self._in_flight.events_for(flight) if flight is not None and own else None
        if own:
            self._in_flight.end(queue_id, entity)
        entity.unschedulable_plugins = set(unschedulable_plugins)
        entity.pending_plugins = set(pending_plugins)
        remainder, strays, merged = self._groups.take_remainder(entity, remaining_member_keys)
        for info in strays:
            self._intake.enqueue(info, POD_UPDATE_LABEL)  # changed groups in flight
        if remainder is None:
            return None
        self._queues.backoff.start_backoff(remainder)
        strategy = self._retries.after_attempt(remainder, cycle, logged)
        if merged:
            # Members that arrived during the attempt have never been tried.
            strategy = max(strategy, Strategy.AFTER_BACKOFF)
        return self._groups.place(remainder, strategy, SCHEDULE_ATTEMPT_FAILURE)

    def done(self, key: str, entity: QueuedEntity | None = None) -> None:
        """The attempt is over with every pod of the entity placed (bound or assumed).

        ``key`` is a pod key or a group key; pass the popped ``entity`` to be exact
        (a scheduler-plugins PodGroup may share its key with a pod). Idempotent.
        Members that arrived during a group's attempt are released if the group's
        quorum now holds (KEP-3370 Permit: assigned + assumed >= minCount).
        """
        if entity is None:
            flight = self._in_flight.get(key) or self._in_flight.get(GROUP_ID_PREFIX + key)
            if flight is None:
                return
            entity = flight.entity
        self._in_flight.end(entity.queue_id, entity)
        if isinstance(entity, QueuedGroupInfo):
            self._groups.finish(entity)
        else:
            self._groups.forget_if_gone(entity.key)

    def close(self) -> None:
        """Stop: ``pop`` returns None and ``run`` returns."""
        self._queues.active.close()
        self._stopped.set()

    # --- cluster events, activation, flushes ---------------------------------------------

    def register_hints(self, plugin_name: str, events: Sequence[ClusterEventWithHint]) -> None:
        self._retries.hints.register(plugin_name, events)

    def on_event(self, event: ClusterEvent, old: object | None, new: object | None) -> int:
        """Move the entities this event may help; returns how many hints raised."""
        return self._retries.on_event(event, old, new)

    def move_all_to_active_or_backoff(self, event: ClusterEvent = FORCE_ACTIVATE) -> None:
        """Retry every unschedulable entity (after its backoff), whatever its hints."""
        self._retries.move_request_cycle = self._in_flight.cycle
        self._retries.move_wildcard(event, None, None, None)

    def activate(self, keys: Iterable[str]) -> None:
        """Force the entities of these pods to the active queue now, skipping backoff
        (upstream ``Activate``); a pod in a group activates its group.

        A gated entity runs PreEnqueue again; an entity in flight is retried as
        soon as its attempt fails.
        """
        self._retries.activate(keys)

    def flush_backoff_completed(self) -> int:
        """Move entities whose backoff is over to the active queue; returns how many."""
        return self._retries.flush_backoff_completed()

    def flush_unschedulable_leftover(self) -> int:
        """Retry entities that waited longer than ``max_in_unschedulable``; returns how many.

        Gated entities that waited as long re-run PreEnqueue, a safety net for a
        gating plugin that missed an event registration.
        """
        return self._retries.flush_unschedulable_leftover()

    async def run(self) -> None:
        """Run both flushes (1 s and 30 s, as upstream) on the injected clock until ``close``."""
        await self._retries.run_flushes(self._stopped)

    # --- inspection ----------------------------------------------------------------

    def __len__(self) -> int:
        """Entities in the sub-queues (in-flight ones not counted)."""
        return len(self._queues)

    def __contains__(self, key: str) -> bool:
        """True when the pod ``key`` waits in a sub-queue (alone or in its group)."""
        return self.where(key) not in (None, "in_flight")

    def get(self, key: str) -> QueuedEntity | None:
        """The queued entity holding the pod ``key``: the pod's own, or its group's."""
        if (entity := self._queues.get(key)) is not None:
            return entity
        group = self._groups.queued_with(key)
        return group.queued if group is not None else None

    def where(self, key: str) -> QueueName | Literal["in_flight"] | None:
        """Where the pod ``key`` is: its entity's sub-queue, or "in_flight"."""
        if (queue := self._queues.where(key)) is not None:
            return queue
        if (group := self._groups.queued_with(key)) is not None and group.queued is not None:
            return self._queues.where(group.queued.queue_id)
        if self._groups.flying_with(key) is not None:
            return "in_flight"
        flight = self._in_flight.get(key)
        return "in_flight" if flight is not None and not flight.deleted else None

    def get_group(self, key: str) -> QueuedGroupInfo | None:
        """The queued entity of group ``key`` (not the one in flight)."""
        group = self._groups.group(key)
        return group.queued if group is not None else None

    def where_group(self, key: str) -> QueueName | Literal["in_flight"] | None:
        """Where group ``key``'s queued entity is; "in_flight" if it only has one in flight."""
        group = self._groups.group(key)
        return group.where() if group is not None else None

    def group_first_seen(self, key: str) -> float | None:
        """Clock time the queue first held a pod of group ``key`` (since it last held
        none): where ``scheduleTimeoutSeconds`` starts."""
        group = self._groups.group(key)
        return group.first_seen if group is not None else None

    def entities(self, queue: QueueName) -> list[QueuedEntity]:
        """The entities of one sub-queue, in no particular order (debugging, tests)."""
        return self._queues.entities(queue)

    def in_flight(self) -> list[QueuedEntity]:
        """Entities being scheduled (a pod deleted meanwhile excluded)."""
        return self._in_flight.entities()

    def pending_counts(self) -> dict[str, int]:
        """Pods per ``scheduler_pending_pods`` queue label (a group counts its members)."""
        counts: dict[str, int] = {queue: n for queue, n in self._queues.counts().items()}
        for group in self._groups.queued_groups():
            if (queue := self._queues.where(group.queue_id)) is not None:
                counts[queue] += len(group.members) - 1
        return counts

    def entity_counts(self) -> dict[tuple[str, str], int]:
        """Entities per (queue, type) of ``scheduler_queued_entities``; type "pod" or "podgroup"."""
        counts: dict[tuple[str, str], int] = {(q, kind): 0 for q in QUEUES for kind in KINDS}
        for queue, n in self._queues.counts().items():
            counts[(queue, "pod")] = n
        for group in self._groups.queued_groups():
            if (where := self._queues.where(group.queue_id)) is not None:
                counts[(where, "pod")] -= 1
                counts[(where, "podgroup")] += 1
        return counts

    # --- nominated pods ------------------------------------------------------------

    def add_nominated(self, info: PodInfo, node_name: str) -> None:
        self._nominator.add(info, node_name)

    def delete_nominated(self, key: str) -> None:
        self._nominator.delete(key)

    def nominated_pods_for_node(self, node_name: str) -> list[PodInfo]:
        return self._nominator.pods_for_node(node_name)

    def nominated_node(self, key: str) -> str | None:
        return self._nominator.node_of(key)

    def nominated_nodes(self) -> list[str]:
        return self._nominator.nodes()
