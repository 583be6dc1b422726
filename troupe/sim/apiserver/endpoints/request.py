"""What a resource request is, and how its body and query are read.

``ResourceRequest`` is the parsed path (``server.ApiServer`` builds it the way
``RequestInfoFactory`` does); ``read_json`` decodes a body (JSON, or YAML for
``application/yaml``; protobuf and CBOR are refused with 415); ``selectors`` parses the
``labelSelector`` and ``fieldSelector`` parameters and checks the field labels against
the kind's. Used by the verb handlers, the watch streamer and the review endpoints.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Final

import yaml
from aiohttp import web

from troupe.sim.apiserver.machinery import errors
from troupe.sim.apiserver.machinery.encoding import dumps
from troupe.sim.apiserver.machinery.resources import ResourceType
from troupe.sim.apiserver.machinery.selectors import (
    FieldSelector,
    LabelSelector,
    SelectorError,
    parse_field_selector,
    parse_label_selector,
)

JSON: Final = "application/json"
YAML: Final = "application/yaml"
MERGE_PATCH: Final = "application/merge-patch+json"
STRATEGIC_PATCH: Final = "application/strategic-merge-patch+json"
JSON_PATCH: Final = "application/json-patch+json"
APPLY_PATCH: Final = "application/apply-patch+yaml"


@dataclass(frozen=True, slots=True)
class ResourceRequest:
    rt: ResourceType
    namespace: str | None
    name: str | None
    subresource: str | None


def json_response(value: Any, status: int = 200) -> web.Response:
    return web.Response(body=dumps(value), status=status, content_type="application/json")


def unsupported_media_type(content_type: str, accepted: list[str]) -> errors.ApiError:
    """``negotiation.NewUnsupportedMediaTypeError``, naming the refused type: client-go
    reports it as is, so the user learns which encoding to switch to."""
    return errors.ApiError(
        errors.status_failure(
            415,
            "UnsupportedMediaType",
            f"the body of the request was in an unknown format ({content_type}) - accepted "
            "media types include: " + ", ".join(accepted),
            {},
        )
    )


async def read_json(request: web.Request) -> Any:
    """The request body as JSON (``application/json``, or YAML for ``application/yaml``).

    Protobuf and CBOR bodies are refused with 415: the embedded server keeps objects as
    JSON and has no protobuf schemas (docs/embedded-cluster.md has the kubectl workaround).
    """
    body = await request.read()
    if not body:
        return {}
    content_type = request.content_type if "Content-Type" in request.headers else JSON
    if content_type == YAML:
        try:
            return yaml.safe_load(body)
        except yaml.YAMLError as error:
            raise errors.bad_request(
                f"couldn't get version/kind; yaml parse error: {error}"
            ) from None
    if not content_type.endswith("json"):
        raise unsupported_media_type(content_type, [JSON, YAML])
    try:
        return json.loads(body)
    except ValueError as error:
        raise errors.bad_request(f"couldn't get version/kind; json parse error: {error}") from None


def selectors(rt: ResourceType, query: Any) -> tuple[LabelSelector, FieldSelector]:
    try:
        labels = parse_label_selector(query.get("labelSelector"))
        fields = parse_field_selector(query.get("fieldSelector"))
    except SelectorError as error:
        raise errors.bad_request(str(error)) from None
    for field in fields.fields:
        if not rt.supports_field(field):
            raise errors.bad_request(rt.field_error(field))
    return labels, fields
