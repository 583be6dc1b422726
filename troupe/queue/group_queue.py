"""One pod group's state in the queue, and every change of it (KEP-4671 group entities).

``GroupTable`` keeps one ``GroupQueue`` per group the queue holds pods of, from
the first such pod until it holds none again. While the group is *managed* (its
policy is a gang, or its object is missing so nobody knows yet) its pods never
sit in the queue on their own: each is

* a member of the group's **queued entity** (``queued``, at most one, in some
  sub-queue), once it passed its own PreEnqueue; or
* a **pod entity in the gated pool** (in ``solo``), while its own PreEnqueue (a
  scheduling gate) refuses it; released, it joins the queued entity (``absorb``); or
* a member of the group's entity **in flight** (``flying``); members updated or
  deleted meanwhile are kept in ``flight_updates`` / ``flight_deleted``.

Members that arrive while the group is in flight join a new queued entity that
stays gated (``EntityGate``: one attempt at a time) until the attempt ends:
``finish`` (every member placed) re-checks it, ``merge_held`` merges it with the
members that did not fit. A group with the Basic policy (no quorum) has its
pods queued as ordinary pods (``solo``); ``changed`` gathers them into the group
entity when the policy turns gang, and hands the entity back to be queued as pods
(``as_pods``, by ``GroupTable``) when it turns Basic. ``first_seen`` is where
``scheduleTimeoutSeconds`` starts; attempts and backoff are fields of the entity,
so a remainder keeps them.

``GroupTable`` calls every transition and does what spans groups around it
(which pods are held elsewhere; attaching, forgetting and dissolving pods).
Each transition moves the group's own entity with ``SubQueues`` and reads the
``GroupDirectory``; none calls back up.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from troupe.api.clock import Clock
from troupe.api.gangs import GangPolicy, GroupDirectory, GroupRef
from troupe.api.objects import Pod
from troupe.api.podinfo import PodInfo
from troupe.api.status import Status
from troupe.queue.entity import QueuedGroupInfo, QueuedPodInfo
from troupe.queue.group_entity import add_member, remove_member, resort
from troupe.queue.hints import Strategy
from troupe.queue.sub_queues import QueueName, SubQueues

# Incoming-event labels of moves a group makes.
GROUP_CHANGE = "PodGroupChange"
GROUP_ATTEMPT_DONE = "PodGroupAttemptDone"


def is_managed(policy: GangPolicy | None) -> bool:
    """True when a group's pods are queued as one entity: a gang policy, or no
    policy yet (the pods wait for the group object, KEP-4671 PreEnqueue)."""
    return policy is None or policy.gang


@dataclass(frozen=True, slots=True)
class GroupContext:
    """What every ``GroupQueue`` works with; one, shared, per scheduling queue."""

    queues: SubQueues
    directory: GroupDirectory
    pod_gate: Callable[[Pod], Status]
    clock: Clock


class GroupQueue:
    __slots__ = (
        "_context",
        "_created",
        "attached",
        "first_seen",
        "flight_deleted",
        "flight_updates",
        "flying",
        "queued",
        "ref",
        "solo",
    )

    def __init__(self, ref: GroupRef, first_seen: float, context: GroupContext) -> None:
        self.ref = ref
        self.first_seen = first_seen
        # The entity waiting in a sub-queue (at most one) and the one being scheduled.
        self.queued: QueuedGroupInfo | None = None
        self.flying: QueuedGroupInfo | None = None
        # Newest informer version of members updated, and members deleted, in flight.
        self.flight_updates: dict[str, PodInfo] = {}
        self.flight_deleted: set[str] = set()
        # Every pod key the queue holds for this group (queued, gated alone, in
        # flight); ``GroupTable`` attaches and detaches them.
        self.attached: set[str] = set()
        # The attached pods held as pod entities: gated by their own PreEnqueue, or
        # scheduled alone (Basic policy), queued or in flight.
        self.solo: set[str] = set()
        # (policy.created, the same instant on the queue clock), converted once.
        self._created: tuple[float, float] | None = None
        self._context = context

    @property
    def empty(self) -> bool:
        """True when the queue holds nothing of this group any more."""
        return not self.attached and self.queued is None and self.flying is None

    def managed(self) -> bool:
        return is_managed(self._context.directory.policy(self.ref))

    # --- lookups -----------------------------------------------------------------------

    def where(self) -> QueueName | Literal["in_flight"] | None:
        """Where the queued entity is; "in_flight" if the group only has one in flight."""
        if self.queued is not None:
            return self._context.queues.where(self.queued.queue_id)
        return "in_flight" if self.flying is not None else None

    def queues_member(self, pod_key: str) -> bool:
        """True when the queued entity holds ``pod_key``."""
        return self.queued is not None and pod_key in self.queued.members

    def flies_member(self, pod_key: str) -> bool:
        """True when the entity in flight holds ``pod_key`` (not deleted meanwhile)."""
        return (
            self.flying is not None
            and pod_key in self.flying.members
            and pod_key not in self.flight_deleted
        )

    def member_info(self, pod_key: str) -> PodInfo | None:
        """The newest version of a member, queued or in flight."""
        if self.queued is not None and pod_key in self.queued.members:
            return self.queued.members[pod_key]
        if self.flying is not None and self.flies_member(pod_key):
            return self.flight_updates.get(pod_key) or self.flying.members[pod_key]
        return None

    # --- pods entering -----------------------------------------------------------------

    def enqueue(self, info: PodInfo, joined: float, event: str) -> QueueName:
        """A pending pod of this (managed) group enters the queue."""
        status = self._context.pod_gate(info.pod)
        if not status.is_success:
            # Gated on its own: it does not count toward minCount until released.
            self.solo.add(info.key)
            return self._context.queues.to_gated(QueuedPodInfo.of(info, joined), status, event)
        self.solo.discard(info.key)
        return self._join(info, joined, event)

    def absorb(self, entity: QueuedPodInfo, event: str) -> QueueName | None:
        """A pod entity of this group on its way into a sub-queue joins the group
        entity instead, if the group is managed and the pod's own PreEnqueue passes.
        None: it goes where it was going, as one of the group's solo pods."""
        key = entity.pod_key
        if not self.managed() or not self._context.pod_gate(entity.pod).is_success:
            self.solo.add(key)
            return None
        self.solo.discard(key)
        return self._join(entity.pod_info, entity.timestamp, event)

    def _join(self, info: PodInfo, joined: float, event: str) -> QueueName:
        entity = self.queued
        if entity is None:
            entity = QueuedGroupInfo.of(self.ref, joined)
            add_member(entity, info, joined)
            self.queued = entity
            self._resort(entity)
            return self._context.queues.to_active(entity, event)
        where = self._take_out(entity)
        add_member(entity, info, joined)
        # A new member is new information: a rejected group is retried (after backoff).
        return self._put_back(entity, where, event, retry=True)

    # --- member changes --------------------------------------------------------------------

    def replace_member(self, info: PodInfo, event: str) -> QueueName | None:
        """A newer version of a member of the queued entity.

        A member refused by its own PreEnqueue now leaves for the gated pool. A
        group in the unschedulable pool stays there: the caller asks the hints.
        Returns where the group entity is (None when it is gone).
        """
        entity = self.queued
        assert entity is not None and info.key in entity.members
        status = self._context.pod_gate(info.pod)
        where = self._take_out(entity)
        if status.is_success:
            add_member(entity, info, self._context.clock.now())
        else:
            joined = entity.joined.get(info.key, entity.timestamp)
            remove_member(entity, info.key)
            self.solo.add(info.key)
            self._context.queues.to_gated(QueuedPodInfo.of(info, joined), status, event)
            if not entity.members:
                self._drop_queued()
                return None
        return self._put_back(entity, where, event)

    def remove_member(self, pod_key: str, event: str) -> bool:
        """A member was deleted; False if no entity of the group holds ``pod_key``."""
        entity = self.queued
        if entity is not None and pod_key in entity.members:
            where = self._take_out(entity)
            remove_member(entity, pod_key)
            if entity.members:
                self._put_back(entity, where, event)
            else:
                self._drop_queued()
            return True
        if self.flies_member(pod_key):
            self.flight_deleted.add(pod_key)
            self.flight_updates.pop(pod_key, None)
            return True
        return False

    def update_in_flight(self, info: PodInfo) -> PodInfo | None:
        """A newer version of a member in flight, kept for the requeue; returns the
        version it replaces."""
        current = self.member_info(info.key)
        self.flight_updates[info.key] = info
        return current

    # --- the group object changed ------------------------------------------------------------

    def changed(self, event: str) -> QueuedGroupInfo | None:
        """Follow a change of the group's object: policy, problem, existence.

        Returns the queued entity, out of the sub-queues, when the group turned
        Basic: the caller queues its members as pods (``as_pods``).
        """
        queues = self._context.queues
        if self.managed():
            # Basic -> gang, or the group object is gone: pods queued alone join the
            # group entity (those held by their own PreEnqueue stay gated alone).
            for pod_key in sorted(self.solo):
                pod = queues.get(pod_key)
                if not isinstance(pod, QueuedPodInfo) or queues.where(pod_key) == "gated":
                    continue
                queues.remove(pod_key)
                self.solo.discard(pod_key)
                self._join(pod.pod_info, pod.timestamp, event)
        elif (entity := self.queued) is not None:
            # gang -> Basic: the members are scheduled one by one from now on.
            queues.remove(entity.queue_id)
            self.queued = None
            return entity
        if (queued := self.queued) is not None:
            # A rejected group is retried when its policy changed (say, a lower
            # minCount); other changes (status, counts) leave it waiting.
            retry = queued.policy != self._context.directory.policy(self.ref)
            self._put_back(queued, self._take_out(queued), event, retry=retry)
        return None

    # --- attempts ----------------------------------------------------------------------

    def start_flight(self, entity: QueuedGroupInfo) -> None:
        if self.queued is entity:
            self.queued = None
        self._clear_flight()
        self.flying = entity

    def finish(self, entity: QueuedGroupInfo) -> bool:
        """``entity``'s attempt ended with every member placed (False: it is not the
        one in flight). Members that arrived meanwhile go on if the quorum now
        holds (KEP-3370 Permit: assigned + assumed >= minCount)."""
        if self.flying is not entity:
            return False
        self._clear_flight()
        if (held := self.queued) is not None:
            self._put_back(held, self._take_out(held), GROUP_ATTEMPT_DONE)
        return True

    def end_flight(self, entity: QueuedGroupInfo) -> tuple[dict[str, PodInfo], set[str]]:
        """End ``entity``'s failed attempt if it is the one in flight; returns the
        members updated (newest versions) and deleted meanwhile."""
        if self.flying is not entity:
            return {}, set()
        updates, deleted = self.flight_updates, self.flight_deleted
        self._clear_flight()
        return updates, deleted

    def merge_held(self, entity: QueuedGroupInfo) -> bool:
        """Members that arrived during ``entity``'s failed attempt join it; True when
        there were any."""
        held = self.queued
        if held is None:
            return False
        self._context.queues.remove(held.queue_id)
        self.queued = None
        for pod_key, info in held.members.items():
            add_member(entity, info, held.joined.get(pod_key, held.timestamp))
        return bool(held.members)

    def requeue(self, entity: QueuedGroupInfo, strategy: Strategy, event: str) -> QueueName | None:
        """Requeue ``entity`` whose attempt ended (the members that did not fit, as
        ``GroupTable.take_remainder`` left it); the group is managed."""
        self.queued = entity
        self._resort(entity)
        queues = self._context.queues
        if self.flying is not None:
            # Another attempt on this group started meanwhile: wait for its outcome.
            return queues.to_gated(entity, queues.run_gate(entity), event)
        return queues.requeue(entity, strategy, event)

    # --- helpers -----------------------------------------------------------------------

    def _clear_flight(self) -> None:
        self.flying = None
        self.flight_updates = {}
        self.flight_deleted = set()

    def _take_out(self, entity: QueuedGroupInfo) -> QueueName | None:
        """Where ``entity`` is; out of its heap, so it may change (pools are unordered)."""
        queues = self._context.queues
        where = queues.where(entity.queue_id)
        if where in ("active", "backoff"):
            queues.remove(entity.queue_id)
        return where

    def _put_back(
        self,
        entity: QueuedGroupInfo,
        where: QueueName | None,
        event: str,
        *,
        retry: bool = False,
    ) -> QueueName:
        """Re-place an entity that changed where it was, running the gate again."""
        self._resort(entity)
        queues = self._context.queues
        if where == "gated":
            return queues.recheck_gated(entity, event)
        if where == "unschedulable":
            if not retry:
                return where
            queues.unschedulable.remove(entity.queue_id)
            return queues.requeue(entity, Strategy.AFTER_BACKOFF, event)
        if where is None:
            return queues.to_active(entity, event)
        status = queues.run_gate(entity)
        if not status.is_success:
            # Lost members below minCount, or the group object went away.
            return queues.to_gated(entity, status, event)
        if where == "active":
            queues.active.push(entity)
        else:
            queues.backoff.add(entity)
        return where

    def _resort(self, entity: QueuedGroupInfo) -> None:
        policy = self._context.directory.policy(self.ref)
        resort(entity, policy, self._created_on_clock(policy))

    def _created_on_clock(self, policy: GangPolicy | None) -> float | None:
        """The group's creation time on the queue clock (QueueSort compares it with
        pods' queue times); None while unknown."""
        if policy is None or policy.created <= 0:
            return None
        if self._created is None or self._created[0] != policy.created:
            clock = self._context.clock
            offset = clock.wall() - clock.now()
            self._created = (policy.created, policy.created - offset)
        return self._created[1]

    def _drop_queued(self) -> None:
        if self.queued is not None:
            self._context.queues.remove(self.queued.queue_id)
            self.queued = None
