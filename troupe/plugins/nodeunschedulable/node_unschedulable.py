"""NodeUnschedulable: reject nodes with ``spec.unschedulable`` unless the pod tolerates
the ``node.kubernetes.io/unschedulable:NoSchedule`` taint (as DaemonSet pods do).

The filter is the table's ``unschedulable`` column negated. PreFilter returns SKIP
when the pod tolerates cordons or no node is cordoned, so the usual cycle does not
run the filter at all (upstream has no PreFilter here; the result is the same).
"""

from __future__ import annotations

from collections.abc import Sequence

from troupe.api.cycle import CycleState
from troupe.api.events import (
    Action,
    ClusterEvent,
    ClusterEventWithHint,
    QueueingHint,
    Resource,
)
from troupe.api.framework import FilterResult, Handle, PluginTraits, PreFilterResult
from troupe.api.nodetable import NodeTable
from troupe.api.objects import Node, Pod, Taint, Toleration
from troupe.api.podinfo import PodInfo
from troupe.api.selectors import tolerates
from troupe.api.status import SKIP, SUCCESS, Code, Status

ERR_REASON = "node(s) were unschedulable"
UNSCHEDULABLE_TAINT = Taint(key="node.kubernetes.io/unschedulable", effect="NoSchedule")

NODE_ADD_OR_CORDON_CHANGE = ClusterEvent(
    Resource.NODE, Action.ADD | Action.UPDATE_NODE_CONDITION, "NodeAddOrConditionUpdate"
)
POD_TOLERATIONS_UPDATE = ClusterEvent(Resource.POD, Action.UPDATE_POD_TOLERATIONS)


def tolerates_cordon(tolerations: Sequence[Toleration]) -> bool:
    return any(tolerates(t, UNSCHEDULABLE_TAINT) for t in tolerations)


class NodeUnschedulable:
    name = "NodeUnschedulable"
    # Filter and Score of a node depend only on that node and the pod, and not on
    # the pods placed on the node.
    traits = PluginTraits(node_local=True, node_only=True)

    def __init__(self, args: None, handle: Handle) -> None:
        del args, handle

    def pre_filter(
        self, state: CycleState, pod: PodInfo, table: NodeTable
    ) -> tuple[PreFilterResult | None, Status]:
        if not table.unschedulable.any() or self._tolerates(pod):
            return None, SKIP
        return None, SUCCESS

    def filter(self, state: CycleState, pod: PodInfo, table: NodeTable) -> FilterResult:
        if self._tolerates(pod):
            return FilterResult.all(table)
        return FilterResult.masked(
            ~table.unschedulable, ERR_REASON, Code.UNSCHEDULABLE_AND_UNRESOLVABLE
        )

    def _tolerates(self, pod: PodInfo) -> bool:
        cached = pod.extra.get(self.name)
        if not isinstance(cached, bool):
            cached = tolerates_cordon(pod.pod.spec.tolerations)
            pod.extra[self.name] = cached
        return cached

    def events_to_register(self) -> Sequence[ClusterEventWithHint]:
        return (
            ClusterEventWithHint(NODE_ADD_OR_CORDON_CHANGE, node_became_schedulable),
            ClusterEventWithHint(POD_TOLERATIONS_UPDATE, pod_now_tolerates_cordon),
        )


def node_became_schedulable(pod: Pod, old: object | None, new: object | None) -> QueueingHint:
    """QUEUE for a new schedulable node or an uncordon (upstream
    ``isSchedulableAfterNodeChange``)."""
    if not isinstance(new, Node):
        return QueueingHint.QUEUE
    was_schedulable = isinstance(old, Node) and not old.spec.unschedulable
    if not was_schedulable and not new.spec.unschedulable:
        return QueueingHint.QUEUE
    return QueueingHint.SKIP


def pod_now_tolerates_cordon(pod: Pod, old: object | None, new: object | None) -> QueueingHint:
    """QUEUE when the rejected pod itself gained the cordon toleration."""
    if not isinstance(new, Pod) or new.metadata.uid != pod.metadata.uid:
        return QueueingHint.SKIP
    before = isinstance(old, Pod) and tolerates_cordon(old.spec.tolerations)
    if not before and tolerates_cordon(new.spec.tolerations):
        return QueueingHint.QUEUE
    return QueueingHint.SKIP
