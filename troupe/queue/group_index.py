"""Pod groups in the queue: which gang each pending pod is in, and the group entities.

``SchedulingQueue`` owns one ``GroupIndex`` and hands it every pending pod whose
``group_of`` names a group. While the group is *managed* (its policy is a gang,
or its object is missing so nobody knows yet) its pods never sit in the queue on
their own: each is

* a member of the group's **queued entity** (``GroupRecord.queued``, at most one,
  in some sub-queue), once it passed its own PreEnqueue; or
* a **pod entity in the gated pool**, while its own PreEnqueue (a scheduling gate)
  refuses it; released, it joins the queued entity (``absorb``); or
* a member of the group's entity **in flight** (``GroupRecord.flying``).

Members that arrive while the group is in flight join a new queued entity that
stays gated until the attempt ends: ``finish`` (every member placed) releases it
if quorum now holds, ``take_remainder`` merges it with the members that did not
fit. A group with the Basic policy (no quorum) has its pods queued as ordinary
pods; ``changed`` moves pods between the two forms when the policy changes.

The group entity's PreEnqueue (the gang checks) is ``pre_enqueue.EntityGate``,
which ``SubQueues`` runs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from troupe.api.clock import Clock
from troupe.api.gangs import GangPolicy, GroupDirectory, GroupKey, GroupRef
from troupe.api.objects import Pod
from troupe.api.podinfo import PodInfo
from troupe.api.status import Status
from troupe.queue.entity import QueuedEntity, QueuedGroupInfo, QueuedPodInfo
from troupe.queue.group_records import GroupBook, GroupRecord
from troupe.queue.hints import Strategy
from troupe.queue.in_flight import InFlight
from troupe.queue.sub_queues import QueueName, SubQueues

# Incoming-event labels of moves the group index makes.
GROUP_CHANGE = "PodGroupChange"
GROUP_ATTEMPT_DONE = "PodGroupAttemptDone"

GroupOf = Callable[[Pod], GroupRef | None]


class GroupIndex:
    def __init__(
        self,
        queues: SubQueues,
        in_flight: InFlight,
        groups: GroupDirectory,
        group_of: GroupOf,
        pod_gate: Callable[[Pod], Status],
        clock: Clock,
    ) -> None:
        self._queues = queues
        self._in_flight = in_flight
        self._groups = groups
        self._group_of = group_of
        self._pod_gate = pod_gate
        self._clock = clock
        self._book = GroupBook()

    @property
    def book(self) -> GroupBook:
        return self._book

    def ref_of(self, pod: Pod) -> GroupRef | None:
        return self._group_of(pod)

    def managed(self, ref: GroupRef) -> bool:
        """True when the group's pods are queued as one entity: a gang policy, or no
        policy yet (the pods wait for the group object, KEP-4671 PreEnqueue)."""
        policy = self._groups.policy(ref)
        return policy is None or policy.gang

    # --- pods entering ---------------------------------------------------------------------

    def enqueue(self, info: PodInfo, ref: GroupRef, joined: float, event: str) -> QueueName:
        """A pending pod of the managed group ``ref`` enters the queue."""
        record = self._book.attach(info.key, ref, self._clock.now())
        status = self._pod_gate(info.pod)
        if not status.is_success:
            # Gated on its own: it does not count toward minCount until released.
            record.solo.add(info.key)
            return self._queues.to_gated(QueuedPodInfo.of(info, joined), status, event)
        record.solo.discard(info.key)
        return self._join(record, info, joined, event)

    def absorb(self, entity: QueuedEntity, event: str) -> QueueName | None:
        """``SubQueues`` hook: a pod entity of a managed group joins the group entity."""
        if not isinstance(entity, QueuedPodInfo):
            return None
        key = entity.pod_key
        ref = self._group_of(entity.pod)
        if ref is None:
            if self._book.is_attached(key):
                self._book.detach(key)
            return None
        record = self._book.attach(key, ref, self._clock.now())
        if not self.managed(ref) or not self._pod_gate(entity.pod).is_success:
            record.solo.add(key)
            return None
        record.solo.discard(key)
        return self._join(record, entity.pod_info, entity.timestamp, event)

    def _join(self, record: GroupRecord, info: PodInfo, joined: float, event: str) -> QueueName:
        entity = record.queued
        if entity is None:
            entity = QueuedGroupInfo.of(record.ref, joined)
            entity.add_member(info, joined)
            record.queued = entity
            self._resort(record, entity)
            return self._queues.to_active(entity, event)
        where = self._take_out(entity)
        entity.add_member(info, joined)
        # A new member is new information: a rejected group is retried (after backoff).
        return self._put_back(record, entity, where, event, retry=True)

    # --- member changes --------------------------------------------------------------------

    def replace_member(self, record: GroupRecord, info: PodInfo, event: str) -> QueueName | None:
        """A newer version of a member of the queued entity.

        A member refused by its own PreEnqueue now leaves for the gated pool. A
        group in the unschedulable pool stays there: the caller asks the hints.
        Returns where the group entity is (None when it is gone).
        """
        entity = record.queued
        assert entity is not None and info.key in entity.members
        status = self._pod_gate(info.pod)
        where = self._take_out(entity)
        if status.is_success:
            entity.add_member(info, self._clock.now())
        else:
            joined = entity.joined.get(info.key, entity.timestamp)
            entity.remove_member(info.key)
            record.solo.add(info.key)
            self._queues.to_gated(QueuedPodInfo.of(info, joined), status, event)
            if not entity.members:
                self._drop_queued(record)
                return None
        return self._put_back(record, entity, where, event)

    def remove_member(self, pod_key: str, event: str) -> bool:
        """A member was deleted; False if ``pod_key`` is in no group entity."""
        record = self._book.record_of_pod(pod_key)
        if record is None:
            return False
        entity = record.queued
        if entity is not None and pod_key in entity.members:
            where = self._take_out(entity)
            entity.remove_member(pod_key)
            if entity.members:
                self._put_back(record, entity, where, event)
            else:
                self._drop_queued(record)
            return True
        if self._book.flying_with(pod_key) is not None:
            record.flight_deleted.add(pod_key)
            record.flight_updates.pop(pod_key, None)
            return True
        return False

    def forget_if_gone(self, pod_key: str) -> None:
        """Stop tracking ``pod_key`` once the queue holds it nowhere."""
        if self._book.is_attached(pod_key) and not self._held(pod_key):
            self._book.detach(pod_key)

    # --- the group object changed ------------------------------------------------------------

    def changed(self, key: GroupKey, event: str) -> None:
        """Follow a change of the group's object: policy, problem, existence."""
        record = self._book.record(key)
        if record is None:
            return
        if self.managed(record.ref):
            # Basic -> gang, or the group object is gone: pods queued alone join the
            # group entity (those held by their own PreEnqueue stay gated alone).
            for pod_key in sorted(record.solo):
                pod = self._queues.get(pod_key)
                if not isinstance(pod, QueuedPodInfo) or self._queues.where(pod_key) == "gated":
                    continue
                self._queues.remove(pod_key)
                record.solo.discard(pod_key)
                self._join(record, pod.pod_info, pod.timestamp, event)
        elif record.queued is not None:
            # gang -> Basic: the members are scheduled one by one from now on.
            entity = record.queued
            self._queues.remove(entity.queue_id)
            record.queued = None
            self._dissolve(record, entity, Strategy.AFTER_BACKOFF, event)
        if (queued := record.queued) is not None:
            # A rejected group is retried when its policy changed (say, a lower
            # minCount); other changes (status, counts) leave it waiting.
            retry = queued.policy != self._groups.policy(record.ref)
            self._put_back(record, queued, self._take_out(queued), event, retry=retry)
        self._book.drop_if_empty(record)

    # --- attempts ----------------------------------------------------------------------

    def start_flight(self, entity: QueuedGroupInfo) -> None:
        record = self._book.ensure(entity.ref, self._clock.now())
        if record.queued is entity:
            record.queued = None
        record.end_flight()
        record.flying = entity

    def finish(self, entity: QueuedGroupInfo) -> None:
        """Every member of ``entity`` was placed: they leave the queue's books, and
        members that arrived meanwhile are released if the quorum now holds."""
        record = self._book.record(entity.key)
        if record is None or record.flying is not entity:
            return
        record.end_flight()
        for pod_key in entity.members:
            self.forget_if_gone(pod_key)
        if (held := record.queued) is not None:
            self._put_back(record, held, self._take_out(held), GROUP_ATTEMPT_DONE)
        self._book.drop_if_empty(record)

    def take_remainder(
        self, entity: QueuedGroupInfo, remaining: Iterable[str]
    ) -> tuple[QueuedGroupInfo | None, list[PodInfo], bool]:
        """End ``entity``'s attempt keeping only the ``remaining`` members.

        Returns the entity to requeue (the members that did not fit, newest
        versions, deleted ones left out, plus any member that arrived meanwhile) or
        None when nothing is left or it is already queued; the members whose group
        changed in flight (to be added anew); and whether members were merged in.
        """
        record = self._book.record(entity.key)
        if record is not None and record.queued is entity:
            return None, [], False  # handed back twice
        updates: dict[str, PodInfo] = {}
        deleted: set[str] = set()
        if record is not None and record.flying is entity:
            updates, deleted = record.flight_updates, record.flight_deleted
            record.end_flight()
        keep = set(remaining)
        members, joined = entity.members, entity.joined
        entity.members, entity.joined = {}, {}
        strays: list[PodInfo] = []
        for pod_key, info in members.items():
            if pod_key not in keep or pod_key in deleted or self._held(pod_key):
                # Placed, deleted in flight, or queued again since (a re-created pod,
                # an entity handed back twice): never hold a pod in two places.
                continue
            info = updates.get(pod_key, info)
            if self._group_of(info.pod) != entity.ref:
                strays.append(info)
                continue
            entity.add_member(info, joined.get(pod_key, entity.timestamp))
        for pod_key in members:
            if pod_key not in entity.members:
                self.forget_if_gone(pod_key)
        record = self._book.ensure(entity.ref, self._clock.now())
        for pod_key in entity.members:
            self._book.attach(pod_key, entity.ref, self._clock.now())
        merged = False
        held = record.queued
        if held is not None:
            self._queues.remove(held.queue_id)
            record.queued = None
            for pod_key, info in held.members.items():
                entity.add_member(info, held.joined.get(pod_key, held.timestamp))
                merged = True
        if not entity.members:
            self._book.drop_if_empty(record)
            return None, strays, merged
        return entity, strays, merged

    def place(self, entity: QueuedGroupInfo, strategy: Strategy, event: str) -> QueueName | None:
        """Requeue a group entity whose attempt ended (``take_remainder``'s result)."""
        record = self._book.ensure(entity.ref, self._clock.now())
        if not self.managed(entity.ref):
            return self._dissolve(record, entity, strategy, event)
        record.queued = entity
        self._resort(record, entity)
        if record.flying is not None:
            # Another attempt on this group started meanwhile: wait for its outcome.
            return self._queues.to_gated(entity, self._queues.run_gate(entity), event)
        return self._queues.requeue(entity, strategy, event)

    # --- helpers -----------------------------------------------------------------------

    def _take_out(self, entity: QueuedGroupInfo) -> QueueName | None:
        """Where ``entity`` is; out of its heap, so it may change (pools are unordered)."""
        where = self._queues.where(entity.queue_id)
        if where in ("active", "backoff"):
            self._queues.remove(entity.queue_id)
        return where

    def _put_back(
        self,
        record: GroupRecord,
        entity: QueuedGroupInfo,
        where: QueueName | None,
        event: str,
        *,
        retry: bool = False,
    ) -> QueueName:
        """Re-place an entity that changed where it was, running the gate again."""
        self._resort(record, entity)
        queue_id = entity.queue_id
        if where == "gated":
            return self._queues.recheck_gated(entity, event)
        if where == "unschedulable":
            if not retry:
                return where
            self._queues.unschedulable.remove(queue_id)
            return self._queues.requeue(entity, Strategy.AFTER_BACKOFF, event)
        if where is None:
            return self._queues.to_active(entity, event)
        status = self._queues.run_gate(entity)
        if not status.is_success:
            # Lost members below minCount, or the group object went away.
            return self._queues.to_gated(entity, status, event)
        if where == "active":
            self._queues.active.push(entity)
        else:
            self._queues.backoff.add(entity)
        return where

    def _dissolve(
        self, record: GroupRecord, entity: QueuedGroupInfo, strategy: Strategy, event: str
    ) -> QueueName | None:
        """Queue the members of ``entity`` as pods (Basic policy); where the last went."""
        where: QueueName | None = None
        for pod_key, info in entity.members.items():
            pod = QueuedPodInfo.of(info, entity.joined.get(pod_key, entity.timestamp))
            pod.attempts = entity.attempts
            pod.backoff_expiry = entity.backoff_expiry
            pod.initial_attempt_timestamp = entity.initial_attempt_timestamp
            pod.unschedulable_plugins = set(entity.unschedulable_plugins)
            pod.pending_plugins = set(entity.pending_plugins)
            self._book.attach(pod_key, record.ref, self._clock.now())
            record.solo.add(pod_key)
            where = self._queues.requeue(pod, strategy, event)
        return where

    def _resort(self, record: GroupRecord, entity: QueuedGroupInfo) -> None:
        policy = self._groups.policy(record.ref)
        entity.resort(policy, self._created(record, policy))

    def _created(self, record: GroupRecord, policy: GangPolicy | None) -> float | None:
        """The group's creation time on the queue clock (QueueSort compares it with
        pods' queue times); None while unknown."""
        if policy is None or policy.created <= 0:
            return None
        if record.created is None or record.created[0] != policy.created:
            offset = self._clock.wall() - self._clock.now()
            record.created = (policy.created, policy.created - offset)
        return record.created[1]

    def _held(self, pod_key: str) -> bool:
        """True when the queue holds ``pod_key`` anywhere: queued, or in flight."""
        if self._queues.where(pod_key) is not None:
            return True
        flight = self._in_flight.get(pod_key)
        if flight is not None and not flight.deleted:
            return True
        return (
            self._book.queued_with(pod_key) is not None
            or self._book.flying_with(pod_key) is not None
        )

    def _drop_queued(self, record: GroupRecord) -> None:
        if record.queued is not None:
            self._queues.remove(record.queued.queue_id)
            record.queued = None
