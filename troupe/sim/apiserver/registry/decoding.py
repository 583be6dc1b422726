"""The Go types an API write must decode into, for the fields that are modelled.

kube-apiserver decodes a body into its Go struct before anything else runs, so a
value of the wrong JSON type is a 400, never stored: ``Pod in version "v1" cannot be
handled as a Pod: json: cannot unmarshal array into Go struct field
ObjectMeta.metadata.labels of type map[string]string``. The embedded server keeps
objects as JSON, so ``check_types`` walks the parts a ``Struct`` schema describes
(object metadata for every kind; what the scheduler reads of pods, nodes, bindings,
PriorityClasses and PDBs; Leases) in document order and raises the first mismatch
as encoding/json words it: the innermost Go struct, the JSON path without indices,
the Go type. Fields a schema does not describe are stored as given (upstream would
drop the ones its type lacks). ``null`` is accepted anywhere, as Go's decoder sets
the zero value. Called by the kinds' strategies (``Strategy.check_types``) on writes
through the API.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Final

from troupe.sim.apiserver.machinery import errors

_MICRO_TIME: Final = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}(Z|[+-]\d{2}:\d{2})")
_TIME: Final = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})")
_TIME_LAYOUTS: Final = {
    "microtime": (
        _MICRO_TIME,
        "2006-01-02T15:04:05.000000Z07:00",
        "a MicroTime needs six fractional digits and a zone",
    ),
    "time": (_TIME, "2006-01-02T15:04:05Z07:00", "a Time needs a date, a time and a zone"),
}


@dataclass(frozen=True, slots=True)
class Scalar:
    go: str  # the Go type: "string", "int32", "bool", "v1.TaintEffect", ...
    kind: str  # "string", "int", "bool", "time", "microtime", "intorstring"
    bits: int = 64


@dataclass(frozen=True, slots=True)
class List:
    go: str
    elem: Node | None


@dataclass(frozen=True, slots=True)
class Map:
    go: str
    elem: Node | None  # None: values checked elsewhere (quantities)


@dataclass(frozen=True, slots=True)
class Struct:
    go: str  # "v1.PodSpec"; the struct's own name is what follows the dot
    fields: dict[str, Node] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.go.rpartition(".")[2]


Node = Scalar | List | Map | Struct


class _TypeMismatch(Exception):
    pass


def string(go: str = "string") -> Scalar:
    return Scalar(go, "string")


STRING: Final = string()
INT32: Final = Scalar("int32", "int", 32)
INT64: Final = Scalar("int64", "int", 64)
BOOL: Final = Scalar("bool", "bool")
MICRO_TIME: Final = Scalar("v1.MicroTime", "microtime")
TIME: Final = Scalar("v1.Time", "time")
INT_OR_STRING: Final = Scalar("intstr.IntOrString", "intorstring")
STRINGS: Final = List("[]string", STRING)
STRING_MAP: Final = Map("map[string]string", STRING)
RESOURCE_LIST: Final = Map("v1.ResourceList", None)

OWNER_REFERENCE: Final = Struct(
    "v1.OwnerReference",
    {
        "apiVersion": STRING,
        "kind": STRING,
        "name": STRING,
        "uid": string("types.UID"),
        "controller": BOOL,
        "blockOwnerDeletion": BOOL,
    },
)
OBJECT_META: Final = Struct(
    "v1.ObjectMeta",
    {
        "name": STRING,
        "generateName": STRING,
        "namespace": STRING,
        "uid": string("types.UID"),
        "resourceVersion": STRING,
        "generation": INT64,
        "deletionGracePeriodSeconds": INT64,
        "labels": STRING_MAP,
        "annotations": STRING_MAP,
        "ownerReferences": List("[]v1.OwnerReference", OWNER_REFERENCE),
        "finalizers": STRINGS,
    },
)


def object_type(kind: str, **fields: Node) -> Struct:
    """A top-level kind: type metadata, object metadata and ``fields``."""
    return Struct(
        f"v1.{kind}",
        {"apiVersion": STRING, "kind": STRING, "metadata": OBJECT_META, **fields},
    )


def check_types(kind: str, version: str, obj: Any, schema: Struct) -> None:
    """Raise the 400 kube-apiserver's decoder answers for ``obj`` (a ``kind`` written
    at ``version``), if any."""
    try:
        _check(obj, schema, schema, "")
    except _TypeMismatch as mismatch:
        raise errors.bad_request(
            f'{kind} in version "{version}" cannot be handled as a {kind}: {mismatch}'
        ) from None


def _json_kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, str):
        return "string"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, list):
        return "array"
    return "object"


def _mismatch(shown: str, owner: Struct, path: str, node: Node) -> _TypeMismatch:
    return _TypeMismatch(
        f"json: cannot unmarshal {shown} into Go struct field {owner.name}.{path} of type {node.go}"
    )


def _check(value: Any, node: Node, owner: Struct, path: str) -> None:
    if value is None:
        return
    if isinstance(node, Struct):
        if not isinstance(value, dict):
            raise _mismatch(_json_kind(value), owner, path, node)
        for key, item in value.items():
            child = node.fields.get(key)
            if child is not None:
                _check(item, child, node, f"{path}.{key}" if path else key)
    elif isinstance(node, List):
        if not isinstance(value, list):
            raise _mismatch(_json_kind(value), owner, path, node)
        if node.elem is not None:
            for item in value:
                _check(item, node.elem, owner, path)
    elif isinstance(node, Map):
        if not isinstance(value, dict):
            raise _mismatch(_json_kind(value), owner, path, node)
        if node.elem is not None:
            for item in value.values():
                _check(item, node.elem, owner, path)
    else:
        _check_scalar(value, node, owner, path)


def _check_scalar(value: Any, node: Scalar, owner: Struct, path: str) -> None:
    if node.kind == "int":
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise _mismatch(_json_kind(value), owner, path, node)
        limit = 1 << (node.bits - 1)
        if isinstance(value, float) or not -limit <= value < limit:
            raise _mismatch(f"number {value}", owner, path, node)
    elif node.kind == "bool":
        if not isinstance(value, bool):
            raise _mismatch(_json_kind(value), owner, path, node)
    elif node.kind in _TIME_LAYOUTS:
        # metav1.Time / MicroTime decode a string themselves, without the field's context.
        if not isinstance(value, str):
            raise _TypeMismatch(
                f"json: cannot unmarshal {_json_kind(value)} into Go value of type string"
            )
        pattern, layout, why = _TIME_LAYOUTS[node.kind]
        if pattern.fullmatch(value) is None:
            raise _TypeMismatch(f'{path}: parsing time "{value}" as "{layout}": {why}')
    elif node.kind == "intorstring":
        if isinstance(value, bool) or not isinstance(value, int | str):
            shown = f"number {value}" if isinstance(value, float) else _json_kind(value)
            raise _TypeMismatch(f"json: cannot unmarshal {shown} into Go value of type int32")
    elif not isinstance(value, str):
        raise _mismatch(_json_kind(value), owner, path, node)
