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
    """A value ``node`` cannot hold. The JSON path and the innermost struct are added as
    the check unwinds, so a value that fits costs no path building."""

    def __init__(self, shown: str, node: Node, *, plain: str = "") -> None:
        super().__init__(shown)
        self.shown = shown
        self.node = node
        self.plain = plain  # a message worded without the field (Time, IntOrString)
        self.keys: list[str] = []
        self.owner: Struct | None = None

    def message(self, root: Struct) -> str:
        path = ".".join(reversed(self.keys))
        if self.plain:
            return self.plain.format(path=path)
        owner = self.owner or root
        return (
            f"json: cannot unmarshal {self.shown} into Go struct field {owner.name}.{path} "
            f"of type {self.node.go}"
        )


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
        _struct(obj, schema)
    except _TypeMismatch as mismatch:
        raise errors.bad_request(
            f'{kind} in version "{version}" cannot be handled as a {kind}: '
            f"{mismatch.message(schema)}"
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


def _check(value: Any, node: Node) -> None:
    if value is not None:
        _CHECKS[type(node)](value, node)


def _struct(value: Any, node: Any) -> None:
    if type(value) is not dict:
        raise _TypeMismatch(_json_kind(value), node)
    fields = node.fields
    for key, item in value.items():
        child = fields.get(key)
        if child is not None and item is not None:
            try:
                _CHECKS[type(child)](item, child)
            except _TypeMismatch as mismatch:
                mismatch.keys.append(key)
                if mismatch.owner is None:
                    mismatch.owner = node
                raise


def _list(value: Any, node: Any) -> None:
    if type(value) is not list:
        raise _TypeMismatch(_json_kind(value), node)
    if node.elem is not None:
        for item in value:
            _check(item, node.elem)


def _map(value: Any, node: Any) -> None:
    if type(value) is not dict:
        raise _TypeMismatch(_json_kind(value), node)
    if node.elem is not None:
        for item in value.values():
            _check(item, node.elem)


def _scalar(value: Any, node: Any) -> None:
    kind = node.kind
    if kind == "string":
        if type(value) is not str:
            raise _TypeMismatch(_json_kind(value), node)
    elif kind == "int":
        if type(value) is not int:
            shown = f"number {value}" if type(value) is float else _json_kind(value)
            raise _TypeMismatch(shown, node)
        limit = 1 << (node.bits - 1)
        if not -limit <= value < limit:
            raise _TypeMismatch(f"number {value}", node)
    elif kind == "bool":
        if type(value) is not bool:
            raise _TypeMismatch(_json_kind(value), node)
    elif kind in _TIME_LAYOUTS:
        # metav1.Time / MicroTime decode a string themselves, without the field's context.
        if type(value) is not str:
            plain = f"json: cannot unmarshal {_json_kind(value)} into Go value of type string"
            raise _TypeMismatch("", node, plain=plain)
        pattern, layout, why = _TIME_LAYOUTS[kind]
        if pattern.fullmatch(value) is None:
            shown = value.replace("{", "{{").replace("}", "}}")
            plain = f'{{path}}: parsing time "{shown}" as "{layout}": {why}'
            raise _TypeMismatch("", node, plain=plain)
    elif kind == "intorstring" and type(value) not in (int, str):
        shown = f"number {value}" if type(value) is float else _json_kind(value)
        plain = f"json: cannot unmarshal {shown} into Go value of type int32"
        raise _TypeMismatch("", node, plain=plain.replace("{", "{{").replace("}", "}}"))


_CHECKS: Final[dict[type, Any]] = {Struct: _struct, List: _list, Map: _map, Scalar: _scalar}
