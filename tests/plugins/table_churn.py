"""Random churn of a NodeTable for the incremental-count property tests: pods added
and removed, nodes dropped and added, with the placed pods remembered."""

from __future__ import annotations

from collections.abc import Callable

from troupe.api.nodetable import NodeTable
from troupe.api.objects import Node
from troupe.api.podinfo import PodInfo


class TableChurn:
    def __init__(self, table: NodeTable, new_node: Callable[[str, str], Node]) -> None:
        self.table = table
        self._new_node = new_node
        self.placed: list[tuple[PodInfo, str]] = []

    def step(self, step: int, op: str, n: int, pod: PodInfo | None = None) -> None:
        """One operation: ``add`` (``pod`` on the ``n``-th node), ``remove`` (the
        ``n``-th placed pod), ``drop-node`` (the ``n``-th node, with its pods) or
        ``new-node`` (in zone ``a`` or ``b``); an operation with nothing to act on
        does nothing."""
        table = self.table
        names = list(table.index)
        if op == "add" and names and pod is not None:
            target = names[n % len(names)]
            table.add_pod(pod, target)
            self.placed.append((pod, target))
        elif op == "remove" and self.placed:
            info, target = self.placed.pop(n % len(self.placed))
            table.remove_pod(info, target)
        elif op == "drop-node" and names:
            gone = names[n % len(names)]
            table.remove_node(gone)
            self.placed = [(i, t) for i, t in self.placed if t != gone]
        elif op == "new-node":
            table.add_node(self._new_node(f"m{step}", "ab"[n % 2]))
