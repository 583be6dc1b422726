"""``pods/binding``: ``BindingREST.Create`` of pkg/registry/core/pod/storage/storage.go.

A Binding of the wrong JSON types is the decoder's 400 (``schemas.BINDING``). UID and
resourceVersion preconditions (a Conflict worded as the storage layer words it),
"already assigned" and "being deleted" conflicts on ``pods/binding``, then spec.nodeName,
the Binding's annotations and ``PodScheduled=True`` in one write. Binding to a node that
does not exist is allowed, as upstream. Called by the server's subresource handler.
"""

from __future__ import annotations

from typing import Any, Final

from troupe.sim.apiserver.machinery import errors
from troupe.sim.apiserver.machinery.resources import ResourceType
from troupe.sim.apiserver.registry.decoding import check_types
from troupe.sim.apiserver.registry.schemas import BINDING
from troupe.sim.apiserver.storage.store import Obj, Store


def _set_condition(status: dict[str, Any], condition: dict[str, Any], now: str) -> None:
    """podutil.UpdatePodCondition: replace the condition of that type, keeping the
    transition time when the status did not change."""
    conditions = list(status.get("conditions") or [])
    for i, existing in enumerate(conditions):
        if existing.get("type") == condition["type"]:
            changed = existing.get("status") != condition["status"]
            conditions[i] = {
                **condition,
                "lastTransitionTime": now if changed else existing.get("lastTransitionTime", now),
            }
            break
    else:
        conditions.append({**condition, "lastTransitionTime": now})
    status["conditions"] = conditions


def bind(store: Store, namespace: str, name: str, binding: Obj) -> Obj:
    """Bind a pod to a node; returns the updated pod or raises ``ApiError``."""
    check_types("Binding", "v1", binding, BINDING)
    rt = store.resolve("pods")
    meta = binding.get("metadata") or {}
    if meta.get("name") and meta["name"] != name:
        raise errors.bad_request("name in URL does not match name in Binding object")
    target = binding.get("target") or {}
    node = target.get("name") or ""
    if not node:
        raise errors.invalid(
            _BINDING, name, [("target.name", "FieldValueRequired", "Required value")]
        )
    if target.get("kind") not in (None, "", "Node"):
        raise errors.invalid(
            _BINDING,
            name,
            [
                (
                    "target.kind",
                    "FieldValueNotSupported",
                    f'Unsupported value: "{target["kind"]}": supported values: "Node"',
                )
            ],
        )
    pod = store.find(rt, namespace, name)
    if pod is None:
        raise errors.not_found(rt, name)
    pod_meta = pod["metadata"]
    uid = meta.get("uid")
    if uid and uid != pod_meta["uid"]:
        raise errors.storage_precondition_conflict(rt, namespace, name, uid, pod_meta["uid"])
    rv = meta.get("resourceVersion")
    if rv and rv != pod_meta["resourceVersion"]:
        raise errors.stale_conflict(rt, name)
    if pod_meta.get("deletionTimestamp"):
        raise errors.conflict(
            "pods/binding",
            "",
            "pods/binding",
            name,
            f"pod {name} is being deleted, cannot be assigned to a host",
        )
    current = (pod.get("spec") or {}).get("nodeName")
    if current:
        raise errors.conflict(
            "pods/binding",
            "",
            "pods/binding",
            name,
            f'pod {name} is already assigned to node "{current}"',
        )
    new_meta = dict(pod_meta)
    if meta.get("annotations"):
        new_meta["annotations"] = {**(pod_meta.get("annotations") or {}), **meta["annotations"]}
    status = dict(pod.get("status") or {})
    _set_condition(
        status, {"type": "PodScheduled", "status": "True", "lastProbeTime": None}, store.now()
    )
    new = {**pod, "metadata": new_meta, "spec": {**pod["spec"], "nodeName": node}, "status": status}
    return store.replace_object(rt, new, pod)


_BINDING: Final = ResourceType("", "v1", "Binding", "bindings", True)
