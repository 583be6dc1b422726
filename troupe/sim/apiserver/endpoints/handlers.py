"""The resource verbs of the embedded API server: get, list, create, update, patch,
delete, deletecollection and the pod subresources, over the in-memory ``Store``.

Each handler takes the parsed request (``ResourceRequest``) and returns an aiohttp
response or raises ``ApiError``. Response shapes follow ``endpoints/handlers``: lists carry
their list kind and resourceVersion, creates answer 201, binding and eviction answer a
201 Success ``Status``, deletes answer the object for kinds that return deleted objects
and a Success ``Status`` otherwise. Called by ``server.ApiServer``.
"""

from __future__ import annotations

from typing import Any, Final

from aiohttp import web

from troupe.sim.apiserver.endpoints.decoding import check_patched
from troupe.sim.apiserver.endpoints.request import (
    APPLY_PATCH,
    JSON_PATCH,
    MERGE_PATCH,
    STRATEGIC_PATCH,
    ResourceRequest,
    int_param,
    json_response,
    read_json,
    selectors,
)
from troupe.sim.apiserver.endpoints.table import TABLE_CONTENT_TYPE, table, wants_table
from troupe.sim.apiserver.machinery import errors
from troupe.sim.apiserver.machinery.encoding import dumps
from troupe.sim.apiserver.machinery.patch import (
    PatchError,
    json_patch,
    merge_patch,
    strategic_merge_patch,
)
from troupe.sim.apiserver.registry.binding import bind
from troupe.sim.apiserver.registry.decoding import check_types
from troupe.sim.apiserver.registry.eviction import evict
from troupe.sim.apiserver.registry.schemas import DELETE_OPTIONS
from troupe.sim.apiserver.storage.store import Obj, Store

_CREATED_STATUS: Final = dumps(
    {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}
)


def get(store: Store, req: ResourceRequest) -> web.Response:
    assert req.name is not None
    return json_response(store.get(req.rt, req.name, req.namespace, copy=False))


def list_objects(store: Store, req: ResourceRequest, query: Any, accept: str = "") -> web.Response:
    labels, fields = selectors(req.rt, query)
    limit = max(0, int_param(query, "limit") or 0)  # negative: no limit, as upstream
    int_param(query, "timeoutSeconds")  # parsed as upstream does; a list answers at once
    items, rv, token, remaining = store.list_page(
        req.rt, req.namespace, labels, fields, limit, query.get("continue") or ""
    )
    meta: dict[str, Any] = {"resourceVersion": str(rv)}
    if token:
        meta["continue"] = token
        if remaining is not None and labels.empty and fields.empty:
            meta["remainingItemCount"] = remaining
    rt = req.rt
    if wants_table(accept):
        include = query.get("includeObject") or "Metadata"
        answer = table(rt, items, store.clock.wall(), include, meta)
        return web.Response(body=dumps(answer), headers={"Content-Type": TABLE_CONTENT_TYPE})
    body = {
        "kind": rt.list_kind,
        "apiVersion": rt.api_version,
        "metadata": meta,
        "items": items,
    }
    return json_response(body)


def _check_identity(req: ResourceRequest, obj: Any) -> Obj:
    if not isinstance(obj, dict):
        raise errors.bad_request("the body of the request must be a JSON object")
    meta = obj.get("metadata")
    if meta is None:
        meta = obj["metadata"] = {}
    if not isinstance(meta, dict):
        raise errors.bad_request("metadata must be an object")
    if req.name is not None and meta.get("name") and meta["name"] != req.name:
        raise errors.bad_request(
            f"the name of the object ({meta['name']}) does not match the name on the URL "
            f"({req.name})"
        )
    if req.rt.namespaced and meta.get("namespace") and meta["namespace"] != req.namespace:
        raise errors.bad_request(
            "the namespace of the provided object does not match the namespace sent on the request"
        )
    if req.name is not None:
        meta["name"] = req.name
    return obj


async def create(store: Store, req: ResourceRequest, request: web.Request) -> web.Response:
    obj = _check_identity(req, await read_json(request, req.rt.kind))
    created = store.create(req.rt, obj, req.namespace, copy=False, validate=True)
    return json_response(created, 201)


async def update(store: Store, req: ResourceRequest, request: web.Request) -> web.Response:
    obj = _check_identity(req, await read_json(request, req.rt.kind))
    existed = req.name is not None and store.find(req.rt, req.namespace or "", req.name) is not None
    updated = store.update(
        req.rt, obj, req.namespace, subresource=req.subresource, copy=False, validate=True
    )
    return json_response(updated, 200 if existed else 201)


async def patch(store: Store, req: ResourceRequest, request: web.Request) -> web.Response:
    assert req.name is not None
    content_type = request.content_type
    custom = not req.rt.builtin
    accepted = [JSON_PATCH, MERGE_PATCH, APPLY_PATCH] + ([] if custom else [STRATEGIC_PATCH])
    if content_type not in accepted or content_type == APPLY_PATCH:
        raise errors.ApiError(
            errors.status_failure(
                415,
                "UnsupportedMediaType",
                "the body of the request was in an unknown format - accepted media types include: "
                + ", ".join(accepted),
                {},
            )
        )
    body = await read_json(request)
    old = store.get(req.rt, req.name, req.namespace, copy=False)
    try:
        if content_type == JSON_PATCH:
            patched = json_patch(old, body)
        elif content_type == MERGE_PATCH:
            patched = merge_patch(old, body)
        else:
            patched = strategic_merge_patch(old, body)
    except PatchError as error:
        if error.code == 400:
            raise errors.bad_request(str(error)) from None
        if error.code == 413:
            raise errors.ApiError(
                errors.status_failure(413, "RequestEntityTooLarge", str(error), {})
            ) from None
        raise errors.ApiError(errors.status_failure(422, "Invalid", str(error), {})) from None
    check_patched(req.rt.kind, req.rt.version, patched)
    obj = _check_identity(req, patched)
    meta = obj["metadata"]
    # A resourceVersion the patch sets is an optimistic-concurrency precondition; otherwise
    # the patch applies to the current object (upstream retries internally on conflict).
    if not meta.get("resourceVersion"):
        meta["resourceVersion"] = old["metadata"]["resourceVersion"]
    updated = store.update(
        req.rt, obj, req.namespace, subresource=req.subresource, copy=False, validate=True
    )
    return json_response(updated)


def _delete_options(query: Any, body: Any) -> tuple[int | None, dict[str, Any]]:
    options = body if isinstance(body, dict) else {}
    check_types("DeleteOptions", "v1", options, DELETE_OPTIONS)
    grace = int_param(query, "gracePeriodSeconds")
    if grace is None:
        grace = options.get("gracePeriodSeconds")
    return grace, options.get("preconditions") or {}


async def delete(store: Store, req: ResourceRequest, request: web.Request) -> web.Response:
    assert req.name is not None
    body = await read_json(request, "DeleteOptions")
    grace, preconditions = _delete_options(request.query, body)
    last, _ = store.delete(
        req.rt,
        req.name,
        req.namespace,
        grace_period_seconds=grace,
        preconditions=preconditions,
        copy=False,
    )
    if req.rt.return_deleted_object:
        return json_response(last)
    details: dict[str, Any] = {"name": req.name}
    if req.rt.group:
        details["group"] = req.rt.group
    details["kind"] = req.rt.plural
    details["uid"] = last["metadata"].get("uid", "")
    return json_response(
        {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Success",
            "details": details,
        }
    )


async def delete_collection(
    store: Store, req: ResourceRequest, request: web.Request
) -> web.Response:
    labels, fields = selectors(req.rt, request.query)
    body = await read_json(request, "DeleteOptions")
    grace, preconditions = _delete_options(request.query, body)
    deleted = []
    for obj in store.list(req.rt, req.namespace, labels, fields, copy=False):
        meta = obj["metadata"]
        if store.find(req.rt, meta.get("namespace", ""), meta["name"]) is None:
            continue  # gone through a cascade meanwhile
        last, _ = store.delete(
            req.rt,
            meta["name"],
            meta.get("namespace"),
            grace_period_seconds=grace,
            preconditions=preconditions or None,
            copy=False,
        )
        deleted.append(last)
    rt = req.rt
    return json_response(
        {
            "kind": rt.list_kind,
            "apiVersion": rt.api_version,
            "metadata": {"resourceVersion": str(store.resource_version)},
            "items": deleted,
        }
    )


async def subresource_post(
    store: Store, req: ResourceRequest, request: web.Request
) -> web.Response:
    assert req.name is not None and req.namespace is not None
    body = await read_json(request, "Binding" if req.subresource == "binding" else "Eviction")
    if not isinstance(body, dict):
        raise errors.bad_request("the body of the request must be a JSON object")
    if req.subresource == "binding":
        bind(store, req.namespace, req.name, body)
    else:
        evict(store, req.namespace, req.name, body)
    return web.Response(body=_CREATED_STATUS, status=201, content_type="application/json")
