"""The queue's books on pod groups: one ``GroupRecord`` per group it holds pods of.

``GroupIndex`` (which moves group entities) keeps a ``GroupBook``: which group
each pending pod is attached to, each group's queued entity and entity in
flight, and the object key -> groups index ``SchedulingQueue.group_changed``
needs (a Workload holds several groups). A record exists from the first pod of
its group the queue sees until it holds none of them again; ``first_seen`` is
when it was created (``scheduleTimeoutSeconds`` starts there).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from troupe.api.gangs import GroupKey, GroupRef
from troupe.api.podinfo import PodInfo
from troupe.queue.entity import QueuedGroupInfo


@dataclass(slots=True, eq=False)
class GroupRecord:
    """Everything the queue holds of one group."""

    ref: GroupRef
    first_seen: float
    # The entity waiting in a sub-queue (at most one) and the one being scheduled.
    queued: QueuedGroupInfo | None = None
    flying: QueuedGroupInfo | None = None
    # Newest informer version of members updated, and members deleted, in flight.
    flight_updates: dict[str, PodInfo] = field(default_factory=dict)
    flight_deleted: set[str] = field(default_factory=set)
    # Every pod key the queue holds for this group (queued, gated alone, in flight).
    attached: set[str] = field(default_factory=set)
    # The attached pods held as pod entities: gated by their own PreEnqueue, or
    # scheduled alone (Basic policy), queued or in flight.
    solo: set[str] = field(default_factory=set)
    # (policy.created, the same instant on the queue clock), converted once.
    created: tuple[float, float] | None = None

    def end_flight(self) -> None:
        self.flying = None
        self.flight_updates = {}
        self.flight_deleted = set()


class GroupBook:
    def __init__(self) -> None:
        self._records: dict[GroupKey, GroupRecord] = {}
        self._member_of: dict[str, GroupKey] = {}
        self._by_object: dict[str, set[GroupKey]] = {}

    # --- lookups -----------------------------------------------------------------------

    def record(self, key: str) -> GroupRecord | None:
        return self._records.get(GroupKey(key))

    def record_of_pod(self, pod_key: str) -> GroupRecord | None:
        group = self._member_of.get(pod_key)
        return self._records[group] if group is not None else None

    def is_attached(self, pod_key: str) -> bool:
        return pod_key in self._member_of

    def group_keys_of(self, object_key: str) -> list[GroupKey]:
        """The groups whose API object is ``namespace/name`` (a Workload has several)."""
        return sorted(self._by_object.get(object_key, ()))

    def queued_groups(self) -> Iterator[QueuedGroupInfo]:
        return (r.queued for r in self._records.values() if r.queued is not None)

    def flying_with(self, pod_key: str) -> GroupRecord | None:
        """The record whose entity in flight holds ``pod_key`` (not deleted meanwhile)."""
        record = self.record_of_pod(pod_key)
        if record is None or record.flying is None:
            return None
        if pod_key in record.flying.members and pod_key not in record.flight_deleted:
            return record
        return None

    def queued_with(self, pod_key: str) -> GroupRecord | None:
        """The record whose queued entity holds ``pod_key``."""
        record = self.record_of_pod(pod_key)
        if record is None or record.queued is None or pod_key not in record.queued.members:
            return None
        return record

    def member_info(self, pod_key: str) -> PodInfo | None:
        """The newest version of a pod held in a group entity, queued or in flight."""
        if (record := self.queued_with(pod_key)) is not None and record.queued is not None:
            return record.queued.members[pod_key]
        if (record := self.flying_with(pod_key)) is not None and record.flying is not None:
            return record.flight_updates.get(pod_key) or record.flying.members[pod_key]
        return None

    # --- membership --------------------------------------------------------------------

    def ensure(self, ref: GroupRef, now: float) -> GroupRecord:
        record = self._records.get(ref.key)
        if record is None:
            record = GroupRecord(ref, now)
            self._records[ref.key] = record
            self._by_object.setdefault(ref.object_key, set()).add(ref.key)
        return record

    def attach(self, pod_key: str, ref: GroupRef, now: float) -> GroupRecord:
        """Record that the queue holds ``pod_key`` for group ``ref`` (leaving any other)."""
        current = self._member_of.get(pod_key)
        if current is not None and current != ref.key:
            self.detach(pod_key)
        record = self.ensure(ref, now)
        self._member_of[pod_key] = ref.key
        record.attached.add(pod_key)
        return record

    def detach(self, pod_key: str) -> None:
        group = self._member_of.pop(pod_key)
        record = self._records[group]
        record.attached.discard(pod_key)
        record.solo.discard(pod_key)
        self.drop_if_empty(record)

    def drop_if_empty(self, record: GroupRecord) -> None:
        if record.attached or record.queued is not None or record.flying is not None:
            return
        key = record.ref.key
        if self._records.get(key) is record:
            del self._records[key]
            keys = self._by_object[record.ref.object_key]
            keys.discard(key)
            if not keys:
                del self._by_object[record.ref.object_key]
