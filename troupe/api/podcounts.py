"""Per-node counts of pods matching a selector, kept current from the NodeTable change log.

PodTopologySpread and InterPodAffinity (``troupe.plugins``) ask the same question in
every cycle: "how many pods matching S sit on each node?" Rescanning every pod for that
would cost milliseconds per pod at 10,000 pods; instead each distinct question (a
``PodMatcher``) keeps an integer column over the NodeTable slots that is brought up to
date from ``NodeTable.changes_since`` (usually one or two pod changes since the previous
cycle) and rebuilt from ``NodeTable.pods`` only when the log cannot answer (trimmed, a
node removed, another table).

- ``PodClause`` / ``PodMatcher``: a hashable "which pods count" (namespaces, label
  selector, all clauses ANDed, terminating pods optionally left out), asked of a
  pod's ``PodRecord``, the part of a pod the change log keeps.
- ``SelectorCounts`` / ``CountsCache``: the per-slot column of one matcher, and a
  bounded LRU of them that a plugin instance owns.
- ``CarriedCounts``: the reverse question, "how many pods on each node *carry* key K"
  (e.g. a required anti-affinity term), over the pods in ``NodeTable.affinity_pods``.
- ``domain_sums`` / ``per_slot``: fold a per-slot column into topology domains (the
  values of one node label) with ``np.bincount`` and spread the totals back to slots.

Only the scheduling cycle calls these, synchronously, so nothing here is thread-safe.
"""

from __future__ import annotations

import weakref
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

import numpy as np
from numpy.typing import NDArray

from troupe.api.nodetable import BoolArray, IntArray, NodeTable, PodChange
from troupe.api.objects import LabelSelector
from troupe.api.podinfo import PodRecord
from troupe.api.selectors import requirement_matches, validate_label_selector

SelectorKey = tuple[tuple[tuple[str, str], ...], tuple[tuple[str, str, tuple[str, ...]], ...]]
"""Canonical, hashable form of a LabelSelector (matchLabels, matchExpressions)."""

K = TypeVar("K")
LabelColumn = NDArray[np.int32]


def selector_key(selector: LabelSelector | None) -> SelectorKey | None:
    """Two selectors that select the same pods by construction get the same key."""
    if selector is None:
        return None
    labels = tuple(sorted(selector.match_labels.items()))
    exprs = tuple(
        sorted((r.key, r.operator, tuple(sorted(r.values))) for r in selector.match_expressions)
    )
    return labels, exprs


@dataclass(frozen=True, slots=True)
class PodClause:
    """Pods in ``namespaces`` (None: every namespace) whose labels satisfy ``selector``
    (None: no pod, an empty selector: every pod; upstream ``LabelSelectorAsSelector``).

    Equality and hashing use the canonical ``key``. ``valid`` is false for a selector
    upstream would fail to build, which then matches nothing."""

    namespaces: frozenset[str] | None
    key: SelectorKey | None
    valid: bool = field(compare=False)
    selector: LabelSelector | None = field(compare=False, hash=False, repr=False)

    @classmethod
    def of(cls, namespaces: frozenset[str] | None, selector: LabelSelector | None) -> PodClause:
        valid = selector is not None and not validate_label_selector(selector, "")
        return cls(namespaces, selector_key(selector), valid, selector)

    def matches(self, namespace: str, labels: Mapping[str, str]) -> bool:
        """``label_selector_matches`` on the pre-validated canonical form: this runs for
        every pod when a count is rebuilt, so validation is done once, in ``of``."""
        if self.namespaces is not None and namespace not in self.namespaces:
            return False
        if not self.valid or self.key is None:
            return False
        match_labels, expressions = self.key
        for key, value in match_labels:
            if labels.get(key) != value:
                return False
        for key, operator, values in expressions:
            if not requirement_matches(operator, values, labels.get(key)):
                return False
        return True


@dataclass(frozen=True, slots=True)
class PodMatcher:
    """A pod counts when it satisfies every clause, and is not terminating when
    ``skip_terminating`` (PodTopologySpread leaves those out, kubernetes#87621)."""

    clauses: tuple[PodClause, ...]
    skip_terminating: bool = False

    def matches(self, pod: PodRecord) -> bool:
        if self.skip_terminating and pod.terminating:
            return False
        namespace, labels = pod.namespace, pod.labels
        # An explicit loop: this runs per pod per recount, all() costs a generator.
        for clause in self.clauses:  # noqa: SIM110
            if not clause.matches(namespace, labels):
                return False
        return True


class _RemovalWatch:
    """Counts node removals of one table, seen through its node names.

    ``NodeTable.changes_since`` answers None after a node removal only to readers that
    were behind the log when it happened; a reader that was fully caught up gets an
    empty list and would keep the removed node's pods (the log base does not move
    past the reader's position). Until the table says so itself, readers also compare
    node names, which costs one C-level list comparison per ``node_generation``."""

    __slots__ = ("_generation", "_names", "epoch")

    def __init__(self, table: NodeTable) -> None:
        self._generation = table.node_generation
        self._names = list(table.names)
        self.epoch = 0

    def current(self, table: NodeTable) -> int:
        if table.node_generation != self._generation:
            self._generation = table.node_generation
            names = table.names
            if names != self._names:
                # A slot that held a node and now holds another name (or none) lost
                # its node; a free slot getting a node is a plain add.
                if any(old and old != new for old, new in zip(self._names, names, strict=False)):
                    self.epoch += 1
                self._names = list(names)
        return self.epoch


_WATCHES: weakref.WeakKeyDictionary[NodeTable, _RemovalWatch] = weakref.WeakKeyDictionary()


def _removal_epoch(table: NodeTable) -> int:
    watch = _WATCHES.get(table)
    if watch is None:
        watch = _WATCHES[table] = _RemovalWatch(table)
    return watch.current(table)


class _TableCursor:
    """Where a reader stands in one table's change log."""

    __slots__ = ("_epoch", "_table", "seq")

    def __init__(self) -> None:
        self._table: weakref.ref[NodeTable] | None = None
        self._epoch = -1
        self.seq = -1

    def pending(self, table: NodeTable) -> list[PodChange] | None:
        """Changes since the last call, or None when the reader must rebuild."""
        if self._table is None or self._table() is not table:
            return None
        if _removal_epoch(table) != self._epoch:
            return None
        return table.changes_since(self.seq)

    def mark(self, table: NodeTable) -> None:
        if self._table is None or self._table() is not table:
            self._table = weakref.ref(table)
        self._epoch = _removal_epoch(table)
        self.seq = table.change_seq


def _fit(column: IntArray, capacity: int) -> IntArray:
    # The table grows by appending slots; existing slots keep their index.
    if len(column) >= capacity:
        return column
    return np.concatenate([column, np.zeros(capacity - len(column), dtype=column.dtype)])


class SelectorCounts:
    """Per-slot count of the pods matching ``matcher``, for one NodeTable at a time."""

    __slots__ = ("_counts", "_cursor", "matcher")

    def __init__(self, matcher: PodMatcher) -> None:
        self.matcher = matcher
        self._counts: IntArray = np.zeros(0, dtype=np.int64)
        self._cursor = _TableCursor()

    def counts(self, table: NodeTable) -> IntArray:
        """Capacity-long counts; the caller must not modify the array."""
        changes = self._cursor.pending(table)
        if changes is None:
            self._rebuild(table)
        else:
            counts = _fit(self._counts, table.capacity)
            matches = self.matcher.matches
            for sign, slot, record in changes:
                if matches(record):
                    counts[slot] += sign
            self._counts = counts
        self._cursor.mark(table)
        return self._counts

    def _rebuild(self, table: NodeTable) -> None:
        counts = np.zeros(table.capacity, dtype=np.int64)
        matches = self.matcher.matches
        for slot, pods in enumerate(table.pods):
            if pods:
                counts[slot] = sum(1 for info in pods.values() if matches(info.record))
        self._counts = counts


class CountsCache:
    """The ``SelectorCounts`` a plugin instance keeps, least recently used evicted."""

    __slots__ = ("_entries", "maxsize")

    def __init__(self, maxsize: int = 256) -> None:
        self.maxsize = maxsize
        self._entries: OrderedDict[PodMatcher, SelectorCounts] = OrderedDict()

    def counts(self, table: NodeTable, matcher: PodMatcher) -> IntArray:
        entry = self._entries.get(matcher)
        if entry is None:
            entry = SelectorCounts(matcher)
            self._entries[matcher] = entry
            if len(self._entries) > self.maxsize:
                self._entries.popitem(last=False)
        else:
            self._entries.move_to_end(matcher)
        return entry.counts(table)

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, matcher: object) -> bool:
        return matcher in self._entries


class CarriedCounts(Generic[K]):
    """For each key K that ``extract(record)`` yields for some placed pod's
    ``PodRecord``, how many pods on each slot carry it. Only pods with an affinity
    term (``NodeTable.affinity_pods``, records with ``affinity``) are looked at, so
    ``extract`` must yield nothing for other pods.

    A key disappears once no pod carries it, so the mapping stays as small as the set
    of distinct terms in the cluster (a 1,000-pod gang with one anti-affinity term
    contributes one key)."""

    __slots__ = ("_capacity", "_counts", "_cursor", "_extract", "_totals")

    def __init__(self, extract: Callable[[PodRecord], Sequence[K]]) -> None:
        self._extract = extract
        self._capacity = 0
        self._counts: dict[K, IntArray] = {}
        self._totals: dict[K, int] = {}
        self._cursor = _TableCursor()

    def refresh(self, table: NodeTable) -> Mapping[K, IntArray]:
        """Key -> capacity-long counts; the caller must not modify the arrays."""
        changes = self._cursor.pending(table)
        if changes is None:
            self._rebuild(table)
        else:
            if self._capacity < table.capacity:
                self._counts = {k: _fit(v, table.capacity) for k, v in self._counts.items()}
            for sign, slot, record in changes:
                if record.affinity is not None:
                    for key in self._extract(record):
                        self._add(key, slot, sign, table.capacity)
        self._capacity = table.capacity
        self._cursor.mark(table)
        return self._counts

    def _add(self, key: K, slot: int, sign: int, capacity: int) -> None:
        column = self._counts.get(key)
        if column is None:
            column = np.zeros(capacity, dtype=np.int64)
            self._counts[key] = column
        column[slot] += sign
        total = self._totals.get(key, 0) + sign
        if total <= 0:
            del self._counts[key]
            self._totals.pop(key, None)
        else:
            self._totals[key] = total

    def _rebuild(self, table: NodeTable) -> None:
        self._counts = {}
        self._totals = {}
        for pod_key, slot in table.affinity_pods.items():
            info = table.pods[slot].get(pod_key)
            if info is not None:
                for key in self._extract(info.record):
                    self._add(key, slot, 1, table.capacity)


# --- topology domains --------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DomainSums:
    """Totals of a per-slot column per value of one node label.

    ``column`` is the table's label-id column (-1: label absent; shared with the
    table, do not modify), ``has_label`` its ``>= 0`` mask, ``sums[v]`` the total over
    the selected slots whose label id is v.
    """

    column: LabelColumn
    has_label: BoolArray
    sums: IntArray

    def per_slot(self) -> IntArray:
        """Each labelled slot gets its domain's total; unlabelled slots 0."""
        # Index -1 reads the last domain; the has_label product zeroes it.
        return self.sums[self.column] * self.has_label if len(self.sums) else _zeros_like(self)


def _zeros_like(sums: DomainSums) -> IntArray:
    return np.zeros(len(sums.column), dtype=np.int64)


def domain_sums(
    table: NodeTable,
    topology_key: str,
    per_slot_values: IntArray,
    among: BoolArray | None = None,
) -> DomainSums | None:
    """Fold ``per_slot_values`` into the domains of ``topology_key``, counting only
    slots in ``among`` (default: every labelled slot). None: no node has the label."""
    column = table.labels.get(topology_key)
    if column is None:
        return None
    has_label = column >= 0
    selected = has_label if among is None else has_label & among
    sums = np.bincount(
        column[selected],
        weights=per_slot_values[: len(column)][selected],
        minlength=len(table.label_values[topology_key]),
    )
    return DomainSums(column, has_label, sums.astype(np.int64))
