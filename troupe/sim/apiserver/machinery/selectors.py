"""Label and field selectors as they arrive in request query strings.

``parse_label_selector`` follows ``k8s.io/apimachinery/pkg/labels.Parse`` (``=``, ``==``,
``!=``, ``in (...)``, ``notin (...)``, ``key``, ``!key``, ``>``/``<``, comma is AND) and
matches through ``troupe.api.selectors.requirement_matches``, the project's one label
matcher. ``parse_field_selector`` follows ``fields.ParseSelector`` (``=``, ``==``, ``!=``,
backslash escapes). The server and the in-process store API use both for lists, watches
and deletecollection; a syntax error raises ``SelectorError`` (400 BadRequest).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from troupe.api.selectors import requirement_matches


class SelectorError(ValueError):
    """The selector text does not parse."""


@dataclass(frozen=True, slots=True)
class LabelRequirement:
    key: str
    operator: str  # In, NotIn, Exists, DoesNotExist, Gt, Lt
    values: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class LabelSelector:
    requirements: tuple[LabelRequirement, ...]

    @property
    def empty(self) -> bool:
        return not self.requirements

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        labels = labels or {}
        return all(
            requirement_matches(r.operator, r.values, labels.get(r.key)) for r in self.requirements
        )


EVERYTHING: Final = LabelSelector(())

_KEY_RE: Final = re.compile(r"\s*([A-Za-z0-9][-A-Za-z0-9_./]*)\s*")
_VALUE_RE: Final = re.compile(r"\s*([-A-Za-z0-9_.]*)\s*")
_SET_OP_RE: Final = re.compile(r"(in|notin)\s*\(", re.ASCII)


def _split_top_level(text: str) -> list[str]:
    """Split on commas outside parentheses."""
    parts: list[str] = []
    depth = 0
    start = 0
    for i, ch in enumerate(text):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts


def _parse_requirement(term: str) -> LabelRequirement:
    stripped = term.strip()
    if not stripped:
        raise SelectorError("unable to parse requirement: found '', expected: identifier")
    if stripped.startswith("!"):
        match = _KEY_RE.fullmatch(stripped[1:])
        if match is None:
            raise SelectorError(f"unable to parse requirement: invalid key {stripped[1:]!r}")
        return LabelRequirement(match.group(1), "DoesNotExist", ())
    match = _KEY_RE.match(stripped)
    if match is None:
        raise SelectorError(
            f"unable to parse requirement: found {stripped!r}, expected: identifier"
        )
    key = match.group(1)
    rest = stripped[match.end() :]
    if not rest:
        return LabelRequirement(key, "Exists", ())
    for token, operator in (("==", "In"), ("!=", "NotIn"), ("=", "In"), (">", "Gt"), ("<", "Lt")):
        if rest.startswith(token):
            value = _VALUE_RE.fullmatch(rest[len(token) :])
            if value is None:
                raise SelectorError(
                    "unable to parse requirement: invalid label value: "
                    f"{rest[len(token) :].strip()!r}"
                )
            return LabelRequirement(key, operator, (value.group(1),))
    set_op = _SET_OP_RE.match(rest)
    if set_op is not None and rest.endswith(")"):
        inner = rest[set_op.end() : -1]
        values: list[str] = []
        for raw in inner.split(","):
            value = _VALUE_RE.fullmatch(raw)
            if value is None:
                raise SelectorError(
                    f"unable to parse requirement: invalid label value: {raw.strip()!r}"
                )
            values.append(value.group(1))
        return LabelRequirement(key, "In" if set_op.group(1) == "in" else "NotIn", tuple(values))
    raise SelectorError(
        f"unable to parse requirement: found '{rest.split()[0]}', expected: "
        "in, notin, =, ==, !=, gt, lt"
    )


def parse_label_selector(text: str | Mapping[str, str] | None) -> LabelSelector:
    """A selector string (or an equality map) to a ``LabelSelector``; None/"" is everything."""
    if text is None:
        return EVERYTHING
    if isinstance(text, Mapping):
        return LabelSelector(
            tuple(LabelRequirement(k, "In", (v,)) for k, v in sorted(text.items()))
        )
    if not text.strip():
        return EVERYTHING
    return LabelSelector(tuple(_parse_requirement(term) for term in _split_top_level(text)))


# --- fields ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FieldRequirement:
    field: str
    negated: bool
    value: str


@dataclass(frozen=True, slots=True)
class FieldSelector:
    requirements: tuple[FieldRequirement, ...]

    @property
    def empty(self) -> bool:
        return not self.requirements

    @property
    def fields(self) -> tuple[str, ...]:
        return tuple(r.field for r in self.requirements)

    def matches(self, obj: Mapping[str, Any]) -> bool:
        return all((field_value(obj, r.field) == r.value) != r.negated for r in self.requirements)


NO_FIELDS: Final = FieldSelector(())


def _split_unescaped(text: str, sep: str) -> list[str]:
    parts: list[str] = []
    current: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            current.append(text[i : i + 2])
            i += 2
            continue
        if ch == sep:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
        i += 1
    parts.append("".join(current))
    return parts


def _unescape(value: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(value):
        if value[i] == "\\" and i + 1 < len(value):
            out.append(value[i + 1])
            i += 2
        else:
            out.append(value[i])
            i += 1
    return "".join(out)


def _find_operator(term: str) -> tuple[int, str] | None:
    i = 0
    while i < len(term):
        if term[i] == "\\":
            i += 2
            continue
        for op in ("!=", "==", "="):
            if term.startswith(op, i):
                return i, op
        i += 1
    return None


def parse_field_selector(text: str | None) -> FieldSelector:
    if text is None or not text.strip():
        return NO_FIELDS
    requirements: list[FieldRequirement] = []
    for term in _split_unescaped(text, ","):
        if not term:
            continue
        found = _find_operator(term)
        if found is None:
            raise SelectorError(f"invalid selector: '{text}'; can't understand '{term}'")
        at, op = found
        requirements.append(
            FieldRequirement(term[:at].strip(), op == "!=", _unescape(term[at + len(op) :]))
        )
    return FieldSelector(tuple(requirements))


# Boolean fields upstream formats with strconv.FormatBool even when unset.
_BOOL_FIELDS: Final = frozenset({"spec.hostNetwork", "spec.unschedulable"})


def field_value(obj: Mapping[str, Any], path: str) -> str:
    """The string value a field selector compares against (upstream ``GetAttrs``)."""
    if path == "source":  # core/v1 Event: source.component
        path = "source.component"
    node: Any = obj
    for part in path.split("."):
        if not isinstance(node, Mapping):
            node = None
            break
        node = node.get(part)
        if node is None:
            break
    if node is None:
        return "false" if path in _BOOL_FIELDS else ""
    if isinstance(node, bool):
        return "true" if node else "false"
    return str(node)
