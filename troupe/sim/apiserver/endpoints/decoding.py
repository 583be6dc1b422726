"""Request bodies to JSON values, within kube-apiserver's limits.

- A body over ``MAX_REQUEST_BYTES`` (3 MiB, kube-apiserver's ``MaxRequestBodyBytes``)
  is refused with 413 ``Request entity too large: limit is 3145728`` before it is read
  whole, as ``limitedReadBody`` does.
- JSON must be JSON: ``NaN``, ``Infinity`` and numbers beyond a float64 are refused,
  and an unpaired ``\\uD800`` becomes U+FFFD as Go's decoder makes it;
  YAML is converted to JSON as sigs.k8s.io/yaml converts it (timestamps stay strings,
  map keys become strings, ``!!binary`` becomes text, ``.nan`` / ``.inf`` are refused)
  and its aliases may expand only as far as go-yaml lets them (``allowedAliasRatio``,
  CVE-2019-11253): ``yaml: document contains excessive aliasing``.
- Values nest at most ``MAX_DEPTH`` levels. Upstream's decoders stop at 10000; the
  embedded server stops at 100, deep enough for any real object and shallow enough
  that every stored object can be encoded and copied again (its JSON encoder gives up
  near 255 levels).
- A value that results from a body (YAML aliases expanded) or a patch is at most
  ``MAX_OBJECT_BYTES`` of JSON, or the answer is the same 413.

A body that does not decode is a 400 worded as ``transformDecodeError`` words it:
``the object provided is unrecognized (must be of type Pod): <why> (<the body's first
30 bytes>)``. Used by ``request.read_json`` and the PATCH handler.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
from typing import Any, Final

import yaml

from troupe.sim.apiserver.machinery import errors
from troupe.sim.apiserver.machinery.encoding import dumps

MAX_REQUEST_BYTES: Final = 3 * 1024 * 1024
MAX_OBJECT_BYTES: Final = MAX_REQUEST_BYTES
MAX_DEPTH: Final = 100
_LOADER: Final = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
# An escaped UTF-16 surrogate: JSON may leave one unpaired, which no encoder can write.
_SURROGATE_ESCAPE: Final = re.compile(rb"\\[uU]0*[dD][89a-fA-F]")
_TAG: Final = "tag:yaml.org,2002:"


class DecodeError(ValueError):
    """The body does not decode; the message says why, as Go's decoders word it."""


def too_large() -> errors.ApiError:
    """``errors.NewRequestEntityTooLargeError``."""
    return errors.ApiError(
        errors.status_failure(
            413,
            "RequestEntityTooLarge",
            f"Request entity too large: limit is {MAX_REQUEST_BYTES}",
            {},
        )
    )


def summarize(body: bytes, limit: int = 30) -> str:
    """``summarizeData``: JSON objects as text, anything else as hex."""
    if not body:
        return "<empty>"
    head = body[:limit]
    shown = head.decode("utf-8", "replace") if body[:1] == b"{" else head.hex()
    return shown + (" ..." if len(body) > limit else "")


def unrecognized(kind: str, why: str, body: bytes) -> errors.ApiError:
    return errors.bad_request(
        f"the object provided is unrecognized (must be of type {kind}): {why} ({summarize(body)})"
    )


def check_size(value: Any) -> None:
    """413 for a value whose JSON is over ``MAX_OBJECT_BYTES``."""
    if len(dumps(value)) > MAX_OBJECT_BYTES:
        raise too_large()


def check_patched(kind: str, version: str, value: Any) -> None:
    """What a patch produced stays within ``MAX_DEPTH`` (400) and ``MAX_OBJECT_BYTES``
    (413), as a body would have to."""
    if isinstance(value, dict | list) and depth_exceeded(value):
        raise errors.bad_request(
            f'{kind} in version "{version}" cannot be handled as a {kind}: exceeded max depth'
        )
    check_size(value)


def depth_exceeded(value: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether ``value`` nests deeper than ``limit`` (iteratively: no recursion)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        for child in item.values() if isinstance(item, dict) else item:
            if isinstance(child, dict | list):
                if depth + 1 > limit:
                    return True
                stack.append((child, depth + 1))
    return False


# --- JSON ------------------------------------------------------------------------------


def _refuse_constant(name: str) -> Any:
    raise DecodeError(f"invalid character '{name[0]}' looking for beginning of value")


def _finite(text: str) -> float:
    number = float(text)
    if math.isinf(number):
        raise DecodeError(f"number {text} is out of range")
    return number


_DECODER: Final = json.JSONDecoder(parse_constant=_refuse_constant, parse_float=_finite)


def decode_json(body: bytes) -> Any:
    """Parse JSON as Go's decoder would accept it; raises ``DecodeError``."""
    try:
        value = _DECODER.decode(body.decode(json.detect_encoding(body), "surrogatepass"))
    except RecursionError:
        raise DecodeError("exceeded max depth") from None
    except ValueError as error:  # JSONDecodeError, bad UTF-8, too many digits, ours
        raise DecodeError(str(error)) from None
    many = isinstance(value, dict | list) and body.count(b"{") + body.count(b"[") > MAX_DEPTH
    if many and depth_exceeded(value):
        raise DecodeError("exceeded max depth")
    return without_lone_surrogates(value) if _SURROGATE_ESCAPE.search(body) else value


def without_lone_surrogates(value: Any) -> Any:
    """Unpaired surrogates replaced by U+FFFD, as Go's decoders replace them (Python's
    keeps them, and then nothing can encode the object again)."""
    if isinstance(value, str):
        return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    if isinstance(value, list):
        return [without_lone_surrogates(item) for item in value]
    if isinstance(value, dict):
        return {
            without_lone_surrogates(key): without_lone_surrogates(item)
            for key, item in value.items()
        }
    return value


# --- YAML ------------------------------------------------------------------------------


def _allowed_alias_ratio(decodes: int) -> float:
    """go-yaml's ``allowedAliasRatio``: 99% of small documents may come from aliases,
    scaling down to 10% at 4,000,000 decodes."""
    low, high = 400_000, 4_000_000
    if decodes <= low:
        return 0.99
    if decodes >= high:
        return 0.10
    return 0.99 - 0.89 * (decodes - low) / (high - low)


class _YamlToJson:
    """Walks a composed YAML node graph in document order, as go-yaml's decoder does:
    a node met again is an alias, and every node decoded under one counts towards the
    alias ratio."""

    def __init__(self) -> None:
        self.decodes = 0
        self.aliased = 0
        self.alias_depth = 0
        self.seen: set[int] = set()
        self.path: set[int] = set()
        self.constructor = yaml.constructor.SafeConstructor()

    def value(self, node: yaml.Node, depth: int) -> Any:
        alias = id(node) in self.seen
        self.seen.add(id(node))
        if id(node) in self.path:
            raise DecodeError("yaml: anchor value contains itself")
        self._count()
        if alias:
            self.alias_depth += 1
            self._count()
        try:
            return self._build(node, depth)
        finally:
            if alias:
                self.alias_depth -= 1

    def _count(self) -> None:
        self.decodes += 1
        if self.alias_depth > 0:
            self.aliased += 1
        if (
            self.aliased > 100
            and self.decodes > 1000
            and self.aliased / self.decodes > _allowed_alias_ratio(self.decodes)
        ):
            raise DecodeError("yaml: document contains excessive aliasing")

    def _build(self, node: yaml.Node, depth: int) -> Any:
        if isinstance(node, yaml.ScalarNode):
            return self._scalar(node)
        if depth >= MAX_DEPTH:
            raise DecodeError(f"yaml: exceeded max depth of {MAX_DEPTH}")
        self.path.add(id(node))
        try:
            if isinstance(node, yaml.MappingNode):
                return self._mapping(node, depth)
            return [self.value(item, depth + 1) for item in node.value]
        finally:
            self.path.discard(id(node))

    def _mapping(self, node: yaml.MappingNode, depth: int) -> dict[str, Any]:
        self.constructor.flatten_mapping(node)  # merge keys (<<), as go-yaml does
        out: dict[str, Any] = {}
        for key_node, value_node in node.value:
            key = self.value(key_node, depth + 1)
            out[_json_key(key)] = self.value(value_node, depth + 1)
        return out

    def _scalar(self, node: yaml.ScalarNode) -> Any:
        tag = node.tag
        if tag in (_TAG + "null", _TAG + "bool", _TAG + "int"):
            return self.constructor.construct_object(node)
        if tag == _TAG + "float":
            number = self.constructor.construct_yaml_float(node)
            if not math.isfinite(number):
                raise DecodeError(f"json: unsupported value: {_go_float(number)}")
            return number
        if tag == _TAG + "binary":
            try:
                raw = base64.b64decode(node.value.encode("ascii", "replace"))
            except binascii.Error:
                raise DecodeError("yaml: !!binary value contains invalid base64 data") from None
            return raw.decode("utf-8", "replace")
        return str(node.value)  # strings, timestamps (kept as text), unknown tags


def _go_float(number: float) -> str:
    if math.isnan(number):
        return "NaN"
    return "+Inf" if number > 0 else "-Inf"


def _json_key(key: Any) -> str:
    """sigs.k8s.io/yaml: non-string keys become strings; others are an error."""
    if isinstance(key, str):
        return key
    if isinstance(key, bool):
        return "true" if key else "false"
    if isinstance(key, int | float):
        return repr(key)
    raise DecodeError(f"unsupported map key of type: {type(key).__name__}, key: {key!r}")


def decode_yaml(body: bytes) -> Any:
    """YAML to a JSON value as the API server converts it; raises ``DecodeError``."""
    loader = _LOADER(body)
    try:
        node = loader.get_node() if loader.check_node() else None
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark
        where = f"line {mark.line + 1}: " if mark is not None else ""
        raise DecodeError(f"yaml: {where}{error.problem}") from None
    except (yaml.YAMLError, RecursionError, ValueError) as error:
        raise DecodeError(f"yaml: {error}") from None
    finally:
        loader.dispose()
    if node is None:
        return None
    try:
        value = _YamlToJson().value(node, 0)
        return without_lone_surrogates(value) if _SURROGATE_ESCAPE.search(body) else value
    except yaml.YAMLError as error:
        raise DecodeError(f"yaml: {error}") from None
    except RecursionError:
        raise DecodeError(f"yaml: exceeded max depth of {MAX_DEPTH}") from None
