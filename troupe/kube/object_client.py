"""Reads and writes of any API object by its ``ObjectKind``, for ``KubeClient``.

``KubeClient`` builds one ``ObjectClient`` with its own write and read paths and
serves these methods as the generic part of ``SchedulerClient``: plugins call them
from PreBind (a PVC's ``volume.kubernetes.io/selected-node``, a PV's ``claimRef``, a
ResourceClaim's finalizer, then its ``status.allocation`` and ``reservedFor``). So
each write takes a token from the client's ``qps/burst`` bucket, runs under its
retry policy, goes through the fenced transport under leader election (nothing
leaves a replica that cannot prove it holds the lease: ``WriteFenced``), and fails
with an ``ApiError`` whose ``is_conflict`` / ``is_not_found`` tell a stale
``resourceVersion`` or an existing object from a missing one. Paths are the
REST paths client-go's dynamic client builds (``/api/v1/...`` for the core group,
``/apis/<group>/<version>/...`` otherwise).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Mapping
from typing import Any, Protocol

from pydantic_core import to_json

from troupe.api.client import ApiError, JsonPatch, PatchType
from troupe.api.watches import ObjectKind
from troupe.kube.transport import JSON, Response


class WriteFn(Protocol):
    def __call__(
        self, method: str, path: str, body: bytes | None, *, content_type: str = JSON, what: str
    ) -> Awaitable[Response]: ...


class ReadFn(Protocol):
    def __call__(self, path: str, what: str) -> Awaitable[Response]: ...


def object_path(
    kind: ObjectKind, name: str = "", namespace: str = "", subresource: str = ""
) -> str:
    """The REST path of ``kind``'s collection (no ``name``) or of one object (or its
    ``subresource``). Raises ``ValueError`` when ``namespace`` does not fit the kind's
    scope, naming the kind and the object."""
    what = f"{kind.kind} {namespace + '/' if namespace else ''}{name}".rstrip()
    if kind.namespaced and not namespace:
        raise ValueError(f"{what}: metadata.namespace is required for {kind}")
    if not kind.namespaced and namespace:
        raise ValueError(f"{what}: {kind} is cluster-scoped; metadata.namespace must be empty")
    path = f"/apis/{kind.group}/{kind.version}" if kind.group else f"/api/{kind.version}"
    if namespace:
        path += f"/namespaces/{namespace}"
    path += f"/{kind.resource}"
    if name:
        path += f"/{name}"
        if subresource:
            path += f"/{subresource}"
    return path


def _named(kind: ObjectKind, obj: Mapping[str, Any]) -> tuple[str, str]:
    """(namespace, name) from ``obj``'s metadata; ValueError without a name."""
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    name, namespace = meta.get("name"), meta.get("namespace") or ""
    if not isinstance(name, str) or not name:
        raise ValueError(f"{kind.kind}: metadata.name is required to write it")
    return str(namespace), name


def _object(resp: Response, what: str) -> dict[str, Any]:
    data = json.loads(resp.body) if resp.body else {}
    if not isinstance(data, dict):
        raise ApiError(resp.status, f"{what}: expected an object, got {type(data).__name__}")
    return data


class ObjectClient:
    """``SchedulerClient``'s object methods over a client's write and read paths."""

    def __init__(self, write: WriteFn, read: ReadFn) -> None:
        self._write = write
        self._read = read

    async def get_object(self, kind: ObjectKind, name: str, namespace: str = "") -> dict[str, Any]:
        path = object_path(kind, name, namespace)
        what = f"get {kind.kind} {_display(namespace, name)}"
        return _object(await self._read(path, what), what)

    async def create_object(self, kind: ObjectKind, obj: Mapping[str, Any]) -> dict[str, Any]:
        meta = obj.get("metadata")
        namespace = str(meta.get("namespace") or "") if isinstance(meta, Mapping) else ""
        what = f"create {kind.kind} in {namespace}" if namespace else f"create {kind.kind}"
        body = {"apiVersion": kind.group_version, "kind": kind.kind, **obj}
        path = object_path(kind, namespace=namespace)
        return _object(await self._write("POST", path, to_json(body), what=what), what)

    async def update_object(
        self, kind: ObjectKind, obj: Mapping[str, Any], *, subresource: str = ""
    ) -> dict[str, Any]:
        namespace, name = _named(kind, obj)
        target = f"{subresource} of " if subresource else ""
        what = f"update {target}{kind.kind} {_display(namespace, name)}"
        body = {"apiVersion": kind.group_version, "kind": kind.kind, **obj}
        path = object_path(kind, name, namespace, subresource)
        return _object(await self._write("PUT", path, to_json(body), what=what), what)

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
        if (patch_type is PatchType.JSON) == isinstance(patch, Mapping):
            shape = "a list of operations" if patch_type is PatchType.JSON else "an object"
            raise ValueError(f"patch of {kind.kind} {name}: a {patch_type.name} patch is {shape}")
        target = f"{subresource} of " if subresource else ""
        what = f"patch {target}{kind.kind} {_display(namespace, name)}"
        path = object_path(kind, name, namespace, subresource)
        body = to_json(dict(patch) if isinstance(patch, Mapping) else [dict(op) for op in patch])
        resp = await self._write("PATCH", path, body, content_type=patch_type.value, what=what)
        return _object(resp, what)


def _display(namespace: str, name: str) -> str:
    return f"{namespace}/{name}" if namespace else name
