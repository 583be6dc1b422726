"""Server-side printing: ``meta.k8s.io/v1`` Table answers for kubectl.

kubectl asks lists and watches for ``Accept: application/json;as=Table;v=v1;g=meta.k8s.io``
and prints the columns the server chooses. Pods and nodes get the columns of upstream's
printers (pkg/printers/internalversion: NAME READY STATUS RESTARTS AGE, wide: IP NODE
NOMINATED NODE READINESS GATES; NAME STATUS ROLES AGE VERSION, wide: INTERNAL-IP
EXTERNAL-IP OS-IMAGE KERNEL-VERSION CONTAINER-RUNTIME; events, in either API group: LAST
SEEN TYPE REASON OBJECT MESSAGE); every other kind gets
NAME and AGE (upstream's default table convertor). Rows carry the object's metadata as
PartialObjectMetadata (``includeObject=Metadata``, the default) or the whole object
(``includeObject=Object``). Used by the list and watch handlers.
"""

from __future__ import annotations

from typing import Any, Final

from troupe.sim.apiserver.machinery.meta import parse_rfc3339
from troupe.sim.apiserver.machinery.resources import ResourceType
from troupe.sim.apiserver.storage.conversion import EVENTS_GROUP, to_storage

TABLE_CONTENT_TYPE: Final = "application/json;as=Table;v=v1;g=meta.k8s.io"
Column = tuple[str, str, int]  # name, type, priority

_NAME: Final = ("Name", "string", 0)
_AGE: Final = ("Age", "string", 0)
_POD_COLUMNS: Final = (
    _NAME,
    ("Ready", "string", 0),
    ("Status", "string", 0),
    ("Restarts", "string", 0),
    _AGE,
    ("IP", "string", 1),
    ("Node", "string", 1),
    ("Nominated Node", "string", 1),
    ("Readiness Gates", "string", 1),
)
_NODE_COLUMNS: Final = (
    _NAME,
    ("Status", "string", 0),
    ("Roles", "string", 0),
    _AGE,
    ("Version", "string", 0),
    ("Internal-IP", "string", 1),
    ("External-IP", "string", 1),
    ("OS-Image", "string", 1),
    ("Kernel-Version", "string", 1),
    ("Container-Runtime", "string", 1),
)


# printers.eventColumnDefinitions; both Event views print the same columns.
_EVENT_COLUMNS: Final = (
    ("Last Seen", "string", 0),
    ("Type", "string", 0),
    ("Reason", "string", 0),
    ("Object", "string", 0),
    ("Subobject", "string", 1),
    ("Source", "string", 1),
    ("Message", "string", 0),
    ("First Seen", "string", 1),
    ("Count", "integer", 1),
    ("Name", "string", 1),
)


def wants_table(accept: str) -> bool:
    return any(
        "as=Table" in part
        and "g=meta.k8s.io" in part
        and "v=v1" in part.replace(" ", "").split(";")
        for part in accept.split(",")
    )


def age(created: str, now: float) -> str:
    """``duration.HumanDuration`` of the object's age."""
    if not created:
        return "<unknown>"
    seconds = max(0, int(now - parse_rfc3339(created)))
    if seconds < 120:
        return f"{seconds}s"
    minutes = seconds // 60
    if minutes < 10:
        rest = seconds % 60
        return f"{minutes}m{rest}s" if rest else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = minutes // 60
    if hours < 8:
        rest = minutes % 60
        return f"{hours}h{rest}m" if rest else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    days = hours // 24
    return f"{days}d{hours % 24}h" if days < 8 and hours % 24 else f"{days}d"


def _pod_cells(pod: dict[str, Any], now: float) -> list[Any]:
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    statuses = status.get("containerStatuses") or []
    ready = sum(1 for s in statuses if s.get("ready"))
    restarts = sum(int(s.get("restartCount", 0)) for s in statuses)
    reason = status.get("reason") or status.get("phase") or "Unknown"
    for s in statuses:
        state = s.get("state") or {}
        if "waiting" in state and state["waiting"].get("reason"):
            reason = state["waiting"]["reason"]
    if pod["metadata"].get("deletionTimestamp"):
        reason = "Terminating"
    gates = spec.get("readinessGates") or []
    return [
        pod["metadata"]["name"],
        f"{ready}/{len(spec.get('containers') or [])}",
        reason,
        str(restarts),
        age(pod["metadata"].get("creationTimestamp", ""), now),
        status.get("podIP") or "<none>",
        spec.get("nodeName") or "<none>",
        status.get("nominatedNodeName") or "<none>",
        f"0/{len(gates)}" if gates else "<none>",
    ]


def _node_cells(node: dict[str, Any], now: float) -> list[Any]:
    conditions = (node.get("status") or {}).get("conditions") or []
    ready = next((c for c in conditions if c.get("type") == "Ready"), None)
    state = (
        "Unknown" if ready is None else ("Ready" if ready.get("status") == "True" else "NotReady")
    )
    if (node.get("spec") or {}).get("unschedulable"):
        state += ",SchedulingDisabled"
    labels = node["metadata"].get("labels") or {}
    roles = sorted(
        k.split("/", 1)[1] for k in labels if k.startswith("node-role.kubernetes.io/") and "/" in k
    )
    status = node.get("status") or {}
    info = status.get("nodeInfo") or {}
    return [
        node["metadata"]["name"],
        state,
        ",".join(roles) or "<none>",
        age(node["metadata"].get("creationTimestamp", ""), now),
        info.get("kubeletVersion", ""),
        _address(status, "InternalIP"),
        _address(status, "ExternalIP"),
        info.get("osImage") or "<unknown>",
        info.get("kernelVersion") or "<unknown>",
        info.get("containerRuntimeVersion") or "<unknown>",
    ]


def _address(status: dict[str, Any], kind: str) -> str:
    # printers.getNodeInternalIP / getNodeExternalIP: the first address of the type.
    for address in status.get("addresses") or []:
        if address.get("type") == kind:
            return str(address.get("address", ""))
    return "<none>"


def _since(stamp: Any, now: float) -> str:
    return age(stamp, now) if stamp else "<unknown>"


def _event_cells(event: dict[str, Any], now: float) -> list[Any]:
    """printers.printEvent, over the core v1 form of the event."""
    first = _since(event.get("firstTimestamp"), now)
    if not event.get("firstTimestamp"):
        first = _since(event.get("eventTime"), now)
    last = _since(event.get("lastTimestamp"), now) if event.get("lastTimestamp") else first
    count = event.get("count") or 0
    series = event.get("series")
    if series:
        last = _since(series.get("lastObservedTime"), now)
        count = series.get("count") or 0
    elif not count:
        count = 1  # singleton events of the new API carry no count
    involved = event.get("involvedObject") or {}
    kind = str(involved.get("kind", "")).lower()
    target = f"{kind}/{involved['name']}" if involved.get("name") else kind
    source = event.get("source") or {}
    component = source.get("component") or event.get("reportingComponent") or ""
    host = source.get("host") or event.get("reportingInstance") or ""
    return [
        last,
        event.get("type", ""),
        event.get("reason", ""),
        target,
        involved.get("fieldPath", ""),
        f"{component}, {host}" if host else component,
        str(event.get("message", "")).strip(),
        first,
        int(count),
        event["metadata"]["name"],
    ]


def _columns(rt: ResourceType) -> tuple[Column, ...]:
    if rt.group == "" and rt.plural == "pods":
        return _POD_COLUMNS
    if rt.group == "" and rt.plural == "nodes":
        return _NODE_COLUMNS
    if rt.plural == "events" and rt.group in ("", EVENTS_GROUP):
        return _EVENT_COLUMNS
    return (_NAME, _AGE)


def _cells(rt: ResourceType, obj: dict[str, Any], now: float) -> list[Any]:
    if rt.group == "" and rt.plural == "pods":
        return _pod_cells(obj, now)
    if rt.group == "" and rt.plural == "nodes":
        return _node_cells(obj, now)
    if rt.plural == "events" and rt.group in ("", EVENTS_GROUP):
        return _event_cells(to_storage(rt, obj), now)
    return [obj["metadata"]["name"], age(obj["metadata"].get("creationTimestamp", ""), now)]


def _row_object(obj: dict[str, Any], include: str) -> dict[str, Any] | None:
    if include == "None":
        return None
    if include == "Object":
        return obj
    return {
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": obj["metadata"],
    }


def table(
    rt: ResourceType,
    objects: list[dict[str, Any]],
    now: float,
    include: str = "Metadata",
    list_meta: dict[str, Any] | None = None,
) -> dict[str, Any]:
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": list_meta or {},
        "columnDefinitions": [
            {
                "name": name,
                "type": type_,
                "format": "name" if name == "Name" else "",
                "description": "",
                "priority": priority,
            }
            for name, type_, priority in _columns(rt)
        ],
        "rows": [
            {"cells": _cells(rt, obj, now), "object": _row_object(obj, include)} for obj in objects
        ],
    }
