"""What a resource request is, and how its body and query are read.

``ResourceRequest`` is the parsed path (``server.ApiServer`` builds it the way
``RequestInfoFactory`` does); ``read_json`` decodes a body (JSON, or YAML for
``application/yaml``; protobuf and CBOR are refused with 415) within the limits of
``decoding.py``; ``int_param`` reads an integer parameter as the parameter codec does;
``selectors`` parses the ``labelSelector`` and ``fieldSelector`` parameters and checks
the field labels against the kind's. Used by the verb handlers, the watch streamer and
the review endpoints.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Final

from aiohttp import web

from troupe.sim.apiserver.endpoints.decoding import (
    MAX_REQUEST_BYTES,
    DecodeError,
    check_size,
    decode_json,
    decode_yaml,
    too_large,
    unrecognized,
)
from troupe.sim.apiserver.machinery import errors
from troupe.sim.apiserver.machinery.encoding import dumps
from troupe.sim.apiserver.machinery.field import go_quote
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
_DECIMAL: Final = re.compile(r"[+-]?[0-9]+")


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


async def read_body(request: web.Request) -> bytes:
    """The body, refused with 413 once it passes ``MAX_REQUEST_BYTES`` (``limitedReadBody``)."""
    length = request.content_length
    if length is not None and length > MAX_REQUEST_BYTES:
        raise too_large()
    chunks: list[bytes] = []
    size = 0
    while chunk := await request.content.readany():
        size += len(chunk)
        if size > MAX_REQUEST_BYTES:
            raise too_large()
        chunks.append(chunk)
    return b"".join(chunks)


async def read_json(request: web.Request, kind: str | None = None) -> Any:
    """The request body as JSON (``application/json``, or YAML for ``application/yaml``),
    within the limits of ``decoding.py``. ``kind`` names the type the body must be in a
    decode error (``must be of type Pod``); None for a patch, whose errors are plain.

    Protobuf and CBOR bodies are refused with 415: the embedded server keeps objects as
    JSON and has no protobuf schemas (docs/embedded-cluster.md has the kubectl workaround).
    """
    body = await read_body(request)
    if not body:
        return {}
    content_type = request.content_type if "Content-Type" in request.headers else JSON
    if content_type == YAML:
        try:
            value = decode_yaml(body)
        except DecodeError as error:
            raise _undecodable(kind, f"error converting YAML to JSON: {error}", body) from None
        check_size(value)  # aliases may have expanded it past what the body was
        return {} if value is None else value
    if not content_type.endswith("json"):
        raise unsupported_media_type(content_type, [JSON, YAML])
    try:
        return decode_json(body)
    except DecodeError as error:
        why = f"couldn't get version/kind; json parse error: {error}"
        raise _undecodable(kind, why, body) from None


def _undecodable(kind: str | None, why: str, body: bytes) -> errors.ApiError:
    return unrecognized(kind, why, body) if kind is not None else errors.bad_request(why)


def int_param(query: Any, name: str) -> int | None:
    """An int64 query parameter as the parameter codec reads it (``strconv.ParseInt``):
    absent is None, anything else that is not a decimal int64 is a 400."""
    text = query.get(name)
    if text is None:
        return None
    if _DECIMAL.fullmatch(text) is None:
        raise errors.bad_request(f"strconv.ParseInt: parsing {go_quote(text)}: invalid syntax")
    value = int(text)
    if not -(1 << 63) <= value < (1 << 63):
        raise errors.bad_request(f"strconv.ParseInt: parsing {go_quote(text)}: value out of range")
    return value


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
