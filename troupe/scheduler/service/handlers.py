"""Cluster events into the cache and the queue.

The informers call these handlers with parsed objects; the handlers keep the cache
(assigned pods, nodes) and the queue (unassigned pods of our profiles) in step,
and turn each change (namespace label changes included) into a ``ClusterEvent`` so
the queue can move pods that the change may have made schedulable. Changes of the
API objects plugins watch arrive here as cluster events already
(``on_object_change``, after the plugins themselves heard of them). Pods of other
schedulers are ignored unless assigned (they consume node capacity). Terminal pods
(Succeeded/Failed) free their capacity, as upstream's informer excludes them.

An object whose quantities troupe cannot use (a request, limit or overhead that does
not parse or is negative, a node's capacity or allocatable likewise) never reaches the
queue or the NodeTable, so it cannot skew another pod's fit or score: a pending pod of
ours gets ``PodScheduled=False`` (reason ``InvalidQuantity``, the message naming the
field) and a ``FailedScheduling`` event; a node gets a Warning event and an error log
line and is left out (taken out of the NodeTable if it was in it) until a later
version of it is usable. An amount above what troupe holds (``MAX_AMOUNT``, 10T cores
or 10P of anything else) is such a problem too. An assigned pod occupies its node
whatever troupe thinks of it: one asking more than that is counted as asking the
limit, one whose quantities do not parse is not counted; either gets a Warning event
(reason ``InvalidQuantity``) and a log line naming the pod, node and field. Each is
told once per distinct problem.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final, Protocol

import structlog

from troupe.api.client import Event, ObjectRef
from troupe.api.events import (
    ASSIGNED_POD_ADD,
    ASSIGNED_POD_DELETE,
    NAMESPACE_ADD,
    NAMESPACE_DELETE,
    NAMESPACE_LABEL_UPDATE,
    NODE_ADD,
    NODE_DELETE,
    Action,
    ClusterEvent,
    Resource,
)
from troupe.api.gangapi import CompositePodGroup
from troupe.api.gangapi_kinds import TEMPLATES_OBJECTS, GroupObject
from troupe.api.gangs import GangApi, GroupRef, group_ref_of, group_refs_of
from troupe.api.objects import Namespace, Node, Pod, PodCondition
from troupe.api.quantity import AmountTooLarge, QuantityError, max_amount_text
from troupe.api.resources import node_allocatable
from troupe.queue.scheduling_queue import SchedulingQueue
from troupe.scheduler.cache import Cache
from troupe.scheduler.cycle.binding_cycle import BindingCycle
from troupe.scheduler.cycle.pod_batch import PodBatches
from troupe.scheduler.cycle.writer import BackgroundWriter
from troupe.scheduler.framework.waiting_pods import WaitingPods
from troupe.scheduler.gangs.directory import GangDirectory
from troupe.scheduler.observe.explain import Explanations

log = structlog.get_logger("troupe.scheduler")

# The Warning event's reason on a pod that names groups in two APIs.
POD_IN_TWO_GROUPS: Final = "PodGroupConflict"
# PodScheduled=False reason of a pod whose quantities cannot be used.
REASON_INVALID_QUANTITY: Final = "InvalidQuantity"
# Warning event reason on a node whose capacity or allocatable cannot be used.
NODE_INVALID_QUANTITY: Final = "InvalidNodeResources"


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


UNSCHEDULED_POD_ADD = ClusterEvent(Resource.POD, Action.ADD, "UnscheduledPodAdd")
POD_GROUP_ADD = ClusterEvent(Resource.POD_GROUP, Action.ADD, "PodGroupAdd")
POD_GROUP_UPDATE = ClusterEvent(Resource.POD_GROUP, Action.UPDATE_OTHER, "PodGroupUpdate")
POD_GROUP_DELETE = ClusterEvent(Resource.POD_GROUP, Action.DELETE, "PodGroupDelete")
# Objects that only hold other groups' policy: a template Workload (v1alpha2 or v1beta1)
# and a CompositePodGroup. The directory re-evaluates the PodGroups they concern and the
# queue hears about those groups; they are no cluster event of their own.
_HOLDERS = (*TEMPLATES_OBJECTS, CompositePodGroup)


class PodListener(Protocol):
    """Something else that follows every pod (the PodGroup status controller)."""

    def on_pod_add(self, pod: Pod) -> None: ...
    def on_pod_update(self, old: Pod, new: Pod) -> None: ...
    def on_pod_delete(self, pod: Pod) -> None: ...


class ClusterEventHandlers:
    def __init__(
        self,
        *,
        cache: Cache,
        queue: SchedulingQueue,
        groups: GangDirectory,
        writer: BackgroundWriter,
        explanations: Explanations,
        binding: BindingCycle,
        waiting: WaitingPods,
        batches: PodBatches,
        owns: Callable[[str], bool],
        pod_listener: PodListener | None = None,
    ) -> None:
        self._cache = cache
        self._queue = queue
        self._groups = groups
        self._writer = writer
        self._explanations = explanations
        self._binding = binding
        self._waiting = waiting
        self._batches = batches
        self._owns = owns
        self._pods = pod_listener
        # Pods and nodes left out for unusable quantities -> the message they were told.
        self._bad_pods: dict[str, str] = {}
        self._bad_nodes: dict[str, str] = {}

    # --- pods --------------------------------------------------------------------

    def _warn_if_in_two_groups(self, pod: Pod) -> None:
        """A pending pod of ours that names groups in two APIs joins one of them
        (``group_ref_of``): it is told which, so a mistake does not go unseen."""
        refs = group_refs_of(pod)
        if len(refs) < 2 or pod.spec.node_name or not self._owns(pod.spec.scheduler_name):
            return
        groups = self._groups

        def named(ref: GroupRef) -> str:
            version = groups.api_version(ref)
            return f"{ref.kind} {version} {ref.display} ({ref.member_field})"

        winner, *losers = refs
        message = f"pod names groups in {len(refs)} APIs: it joins {named(winner)}; " + "; ".join(
            f"{named(ref)} does not count it" for ref in losers
        )
        self._writer.event(
            Event(ObjectRef.of_pod(pod), "Warning", POD_IN_TWO_GROUPS, "Scheduling", message)
        )

    def on_pod_add(self, pod: Pod) -> None:
        self._groups.pod_seen(pod)
        self._warn_if_in_two_groups(pod)
        if self._pods is not None:
            self._pods.on_pod_add(pod)
        if pod.spec.node_name:
            self._explanations.pod_gone(pod.key)
            if pod.is_terminal:
                return
            self._report_assigned(pod, self._cache.add_pod(pod))
            self._queue.delete(pod)
            self._queue.on_event(ASSIGNED_POD_ADD, None, pod)
        elif (
            self._owns(pod.spec.scheduler_name)
            and not pod.is_terminal
            and pod.metadata.deletion_timestamp is None
        ):
            try:
                self._queue.add(pod)
            except QuantityError as err:
                self._refuse_pod(pod, err)
                return
            self._bad_pods.pop(pod.key, None)
            # A new pod may complete a gang waiting at Permit (Coscheduling).
            self._queue.on_event(UNSCHEDULED_POD_ADD, None, pod)

    def on_pod_update(self, old: Pod, new: Pod) -> None:
        if self._pods is not None:
            self._pods.on_pod_update(old, new)
        if old.metadata.uid != new.metadata.uid:
            self._groups.pod_gone(old)
        self._groups.pod_seen(new)
        if group_refs_of(old) != group_refs_of(new):
            self._warn_if_in_two_groups(new)
        if new.spec.node_name:
            if new.is_terminal:
                self._assigned_pod_gone(new)
                return
            if not old.spec.node_name or old.spec.node_name != new.spec.node_name:
                # Bound (by us or anyone): it leaves the queue and occupies its node.
                key = new.key
                self._explanations.pod_gone(key)
                self._binding.pod_superseded(key)
                self._queue.delete(old)
                self._report_assigned(new, self._cache.add_pod(new))
                self._queue.on_event(ASSIGNED_POD_ADD, None, new)
                return
            self._report_assigned(new, self._cache.update_pod(old, new))
            if old.metadata.labels != new.metadata.labels:
                self._queue.on_event(
                    ClusterEvent(
                        Resource.ASSIGNED_POD, Action.UPDATE_POD_LABEL, "AssignedPodUpdate"
                    ),
                    old,
                    new,
                )
            return
        if not self._owns(new.spec.scheduler_name) or new.is_terminal:
            self._queue.delete(old)
            return
        if old.metadata.uid and old.metadata.uid != new.metadata.uid:
            if self._cache.uid_of(old.key) == old.metadata.uid:
                self._binding.pod_superseded(old.key)
            self._queue.delete(old)
            self._queue.add(new)
            return
        if self._cache.uid_of(new.key) == new.metadata.uid:
            # Assumed, its binding in flight: the pod left the queue when it was
            # placed and must not come back to be placed again (upstream skips
            # assumed pods the same way). A label or annotation an operator adds
            # meanwhile changes nothing about where it goes; a deletion means its
            # binding, if refused, is not followed by another attempt.
            if new.metadata.deletion_timestamp is not None:
                self._binding.pod_superseded(new.key)
            return
        try:
            self._queue.update(old, new)
        except QuantityError as err:
            self._queue.delete(old)  # an earlier, usable version must not stay queued
            self._refuse_pod(new, err)
            return
        self._bad_pods.pop(new.key, None)

    def _refuse_pod(self, pod: Pod, err: QuantityError) -> None:
        """Leave out a pending pod whose quantities cannot be used, and say why."""
        message = f"{err}; the pod is not scheduled until it is corrected"
        if self._bad_pods.get(pod.key) == message:
            return
        self._bad_pods[pod.key] = message
        log.error("pod left out: its quantities cannot be used", pod=pod.key, error=str(err))
        condition = PodCondition(
            type="PodScheduled", status="False", reason=REASON_INVALID_QUANTITY, message=message
        )
        self._writer.pod_status(pod, condition, None)
        self._writer.event(
            Event(ObjectRef.of_pod(pod), "Warning", "FailedScheduling", "Scheduling", message)
        )

    def _report_assigned(self, pod: Pod, problem: QuantityError | None) -> None:
        """Tell of an assigned pod the cache could not count as written."""
        if problem is None:
            return
        node = pod.spec.node_name
        if isinstance(problem, AmountTooLarge):
            limit = max_amount_text(problem.resource_name)
            message = f"{problem}; troupe counts it as {limit} on node {node}"
        else:
            message = f"{problem}; troupe does not count the pod on node {node}"
        if self._bad_pods.get(pod.key) == message:
            return
        self._bad_pods[pod.key] = message
        log.error("assigned pod not counted as written", pod=pod.key, node=node, error=str(problem))
        self._writer.event(
            Event(ObjectRef.of_pod(pod), "Warning", REASON_INVALID_QUANTITY, "Scheduling", message)
        )

    def on_pod_delete(self, pod: Pod) -> None:
        self._bad_pods.pop(pod.key, None)
        self._groups.pod_gone(pod)
        self._explanations.pod_gone(pod.key)
        if self._pods is not None:
            self._pods.on_pod_delete(pod)
        waiting = self._waiting.get(pod.key)
        if waiting is not None:
            waiting.reject("", "pod was deleted while waiting on permit")
        if pod.spec.node_name or pod.key in self._cache:
            self._assigned_pod_gone(pod)
        self._queue.delete(pod)

    def _assigned_pod_gone(self, pod: Pod) -> None:
        if self._cache.binding_in_flight(pod.key):
            # Our binding is in flight; the binding cycle settles the cache.
            if self._cache.uid_of(pod.key) == pod.metadata.uid:
                self._binding.pod_superseded(pod.key)
            return
        self._cache.remove_pod(pod)
        self._queue.on_event(ASSIGNED_POD_DELETE, pod, None)
        ref = group_ref_of(pod)
        if ref is not None:
            # Fewer members placed: the gang's quorum check changes.
            self._queue.group_changed(ref)

    # --- nodes -------------------------------------------------------------------

    def _node_usable(self, node: Node) -> bool:
        """Whether ``node``'s capacity and allocatable parse and are not negative; if
        not, the node is reported (once per distinct problem)."""
        name = node.metadata.name
        try:
            node_allocatable(node)
        except QuantityError as err:
            message = f"{err}; the node is left out of scheduling until it is corrected"
            if self._bad_nodes.get(name) != message:
                self._bad_nodes[name] = message
                log.error("node left out: its quantities cannot be used", node=name, error=str(err))
                self._writer.event(
                    Event(
                        ObjectRef("Node", "", name, node.metadata.uid),
                        "Warning",
                        NODE_INVALID_QUANTITY,
                        "Scheduling",
                        message,
                    )
                )
            return False
        if self._bad_nodes.pop(name, None) is not None:
            log.info("node usable again", node=name)
        return True

    def on_node_add(self, node: Node) -> None:
        if not self._node_usable(node):
            return
        self._cache.add_node(node)
        self._queue.on_event(NODE_ADD, None, node)

    def on_node_update(self, old: Node, new: Node) -> None:
        name = new.metadata.name
        if (
            old.status.allocatable != new.status.allocatable
            or old.status.capacity != new.status.capacity
            or name in self._bad_nodes
        ) and not self._node_usable(new):
            self._cache.remove_node(name)
            return
        if name in self._cache.table.index:
            self._cache.update_node(new)
        else:  # usable again (or first usable version): as an add
            self._cache.add_node(new)
            self._queue.on_event(NODE_ADD, None, new)
            return
        event = node_update_event(old, new)
        if event is not None:
            self._queue.on_event(event, old, new)

    def on_node_delete(self, node: Node) -> None:
        self._bad_nodes.pop(node.metadata.name, None)
        self._cache.remove_node(node.metadata.name)
        # Bindings to it not sent yet are called off: their pods (and gangs) are
        # placed again rather than bound to a node that is gone.
        self._binding.node_deleted(node.metadata.name)
        self._queue.on_event(NODE_DELETE, node, None)

    # --- namespaces ----------------------------------------------------------------
    # The Namespace informer has updated the labels plugins read before calling
    # these, and calls ``on_namespace_update`` only when the labels changed.

    def on_namespace_add(self, namespace: Namespace) -> None:
        self._queue.on_event(NAMESPACE_ADD, None, namespace)

    def on_namespace_update(self, old: Namespace, new: Namespace) -> None:
        # A batch of pods evaluated against the old labels ends here.
        self._batches.interrupt()
        self._queue.on_event(NAMESPACE_LABEL_UPDATE, old, new)

    def on_namespace_delete(self, namespace: Namespace) -> None:
        self._queue.on_event(NAMESPACE_DELETE, namespace, None)

    # --- objects plugins watch (troupe.kube.object_informers) -------------------------

    def on_object_change(self, event: ClusterEvent, old: object | None, new: object | None) -> None:
        """A watched object changed; the plugins that watch it know already. A batch
        of pods placed before the change ends here (a plugin's verdict may depend on
        the object), and the queue asks the plugins' queueing hints."""
        self._batches.interrupt()
        self._queue.on_event(event, old, new)

    # --- pod groups (any of the three gang APIs) ---------------------------------------

    def on_group_add(self, api: GangApi, obj: GroupObject) -> None:
        self._groups.upsert(api, obj)
        if not isinstance(obj, _HOLDERS):
            self._queue.on_event(POD_GROUP_ADD, None, obj)

    def on_group_update(self, api: GangApi, old: GroupObject, new: GroupObject) -> None:
        self._groups.upsert(api, new)
        if not isinstance(new, _HOLDERS):
            self._queue.on_event(POD_GROUP_UPDATE, old, new)

    def on_group_delete(self, api: GangApi, obj: GroupObject) -> None:
        meta = obj.metadata
        self._explanations.object_gone(meta.namespace, meta.name)
        if isinstance(obj, TEMPLATES_OBJECTS):
            self._groups.remove_templates(meta.namespace, meta.name)
            return
        if isinstance(obj, CompositePodGroup):
            self._groups.remove_composite(meta.namespace, meta.name)
            return
        self._groups.remove(api, meta.namespace, meta.name)
        self._queue.on_event(POD_GROUP_DELETE, obj, None)
