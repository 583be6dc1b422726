"""A tiny framework Handle and scheduler client for plugin tests.

Plugins only see ``troupe.api.framework.Handle``; these doubles record what the
plugin did (bindings, object writes) and can be told to fail, so no test needs the
scheduler. ``RecordingClient`` keeps API objects in memory for plugins that read and
write them in PreBind, with the API server's 404 and 409 (``resourceVersion``)
answers; JSON patches are left to the end-to-end tests.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from troupe.api.client import ApiError, Event, JsonPatch, PatchType
from troupe.api.clock import FakeClock
from troupe.api.cycle import CycleState
from troupe.api.framework import (
    FilterPlugin,
    NamespaceLabels,
    NamespaceLister,
    PreFilterPlugin,
    PreScorePlugin,
    ScoreExtensions,
    ScorePlugin,
    WaitingPod,
)
from troupe.api.gangs import NoGroups
from troupe.api.nodetable import NodeTable
from troupe.api.objects import Pod, PodCondition
from troupe.api.podinfo import PodInfo
from troupe.api.status import Code, Status
from troupe.api.watches import ObjectKind
from troupe.sim.apiserver.machinery.patch import merge_patch, strategic_merge_patch


@dataclass
class RecordingClient:
    """Records bindings; raises ``fail_with`` from ``bind`` when set."""

    bindings: list[tuple[str, str]] = field(default_factory=list)
    patches: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    fail_with: Exception | None = None

    async def bind(self, pod: Pod, node_name: str) -> None:
        if self.fail_with is not None:
            raise self.fail_with
        self.bindings.append((pod.key, node_name))

    async def patch_pod_status(
        self, pod: Pod, condition: PodCondition | None, nominated_node_name: str | None
    ) -> None:
        raise AssertionError("plugins under test must not patch pod status")

    async def record_event(self, event: Event) -> None:
        raise AssertionError("plugins under test must not record events")

    async def merge_patch(self, path: str, patch: Mapping[str, Any]) -> dict[str, Any]:
        self.patches.append((path, dict(patch)))
        return dict(patch)

    # --- any API object, in memory -------------------------------------------------

    objects: dict[tuple[str, str, str], dict[str, Any]] = field(default_factory=dict)
    # ("create" | "update" | "update status" | "patch", "<Kind> [ns/]name"), in order.
    writes: list[tuple[str, str]] = field(default_factory=list)

    def _stored(self, kind: ObjectKind, name: str, namespace: str) -> dict[str, Any]:
        obj = self.objects.get((kind.group_resource, namespace, name))
        if obj is None:
            raise ApiError(404, f'{kind.group_resource} "{name}" not found')
        return obj

    def _put(self, kind: ObjectKind, obj: dict[str, Any], verb: str) -> dict[str, Any]:
        meta = obj.setdefault("metadata", {})
        meta["resourceVersion"] = str(int(meta.get("resourceVersion") or 0) + 1)
        key = (kind.group_resource, meta.get("namespace", ""), meta["name"])
        self.objects[key] = obj
        self.writes.append((verb, f"{kind.kind} {'/'.join(filter(None, key[1:]))}"))
        return copy.deepcopy(obj)

    async def get_object(self, kind: ObjectKind, name: str, namespace: str = "") -> dict[str, Any]:
        return copy.deepcopy(self._stored(kind, name, namespace))

    async def create_object(self, kind: ObjectKind, obj: Mapping[str, Any]) -> dict[str, Any]:
        new = copy.deepcopy(dict(obj))
        meta = new.get("metadata", {})
        if (kind.group_resource, meta.get("namespace", ""), meta["name"]) in self.objects:
            raise ApiError(409, f'{kind.group_resource} "{meta["name"]}" already exists')
        meta.pop("resourceVersion", None)
        return self._put(kind, new, "create")

    async def update_object(
        self, kind: ObjectKind, obj: Mapping[str, Any], *, subresource: str = ""
    ) -> dict[str, Any]:
        new = copy.deepcopy(dict(obj))
        meta = new.get("metadata", {})
        old = self._stored(kind, meta["name"], meta.get("namespace", ""))
        current = old["metadata"]["resourceVersion"]
        if meta.get("resourceVersion") and meta["resourceVersion"] != current:
            raise ApiError(409, "the object has been modified; please apply your changes")
        meta["resourceVersion"] = current
        if subresource == "status":  # only the status moves
            new = {**copy.deepcopy(old), "status": new.get("status")}
        return self._put(kind, new, f"update {subresource}".strip())

    async def update_object_status(
        self, kind: ObjectKind, obj: Mapping[str, Any]
    ) -> dict[str, Any]:
        return await self.update_object(kind, obj, subresource="status")

    async def patch_object(
        self,
        kind: ObjectKind,
        name: str,
        patch: JsonPatch,
        *,
        namespace: str = "",
        patch_type: PatchType = PatchType.MERGE,
        subresource: str = "",
    ) -> dict[str, Any]:
        old = self._stored(kind, name, namespace)
        if patch_type is PatchType.JSON or not isinstance(patch, Mapping):
            raise NotImplementedError("JSON patches: test them against the embedded server")
        apply = merge_patch if patch_type is PatchType.MERGE else strategic_merge_patch
        new = apply(old, dict(patch))
        wanted = dict(patch).get("metadata", {}).get("resourceVersion")
        if wanted and wanted != old["metadata"]["resourceVersion"]:
            raise ApiError(409, "the object has been modified; please apply your changes")
        new["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"]
        return self._put(kind, new, "patch")


class FakeHandle:
    def __init__(
        self, table: NodeTable | None = None, namespaces: NamespaceLister | None = None
    ) -> None:
        self._table = table if table is not None else NodeTable()
        self._client = RecordingClient()
        self._clock = FakeClock()
        self._namespaces: NamespaceLister = (
            namespaces if namespaces is not None else NamespaceLabels()
        )

    @property
    def client(self) -> RecordingClient:
        return self._client

    @property
    def clock(self) -> FakeClock:
        return self._clock

    @property
    def table(self) -> NodeTable:
        return self._table

    @property
    def groups(self) -> NoGroups:
        return NoGroups()

    @property
    def scheduler_name(self) -> str:
        return "troupe-scheduler"

    def nominated_for_node(self, pod: PodInfo, node: str) -> list[PodInfo]:
        return []

    def get_waiting_pod(self, key: str) -> WaitingPod | None:
        return None

    def iterate_waiting_pods(self) -> Sequence[WaitingPod]:
        return ()

    @property
    def namespaces(self) -> NamespaceLister:
        return self._namespaces


def conflict(message: str = "pod already bound") -> ApiError:
    return ApiError(409, message)


# --- running one plugin the way the framework would ------------------------------


@dataclass(frozen=True)
class FilterOutcome:
    """A filter run seen by node name: who passed and why the others did not."""

    status: Status  # PreFilter's status (SKIP: filter not run)
    feasible: frozenset[str]
    reasons: dict[str, list[str]]  # node -> reasons, in explain order
    codes: dict[str, set[Code]]  # node -> codes of its rejections
    node_names: frozenset[str] | None = None  # PreFilterResult


def run_filter(plugin: object, pod: PodInfo | Pod, table: NodeTable) -> FilterOutcome:
    """PreFilter (if any), then Filter over every present node, then explain."""
    info = pod if isinstance(pod, PodInfo) else PodInfo.of(pod)
    state = CycleState()
    status = Status()
    node_names = None
    if isinstance(plugin, PreFilterPlugin):
        result, status = plugin.pre_filter(state, info, table)
        node_names = result.node_names if result is not None else None
        if status.is_skip:
            return FilterOutcome(status, frozenset(table.index), {}, {}, node_names)
        if not status.is_success:
            return FilterOutcome(status, frozenset(), {}, {}, node_names)
    assert isinstance(plugin, FilterPlugin)
    out = plugin.filter(state, info, table)
    assert out.feasible.shape == (table.capacity,)
    present = table.present
    feasible = frozenset(table.names[s] for s in np.flatnonzero(out.feasible & present))
    reasons: dict[str, list[str]] = {}
    codes: dict[str, set[Code]] = {}
    for rejection in out.explain():
        for slot in np.flatnonzero(rejection.nodes & present):
            reasons.setdefault(table.names[slot], []).append(rejection.reason)
            codes.setdefault(table.names[slot], set()).add(rejection.code)
    return FilterOutcome(status, feasible, reasons, codes, node_names)


def run_score(
    plugin: object,
    pod: PodInfo | Pod,
    table: NodeTable,
    normalize: bool = True,
    *,
    only: Sequence[str] | None = None,
) -> dict[str, int] | None:
    """PreScore (None when it returns SKIP), Score over all present nodes (or the
    nodes ``only`` names, in that order), then NormalizeScore when the plugin has it."""
    info = pod if isinstance(pod, PodInfo) else PodInfo.of(pod)
    state = CycleState()
    slots = table.slots() if only is None else np.array([table.index[n] for n in only], np.intp)
    if isinstance(plugin, PreScorePlugin):
        status = plugin.pre_score(state, info, table, slots)
        if status.is_skip:
            return None
        assert status.is_success, status
    assert isinstance(plugin, ScorePlugin)
    scores = plugin.score(state, info, table, slots)
    assert scores.dtype == np.int64 and scores.shape == (len(slots),)
    if normalize and isinstance(plugin, ScoreExtensions):
        plugin.normalize_score(state, info, scores)
    return {table.names[s]: int(v) for s, v in zip(slots, scores, strict=True)}
