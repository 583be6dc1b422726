"""Node taints and labels interned as reference-counted rows and ids of NodeTable columns.

``troupe.api.nodetable.NodeTable`` keeps its taint bitset and label columns here and
is the only caller; plugins read them through the table (``taints``, ``taint_list``,
``live_taint_ids``, ``labels``, ``label_values``).

Taints (``TaintRows``): each distinct (key, value, effect) that at least one node
carries has an id and a row of a boolean matrix ``matrix[id, slot]``. An id counts
the nodes carrying its taint; when none does any more, its row is already all False
(each node clears its own bits first), its key is forgotten and the id is reused for
the next distinct taint. A taint whose value changes all the time (cluster-autoscaler
writes ``DeletionCandidateOfClusterAutoscaler=<timestamp>``) therefore costs as many
rows as nodes carry at once, not as many as were ever seen. The matrix grows its rows
geometrically, so a new distinct taint writes one row, O(nodes), instead of copying
the matrix. Rows past the ids handed out, and rows of free ids, are all False.

Labels (``LabelColumns``): one int32 column per label key holds each slot's value id
(``-1``: the node lacks the key), ``values[key][id]`` the value. Value ids are counted
and reused the same way, and a key no node carries any more loses its column. A free
id keeps its last value string in ``values`` (no slot refers to it), so readers that
map ids to values never meet a hole.

Upstream has nothing to follow here: kube-scheduler keeps each node's taints and
labels on its ``NodeInfo`` and reads them node by node.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from numpy.typing import NDArray

from troupe.api.objects import Taint

ABSENT = -1
_MIN_ROWS = 8

TaintKey = tuple[str, str, str]


def _key(taint: Taint) -> TaintKey:
    return (taint.key, taint.value, taint.effect)


class TaintRows:
    """Distinct taints as reference-counted rows of a ``(rows, slots)`` bool matrix."""

    def __init__(self, slots: int) -> None:
        self.matrix: NDArray[np.bool_] = np.zeros((0, slots), dtype=bool)
        # By id; a free id keeps the last taint it held (no node has it).
        self.taints: list[Taint] = []
        self._ids: dict[TaintKey, int] = {}
        self._refs: list[int] = []
        self._free: list[int] = []

    def live(self) -> list[int]:
        """Ids some node carries, in id order."""
        return [tid for tid, refs in enumerate(self._refs) if refs]

    def refs(self, tid: int) -> int:
        return self._refs[tid]

    def id_of(self, taint: Taint) -> int | None:
        return self._ids.get(_key(taint))

    def set(self, slot: int, old: Sequence[int], new: Sequence[Taint]) -> tuple[int, ...]:
        """Replace the taints of ``slot`` (ids ``old``) by ``new``; returns the new ids.

        The new taints are counted before the old ones are released, so a taint the
        node keeps is never freed and re-added on the way."""
        ids = tuple(self._acquire(t) for t in new)
        matrix = self.matrix  # read after acquiring: it may have grown
        for tid in old:
            matrix[tid, slot] = False
        for tid in ids:
            matrix[tid, slot] = True
        for tid in old:
            self._release(tid)
        return ids

    def grow_slots(self, slots: int) -> None:
        rows, old = self.matrix.shape
        grown = np.zeros((rows, slots), dtype=bool)
        grown[:, :old] = self.matrix
        self.matrix = grown

    def _acquire(self, taint: Taint) -> int:
        key = _key(taint)
        tid = self._ids.get(key)
        if tid is None:
            if self._free:
                tid = self._free.pop()
                self.taints[tid] = taint
            else:
                tid = len(self.taints)
                self._ensure_rows(tid + 1)
                self.taints.append(taint)
                self._refs.append(0)
            self._ids[key] = tid
        self._refs[tid] += 1
        return tid

    def _release(self, tid: int) -> None:
        self._refs[tid] -= 1
        if self._refs[tid]:
            return
        del self._ids[_key(self.taints[tid])]
        # Every node cleared its own bit; clearing the row again keeps a wrong count
        # from ever showing a freed taint on a node, at O(nodes) per freed taint.
        self.matrix[tid] = False
        self._free.append(tid)

    def _ensure_rows(self, rows: int) -> None:
        have, slots = self.matrix.shape
        if rows <= have:
            return
        grown = np.zeros((max(_MIN_ROWS, 2 * have, rows), slots), dtype=bool)
        grown[:have] = self.matrix
        self.matrix = grown


class LabelColumns:
    """One value-id column per label key, ids and columns reference-counted."""

    def __init__(self, slots: int) -> None:
        self.columns: dict[str, NDArray[np.int32]] = {}
        # By key, by id; a free id keeps the last value it held (no slot has it).
        self.values: dict[str, list[str]] = {}
        self._ids: dict[str, dict[str, int]] = {}
        self._refs: dict[str, list[int]] = {}
        self._key_refs: dict[str, int] = {}
        self._free: dict[str, list[int]] = {}
        # What each slot holds, (key, id) pairs: what ``set`` releases next time.
        self._held: list[tuple[tuple[str, int], ...]] = [()] * slots

    def id_of(self, key: str, value: str) -> int | None:
        ids = self._ids.get(key)
        return None if ids is None else ids.get(value)

    def refs(self, key: str, lid: int) -> int:
        return self._refs[key][lid]

    def set(self, slot: int, labels: Mapping[str, str]) -> None:
        """Make ``labels`` the labels of ``slot`` (empty: the slot is freed).

        A label the node keeps is left alone; a new value is counted before the old
        one is released, so a key the node keeps never loses its column on the way."""
        previous = dict(self._held[slot])
        values, columns = self.values, self.columns
        held = []
        for key, value in labels.items():
            lid = previous.get(key)
            if lid is not None and values[key][lid] == value:
                del previous[key]  # unchanged
            else:
                lid = self._acquire(key, value)
                columns[key][slot] = lid
            held.append((key, lid))
        for key, lid in previous.items():  # changed or gone
            if key not in labels:
                columns[key][slot] = ABSENT
            self._release(key, lid)
        self._held[slot] = tuple(held)

    def grow_slots(self, slots: int) -> None:
        old = len(self._held)
        for key, column in self.columns.items():
            grown = np.full(slots, ABSENT, dtype=np.int32)
            grown[:old] = column
            self.columns[key] = grown
        self._held.extend([()] * (slots - old))

    def _acquire(self, key: str, value: str) -> int:
        ids = self._ids.get(key)
        if ids is None:
            self.columns[key] = np.full(len(self._held), ABSENT, dtype=np.int32)
            ids = self._ids[key] = {}
            self.values[key] = []
            self._refs[key] = []
            self._key_refs[key] = 0
            self._free[key] = []
        lid = ids.get(value)
        if lid is None:
            free = self._free[key]
            if free:
                lid = free.pop()
                self.values[key][lid] = value
            else:
                lid = len(self.values[key])
                self.values[key].append(value)
                self._refs[key].append(0)
            ids[value] = lid
        self._refs[key][lid] += 1
        self._key_refs[key] += 1
        return lid

    def _release(self, key: str, lid: int) -> None:
        self._key_refs[key] -= 1
        if not self._key_refs[key]:
            # No node carries the key: its column, vocabulary and counts go.
            del self.columns[key], self.values[key], self._ids[key]
            del self._refs[key], self._free[key], self._key_refs[key]
            return
        refs = self._refs[key]
        refs[lid] -= 1
        if not refs[lid]:
            del self._ids[key][self.values[key][lid]]
            self._free[key].append(lid)
