"""A CustomResourceDefinition's structural schema applied to its custom resources.

``Store.create`` / ``Store.update`` with ``validate=True`` (every write through the
HTTP API) call ``apply_schema`` with the ``openAPIV3Schema`` of the version written,
and the object is then, as kube-apiserver's apiextensions handler treats it:

1. pruned: a field the schema does not declare is dropped, unless the object (or the
   field's parent) says ``x-kubernetes-preserve-unknown-fields: true``; a map under
   ``additionalProperties`` keeps its keys; an ``x-kubernetes-embedded-resource``
   keeps ``apiVersion``, ``kind`` and ``metadata``; the root's ``apiVersion``, ``kind``
   and ``metadata`` are never pruned;
2. defaulted: an absent property with a ``default`` gets it;
3. validated, with upstream's field errors (kube-openapi's messages as
   ``apiextensions-apiserver`` converts them): ``type`` (``integer``, ``number``,
   ``string``, ``boolean``, ``object``, ``array``; ``null`` only where ``nullable``;
   ``x-kubernetes-int-or-string``), ``required``, ``enum``, ``minimum`` / ``maximum``
   (and their exclusive forms), ``multipleOf``, ``pattern``, ``minLength`` /
   ``maxLength``, ``minItems`` / ``maxItems``, ``uniqueItems``, ``minProperties`` /
   ``maxProperties``, ``format`` (``date-time``, ``int32``, ``int64``), and the value
   validations ``allOf`` / ``anyOf`` / ``oneOf`` / ``not``.

Any cause refuses the write with a 422 Invalid naming each field
(``spec.minMember: Invalid value: "string": spec.minMember in body must be of type
integer: "string"``). ``x-kubernetes-validations`` (CEL rules), list-type and map-type
uniqueness are not checked.
"""

from __future__ import annotations

import copy
import json
import re
from functools import lru_cache
from typing import Any, Final

from troupe.sim.apiserver.machinery import errors
from troupe.sim.apiserver.machinery.resources import ResourceType

Obj = dict[str, Any]
Schema = dict[str, Any]
Cause = tuple[str, str, str]

_ROOT_KEPT: Final = ("apiVersion", "kind", "metadata")
_DATE_TIME: Final = re.compile(
    r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$"
)
_INT_RANGES: Final = {"int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1)}


@lru_cache(maxsize=256)
def _pattern(text: str) -> re.Pattern[str] | None:
    try:
        return re.compile(text)
    except re.error:
        return None


def _shown(value: Any) -> str:
    """A bad value as Go's field error prints it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    return json.dumps(value, separators=(",", ":"))


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _is_type(value: Any, type_: str) -> bool:
    if type_ == "integer":
        return (isinstance(value, int) and not isinstance(value, bool)) or (
            isinstance(value, float) and value.is_integer()
        )
    if type_ == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if type_ == "string":
        return isinstance(value, str)
    if type_ == "boolean":
        return isinstance(value, bool)
    if type_ == "object":
        return isinstance(value, dict)
    if type_ == "array":
        return isinstance(value, list)
    return True


# --- pruning and defaulting ---------------------------------------------------------


def _prune(value: Any, schema: Schema, root: bool = False) -> None:
    """Drop undeclared fields of ``value`` in place and fill declared defaults."""
    if not isinstance(schema, dict):
        return
    if isinstance(value, list):
        items = schema.get("items")
        if isinstance(items, dict):
            for item in value:
                _prune(item, items)
        return
    if not isinstance(value, dict) or schema.get("x-kubernetes-int-or-string"):
        return
    properties = schema.get("properties") or {}
    additional = schema.get("additionalProperties")
    preserve = bool(schema.get("x-kubernetes-preserve-unknown-fields")) or additional is True
    embedded = bool(schema.get("x-kubernetes-embedded-resource"))
    for key in list(value):
        if root and key in _ROOT_KEPT:
            continue
        sub = properties.get(key)
        if sub is not None:
            _prune(value[key], sub)
        elif isinstance(additional, dict):
            _prune(value[key], additional)
        elif not (preserve or (embedded and key in _ROOT_KEPT)):
            del value[key]
    for key, sub in properties.items():
        fill = isinstance(sub, dict) and "default" in sub and not (root and key in _ROOT_KEPT)
        if fill and key not in value:
            value[key] = copy.deepcopy(sub["default"])


# --- validation ---------------------------------------------------------------------


def _invalid(path: str, value: Any, detail: str) -> Cause:
    return (path, "FieldValueInvalid", f"Invalid value: {_shown(value)}: {detail}")


def _check(value: Any, schema: Schema, path: str, causes: list[Cause]) -> None:
    """Append the causes ``value`` at ``path`` violates in ``schema``."""
    if not isinstance(schema, dict):
        return
    at = path or "<root>"
    if value is None:
        if not schema.get("nullable") and ("type" in schema or schema.get("properties")):
            type_ = schema.get("type", "object")
            causes.append(
                (
                    at,
                    "FieldValueTypeInvalid",
                    f'Invalid value: "null": {at} in body must be of type {type_}: "null"',
                )
            )
        return
    if schema.get("x-kubernetes-int-or-string"):
        if not (_is_type(value, "integer") or isinstance(value, str)):
            name = _type_name(value)
            causes.append(
                (
                    at,
                    "FieldValueTypeInvalid",
                    f'Invalid value: "{name}": {at} in body must be of type '
                    f'integer,string: "{name}"',
                )
            )
            return
    elif "type" in schema and not _is_type(value, schema["type"]):
        name = _type_name(value)
        causes.append(
            (
                at,
                "FieldValueTypeInvalid",
                f'Invalid value: "{name}": {at} in body must be of type {schema["type"]}: "{name}"',
            )
        )
        return
    before = len(causes)
    _check_value(value, schema, at, causes)
    if len(causes) > before:
        return
    if isinstance(value, dict):
        _check_object(value, schema, path, causes)
    elif isinstance(value, list):
        _check_array(value, schema, path, at, causes)


def _check_value(value: Any, schema: Schema, at: str, causes: list[Cause]) -> None:
    """Value validations that do not descend: enum, ranges, string and format rules,
    and the combinators."""
    enum = schema.get("enum")
    if isinstance(enum, list) and value not in enum:
        supported = ", ".join(_shown(v) for v in enum)
        causes.append(
            (
                at,
                "FieldValueNotSupported",
                f"Unsupported value: {_shown(value)}: supported values: {supported}",
            )
        )
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if number:
        _check_number(value, schema, at, causes)
    if isinstance(value, str):
        _check_string(value, schema, at, causes)
    for sub in schema.get("allOf") or ():
        _check(value, sub, at, causes)
    any_of = schema.get("anyOf")
    if any_of and not any(_passes(value, sub, at) for sub in any_of):
        detail = f"{at} in body must validate at least one schema (anyOf)"
        causes.append(_invalid(at, value, detail))
    one_of = schema.get("oneOf")
    if one_of:
        passed = sum(_passes(value, sub, at) for sub in one_of)
        if passed != 1:
            detail = f"{at} in body must validate one and only one schema (oneOf)"
            causes.append(_invalid(at, value, detail))
    not_ = schema.get("not")
    if isinstance(not_, dict) and _passes(value, not_, at):
        causes.append(_invalid(at, value, f"{at} in body should not validate the schema (not)"))


def _passes(value: Any, schema: Schema, at: str) -> bool:
    sub: list[Cause] = []
    _check(value, schema, at, sub)
    return not sub


def _check_number(value: float, schema: Schema, at: str, causes: list[Cause]) -> None:
    minimum = schema.get("minimum")
    if minimum is not None:
        if schema.get("exclusiveMinimum") and value <= minimum:
            causes.append(_invalid(at, value, f"{at} in body should be greater than {minimum}"))
        elif value < minimum:
            detail = f"{at} in body should be greater than or equal to {minimum}"
            causes.append(_invalid(at, value, detail))
    maximum = schema.get("maximum")
    if maximum is not None:
        if schema.get("exclusiveMaximum") and value >= maximum:
            causes.append(_invalid(at, value, f"{at} in body should be less than {maximum}"))
        elif value > maximum:
            detail = f"{at} in body should be less than or equal to {maximum}"
            causes.append(_invalid(at, value, detail))
    multiple = schema.get("multipleOf")
    if multiple and (value / multiple) != int(value / multiple):
        causes.append(_invalid(at, value, f"{at} in body should be a multiple of {multiple}"))
    bounds = _INT_RANGES.get(schema.get("format", ""))
    if bounds is not None and not bounds[0] <= value <= bounds[1]:
        causes.append(
            _invalid(at, value, f"{at} in body must be of type {schema['format']}: {_shown(value)}")
        )


def _check_string(value: str, schema: Schema, at: str, causes: list[Cause]) -> None:
    max_length = schema.get("maxLength")
    if max_length is not None and len(value) > max_length:
        causes.append(
            (at, "FieldValueTooLong", f"Too long: may not be more than {max_length} bytes")
        )
    min_length = schema.get("minLength")
    if min_length is not None and len(value) < min_length:
        detail = f"{at} in body should be at least {min_length} chars long"
        causes.append(_invalid(at, value, detail))
    pattern = schema.get("pattern")
    if isinstance(pattern, str):
        compiled = _pattern(pattern)
        if compiled is not None and compiled.search(value) is None:
            causes.append(_invalid(at, value, f"{at} in body should match '{pattern}'"))
    if schema.get("format") == "date-time" and not _DATE_TIME.match(value):
        causes.append(
            _invalid(at, value, f"{at} in body must be of type date-time: {_shown(value)}")
        )


def _check_object(value: Obj, schema: Schema, path: str, causes: list[Cause]) -> None:
    prefix = f"{path}." if path else ""
    root = not path
    for name in schema.get("required") or ():
        if name not in value:
            causes.append((f"{prefix}{name}", "FieldValueRequired", "Required value"))
    count = len(value)
    at = path or "<root>"
    if (limit := schema.get("maxProperties")) is not None and count > limit:
        causes.append(
            (at, "FieldValueTooMany", f"Too many: {count}: must have at most {limit} items")
        )
    if (limit := schema.get("minProperties")) is not None and count < limit:
        causes.append(_invalid(at, count, f"{at} in body should have at least {limit} properties"))
    properties = schema.get("properties") or {}
    additional = schema.get("additionalProperties")
    for key, item in value.items():
        if root and key == "metadata":
            continue  # ObjectMeta is validated as ObjectMeta, not by the schema
        sub = properties.get(key)
        if sub is None and isinstance(additional, dict):
            sub = additional
        if sub is not None:
            field = f"{prefix}{key}" if sub is properties.get(key) else f"{path}[{key}]"
            _check(item, sub, field, causes)


def _check_array(value: list[Any], schema: Schema, path: str, at: str, causes: list[Cause]) -> None:
    count = len(value)
    if (limit := schema.get("maxItems")) is not None and count > limit:
        causes.append(
            (at, "FieldValueTooMany", f"Too many: {count}: must have at most {limit} items")
        )
    if (limit := schema.get("minItems")) is not None and count < limit:
        causes.append(_invalid(at, value, f"{at} in body should have at least {limit} items"))
    if schema.get("uniqueItems"):
        seen: list[Any] = []
        for i, item in enumerate(value):
            if item in seen:
                duplicate = f"Duplicate value: {_shown(item)}"
                causes.append((f"{path}[{i}]", "FieldValueDuplicate", duplicate))
            seen.append(item)
    items = schema.get("items")
    if isinstance(items, dict):
        for i, item in enumerate(value):
            _check(item, items, f"{path}[{i}]", causes)


def apply_schema(rt: ResourceType, obj: Obj, schema: Schema) -> None:
    """Prune and default ``obj`` in place by ``schema``, then refuse it (``ApiError``,
    422) if it violates the schema."""
    _prune(obj, schema, root=True)
    causes: list[Cause] = []
    _check(obj, schema, "", causes)
    if causes:
        name = str((obj.get("metadata") or {}).get("name", ""))
        raise errors.invalid(rt, name, causes)
