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
from troupe.sim.apiserver.machinery.content import is_label_value, is_qualified_name
from troupe.sim.apiserver.machinery.field import go_quote


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

_SPECIAL: Final = frozenset("=!(),><")
_BLANK: Final = frozenset(" \t\r\n")
_SYMBOLS: Final = frozenset({")", ",", "!", "==", "=", ">", "<", "!=", "("})
_ID: Final = "identifier"
_END: Final = "end of string"
# The operators of a binary requirement, as the parser lists them in its errors.
_BINARY: Final = "in, notin, =, ==, !=, gt, lt"
_OPERATORS: Final = {
    "in": "In",
    "notin": "NotIn",
    "=": "In",
    "==": "In",
    "!=": "NotIn",
    ">": "Gt",
    "<": "Lt",
}
_INT64: Final = re.compile(r"[+-]?[0-9]+")


def _lex(text: str) -> list[tuple[str, str]]:
    """``labels.Lexer``: (token, literal) pairs ending with the end of the string."""
    items: list[tuple[str, str]] = []
    pos, size = 0, len(text)
    while True:
        while pos < size and text[pos] in _BLANK:
            pos += 1
        if pos >= size or text[pos] == "\x00":
            items.append((_END, ""))
            return items
        if text[pos] in _SPECIAL:
            # The longest run of special characters that is a symbol ("!=" before "!").
            end = pos + 1
            while end < size and text[end] in _SPECIAL and text[pos : end + 1] in _SYMBOLS:
                end += 1
            items.append((text[pos:end], text[pos:end]))
            pos = end
            continue
        start = pos
        while pos < size and text[pos] not in _SPECIAL and text[pos] not in _BLANK:
            pos += 1
        literal = text[start:pos]
        items.append((literal if literal in ("in", "notin") else _ID, literal))


class _Parser:
    """``labels.Parser``: in a place values may stand, ``in`` and ``notin`` are values."""

    def __init__(self, text: str) -> None:
        self.items = _lex(text)
        self.pos = 0

    def lookahead(self, values: bool = True) -> tuple[str, str]:
        return self._token(self.items[self.pos], values)

    def consume(self, values: bool = True) -> tuple[str, str]:
        self.pos += 1
        return self._token(self.items[self.pos - 1], values)

    @staticmethod
    def _token(item: tuple[str, str], values: bool) -> tuple[str, str]:
        token, literal = item
        return (_ID if values and token in ("in", "notin") else token), literal


def _parse(text: str) -> list[LabelRequirement]:
    parser = _Parser(text)
    requirements: list[LabelRequirement] = []
    while True:
        token, literal = parser.lookahead()
        if token == _END:
            return requirements
        if token not in (_ID, "!"):
            raise SelectorError(f"found '{literal}', expected: !, identifier, or 'end of string'")
        try:
            requirements.append(_requirement(parser))
        except SelectorError as error:
            raise SelectorError(f"unable to parse requirement: {error}") from None
        token, literal = parser.consume()
        if token == _END:
            return requirements
        if token != ",":
            raise SelectorError(f"found '{literal}', expected: ',' or 'end of string'")
        token, literal = parser.lookahead()
        if token not in (_ID, "!"):
            raise SelectorError(f"found '{literal}', expected: identifier after ','")


def _requirement(parser: _Parser) -> LabelRequirement:
    token, key = parser.consume()
    absent = token == "!"
    if absent:
        token, key = parser.consume()
    if token != _ID:
        raise SelectorError(f"found '{key}', expected: identifier")
    problems = is_qualified_name(key)
    if problems:
        # validateLabelKey with the parser's nil field path.
        raise SelectorError(f"<nil>: Invalid value: {go_quote(key)}: {'; '.join(problems)}")
    if absent or parser.lookahead()[0] in (_END, ","):
        return LabelRequirement(key, "DoesNotExist" if absent else "Exists", ())
    token, literal = parser.consume(values=False)
    if token not in _OPERATORS:
        raise SelectorError(f"found '{literal}', expected: {_BINARY}")
    values = _set_values(parser) if token in ("in", "notin") else _exact_value(parser)
    return _new_requirement(key, token, sorted(values))


def _set_values(parser: _Parser) -> set[str]:
    token, literal = parser.consume()
    if token != "(":
        raise SelectorError(f"found '{literal}' expected: '('")
    token, literal = parser.lookahead()
    if token == ")":
        parser.consume()
        return {""}  # "a in ()" is "a in ('')", as upstream parses it
    if token not in (_ID, ","):
        raise SelectorError(f"found '{literal}', expected: ',', ')' or identifier")
    values = _identifiers(parser)
    if parser.consume()[0] != ")":
        raise SelectorError(f"found '{literal}', expected: ')'")
    return values


def _identifiers(parser: _Parser) -> set[str]:
    values: set[str] = set()
    while True:
        token, literal = parser.consume()
        if token == _ID:
            values.add(literal)
            after, shown = parser.lookahead()
            if after == ")":
                return values
            if after != ",":
                raise SelectorError(f"found '{shown}', expected: ',' or ')'")
        elif token == ",":
            after = parser.lookahead()[0]
            if not values or after in (")", ","):
                values.add("")  # "(,", ",)" and ",," hold an empty value
            if after == ")":
                return values
        else:
            raise SelectorError(f"found '{literal}', expected: ',', or identifier")


def _exact_value(parser: _Parser) -> set[str]:
    if parser.lookahead()[0] in (_END, ","):
        return {""}
    token, literal = parser.consume()
    if token != _ID:
        raise SelectorError(f"found '{literal}', expected: identifier")
    return {literal}


def _new_requirement(key: str, operator: str, values: list[str]) -> LabelRequirement:
    """``labels.NewRequirement``'s checks, with the parser's nil field path."""
    problems: list[str] = []
    if operator in (">", "<"):
        for i, value in enumerate(values):
            if not _is_int64(value):
                problems.append(
                    f"values[{i}]: Invalid value: {go_quote(value)}: for 'Gt', 'Lt' operators, "
                    "the value must be an integer"
                )
    for i, value in enumerate(values):
        wrong = is_label_value(value)
        if wrong:
            problems.append(
                f"values[{i}][{key}]: Invalid value: {go_quote(value)}: {'; '.join(wrong)}"
            )
    if problems:
        raise SelectorError(problems[0] if len(problems) == 1 else "[" + ", ".join(problems) + "]")
    return LabelRequirement(key, _OPERATORS[operator], tuple(values))


def _is_int64(text: str) -> bool:
    return _INT64.fullmatch(text) is not None and -(1 << 63) <= int(text) < (1 << 63)


def parse_label_selector(text: str | Mapping[str, str] | None) -> LabelSelector:
    """A selector string (or an equality map) to a ``LabelSelector``; None/"" is everything."""
    if text is None:
        return EVERYTHING
    if isinstance(text, Mapping):
        return LabelSelector(
            tuple(LabelRequirement(k, "In", (v,)) for k, v in sorted(text.items()))
        )
    requirements = _parse(text)
    return LabelSelector(tuple(requirements)) if requirements else EVERYTHING


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
    """``fields.UnescapeValue``: ``\\``, ``\\,`` and ``\\=`` only; a bare ``,`` or ``=``
    is an error."""
    if not any(ch in value for ch in "\\,="):
        return value
    out: list[str] = []
    escaped = False
    for ch in value:
        if escaped:
            if ch not in "\\,=":
                raise SelectorError(f"invalid field selector: invalid escape sequence: \\{ch}")
            out.append(ch)
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch in ",=":
            raise SelectorError(f"invalid field selector: unescaped character in value: {ch}")
        else:
            out.append(ch)
    if escaped:
        raise SelectorError("invalid field selector: invalid escape sequence: \\")
    return "".join(out)


def _split_term(term: str) -> tuple[str, str, str] | None:
    """``fields.splitTerm``: the first operator, ``!=`` before ``==`` before ``=``."""
    for i in range(len(term)):
        for op in ("!=", "==", "="):
            if term.startswith(op, i):
                return term[:i], op, term[i + len(op) :]
    return None


def parse_field_selector(text: str | None) -> FieldSelector:
    """``fields.ParseSelector``: comma-separated ``field=value``, ``==``, ``!=``."""
    if not text:
        return NO_FIELDS
    requirements: list[FieldRequirement] = []
    for term in _split_unescaped(text, ","):
        if not term:
            continue
        split = _split_term(term)
        if split is None:
            raise SelectorError(f"invalid selector: '{text}'; can't understand '{term}'")
        field, op, value = split
        requirements.append(FieldRequirement(field, op == "!=", _unescape(value)))
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
