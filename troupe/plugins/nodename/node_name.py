"""NodeName: reject every node but the one in ``spec.nodeName``.

PreFilter returns SKIP for the usual pod without ``spec.nodeName``, so the filter
only runs for the rare pod that asks for a node by name; the mask is one slot.
A node added under the requested name requeues the pod (upstream
``isSchedulableAfterNodeAdd``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from troupe.api.cycle import CycleState
from troupe.api.events import NODE_ADD, ClusterEventWithHint, QueueingHint
from troupe.api.framework import FilterResult, Handle, PluginTraits, PreFilterResult
from troupe.api.nodetable import NodeTable
from troupe.api.objects import Node, Pod
from troupe.api.podinfo import PodInfo
from troupe.api.status import SKIP, SUCCESS, Code, Status

ERR_REASON = "node(s) didn't match the requested node name"


class NodeName:
    name = "NodeName"
    # Filter and Score of a node depend only on that node and the pod, and not on
    # the pods placed on the node.
    traits = PluginTraits(node_local=True, node_only=True)

    def __init__(self, args: None, handle: Handle) -> None:
        del args, handle

    def pre_filter(
        self, state: CycleState, pod: PodInfo, table: NodeTable
    ) -> tuple[PreFilterResult | None, Status]:
        if not pod.pod.spec.node_name:
            return None, SKIP
        return None, SUCCESS

    def filter(self, state: CycleState, pod: PodInfo, table: NodeTable) -> FilterResult:
        feasible = np.zeros(table.capacity, dtype=bool)
        wanted = pod.pod.spec.node_name
        if wanted:
            slot = table.slot(wanted)
            if slot is not None:
                feasible[slot] = True
        else:
            feasible[:] = True
        return FilterResult.masked(feasible, ERR_REASON, Code.UNSCHEDULABLE_AND_UNRESOLVABLE)

    def events_to_register(self) -> Sequence[ClusterEventWithHint]:
        return (ClusterEventWithHint(NODE_ADD, node_is_the_requested_one),)


def node_is_the_requested_one(pod: Pod, old: object | None, new: object | None) -> QueueingHint:
    if not isinstance(new, Node):
        return QueueingHint.QUEUE
    wanted = pod.spec.node_name
    if not wanted or wanted == new.metadata.name:
        return QueueingHint.QUEUE
    return QueueingHint.SKIP
