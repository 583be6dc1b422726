"""Informer input to the queue: pending pods added, updated and deleted, group objects changed.

``SchedulingQueue.add`` / ``update`` / ``delete`` / ``group_changed`` delegate
here. A pod whose ``group_of`` names a *managed* group (gang policy, or group
object not seen yet) goes to its group (``GroupTable``, then its ``GroupQueue``);
any other pod becomes its own ``QueuedPodInfo`` and enters through ``Moves``.
Updates follow the pod wherever it is: a pod entity in a sub-queue, a member of a
queued group entity, a member of a group in flight (the newest version is kept
for the requeue and the change is logged so a failed attempt can be retried
because of it), or a pod in flight. A queued pod whose group changed (the
scheduler-plugins label is mutable) leaves and arrives anew. Calls down only.
"""

from __future__ import annotations

from troupe.api.clock import Clock
from troupe.api.gangs import GroupRef
from troupe.api.objects import Pod
from troupe.api.podinfo import PodInfo
from troupe.queue.entity import GROUP_ID_PREFIX, QueuedEntity, QueuedPodInfo
from troupe.queue.group_queue import GROUP_CHANGE, GroupQueue
from troupe.queue.group_table import GroupTable
from troupe.queue.hints import POD_UPDATE_LABEL, pod_update_events
from troupe.queue.in_flight import InFlight
from troupe.queue.moves import Moves
from troupe.queue.nominator import Nominator
from troupe.queue.retries import Retries
from troupe.queue.sub_queues import SubQueues

# Event labels of scheduler_queue_incoming_pods_total (upstream framework/events.go).
POD_ADD = "PodAdd"
POD_DELETE = "PodDelete"


class Intake:
    def __init__(
        self,
        queues: SubQueues,
        moves: Moves,
        in_flight: InFlight,
        groups: GroupTable,
        retries: Retries,
        nominator: Nominator,
        clock: Clock,
    ) -> None:
        self._queues = queues
        self._moves = moves
        self._in_flight = in_flight
        self._groups = groups
        self._retries = retries
        self._nominator = nominator
        self._clock = clock

    def add(self, pod: Pod) -> None:
        if (known := self.known_pod(pod.key)) is not None:
            self.update(known, pod)
            return
        self.enqueue(PodInfo.of(pod), POD_ADD)

    def enqueue(self, info: PodInfo, event: str) -> None:
        """Queue a pod the queue does not hold: alone, or in its group."""
        now = self._clock.now()
        ref = self._groups.ref_of(info.pod)
        if ref is not None and self._groups.managed(ref):
            where = self._groups.enqueue(info, ref, now, event)
        else:
            where = self._moves.to_active(QueuedPodInfo.of(info, now), event)
        if where == "active":
            self._nominator.add(info, info.pod.status.nominated_node_name)

    def update(self, old: Pod, new: Pod) -> int:
        key = new.key
        if new.spec.node_name:
            self.delete(new)
            return 0
        if (group := self._groups.flying_with(key)) is not None:
            self._update_in_flight_member(group, old, new)
            return 0
        if (group := self._groups.queued_with(key)) is not None:
            if self._groups.ref_of(new) != group.ref:
                self._move(old, new)
                return 0
            return self._update_member(group, old, new)
        entity = self._queues.get(key)
        flight = self._in_flight.get(key)
        if entity is None and flight is not None and not flight.deleted:
            # Being scheduled: keep the newest version for the requeue, and log the
            # change so the failed attempt can be retried because of it.
            current = flight.latest or _as_pod(flight.entity).pod_info
            flight.latest = PodInfo.of(new)
            for event in pod_update_events(old, new, current.requests, flight.latest.requests):
                self._in_flight.log(event, old, new, target=key)
            return 0
        if entity is None:
            self.add(new)
            return 0
        if self._regrouped(key, new):
            self._move(old, new)
            return 0
        return self._update_pod(_as_pod(entity), old, new)

    def _update_pod(self, entity: QueuedPodInfo, old: Pod, new: Pod) -> int:
        info = PodInfo.of(new)
        events = pod_update_events(old, new, entity.pod_info.requests, info.requests)
        self._nominator.update(old, info)
        where = self._queues.where(entity.queue_id)
        if where in ("active", "backoff"):
            # Out of the heap before the change, back in re-sorted (priority may change).
            self._queues.remove(entity.queue_id)
            entity.replace_pod(info)
            if where == "active":
                self._queues.active.push(entity)
            else:
                self._queues.backoff.add(entity)
            return 0
        entity.replace_pod(info)
        if where == "gated":
            if events:
                self._moves.release_gated(entity, POD_UPDATE_LABEL)
            return 0
        return self._retries.retry_unschedulable(entity, events, old, new)

    def _update_member(self, group: GroupQueue, old: Pod, new: Pod) -> int:
        info = PodInfo.of(new)
        current = group.member_info(new.key)
        requests = current.requests if current is not None else info.requests
        events = pod_update_events(old, new, requests, info.requests)
        self._nominator.update(old, info)
        where = group.replace_member(info, POD_UPDATE_LABEL)
        if where != "unschedulable" or group.queued is None:
            return 0
        # KEP-4671 "Retries": the group moves if any member's hint says QUEUE.
        return self._retries.retry_unschedulable(group.queued, events, old, new)

    def _update_in_flight_member(self, group: GroupQueue, old: Pod, new: Pod) -> None:
        latest = PodInfo.of(new)
        current = group.update_in_flight(latest)
        requests = current.requests if current is not None else latest.requests
        target = GROUP_ID_PREFIX + group.ref.key
        for event in pod_update_events(old, new, requests, latest.requests):
            self._in_flight.log(event, old, new, target=target)

    def _regrouped(self, key: str, new: Pod) -> bool:
        group = self._groups.group_of_pod(key)
        ref = self._groups.ref_of(new)
        return (ref.key if ref else None) != (group.ref.key if group else None)

    def _move(self, old: Pod, new: Pod) -> None:
        """The pod changed groups: it leaves the old one and arrives anew."""
        self.delete(old)
        self.add(new)

    def delete(self, pod: Pod) -> None:
        key = pod.key
        self._nominator.delete(key)
        if not self._groups.remove_member(key, POD_DELETE):
            self._queues.remove(key)
            if (flight := self._in_flight.get(key)) is not None:
                flight.deleted = True
                flight.entity.withdrawn = True
        self._groups.forget_if_gone(key)

    def group_changed(self, target: GroupRef | str) -> None:
        keys = [target.key] if isinstance(target, GroupRef) else self._groups.group_keys_of(target)
        for key in keys:
            self._groups.changed(key, GROUP_CHANGE)

    def known_pod(self, key: str) -> Pod | None:
        """The newest version of pod ``key`` the queue holds (queued or in flight)."""
        entity = self._queues.get(key)
        if isinstance(entity, QueuedPodInfo):
            return entity.pod
        if (info := self._groups.member_info(key)) is not None:
            return info.pod
        flight = self._in_flight.get(key)
        if flight is None or flight.deleted:
            return None
        if flight.latest is not None:
            return flight.latest.pod
        return _as_pod(flight.entity).pod


def _as_pod(entity: QueuedEntity) -> QueuedPodInfo:
    if not isinstance(entity, QueuedPodInfo):
        raise TypeError(f"{entity.kind} {entity.key} is not a pod")
    return entity
