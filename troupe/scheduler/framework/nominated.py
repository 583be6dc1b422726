"""Nominated pods in Filter: room promised by preemption stays promised.

A pod that preempted is nominated to a node (``troupe.queue.nominator``) and waits
for its victims to leave. Until it binds, every other pod of lower or equal
priority must see that room as taken, or it would take it first (upstream
``RunFilterPluginsWithNominatedPods`` / ``addNominatedPods``). Filter is a batch
over the NodeTable, so the adjustment is done afterwards and only where it
matters: ``NominatedPods.adjust`` re-checks the feasible nodes that have a
nomination of equal or higher priority, with those pods added to the node for the
check and taken off again. No nominations, no cost.

Upstream runs the filters twice on such a node, with the nominated pods and
without; the batch pass already was the run without them.

``check_node`` serves preemption's dry runs (``Handle.run_filter_plugins_with_nominated_pods``):
PreFilter on a fresh CycleState (the victims are off the table, so state derived
from placed pods is recomputed rather than patched), then Filter on one node with
the nominated pods.

PreFilter plugins that keep per-pod state they do not derive from the NodeTable
implement ``PreFilterExtensions`` (upstream ``AddPod`` / ``RemovePod``): each
nominated pod added to a node for the check is told to them (AddPod, on a copy of
the cycle state), and after a PreFilter run inside preemption's simulation every
pod the simulation took off the table is (RemovePod, ``after_pre_filter``).

A nominated pod already placed (assumed or bound) no longer needs its nomination;
it is dropped here when met.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Sequence
from typing import Protocol

import numpy as np

from troupe.api.cycle import CycleState
from troupe.api.framework import (
    FilterPlugin,
    FilterResult,
    FilterSlot,
    PreFilterExtensions,
    PreFilterPlugin,
    Rejection,
)
from troupe.api.gangs import group_ref_of
from troupe.api.nodetable import BoolArray, NodeTable
from troupe.api.podinfo import PodInfo
from troupe.api.status import SUCCESS, Code, Status
from troupe.scheduler.framework.instrument import plugin_error, plugin_failure
from troupe.scheduler.framework.messages import pre_filter_excluded_reason

Rejected = tuple[str, FilterResult, BoolArray]
Filters = Sequence[tuple[str, FilterPlugin]]
PreFilters = Sequence[tuple[str, PreFilterPlugin]]
Extensions = Sequence[tuple[str, PreFilterExtensions]]


def add_pods(
    extensions: Extensions, state: CycleState, pod: PodInfo, added: Sequence[PodInfo], node: str
) -> Status:
    """Tell every PreFilterExtensions plugin (not skipped for ``pod``) that ``added``
    are on ``node`` (upstream ``RunPreFilterExtensionAddPod``)."""
    for name, plugin in extensions:
        if name in state.skip_filter_plugins:
            continue
        for other in added:
            try:
                status = plugin.add_pod(state, pod, other, node)
            except Exception as exc:
                return plugin_error(name, "preFilter", exc)
            if not status.is_success:
                return Status.from_error(
                    RuntimeError(f'running AddPod on PreFilter plugin "{name}": {status.message}')
                )
    return SUCCESS


def remove_pods(
    extensions: Extensions,
    state: CycleState,
    pod: PodInfo,
    removed: Sequence[tuple[PodInfo, str]],
) -> Status:
    """Tell every PreFilterExtensions plugin (not skipped for ``pod``) that each pod of
    ``removed`` is off its node (upstream ``RunPreFilterExtensionRemovePod``)."""
    for name, plugin in extensions:
        if name in state.skip_filter_plugins:
            continue
        for other, node in removed:
            try:
                status = plugin.remove_pod(state, pod, other, node)
            except Exception as exc:
                return plugin_error(name, "preFilter", exc)
            if not status.is_success:
                return Status.from_error(
                    RuntimeError(
                        f'running RemovePod on PreFilter plugin "{name}": {status.message}'
                    )
                )
    return SUCCESS


class Nominations(Protocol):
    """Where nominations are kept (``troupe.queue.nominator.Nominator``)."""

    def pods_for_node(self, node_name: str) -> list[PodInfo]: ...
    def nodes(self) -> list[str]: ...
    def delete(self, key: str) -> None: ...


def filter_slot(
    filters: Filters, state: CycleState, pod: PodInfo, table: NodeTable, slot: int
) -> Status:
    """Every plugin of ``filters`` on node ``slot``: SUCCESS, or the first
    rejection with its reasons (the plugin's own ``explain`` for this node)."""
    for name, plugin in filters:
        if name in state.skip_filter_plugins:
            continue
        try:
            if isinstance(plugin, FilterSlot) and plugin.filter_slot(state, pod, table, slot):
                continue
            result = plugin.filter(state, pod, table)
            if result.status.code is Code.ERROR:
                return plugin_failure(name, "filter", result.status)
            if result.feasible[slot]:
                continue
            rejections = [r for r in result.explain() if r.nodes[slot]]
        except Exception as exc:
            return plugin_error(name, "filter", exc)
        code = (
            Code.UNSCHEDULABLE_AND_UNRESOLVABLE
            if any(r.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE for r in rejections)
            else Code.UNSCHEDULABLE
        )
        return Status(code, tuple(r.reason for r in rejections), name, point="Filter")
    return SUCCESS


def _explained(rejections: tuple[Rejection, ...]) -> Callable[[], Sequence[Rejection]]:
    return lambda: rejections


def _group_key(pod: PodInfo) -> str | None:
    """The key of the pod's group (cached on the PodInfo: a pod's group never
    changes under it)."""
    cached = pod.extra.get("troupe.group_key", False)
    if cached is False:
        ref = group_ref_of(pod.pod)
        cached = pod.extra["troupe.group_key"] = ref.key if ref is not None else None
    return cached  # type: ignore[return-value]


class NominatedPods:
    """``nominations``: the queue's nominator; ``placed``: keys of assumed or bound
    pods (the cache), whose nominations are over."""

    def __init__(self, nominations: Nominations, placed: Container[str]) -> None:
        self._nominations = nominations
        self._placed = placed

    def for_node(self, pod: PodInfo, node: str) -> list[PodInfo]:
        """Pods nominated to ``node`` that ``pod`` must leave room for: equal or
        higher priority, not ``pod`` itself, not placed yet."""
        out: list[PodInfo] = []
        group = _group_key(pod)
        for other in self._nominations.pods_for_node(node):
            if other.key == pod.key:
                continue
            if group is not None and _group_key(other) == group:
                # The room of the pod's own gang: its members are placed together.
                continue
            if other.key in self._placed:
                self._nominations.delete(other.key)
                continue
            if other.priority >= pod.priority:
                out.append(other)
        return out

    def with_nominated(
        self,
        filters: Filters,
        state: CycleState,
        pod: PodInfo,
        table: NodeTable,
        slot: int,
        others: list[PodInfo],
        extensions: Extensions = (),
    ) -> Status:
        """Filter on ``slot`` with ``others`` on the node for the check (and told to
        the PreFilterExtensions plugins, on a copy of ``state``)."""
        node = table.names[slot]
        added: list[PodInfo] = []
        try:
            for other in others:
                if table.add_pod(other, node):
                    added.append(other)
            if extensions:
                state = state.clone()
                status = add_pods(extensions, state, pod, others, node)
                if not status.is_success:
                    return status
            return filter_slot(filters, state, pod, table, slot)
        finally:
            for other in added:
                table.remove_pod(other, node)

    def fits(
        self,
        filters: Filters,
        state: CycleState,
        pod: PodInfo,
        table: NodeTable,
        slot: int,
        extensions: Extensions = (),
    ) -> bool:
        """Whether ``pod`` still fits on ``slot`` once its nominated pods are counted
        (True when it has none)."""
        others = self.for_node(pod, table.names[slot])
        if not others:
            return True
        return self.with_nominated(filters, state, pod, table, slot, others, extensions).is_success

    def adjust(
        self,
        filters: Filters,
        state: CycleState,
        pod: PodInfo,
        table: NodeTable,
        feasible: BoolArray,
        extensions: Extensions = (),
    ) -> tuple[BoolArray, list[Rejected]]:
        """``feasible`` without the nodes where the nominated pods leave no room, and
        a diagnosis entry for each such node."""
        failed: list[tuple[int, Status]] = []
        for node in self._nominations.nodes():
            slot = table.slot(node)
            if slot is None or not feasible[slot]:
                continue
            others = self.for_node(pod, node)
            if not others:
                continue
            status = self.with_nominated(filters, state, pod, table, slot, others, extensions)
            if not status.is_success:
                failed.append((slot, status))
        if not failed:
            return feasible, []
        feasible = feasible.copy()
        rejected: list[Rejected] = []
        for slot, status in failed:
            feasible[slot] = False
            mask = np.zeros(table.capacity, dtype=bool)
            mask[slot] = True
            rejections = tuple(Rejection(reason, mask, status.code) for reason in status.reasons)
            result = FilterResult(~mask, _explained(rejections))
            rejected.append((status.plugin, result, mask))
        return feasible, rejected

    def check_node(
        self,
        pre_filters: PreFilters,
        filters: Filters,
        pod: PodInfo,
        table: NodeTable,
        slot: int,
        *,
        extensions: Extensions = (),
        taken_off: Sequence[tuple[PodInfo, str]] = (),
    ) -> Status:
        """PreFilter (fresh state) and Filter of ``pod`` on ``slot`` as the table
        stands, nominated pods counted; ``taken_off``: the pods preemption's
        simulation took off the table, told to the PreFilterExtensions plugins."""
        state = CycleState()
        allowed: frozenset[str] | None = None
        restricting: list[str] = []
        for name, plugin in pre_filters:
            try:
                result, status = plugin.pre_filter(state, pod, table)
            except Exception as exc:
                return plugin_error(name, "preFilter", exc)
            if status.is_skip:
                state.skip_filter_plugins.add(name)
                continue
            if not status.is_success:
                return plugin_failure(name, "preFilter", status)
            if result is not None and result.node_names is not None:
                restricting.append(name)
                allowed = result.node_names if allowed is None else allowed & result.node_names
        if allowed is not None and table.names[slot] not in allowed:
            return Status.unresolvable(pre_filter_excluded_reason(sorted(restricting)))
        if taken_off:
            status = remove_pods(extensions, state, pod, taken_off)
            if not status.is_success:
                return status
        others = self.for_node(pod, table.names[slot])
        if others:
            status = self.with_nominated(filters, state, pod, table, slot, others, extensions)
            if not status.is_success:
                return status
        return filter_slot(filters, state, pod, table, slot)
