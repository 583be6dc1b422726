"""Minimal OpenAPI v3 documents: enough for kubectl to delegate validation to the server.

kubectl (``resource.QueryParamVerifierV3``) reads ``/openapi/v3`` and the group-version
document of each kind it sends, looking for a PATCH operation tagged with the kind's
``x-kubernetes-group-version-kind`` that accepts the ``fieldValidation`` query parameter.
Finding it, kubectl skips client-side schema validation and leaves it to the server, so
``kubectl create -f`` and ``kubectl apply -f`` work without ``--validate=false``. No
schemas are published: the embedded server does not validate unknown fields (it accepts
``fieldValidation`` and ignores it), and ``kubectl explain`` has nothing to show.
``/openapi/v2`` answers 404, which kubectl tolerates once v3 is served.
"""

from __future__ import annotations

import hashlib
from typing import Any

from troupe.sim.apiserver.endpoints.discovery import kube_minor
from troupe.sim.apiserver.machinery.encoding import dumps
from troupe.sim.apiserver.machinery.resources import Registry, ResourceType

_PARAMETERS = [
    {"name": "dryRun", "in": "query", "schema": {"type": "string", "uniqueItems": True}},
    {"name": "fieldManager", "in": "query", "schema": {"type": "string", "uniqueItems": True}},
    {"name": "fieldValidation", "in": "query", "schema": {"type": "string", "uniqueItems": True}},
    {"name": "force", "in": "query", "schema": {"type": "boolean", "uniqueItems": True}},
]


def _gv_path(rt: ResourceType) -> str:
    return f"api/{rt.version}" if not rt.group else f"apis/{rt.group}/{rt.version}"


def _operation(rt: ResourceType, action: str) -> dict[str, Any]:
    return {
        "operationId": f"{action}{rt.kind}",
        "parameters": _PARAMETERS,
        "responses": {"200": {"description": "OK"}},
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": {
            "group": rt.group,
            "version": rt.version,
            "kind": rt.kind,
        },
    }


def group_version_document(registry: Registry, gv_path: str) -> dict[str, Any] | None:
    types = [rt for rt in registry if _gv_path(rt) == gv_path]
    if not types:
        return None
    paths: dict[str, Any] = {}
    for rt in sorted(types, key=lambda t: t.plural):
        scope = "/namespaces/{namespace}" if rt.namespaced else ""
        collection = f"/{gv_path}{scope}/{rt.plural}"
        paths[collection] = {"post": _operation(rt, "post")}
        paths[f"{collection}/{{name}}"] = {
            "put": _operation(rt, "put"),
            "patch": _operation(rt, "patch"),
        }
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": f"v1.{kube_minor(registry)}.0"},
        "paths": paths,
        "components": {"schemas": {}},
    }


def index(registry: Registry) -> dict[str, Any]:
    paths = {}
    for gv_path in sorted({_gv_path(rt) for rt in registry}):
        doc = group_version_document(registry, gv_path)
        digest = hashlib.sha512(dumps(doc)).hexdigest()[:32].upper()
        paths[gv_path] = {"serverRelativeURL": f"/openapi/v3/{gv_path}?hash={digest}"}
    return {"paths": paths}
