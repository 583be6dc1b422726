"""Fluent builders for DRA objects and a runner for allocator cases.

``dev("gpu-0").attr("model", "h100").cap("memory", "80Gi")`` builds a device,
``slice_("s1", dev(...), node="node-1")`` a ResourceSlice, ``device_class("gpu")`` a
DeviceClass matching driver-a, ``claim("c0").request("r0", "gpu", 2).obj()`` a claim.
``allocate(...)`` runs the allocator the way the plugin will, with a fixed share ID.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

from troupe.api.dra.cel import CelEnvironment
from troupe.api.dra.objects import (
    AllocationResult,
    DeviceClass,
    ResourceClaim,
    ResourceSlice,
)
from troupe.api.objects import Node
from troupe.plugins.dynamicresources import AllocatedDevices, Allocator, DeviceID, Inventory

DRIVER_A = "driver-a"
DRIVER_B = "driver-b"
SHARE_ID = "share-1"

CEL_ENV = CelEnvironment()  # one per test session, as one per scheduler
_VERSIONS = itertools.count(1)


class dev:
    def __init__(self, name: str) -> None:
        self.data: dict[str, Any] = {"name": name}

    def attr(self, name: str, value: object) -> dev:
        kind = {bool: "bool", int: "int", str: "string"}[type(value)]
        self.data.setdefault("attributes", {})[name] = {kind: value}
        return self

    def version(self, name: str, value: str) -> dev:
        self.data.setdefault("attributes", {})[name] = {"version": value}
        return self

    def cap(self, name: str, value: str, **policy: Any) -> dev:
        entry: dict[str, Any] = {"value": value}
        if policy:
            entry["requestPolicy"] = policy
        self.data.setdefault("capacity", {})[name] = entry
        return self

    def taint(self, key: str, effect: str, value: str = "") -> dev:
        self.data.setdefault("taints", []).append({"key": key, "value": value, "effect": effect})
        return self

    def consumes(self, counter_set: str, **counters: str) -> dev:
        entry = {
            "counterSet": counter_set,
            "counters": {k: {"value": v} for k, v in counters.items()},
        }
        self.data.setdefault("consumesCounters", []).append(entry)
        return self

    def multi(self) -> dev:
        self.data["allowMultipleAllocations"] = True
        return self

    def on(self, node: str | None = None, *, all_nodes: bool = False, selector: Any = None) -> dev:
        if node:
            self.data["nodeName"] = node
        if all_nodes:
            self.data["allNodes"] = True
        if selector is not None:
            self.data["nodeSelector"] = selector
        return self

    def binding(self, *conditions: str) -> dev:
        self.data["bindingConditions"] = list(conditions)
        self.data["bindsToNode"] = True
        return self


def devs(*names: str) -> list[dev]:
    return [dev(n) for n in names]


def label_selector(key: str, *values: str) -> dict[str, Any]:
    return {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": key, "operator": "In", "values": list(values)}]}
        ]
    }


def slice_(
    name: str,
    *devices: dev,
    driver: str = DRIVER_A,
    pool: str = "pool-1",
    node: str | None = "node-1",
    all_nodes: bool = False,
    selector: dict[str, Any] | None = None,
    per_device: bool = False,
    generation: int = 1,
    count: int = 1,
    counters: dict[str, dict[str, str]] | None = None,
    version: str | None = None,
) -> ResourceSlice:
    spec: dict[str, Any] = {
        "driver": driver,
        "pool": {"name": pool, "generation": generation, "resourceSliceCount": count},
        "devices": [d.data for d in devices],
    }
    if per_device:
        spec["perDeviceNodeSelection"] = True
    elif all_nodes:
        spec["allNodes"] = True
    elif selector is not None:
        spec["nodeSelector"] = selector
    elif node is not None:
        spec["nodeName"] = node
    if counters:
        spec["sharedCounters"] = [
            {"name": n, "counters": {k: {"value": v} for k, v in c.items()}}
            for n, c in counters.items()
        ]
    # Every write gets a new resourceVersion, as from an API server.
    version = version or str(next(_VERSIONS))
    return ResourceSlice.model_validate(
        {"metadata": {"name": name, "resourceVersion": version}, "spec": spec}
    )


def device_class(
    name: str, *expressions: str, driver: str = DRIVER_A, config: dict[str, Any] | None = None
) -> DeviceClass:
    selectors = [{"cel": {"expression": f'device.driver == "{driver}"'}}]
    selectors += [{"cel": {"expression": e}} for e in expressions]
    spec: dict[str, Any] = {"selectors": selectors}
    if config is not None:
        spec["config"] = [{"opaque": {"driver": driver, "parameters": config}}]
    return DeviceClass.model_validate({"metadata": {"name": name}, "spec": spec})


def sub(name: str, class_name: str, count: int = 1, *selectors: str, **more: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "deviceClassName": class_name, "count": count}
    if selectors:
        out["selectors"] = [{"cel": {"expression": e}} for e in selectors]
    out.update(more)
    return out


class claim:
    def __init__(self, name: str, namespace: str = "default") -> None:
        self.data: dict[str, Any] = {
            "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}"},
            "spec": {"devices": {"requests": [], "constraints": [], "config": []}},
        }

    @property
    def _devices(self) -> dict[str, Any]:
        devices: dict[str, Any] = self.data["spec"]["devices"]
        return devices

    def request(
        self,
        name: str,
        class_name: str,
        count: int = 1,
        *selectors: str,
        all: bool = False,
        admin: bool = False,
        tolerations: Sequence[dict[str, Any]] = (),
        capacity: dict[str, str] | None = None,
    ) -> claim:
        exactly: dict[str, Any] = {"deviceClassName": class_name}
        if all:
            exactly["allocationMode"] = "All"
        else:
            exactly["count"] = count
        if selectors:
            exactly["selectors"] = [{"cel": {"expression": e}} for e in selectors]
        if admin:
            exactly["adminAccess"] = True
        if tolerations:
            exactly["tolerations"] = list(tolerations)
        if capacity:
            exactly["capacity"] = {"requests": capacity}
        self._devices["requests"].append({"name": name, "exactly": exactly})
        return self

    def first_available(self, name: str, *subs: dict[str, Any]) -> claim:
        self._devices["requests"].append({"name": name, "firstAvailable": list(subs)})
        return self

    def raw_request(self, request: dict[str, Any]) -> claim:
        self._devices["requests"].append(request)
        return self

    def match(self, attribute: str, *requests: str) -> claim:
        self._devices["constraints"].append(
            {"matchAttribute": attribute, "requests": list(requests)}
        )
        return self

    def distinct(self, attribute: str, *requests: str) -> claim:
        self._devices["constraints"].append(
            {"distinctAttribute": attribute, "requests": list(requests)}
        )
        return self

    def config(self, parameters: dict[str, Any], *requests: str) -> claim:
        self._devices["config"].append(
            {"requests": list(requests), "opaque": {"driver": DRIVER_A, "parameters": parameters}}
        )
        return self

    def obj(self) -> ResourceClaim:
        return ResourceClaim.model_validate(self.data)


def node(name: str = "node-1", **labels: str) -> Node:
    return Node.model_validate({"metadata": {"name": name, "labels": labels}})


def allocator(
    classes: Sequence[DeviceClass],
    slices: Sequence[ResourceSlice],
    *,
    allocated: Sequence[str] = (),
    shared: dict[str, dict[str, str]] | None = None,
    max_steps: int | None = None,
) -> Allocator:
    """An allocator with ``allocated`` ("driver/pool/device") dedicated devices and
    ``shared`` ones consuming the given capacity."""
    from troupe.api.quantity import parse_nanos

    dedicated = frozenset(DeviceID(*text.split("/")) for text in allocated)
    shares = {
        DeviceID(*text.split("/")): {k: parse_nanos(v) for k, v in consumed.items()}
        for text, consumed in (shared or {}).items()
    }
    return Allocator(
        {c.name: c for c in classes},
        Inventory(slices),
        AllocatedDevices(dedicated, shares),
        CEL_ENV,
        max_steps=max_steps,
        new_share_id=lambda: SHARE_ID,
    )


def picks(results: Sequence[AllocationResult] | None) -> list[list[str]] | None:
    """Per claim, ``request=driver/pool/device`` of each result, in order."""
    if results is None:
        return None
    return [
        [f"{r.request}={r.driver}/{r.pool}/{r.device}" for r in result.devices.results]
        for result in results
    ]
