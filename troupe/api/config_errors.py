"""How a configuration problem is worded: pydantic's errors as upstream-style
``field.path[0].sub: message`` lines, and "did you mean" for a misspelt field or
plugin name.

``troupe.api.config_model`` (the top level and each profile) and ``troupe.api.config``
(plugin names, plugin args) call it; ``troupe.api.dra`` words its object errors with
``validation_problems`` too. kube-scheduler reports an unknown field through its
strict decoder (``unknown field "profiles[0].plugins.scor"``) and an unknown plugin
when the framework is built; neither suggests a name, troupe adds the suggestion
(``difflib``) and keeps the path first, as every other problem.
"""

from __future__ import annotations

import difflib
import types
from collections.abc import Iterable, Sequence
from typing import Annotated, Union, get_args, get_origin

from pydantic import ValidationError
from pydantic.fields import FieldInfo
from pydantic_core import ErrorDetails

Loc = tuple[str | int, ...]


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """``", did you mean 'X'?"`` for the known name closest to ``name``, or ``""``:
    a name differing only in case first (``CoScheduling`` -> ``Coscheduling``), else
    the closest spelling (difflib ratio at least 0.75, case ignored)."""
    candidates = sorted(set(known))
    same_case = [k for k in candidates if k.lower() == name.lower() and k != name]
    if same_case:
        return f", did you mean {same_case[0]!r}?"
    by_lower = {k.lower(): k for k in candidates}
    close = difflib.get_close_matches(name.lower(), list(by_lower), n=1, cutoff=0.75)
    return f", did you mean {by_lower[close[0]]!r}?" if close else ""


def format_loc(loc: Iterable[str | int]) -> str:
    """``("profiles", 0, "plugins", "filter")`` -> ``profiles[0].plugins.filter``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else part
    return out


# --- the fields a model has at a path ---------------------------------------------------


def _fields(model: object) -> dict[str, FieldInfo] | None:
    # A BaseModel's fields, or a pydantic dataclass's (troupe.api.objects models).
    fields = getattr(model, "__pydantic_fields__", None)
    return fields if isinstance(fields, dict) else None


def _unwrap(tp: object) -> list[object]:
    """The types a value of ``tp`` may be: Optional and unions split, Annotated removed."""
    origin = get_origin(tp)
    if origin is Annotated:
        return _unwrap(get_args(tp)[0])
    if origin is Union or isinstance(tp, types.UnionType):
        return [t for arg in get_args(tp) for t in _unwrap(arg)]
    return [tp]


def _step(tp: object, part: str | int) -> list[object]:
    out: list[object] = []
    for t in _unwrap(tp):
        origin, args = get_origin(t), get_args(t)
        fields = _fields(t)
        if isinstance(part, str) and fields is not None:
            by_key = {info.alias or name: info for name, info in fields.items()}
            if part in by_key:
                out.append(by_key[part].annotation)
        elif isinstance(part, int) and origin in (list, tuple, Sequence) and args:
            out.append(args[0])
        elif origin is dict and len(args) == 2:
            out.append(args[1])
    return out


def known_fields(model: object, loc: Sequence[str | int]) -> list[str]:
    """The keys allowed beside the last part of ``loc`` in ``model`` (JSON names)."""
    found: list[object] = [model]
    for part in loc[:-1]:
        found = [t for tp in found for t in _step(tp, part)]
    names: list[str] = []
    for tp in found:
        for t in _unwrap(tp):
            fields = _fields(t)
            if fields is not None:
                names += [info.alias or name for name, info in fields.items()]
    return names


# --- pydantic errors as lines ------------------------------------------------------------


def _short_repr(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _literal_choices(expected: str) -> str:
    # pydantic renders Literal choices as "'A', 'B' or 'C'"; upstream lists them.
    head, _, last = expected.rpartition(" or ")
    items = [*head.split(", "), last] if head else [last]
    return "[" + ", ".join(items) + "]"


def _message(error: ErrorDetails, model: object) -> str:
    kind = error["type"]
    ctx = error.get("ctx", {})
    value = error.get("input")
    if kind == "extra_forbidden":
        key = error["loc"][-1] if error["loc"] else ""
        hint = did_you_mean(str(key), known_fields(model, error["loc"])) if model else ""
        return f"unknown field{hint}"
    if kind == "missing":
        return "required field"
    if kind in ("literal_error", "enum"):
        return f"{_short_repr(value)} is not one of {_literal_choices(str(ctx['expected']))}"
    if kind in ("value_error", "assertion_error"):
        return str(ctx.get("error", error["msg"]))
    if kind in ("model_type", "dict_type", "model_attributes_type"):
        return f"must be a mapping, got {_short_repr(value)}"
    message = error["msg"].replace("Input should be", "must be")
    return f"{message}, got {_short_repr(value)}"


def validation_problems(
    error: ValidationError, prefix: Loc = (), model: object = None
) -> list[str]:
    """One ``path: message`` line per pydantic error, each path under ``prefix``;
    ``model`` (the class validated) lets an unknown field name its closest known one."""
    problems = []
    for detail in error.errors():
        path = format_loc((*prefix, *detail["loc"]))
        message = _message(detail, model)
        problems.append(f"{path}: {message}" if path else message)
    return problems


