"""Kubernetes' CEL functions for DRA device selectors, on the cel-expr-python runtime.

Kubernetes' CEL base environment (``k8s.io/apiserver/pkg/cel/environment/base.go``) adds
libraries that no CEL runtime on PyPI ships. This module declares the ones a device
selector uses, with upstream's names, overloads and error texts, for
``troupe.api.dra.cel`` (the only caller):

- ``quantity`` (``library/quantity.go``): ``quantity(s)``, ``isQuantity(s)``,
  ``q.sign()``/``sign(q)``, ``isGreaterThan``, ``isLessThan``, ``compareTo``,
  ``asApproximateFloat``, ``asInteger``, ``isInteger``, ``add``/``sub`` (quantity or
  int), ``mul`` (int). ``div``/``divInt`` are not offered.
- ``semver`` (``library/semverlib.go``, version 1): ``semver(s[, normalize])``,
  ``isSemver(s[, normalize])``, ``major``/``minor``/``patch``, ``isGreaterThan``,
  ``isLessThan``, ``compareTo``. Version attributes of devices are semvers too.
- ``lists`` (``library/lists.go``): ``isSorted``, ``sum``, ``min``, ``max``. Its
  ``indexOf``/``lastIndexOf`` on lists are missing: cel-expr-python cannot add overloads
  to the strings extension's functions of the same names.
- ``regex`` (``library/regex.go``): ``find``, ``findAll`` (Python ``re`` syntax, which
  agrees with RE2 on the patterns selectors use).
- ``sets`` (cel-go ``ext.Sets``): ``sets.contains``, ``sets.equivalent``,
  ``sets.intersects``.

cel-expr-python cannot carry Python objects through an evaluation, so a quantity and a
semver are protobuf messages (``kubernetes.Quantity``, ``kubernetes.Semver``, the type
names upstream's error messages show). A quantity holds its exact value as a decimal
count of nano-units, so message equality is value equality (``quantity("1") ==
quantity("1000m")``, as upstream); a semver holds its precedence fields only, so build
metadata does not take part in ``==`` (blang/semver ``Equals``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from fractions import Fraction
from functools import lru_cache
from itertools import pairwise
from typing import Any, Final

from cel_expr_python import cel
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from troupe.api.quantity import NANOS_PER_UNIT, QuantityError, parse_nanos

_INT64_MIN: Final = -(2**63)
_INT64_MAX: Final = 2**63 - 1


def _build_pool() -> descriptor_pool.DescriptorPool:
    file = descriptor_pb2.FileDescriptorProto(
        name="troupe/kubernetes_cel.proto", package="kubernetes", syntax="proto3"
    )
    string, uint64 = descriptor_pb2.FieldDescriptorProto.TYPE_STRING, 4
    optional = descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL
    quantity = file.message_type.add(name="Quantity")
    quantity.field.add(name="nanos", number=1, type=string, label=optional)
    semver = file.message_type.add(name="Semver")
    for number, name in enumerate(("major", "minor", "patch"), start=1):
        semver.field.add(name=name, number=number, type=uint64, label=optional)
    semver.field.add(name="pre", number=4, type=string, label=optional)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return pool


POOL: Final = _build_pool()
# The generated classes take their fields as keyword arguments; typeshed's Message
# does not know them.
_QuantityMessage: Final[Any] = message_factory.GetMessageClass(
    POOL.FindMessageTypeByName("kubernetes.Quantity")
)
_SemverMessage: Final[Any] = message_factory.GetMessageClass(
    POOL.FindMessageTypeByName("kubernetes.Semver")
)
QUANTITY: Final = cel.Type("kubernetes.Quantity")
SEMVER: Final = cel.Type("kubernetes.Semver")
INT, DOUBLE = cel.Type.INT, cel.Type.DOUBLE
BOOL, STRING, DYN = cel.Type.BOOL, cel.Type.STRING, cel.Type.DYN
LIST = cel.Type.List(DYN)


class CelFunctionError(ValueError):
    """Raised by a library function; the runtime turns it into an error value."""


# --- quantity --------------------------------------------------------------------------


@lru_cache(maxsize=4096)
def quantity_value(text: str) -> Any:
    """The ``kubernetes.Quantity`` message of the quantity string ``text``."""
    try:
        nanos = parse_nanos(text)
    except QuantityError as exc:
        raise CelFunctionError(exc.reason) from None
    return _QuantityMessage(nanos=str(nanos))


def _nanos(q: Any) -> int:
    return int(q.nanos)


def _quantity_of(nanos: int) -> Any:
    return _QuantityMessage(nanos=str(nanos))


def _cmp(a: int, b: int) -> int:
    return (a > b) - (a < b)


def _compare(a: Any, b: Any) -> int:
    if a.DESCRIPTOR.name == "Semver":
        return _semver_cmp(a, b)
    return _cmp(_nanos(a), _nanos(b))


def _is_quantity(text: str) -> bool:
    try:
        parse_nanos(text)
    except QuantityError:
        return False
    return True


def _as_integer(q: Any) -> int:
    whole, rest = divmod(_nanos(q), NANOS_PER_UNIT)
    if rest or not _INT64_MIN <= whole <= _INT64_MAX:
        raise CelFunctionError("cannot convert value to integer")
    return whole


def _is_integer(q: Any) -> bool:
    whole, rest = divmod(_nanos(q), NANOS_PER_UNIT)
    return rest == 0 and _INT64_MIN <= whole <= _INT64_MAX


def _quantity_functions() -> list[cel.FunctionDecl]:
    q, qq = [QUANTITY], [QUANTITY, QUANTITY]
    unit = NANOS_PER_UNIT
    return [
        _fn("quantity", ("string_to_quantity", QUANTITY, [STRING], False, quantity_value)),
        _fn("isQuantity", ("is_quantity_string", BOOL, [STRING], False, _is_quantity)),
        _fn(
            "sign",
            ("quantity_sign", INT, q, False, lambda a: _cmp(_nanos(a), 0)),
            ("quantity_sign_member", INT, q, True, lambda a: _cmp(_nanos(a), 0)),
        ),
        # One implementation per name for both types: the runtime dispatches by kind
        # (message, message), so the semver overloads are declared for the type checker
        # only and the quantity one's implementation serves both.
        _fn(
            "isGreaterThan",
            ("quantity_is_greater_than", BOOL, qq, True, lambda a, b: _compare(a, b) > 0),
            ("semver_is_greater_than", BOOL, [SEMVER, SEMVER], True, None),
        ),
        _fn(
            "isLessThan",
            ("quantity_is_less_than", BOOL, qq, True, lambda a, b: _compare(a, b) < 0),
            ("semver_is_less_than", BOOL, [SEMVER, SEMVER], True, None),
        ),
        _fn(
            "compareTo",
            ("quantity_compare_to", INT, qq, True, _compare),
            ("semver_compare_to", INT, [SEMVER, SEMVER], True, None),
        ),
        _fn(
            "asApproximateFloat",
            ("quantity_get_float", DOUBLE, q, True, lambda a: float(Fraction(_nanos(a), unit))),
        ),
        _fn("asInteger", ("quantity_get_int", INT, q, True, _as_integer)),
        _fn("isInteger", ("quantity_is_integer", BOOL, q, True, _is_integer)),
        _fn(
            "add",
            ("quantity_add", QUANTITY, qq, True, lambda a, b: _quantity_of(_nanos(a) + _nanos(b))),
            (
                "quantity_add_int",
                QUANTITY,
                [QUANTITY, INT],
                True,
                lambda a, n: _quantity_of(_nanos(a) + n * unit),
            ),
        ),
        _fn(
            "sub",
            ("quantity_sub", QUANTITY, qq, True, lambda a, b: _quantity_of(_nanos(a) - _nanos(b))),
            (
                "quantity_sub_int",
                QUANTITY,
                [QUANTITY, INT],
                True,
                lambda a, n: _quantity_of(_nanos(a) - n * unit),
            ),
        ),
        _fn(
            "mul",
            (
                "quantity_multiply_int",
                QUANTITY,
                [QUANTITY, INT],
                True,
                lambda a, n: _quantity_of(_nanos(a) * n),
            ),
        ),
    ]


# --- semver ----------------------------------------------------------------------------

_NUMBER = r"(?:0|[1-9][0-9]*)"
_PRE_PART = r"(?:0|[1-9][0-9]*|[0-9]*[A-Za-z-][0-9A-Za-z-]*)"
_SEMVER_RE: Final = re.compile(
    rf"({_NUMBER})\.({_NUMBER})\.({_NUMBER})"
    rf"(?:-({_PRE_PART}(?:\.{_PRE_PART})*))?(?:\+([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?",
    re.ASCII,
)


@lru_cache(maxsize=4096)
def semver_value(text: str) -> Any:
    """The ``kubernetes.Semver`` message of a strict semver 2.0.0 string."""
    match = _SEMVER_RE.fullmatch(text)
    if match is None:
        raise CelFunctionError(f"invalid semantic version {text!r}")
    major, minor, patch, pre, _build = match.groups()
    if max(int(major), int(minor), int(patch)) >= 2**64:
        raise CelFunctionError(f"invalid semantic version {text!r}")
    return _SemverMessage(major=int(major), minor=int(minor), patch=int(patch), pre=pre or "")


def _normalize(text: str) -> str:
    """blang/semver-tolerant form as upstream's ``normalizeAndParse``: no "v", no
    leading zeros, missing minor/patch filled with 0."""
    parts = text.removeprefix("v").split(".", 2)
    for i, part in enumerate(parts):
        if len(part) > 1:
            stripped = part.lstrip("0")
            if not stripped or not stripped[0].isdigit():
                stripped = "0" + stripped
            parts[i] = stripped
    if len(parts) < 3:
        if "+" in parts[-1] or "-" in parts[-1]:
            raise CelFunctionError("short version cannot contain PreRelease/Build meta data")
        parts += ["0"] * (3 - len(parts))
    return ".".join(parts)


def _semver(text: str, normalize: bool = False) -> Any:
    return semver_value(_normalize(text) if normalize else text)


def _is_semver(text: str, normalize: bool = False) -> bool:
    try:
        _semver(text, normalize)
    except CelFunctionError:
        return False
    return True


def _pre_key(pre: str) -> tuple[tuple[int, int, str], ...]:
    # semver 2.0.0 §11: numeric identifiers sort numerically and before alphanumeric ones.
    return tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in pre.split("."))


def _semver_cmp(a: Any, b: Any) -> int:
    core = _cmp(a.major, b.major) or _cmp(a.minor, b.minor) or _cmp(a.patch, b.patch)
    if core or a.pre == b.pre:
        return core
    if not a.pre or not b.pre:  # a release ranks above its pre-releases
        return 1 if not a.pre else -1
    ka, kb = _pre_key(a.pre), _pre_key(b.pre)
    return (ka > kb) - (ka < kb)


def _semver_functions() -> list[cel.FunctionDecl]:
    return [
        _fn(
            "semver",
            ("string_to_semver", SEMVER, [STRING], False, _semver),
            ("string_bool_to_semver", SEMVER, [STRING, BOOL], False, _semver),
        ),
        _fn(
            "isSemver",
            ("is_semver_string", BOOL, [STRING], False, _is_semver),
            ("is_semver_string_bool", BOOL, [STRING, BOOL], False, _is_semver),
        ),
        _fn("major", ("semver_major", INT, [SEMVER], True, lambda v: v.major)),
        _fn("minor", ("semver_minor", INT, [SEMVER], True, lambda v: v.minor)),
        _fn("patch", ("semver_patch", INT, [SEMVER], True, lambda v: v.patch)),
    ]


# --- lists, regex, sets ----------------------------------------------------------------


def _same(a: object, b: object) -> bool:
    """CEL equality of two plain values: a bool never equals a number."""
    return (type(a) is bool) == (type(b) is bool) and a == b


def _ordered(items: list[Any], what: str) -> list[Any]:
    kinds = {type(item) for item in items}
    if len(kinds) > 1 and not kinds <= {int, float}:
        raise CelFunctionError(f"{what}: list elements must have the same type")
    return items


def _extreme(items: list[Any], pick: Callable[[list[Any]], Any], name: str) -> Any:
    if not items:
        raise CelFunctionError(f"{name} called on empty list")
    return pick(_ordered(items, name))


def _sum(items: list[Any]) -> Any:
    _ordered(items, "sum")
    return sum(items) if items else 0


def _is_sorted(items: list[Any]) -> bool:
    _ordered(items, "isSorted")
    return all(a <= b for a, b in pairwise(items))


def _find(text: str, pattern: str) -> str:
    match = _regex(pattern).search(text)
    return match.group(0) if match else ""


def _find_all(text: str, pattern: str, limit: int = -1) -> list[str]:
    found = [m.group(0) for m in _regex(pattern).finditer(text)]
    return found if limit < 0 else found[:limit]


@lru_cache(maxsize=256)
def _regex(pattern: str) -> re.Pattern[str]:
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise CelFunctionError(f"invalid regular expression {pattern!r}: {exc}") from None


def _contains(a: list[object], b: list[object]) -> bool:
    return all(any(_same(x, y) for x in a) for y in b)


def _other_functions() -> list[cel.FunctionDecl]:
    return [
        _fn("isSorted", ("list_is_sorted", BOOL, [LIST], True, _is_sorted)),
        _fn("sum", ("list_sum", DYN, [LIST], True, _sum)),
        _fn("min", ("list_min", DYN, [LIST], True, lambda xs: _extreme(xs, min, "min"))),
        _fn("max", ("list_max", DYN, [LIST], True, lambda xs: _extreme(xs, max, "max"))),
        _fn("find", ("string_find_n", STRING, [STRING, STRING], True, _find)),
        _fn(
            "findAll",
            ("string_find_all", cel.Type.List(STRING), [STRING, STRING], True, _find_all),
            ("string_find_all_n", cel.Type.List(STRING), [STRING, STRING, INT], True, _find_all),
        ),
        _fn("sets.contains", ("list_sets_contains_list", BOOL, [LIST, LIST], False, _contains)),
        _fn(
            "sets.equivalent",
            (
                "list_sets_equivalent_list",
                BOOL,
                [LIST, LIST],
                False,
                lambda a, b: _contains(a, b) and _contains(b, a),
            ),
        ),
        _fn(
            "sets.intersects",
            (
                "list_sets_intersects_list",
                BOOL,
                [LIST, LIST],
                False,
                lambda a, b: any(_contains(a, [y]) for y in b),
            ),
        ),
    ]


Overload = tuple[str, Any, Sequence[Any], bool, Callable[..., Any] | None]


def _fn(name: str, *overloads: Overload) -> cel.FunctionDecl:
    """A function of ``(id, result type, parameter types, is member, implementation)``
    overloads; an overload without implementation is declared for the checker only."""
    declared = []
    for oid, result, params, member, impl in overloads:
        options: dict[str, Any] = {"is_member": member}
        if impl is not None:
            options["impl"] = impl
        declared.append(cel.Overload(oid, result, list(params), **options))
    return cel.FunctionDecl(name, declared)


def kubernetes_functions() -> list[cel.FunctionDecl]:
    """Every function this module declares, for ``cel.NewEnv(functions=...)``."""
    return [*_quantity_functions(), *_semver_functions(), *_other_functions()]
