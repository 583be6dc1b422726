"""Cluster events into the cache and the queue.

The informers call these handlers with parsed objects; the handlers keep the cache
(assigned pods, nodes) and the queue (unassigned pods of our profiles) in step,
and turn each change into a ``ClusterEvent`` so the queue can move pods that the
change may have made schedulable. Pods of other schedulers are ignored unless
assigned (they consume node capacity). Terminal pods (Succeeded/Failed) free their
capacity, as upstream's informer excludes them.
"""

from __future__ import annotations

from troupe.api.events import (
    ASSIGNED_POD_ADD,
    ASSIGNED_POD_DELETE,
    NODE_ADD,
    NODE_DELETE,
    Action,
    ClusterEvent,
    Resource,
)
from troupe.api.objects import Node, Pod
from troupe.scheduler.schedule_one import Scheduler


def node_update_event(old: Node, new: Node) -> ClusterEvent | None:
    action = Action(0)
    if old.status.allocatable != new.status.allocatable:
        action |= Action.UPDATE_NODE_ALLOCATABLE
    if old.metadata.labels != new.metadata.labels:
        action |= Action.UPDATE_NODE_LABEL
    if old.spec.taints != new.spec.taints:
        action |= Action.UPDATE_NODE_TAINT
    if old.spec.unschedulable != new.spec.unschedulable:
        action |= Action.UPDATE_NODE_CONDITION
    if not action:
        return None
    return ClusterEvent(Resource.NODE, action, "NodeUpdate")


class ClusterEventHandlers:
    def __init__(self, scheduler: Scheduler) -> None:
        self._s = scheduler

    # --- pods --------------------------------------------------------------------

    def on_pod_add(self, pod: Pod) -> None:
        s = self._s
        if pod.spec.node_name:
            if pod.is_terminal:
                return
            s.cache.add_pod(pod)
            s.queue.delete(pod)
            s.queue.on_event(ASSIGNED_POD_ADD, None, pod)
        elif (
            s.owns(pod.spec.scheduler_name)
            and not pod.is_terminal
            and pod.metadata.deletion_timestamp is None
        ):
            s.queue.add(pod)

    def on_pod_update(self, old: Pod, new: Pod) -> None:
        s = self._s
        if new.spec.node_name:
            if new.is_terminal:
                self._assigned_pod_gone(new)
                return
            if not old.spec.node_name or old.spec.node_name != new.spec.node_name:
                # Bound (by us or anyone): it leaves the queue and occupies its node.
                s.queue.delete(old)
                s.cache.add_pod(new)
                s.queue.on_event(ASSIGNED_POD_ADD, None, new)
                return
            s.cache.update_pod(old, new)
            if old.metadata.labels != new.metadata.labels:
                s.queue.on_event(
                    ClusterEvent(
                        Resource.ASSIGNED_POD, Action.UPDATE_POD_LABEL, "AssignedPodUpdate"
                    ),
                    old,
                    new,
                )
            return
        if not s.owns(new.spec.scheduler_name) or new.is_terminal:
            s.queue.delete(old)
            return
        if old.metadata.uid and old.metadata.uid != new.metadata.uid:
            s.queue.delete(old)
            s.queue.add(new)
            return
        s.queue.update(old, new)

    def on_pod_delete(self, pod: Pod) -> None:
        s = self._s
        waiting = s.waiting.get(pod.key)
        if waiting is not None:
            waiting.reject("", "pod was deleted while waiting on permit")
        if pod.spec.node_name or pod.key in s.cache:
            self._assigned_pod_gone(pod)
        s.queue.delete(pod)

    def _assigned_pod_gone(self, pod: Pod) -> None:
        s = self._s
        if s.cache.binding_in_flight(pod.key):
            # Our binding is in flight; the binding cycle settles the cache.
            return
        s.cache.remove_pod(pod)
        s.queue.on_event(ASSIGNED_POD_DELETE, pod, None)

    # --- nodes -------------------------------------------------------------------

    def on_node_add(self, node: Node) -> None:
        self._s.cache.add_node(node)
        self._s.queue.on_event(NODE_ADD, None, node)

    def on_node_update(self, old: Node, new: Node) -> None:
        self._s.cache.update_node(new)
        event = node_update_event(old, new)
        if event is not None:
            self._s.queue.on_event(event, old, new)

    def on_node_delete(self, node: Node) -> None:
        self._s.cache.remove_node(node.metadata.name)
        self._s.queue.on_event(NODE_DELETE, node, None)
