"""Format checks of names, label keys and values, as Kubernetes words them.

Each ``is_*`` returns the list of what is wrong (empty when the value is fine), as
k8s.io/apimachinery/pkg/util/validation (DNS names: "must be no more than 253
characters") and pkg/api/validate/content (label keys and values: "must be no more
than 63 bytes") do; the messages, regular expressions and examples are upstream's.
The name rules (``NameRule``) are pkg/api/validation's ``ValidateNameFunc``s: a DNS
subdomain, a DNS label, a DNS-1035 label, or a path segment (RBAC objects), with
``prefix`` for a ``generateName``. Used by ``registry/objectmeta.py`` and the label
selector parser.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Final

_DNS1123_LABEL: Final = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN: Final = _DNS1123_LABEL + "(\\." + _DNS1123_LABEL + ")*"
_DNS1035_LABEL: Final = "[a-z]([-a-z0-9]*[a-z0-9])?"
_LABEL_KEY: Final = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_LABEL_VALUE: Final = "(" + _LABEL_KEY + ")?"

_DNS1123_LABEL_RE: Final = re.compile(_DNS1123_LABEL)
_DNS1123_SUBDOMAIN_RE: Final = re.compile(_DNS1123_SUBDOMAIN)
_DNS1035_LABEL_RE: Final = re.compile(_DNS1035_LABEL)
_LABEL_KEY_RE: Final = re.compile(_LABEL_KEY)
_LABEL_VALUE_RE: Final = re.compile(_LABEL_VALUE)

_DNS1123_LABEL_MSG: Final = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
    "and must start and end with an alphanumeric character"
)
_DNS1123_SUBDOMAIN_MSG: Final = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' "
    "or '.', and must start and end with an alphanumeric character"
)
_DNS1035_LABEL_MSG: Final = (
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start "
    "with an alphabetic character, and end with an alphanumeric character"
)
_LABEL_KEY_MSG: Final = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
    "with an alphanumeric character"
)
_LABEL_VALUE_MSG: Final = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', "
    "'_' or '.', and must start and end with an alphanumeric character"
)
DNS1123_LABEL_MAX: Final = 63
DNS1123_SUBDOMAIN_MAX: Final = 253
LABEL_VALUE_MAX: Final = 63


def regex_error(message: str, pattern: str, *examples: str) -> str:
    """``validation.RegexError``."""
    if not examples:
        return f"{message} (regex used for validation is '{pattern}')"
    shown = " or ".join(f"'{example}', " for example in examples)
    return f"{message} (e.g. {shown}regex used for validation is '{pattern}')"


def _max_len(limit: int, unit: str = "characters") -> str:
    return f"must be no more than {limit} {unit}"


def _bytes(value: str) -> int:
    return len(value.encode("utf-8", "surrogatepass"))


def is_dns1123_label(value: str) -> list[str]:
    errs = []
    if _bytes(value) > DNS1123_LABEL_MAX:
        errs.append(_max_len(DNS1123_LABEL_MAX))
    if _DNS1123_LABEL_RE.fullmatch(value) is None:
        if _DNS1123_SUBDOMAIN_RE.fullmatch(value) is not None:
            errs.append("must not contain dots")
        else:
            errs.append(regex_error(_DNS1123_LABEL_MSG, _DNS1123_LABEL, "my-name", "123-abc"))
    return errs


def is_dns1123_subdomain(value: str, unit: str = "characters") -> list[str]:
    errs = []
    if _bytes(value) > DNS1123_SUBDOMAIN_MAX:
        errs.append(_max_len(DNS1123_SUBDOMAIN_MAX, unit))
    if _DNS1123_SUBDOMAIN_RE.fullmatch(value) is None:
        errs.append(regex_error(_DNS1123_SUBDOMAIN_MSG, _DNS1123_SUBDOMAIN, "example.com"))
    return errs


def is_dns1035_label(value: str) -> list[str]:
    errs = []
    if _bytes(value) > DNS1123_LABEL_MAX:
        errs.append(_max_len(DNS1123_LABEL_MAX))
    if _DNS1035_LABEL_RE.fullmatch(value) is None:
        errs.append(regex_error(_DNS1035_LABEL_MSG, _DNS1035_LABEL, "my-name", "abc-123"))
    return errs


def is_qualified_name(value: str) -> list[str]:
    """``content.IsLabelKey``: an optional DNS subdomain prefix and ``/``, then a name."""
    parts = value.split("/")
    errs: list[str] = []
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errs.append("prefix part must be non-empty")
        else:
            errs += ["prefix part " + msg for msg in is_dns1123_subdomain(prefix, "bytes")]
    else:
        key = regex_error(_LABEL_KEY_MSG, _LABEL_KEY, "MyName", "my.name", "123-abc")
        return [
            f"a valid label key {key} with an optional DNS subdomain prefix and '/' "
            "(e.g. 'example.com/MyName')"
        ]
    if not name:
        errs.append("name part must be non-empty")
    elif _bytes(name) > DNS1123_LABEL_MAX:
        errs.append("name part " + _max_len(DNS1123_LABEL_MAX, "bytes"))
    if _LABEL_KEY_RE.fullmatch(name) is None:
        errs.append(
            "name part " + regex_error(_LABEL_KEY_MSG, _LABEL_KEY, "MyName", "my.name", "123-abc")
        )
    return errs


def is_label_value(value: str) -> list[str]:
    """``content.IsLabelValue``."""
    errs = []
    if _bytes(value) > LABEL_VALUE_MAX:
        errs.append(_max_len(LABEL_VALUE_MAX, "bytes"))
    if _LABEL_VALUE_RE.fullmatch(value) is None:
        errs.append(regex_error(_LABEL_VALUE_MSG, _LABEL_VALUE, "MyValue", "my_value", "12345"))
    return errs


# --- name rules (pkg/api/validation ValidateNameFunc) ----------------------------------

NameRule = Callable[[str, bool], list[str]]


def _mask_trailing_dash(name: str) -> str:
    """``maskTrailingDash``, quirk included: a generated suffix will follow the dash."""
    if len(name) > 1 and name.endswith("-"):
        return name[:-2] + "a"
    return name


def name_is_dns_subdomain(name: str, prefix: bool) -> list[str]:
    return is_dns1123_subdomain(_mask_trailing_dash(name) if prefix else name)


def name_is_dns_label(name: str, prefix: bool) -> list[str]:
    return is_dns1123_label(_mask_trailing_dash(name) if prefix else name)


def name_is_dns1035_label(name: str, prefix: bool) -> list[str]:
    return is_dns1035_label(_mask_trailing_dash(name) if prefix else name)


def path_segment_name(name: str, prefix: bool) -> list[str]:
    """``path.ValidatePathSegmentName``: no ``/`` or ``%``, not ``.`` or ``..``."""
    if not prefix and name in (".", ".."):
        return [f"may not be '{name}'"]
    return [f"may not contain '{bad}'" for bad in ("/", "%") if bad in name]
