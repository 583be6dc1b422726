"""NodePorts: reject nodes where a host port the pod wants is already taken.

Conflict rule (upstream ``HostPortInfo.CheckConflict``): ports are keyed by protocol
and number; a wanted port on ``0.0.0.0`` conflicts with that port on any address of
the node, and a wanted port on a specific address conflicts with the same address or
with ``0.0.0.0``.

The plugin keeps one count column per used ``(protocol, address, port)`` over the
table's slots, plus one per ``(protocol, port)`` for the wildcard case, and advances
them from the table's pod-change log (``NodeTable.changes_since``); it rebuilds them
from ``NodeTable.ports`` only when the log was trimmed or a node was removed. A pod
without host ports (almost every pod) returns SKIP at PreFilter and costs nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from troupe.api.cycle import CycleState, StateKey
from troupe.api.events import ASSIGNED_POD_DELETE, NODE_ADD, ClusterEventWithHint, QueueingHint
from troupe.api.framework import FilterResult, Handle, PluginTraits, PreFilterResult
from troupe.api.nodetable import BoolArray, IntArray, NodeTable
from troupe.api.objects import Pod
from troupe.api.podinfo import HostPort, PodInfo
from troupe.api.status import SKIP, SUCCESS, Code, Status

ERR_REASON = "node(s) didn't have free ports for the requested pod ports"
ANY_ADDRESS = "0.0.0.0"

FEASIBLE_KEY = StateKey[BoolArray]("PreFilterNodePorts")


def conflicts(wanted: HostPort, used: Iterable[HostPort]) -> bool:
    protocol, address, port = wanted
    for used_protocol, used_address, used_port in used:
        if used_protocol != protocol or used_port != port:
            continue
        if address == ANY_ADDRESS or used_address in (address, ANY_ADDRESS):
            return True
    return False


def host_ports(pod: Pod) -> tuple[HostPort, ...]:
    """The pod's host ports, normalized as ``PodInfo.host_ports`` is."""
    return tuple(
        (p.protocol or "TCP", p.host_ip or ANY_ADDRESS, p.host_port)
        for c in pod.spec.containers
        for p in c.ports
        if p.host_port > 0
    )


@dataclass(slots=True)
class _UsedPorts:
    """Per-slot counts of used host ports, kept in step with one NodeTable."""

    table: NodeTable | None = None
    capacity: int = 0
    seq: int = 0
    exact: dict[HostPort, IntArray] = field(default_factory=dict)
    by_port: dict[tuple[str, int], IntArray] = field(default_factory=dict)

    def sync(self, table: NodeTable) -> None:
        changes = table.changes_since(self.seq) if self.table is table else None
        if changes is None or self.capacity != table.capacity:
            self._rebuild(table)
            return
        for sign, slot, record in changes:
            for hp in record.host_ports:
                self._count(hp, slot, sign)
        self.seq = table.change_seq

    def _rebuild(self, table: NodeTable) -> None:
        self.table = table
        self.capacity = table.capacity
        self.seq = table.change_seq
        self.exact.clear()
        self.by_port.clear()
        for slot, used in enumerate(table.ports):
            for hp, n in used.items():
                self._count(hp, slot, n)

    def _count(self, hp: HostPort, slot: int, n: int) -> None:
        exact = self.exact.get(hp)
        if exact is None:
            exact = self.exact[hp] = np.zeros(self.capacity, dtype=np.int64)
        exact[slot] += n
        key = (hp[0], hp[2])
        by_port = self.by_port.get(key)
        if by_port is None:
            by_port = self.by_port[key] = np.zeros(self.capacity, dtype=np.int64)
        by_port[slot] += n

    def taken(self, wanted: HostPort) -> BoolArray | None:
        """Slots where ``wanted`` conflicts; None when it conflicts nowhere."""
        protocol, address, port = wanted
        if address == ANY_ADDRESS:
            used = self.by_port.get((protocol, port))
            return None if used is None else used > 0
        taken = None
        for hp in ((protocol, address, port), (protocol, ANY_ADDRESS, port)):
            used = self.exact.get(hp)
            if used is not None:
                taken = used > 0 if taken is None else taken | (used > 0)
        return taken


class NodePorts:
    name = "NodePorts"
    # Filter and Score of a node depend only on that node and the pod.
    traits = PluginTraits(node_local=True, capacity_modelled=True)

    def __init__(self, args: None, handle: Handle) -> None:
        del args, handle
        self._used = _UsedPorts()

    def pre_filter(
        self, state: CycleState, pod: PodInfo, table: NodeTable
    ) -> tuple[PreFilterResult | None, Status]:
        if not pod.host_ports:
            return None, SKIP
        state.write(FEASIBLE_KEY, self._feasible(pod, table))
        return None, SUCCESS

    def filter(self, state: CycleState, pod: PodInfo, table: NodeTable) -> FilterResult:
        feasible = state.get(FEASIBLE_KEY)
        if feasible is None:  # PreFilter disabled in this profile
            feasible = self._feasible(pod, table)
        return FilterResult.masked(feasible, ERR_REASON, Code.UNSCHEDULABLE)

    def _feasible(self, pod: PodInfo, table: NodeTable) -> BoolArray:
        self._used.sync(table)
        feasible = np.ones(table.capacity, dtype=bool)
        for wanted in pod.host_ports:
            taken = self._used.taken(wanted)
            if taken is not None:
                feasible &= ~taken
        return feasible

    def events_to_register(self) -> Sequence[ClusterEventWithHint]:
        return (
            ClusterEventWithHint(ASSIGNED_POD_DELETE, freed_a_wanted_port),
            # A new node always has free ports: no hint needed (upstream the same).
            ClusterEventWithHint(NODE_ADD),
        )


def freed_a_wanted_port(pod: Pod, old: object | None, new: object | None) -> QueueingHint:
    """QUEUE when the deleted pod held a port this pod wants (upstream
    ``isSchedulableAfterPodDeleted``)."""
    if not isinstance(old, Pod):
        return QueueingHint.QUEUE
    if not old.spec.node_name and not old.status.nominated_node_name:
        return QueueingHint.SKIP
    freed = host_ports(old)
    if any(conflicts(wanted, freed) for wanted in host_ports(pod)):
        return QueueingHint.QUEUE
    return QueueingHint.SKIP
