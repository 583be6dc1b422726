"""Field errors worded as k8s.io/apimachinery/pkg/util/validation/field words them.

A cause is ``(field, reason, message)``, what ``errors.invalid`` turns into a 422
``Invalid`` Status: ``metadata.name: Invalid value: "a/b": a lowercase RFC 1123
subdomain must ...``. ``show`` renders a bad value as ``field.Error.ErrorBody`` does:
strings quoted as Go's ``%q`` quotes them, numbers and booleans as they are, ``null``
for nothing. Used by the object-metadata, pod and Lease validation of ``registry/``.
"""

from __future__ import annotations

import json
from typing import Any, Final

Cause = tuple[str, str, str]

_ESCAPES: Final = {
    "\a": "\\a",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
    "\v": "\\v",
    "\\": "\\\\",
    '"': '\\"',
}


def go_quote(text: str) -> str:
    """``strconv.Quote``: printable characters as they are, the rest escaped."""
    out = ['"']
    for ch in text:
        escaped = _ESCAPES.get(ch)
        if escaped is not None:
            out.append(escaped)
        elif ch.isprintable():
            out.append(ch)
        elif ord(ch) < 0x80:
            out.append(f"\\x{ord(ch):02x}")
        elif ord(ch) <= 0xFFFF:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(f"\\U{ord(ch):08x}")
    out.append('"')
    return "".join(out)


def show(value: Any) -> str:
    """A bad value as ``field.Error`` prints it."""
    if value is None:
        return "null"
    if isinstance(value, str):
        return go_quote(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _with(body: str, detail: str) -> str:
    return f"{body}: {detail}" if detail else body


def invalid(path: str, value: Any, detail: str) -> Cause:
    return path, "FieldValueInvalid", _with(f"Invalid value: {show(value)}", detail)


def required(path: str, detail: str = "") -> Cause:
    return path, "FieldValueRequired", _with("Required value", detail)


def forbidden(path: str, detail: str) -> Cause:
    return path, "FieldValueForbidden", _with("Forbidden", detail)


def duplicate(path: str, value: Any) -> Cause:
    return path, "FieldValueDuplicate", f"Duplicate value: {show(value)}"


def not_supported(path: str, value: Any, supported: tuple[str, ...]) -> Cause:
    detail = "supported values: " + ", ".join(go_quote(v) for v in supported)
    return path, "FieldValueNotSupported", f"Unsupported value: {show(value)}: {detail}"


def too_long(path: str, max_bytes: int) -> Cause:
    """``field.TooLong``: the value itself is not shown."""
    return path, "FieldValueTooLong", f"Too long: must have at most {max_bytes} bytes"
