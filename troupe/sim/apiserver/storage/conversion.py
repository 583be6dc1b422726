"""Conversion between a stored object and the version a request reads or writes.

One kind may be served at several (group, version)s over one storage:

* ``events`` (core v1) and ``events.k8s.io/v1`` Events are two views of the same objects,
  as in kube-apiserver: stored as core v1, converted as upstream's
  pkg/apis/events/v1/conversion.go does (``regarding`` <-> ``involvedObject``, ``note`` <->
  ``message``, ``reportingController`` <-> ``reportingComponent``, ``deprecatedSource`` /
  ``deprecatedFirstTimestamp`` / ``deprecatedLastTimestamp`` / ``deprecatedCount`` <->
  ``source`` / ``firstTimestamp`` / ``lastTimestamp`` / ``count``; ``eventTime``,
  ``series``, ``reportingInstance``, ``action``, ``reason``, ``related`` and ``type`` are
  the same in both). Field selectors of the events.k8s.io view are translated to the
  core field labels before they are matched against stored objects.
* The native ``podgroups`` and ``workloads`` of ``scheduling.k8s.io`` are stored in the
  ``v1beta1`` shape (a Workload with its ``v1alpha3``-only ``compositePodGroupTemplates``)
  and shown at every served version through ``podgroup_conversion`` (Kubernetes 1.37
  serves one object at every enabled version of its resource).
* CRDs served at several versions share storage with conversion strategy ``None``: only
  ``apiVersion`` is rewritten.

``store.Store`` converts what it stores (``to_storage``) and what it hands out
(``to_view``); watchers carry their view's converter.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from troupe.sim.apiserver.machinery.resources import ResourceType
from troupe.sim.apiserver.machinery.selectors import FieldRequirement, FieldSelector
from troupe.sim.apiserver.storage.podgroup_conversion import (
    pod_group_to_v1alpha2,
    pod_group_to_v1beta1,
    workload_identity,
    workload_without_composites,
)

Obj = dict[str, Any]
Converter = Callable[[Obj], Obj]

EVENTS_GROUP: Final = "events.k8s.io"
# events.k8s.io/v1 field -> core v1 field, for the fields whose names differ.
_EVENTS_TO_CORE: Final = {
    "regarding": "involvedObject",
    "note": "message",
    "reportingController": "reportingComponent",
    "deprecatedSource": "source",
    "deprecatedFirstTimestamp": "firstTimestamp",
    "deprecatedLastTimestamp": "lastTimestamp",
    "deprecatedCount": "count",
}
_CORE_TO_EVENTS: Final = {core: events for events, core in _EVENTS_TO_CORE.items()}
_CORE_ONLY: Final = frozenset(_CORE_TO_EVENTS)
_EVENTS_ONLY: Final = frozenset(_EVENTS_TO_CORE)


SCHEDULING_GROUP: Final = "scheduling.k8s.io"
# (group, plural, version) of a view stored in another version's shape -> (to the
# stored shape, from the stored shape).
_VERSIONED: Final[dict[tuple[str, str, str], tuple[Converter, Converter]]] = {
    (SCHEDULING_GROUP, "podgroups", "v1alpha2"): (pod_group_to_v1beta1, pod_group_to_v1alpha2),
    (SCHEDULING_GROUP, "workloads", "v1alpha2"): (
        workload_without_composites,
        workload_without_composites,
    ),
    (SCHEDULING_GROUP, "workloads", "v1beta1"): (
        workload_without_composites,
        workload_without_composites,
    ),
    (SCHEDULING_GROUP, "workloads", "v1alpha3"): (workload_identity, workload_identity),
}


def _versioned(rt: ResourceType) -> tuple[Converter, Converter] | None:
    return _VERSIONED.get((rt.group, rt.plural, rt.version))


def _with_version(convert: Converter, api_version: str) -> Converter:
    def view(obj: Obj) -> Obj:
        out = convert(obj)
        out["apiVersion"] = api_version
        return out

    return view


def is_events_view(rt: ResourceType) -> bool:
    return rt.group == EVENTS_GROUP and rt.plural == "events"


def _rename(obj: Obj, names: dict[str, str], drop: frozenset[str], api_version: str) -> Obj:
    out: Obj = {"kind": "Event", "apiVersion": api_version}
    for key, value in obj.items():
        if key in ("kind", "apiVersion") or (key in drop and key not in names):
            continue
        out[names.get(key, key)] = value
    return out


def events_to_core(obj: Obj) -> Obj:
    """An events.k8s.io/v1 Event as the core v1 Event stored for it."""
    return _rename(obj, _EVENTS_TO_CORE, _CORE_ONLY, "v1")


def core_to_events(obj: Obj) -> Obj:
    """A stored core v1 Event as events.k8s.io/v1 shows it."""
    return _rename(obj, _CORE_TO_EVENTS, _EVENTS_ONLY, f"{EVENTS_GROUP}/v1")


def view_converter(rt: ResourceType) -> Converter | None:
    """How stored objects look through ``rt`` (None: only apiVersion may differ)."""
    if is_events_view(rt):
        return core_to_events
    versioned = _versioned(rt)
    return _with_version(versioned[1], rt.api_version) if versioned is not None else None


def to_view(rt: ResourceType, obj: Obj) -> Obj:
    if is_events_view(rt):
        return core_to_events(obj)
    versioned = _versioned(rt)
    if versioned is not None:
        return _with_version(versioned[1], rt.api_version)(obj)
    if obj.get("apiVersion") != rt.api_version:
        return {**obj, "apiVersion": rt.api_version}
    return obj


def to_storage(rt: ResourceType, obj: Obj) -> Obj:
    if is_events_view(rt):
        return events_to_core(obj)
    versioned = _versioned(rt)
    return versioned[0](obj) if versioned is not None else obj


def storage_fields(rt: ResourceType, fields: FieldSelector) -> FieldSelector:
    """A field selector of ``rt``'s view as field labels of the stored version."""
    if fields.empty or not is_events_view(rt):
        return fields
    return FieldSelector(
        tuple(
            FieldRequirement(_storage_field(r.field), r.negated, r.value)
            for r in fields.requirements
        )
    )


def _storage_field(label: str) -> str:
    head, dot, rest = label.partition(".")
    return _EVENTS_TO_CORE.get(head, head) + dot + rest
