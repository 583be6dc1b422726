"""The queue's pod groups: which group each pending pod is in, one ``GroupQueue`` per group.

``SchedulingQueue`` (itself, and through ``Intake`` and ``Moves``) hands the table
every pending pod whose ``group_of`` names a group and every group entity it pops
or gets back. Everything about one group is its ``GroupQueue``'s; the table keeps
what spans groups:

* which group each pod is attached to (one at most: a relabelled pod moves), and
  the object key -> groups index ``group_changed`` needs (a Workload holds several);
* whether the queue holds a pod anywhere (``_held``): alone in a sub-queue or in
  flight, or in some group's entity; a pod held nowhere is forgotten, and a group
  that holds nothing any more is dropped;
* the hand-back of a group attempt (``take_remainder``): members placed, deleted,
  relabelled or queued elsewhere since are left out.

The table finds, creates and drops the ``GroupQueue`` objects and calls down into
them; nothing below calls the table.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from troupe.api.clock import Clock
from troupe.api.gangs import GroupDirectory, GroupKey, GroupRef
from troupe.api.objects import Pod
from troupe.api.podinfo import PodInfo
from troupe.api.status import Status
from troupe.queue.entity import QueuedEntity, QueuedGroupInfo, QueuedPodInfo
from troupe.queue.group_entity import as_pods, trim_members
from troupe.queue.group_queue import GroupContext, GroupQueue, is_managed
from troupe.queue.hints import Strategy
from troupe.queue.in_flight import InFlight
from troupe.queue.sub_queues import QueueName, SubQueues

GroupOf = Callable[[Pod], GroupRef | None]


class GroupTable:
    def __init__(
        self,
        queues: SubQueues,
        in_flight: InFlight,
        directory: GroupDirectory,
        group_of: GroupOf,
        pod_gate: Callable[[Pod], Status],
        clock: Clock,
    ) -> None:
        self._queues = queues
        self._in_flight = in_flight
        self._directory = directory
        self._group_of = group_of
        self._clock = clock
        self._context = GroupContext(queues, directory, pod_gate, clock)
        self._groups: dict[GroupKey, GroupQueue] = {}
        self._member_of: dict[str, GroupKey] = {}
        self._by_object: dict[str, set[GroupKey]] = {}

    # --- lookups -----------------------------------------------------------------------

    def group(self, key: str) -> GroupQueue | None:
        return self._groups.get(GroupKey(key))

    def group_of_pod(self, pod_key: str) -> GroupQueue | None:
        """The group ``pod_key`` is attached to."""
        key = self._member_of.get(pod_key)
        return self._groups[key] if key is not None else None

    def ref_of(self, pod: Pod) -> GroupRef | None:
        return self._group_of(pod)

    def managed(self, ref: GroupRef) -> bool:
        return is_managed(self._directory.policy(ref))

    def group_keys_of(self, object_key: str) -> list[GroupKey]:
        """The groups whose API object is ``namespace/name`` (a Workload has several)."""
        return sorted(self._by_object.get(object_key, ()))

    def queued_groups(self) -> Iterator[QueuedGroupInfo]:
        return (g.queued for g in self._groups.values() if g.queued is not None)

    def flying_with(self, pod_key: str) -> GroupQueue | None:
        """The group whose entity in flight holds ``pod_key`` (not deleted meanwhile)."""
        group = self.group_of_pod(pod_key)
        return group if group is not None and group.flies_member(pod_key) else None

    def queued_with(self, pod_key: str) -> GroupQueue | None:
        """The group whose queued entity holds ``pod_key``."""
        group = self.group_of_pod(pod_key)
        return group if group is not None and group.queues_member(pod_key) else None

    def member_info(self, pod_key: str) -> PodInfo | None:
        """The newest version of a pod held in a group entity, queued or in flight."""
        group = self.group_of_pod(pod_key)
        return group.member_info(pod_key) if group is not None else None

    # --- pods entering and leaving -------------------------------------------------------

    def enqueue(self, info: PodInfo, ref: GroupRef, joined: float, event: str) -> QueueName:
        """A pending pod of the managed group ``ref`` enters the queue."""
        return self._attach(info.key, ref).enqueue(info, joined, event)

    def absorb(self, entity: QueuedEntity, event: str) -> QueueName | None:
        """An entity on its way into a sub-queue (``Moves``): a pod of a managed group
        joins its group entity; where it went, or None to place it as asked."""
        if not isinstance(entity, QueuedPodInfo):
            return None
        key = entity.pod_key
        ref = self._group_of(entity.pod)
        if ref is None:
            if key in self._member_of:
                self._detach(key)
            return None
        return self._attach(key, ref).absorb(entity, event)

    def remove_member(self, pod_key: str, event: str) -> bool:
        """A pod was deleted; False if it is in no group entity."""
        group = self.group_of_pod(pod_key)
        return group is not None and group.remove_member(pod_key, event)

    def forget_if_gone(self, pod_key: str) -> None:
        """Stop tracking ``pod_key`` once the queue holds it nowhere."""
        if pod_key in self._member_of and not self._held(pod_key):
            self._detach(pod_key)

    def changed(self, key: GroupKey, event: str) -> None:
        """The group's object changed: policy, problem, existence."""
        group = self._groups.get(key)
        if group is None:
            return
        self._regroup(group, event)
        if (basic := group.changed(event)) is not None:
            self._dissolve(group, basic, Strategy.AFTER_BACKOFF, event)
        self._drop_if_empty(group)

    def _regroup(self, group: GroupQueue, event: str) -> None:
        """Members of the queued entity whose pods now join another group (a
        CompositePodGroup above their PodGroup appeared or went away) move to it.
        Members in flight move when the attempt hands them back (``take_remainder``),
        pods gated alone when they are released (``absorb``)."""
        entity = group.queued
        if entity is None:
            return
        for info in list(entity.members.values()):
            ref = self._group_of(info.pod)
            if ref is None or ref == group.ref:
                continue
            joined = entity.joined.get(info.key, entity.timestamp)
            group.remove_member(info.key, event)
            self.enqueue(info, ref, joined, event)

    # --- attempts ----------------------------------------------------------------------

    def start_flight(self, entity: QueuedGroupInfo) -> None:
        self._ensure(entity.ref).start_flight(entity)

    def finish(self, entity: QueuedGroupInfo) -> None:
        """Every member of ``entity`` was placed: they leave the queue's books, and
        members that arrived meanwhile are released if the quorum now holds."""
        group = self._groups.get(entity.ref.key)
        if group is None or not group.finish(entity):
            return
        for pod_key in entity.members:
            self.forget_if_gone(pod_key)
        self._drop_if_empty(group)

    def take_remainder(
        self, entity: QueuedGroupInfo, remaining: Iterable[str]
    ) -> tuple[QueuedGroupInfo | None, list[PodInfo], bool]:
        """End ``entity``'s attempt keeping only the ``remaining`` members.

        Returns the entity to requeue (the members that did not fit, newest
        versions, deleted ones left out, plus any member that arrived meanwhile) or
        None when nothing is left or it is already queued; the members whose group
        changed in flight (to be added anew); and whether members were merged in.
        """
        group = self._groups.get(entity.ref.key)
        if group is not None and group.queued is entity:
            return None, [], False  # handed back twice
        updates: dict[str, PodInfo] = {}
        deleted: set[str] = set()
        if group is not None:
            updates, deleted = group.end_flight(entity)
        keep = set(remaining)
        # Placed, deleted in flight, or queued again since (a re-created pod, an
        # entity handed back twice): never hold a pod in two places.
        left_out = deleted | {k for k in entity.members if k in keep and self._held(k)}
        strays, lost = trim_members(entity, keep, left_out, updates, self._group_of)
        for pod_key in lost:
            self.forget_if_gone(pod_key)
        # After the forgets, which look for the late members in the queued entity.
        group = self._ensure(entity.ref)
        for pod_key in entity.members:
            self._attach(pod_key, entity.ref)
        merged = group.merge_held(entity)
        if not entity.members:
            self._drop_if_empty(group)
            return None, strays, merged
        return entity, strays, merged

    def place(self, entity: QueuedGroupInfo, strategy: Strategy, event: str) -> QueueName | None:
        """Requeue a group entity whose attempt ended (``take_remainder``'s result)."""
        group = self._ensure(entity.ref)
        if not group.managed():
            return self._dissolve(group, entity, strategy, event)
        return group.requeue(entity, strategy, event)

    def _dissolve(
        self, group: GroupQueue, entity: QueuedGroupInfo, strategy: Strategy, event: str
    ) -> QueueName | None:
        """Queue the members of ``entity`` as pods (the group turned Basic), each like
        any pod entering a sub-queue; where the last went."""
        where: QueueName | None = None
        for pod in as_pods(entity):
            self._attach(pod.pod_key, group.ref)
            group.solo.add(pod.pod_key)
            where = self.absorb(pod, event)
            if where is None:
                where = self._queues.requeue(pod, strategy, event)
        return where

    # --- membership ----------------------------------------------------------------------

    def _ensure(self, ref: GroupRef) -> GroupQueue:
        group = self._groups.get(ref.key)
        if group is None:
            group = GroupQueue(ref, self._clock.now(), self._context)
            self._groups[ref.key] = group
            self._by_object.setdefault(ref.object_key, set()).add(ref.key)
        return group

    def _attach(self, pod_key: str, ref: GroupRef) -> GroupQueue:
        """Record that the queue holds ``pod_key`` for group ``ref`` (leaving any other)."""
        current = self._member_of.get(pod_key)
        if current is not None and current != ref.key:
            self._detach(pod_key)
        group = self._ensure(ref)
        self._member_of[pod_key] = ref.key
        group.attached.add(pod_key)
        return group

    def _detach(self, pod_key: str) -> None:
        group = self._groups[self._member_of.pop(pod_key)]
        group.attached.discard(pod_key)
        group.solo.discard(pod_key)
        self._drop_if_empty(group)

    def _drop_if_empty(self, group: GroupQueue) -> None:
        if not group.empty:
            return
        key = group.ref.key
        if self._groups.get(key) is group:
            del self._groups[key]
            keys = self._by_object[group.ref.object_key]
            keys.discard(key)
            if not keys:
                del self._by_object[group.ref.object_key]

    def _held(self, pod_key: str) -> bool:
        """True when the queue holds ``pod_key`` anywhere: queued, or in flight."""
        if self._queues.where(pod_key) is not None:
            return True
        flight = self._in_flight.get(pod_key)
        if flight is not None and not flight.deleted:
            return True
        group = self.group_of_pod(pod_key)
        return group is not None and (group.queues_member(pod_key) or group.flies_member(pod_key))
