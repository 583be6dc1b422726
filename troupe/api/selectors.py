"""Label selectors, node selectors and taint tolerations: the one matcher of each kind.

Called by the filter and score plugins (NodeAffinity, TaintToleration, pod affinity,
topology spread), by the NodeTable when it builds label and taint masks, and by the
embedded cluster's list filtering. Semantics are upstream's:

* ``requirement_matches`` is ``labels.Requirement.Matches``; the NodeTable's vectorised
  matcher calls it once per distinct label value, so it stays the single source of truth.
* ``label_selector_matches`` is ``metav1.LabelSelectorAsSelector`` + ``Matches``: a nil
  selector matches nothing, an empty one everything.
* ``node_selector_term_matches`` / ``node_selector_matches`` follow
  ``component-helpers/scheduling/corev1/nodeaffinity`` (``LazyErrorNodeSelector``): terms
  are ORed, an empty term matches nothing, and a term that does not parse (for example
  ``In`` with no values) matches nothing while the other terms still count.
* ``node_matches_pod``: a pod's nodeSelector and required node affinity against one
  node (NodeAffinity's update hints, ``troupe explain``'s capacity check).
* ``tolerates`` / ``find_untolerated_taint`` are ``Toleration.ToleratesTaint`` and
  ``v1helper.FindMatchingUntoleratedTaint``; ``tolerates`` also serves DRA device taints
  (``resourceclaim.ToleratesTaint`` has the same rules).

The ``validate_*`` functions report, with the field path, every reason a selector would
silently match nothing, so callers can tell the user instead.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Mapping, Sequence
from functools import lru_cache
from typing import Final, Protocol

from troupe.api.objects import (
    LabelSelector,
    Node,
    NodeSelector,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    Pod,
    Taint,
    Toleration,
)

LABEL_SELECTOR_OPERATORS: Final = ("In", "NotIn", "Exists", "DoesNotExist")
NODE_SELECTOR_OPERATORS: Final = (*LABEL_SELECTOR_OPERATORS, "Gt", "Lt")
FIELD_SELECTOR_OPERATORS: Final = ("In", "NotIn")
NODE_NAME_FIELD: Final = "metadata.name"

_INT64_MIN: Final = -(2**63)
_INT64_MAX: Final = 2**63 - 1
_GO_INT_RE: Final = re.compile(r"[+-]?[0-9]+", re.ASCII)
# k8s.io/apimachinery/pkg/util/validation: qualified names and label values.
_NAME_RE: Final = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]", re.ASCII)
_DNS1123_SUBDOMAIN_RE: Final = re.compile(
    r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*", re.ASCII
)
_NAME_MAX: Final = 63
_PREFIX_MAX: Final = 253


def _parse_int64(text: str) -> int | None:
    """``strconv.ParseInt(text, 10, 64)``: sign and ASCII digits, in int64 range."""
    if _GO_INT_RE.fullmatch(text) is None:
        return None
    value = int(text)
    return value if _INT64_MIN <= value <= _INT64_MAX else None


# --- requirements ----------------------------------------------------------------------


def requirement_matches(operator: str, values: Sequence[str], value: str | None) -> bool:
    """Whether a label whose value is ``value`` (None: the key is absent) satisfies
    ``operator`` over ``values``.

    Gt and Lt compare integers: both the label value and the single requirement value
    must parse as int64, otherwise nothing matches. An unknown operator matches nothing.
    """
    if operator == "In":
        return value is not None and value in values
    if operator == "NotIn":
        return value is None or value not in values
    if operator == "Exists":
        return value is not None
    if operator == "DoesNotExist":
        return value is None
    if operator in ("Gt", "Lt"):
        if value is None or len(values) != 1:
            return False
        label_int = _parse_int64(value)
        bound = _parse_int64(values[0])
        if label_int is None or bound is None:
            return False
        return label_int > bound if operator == "Gt" else label_int < bound
    return False


def qualified_name_errors(key: str, path: str) -> list[str]:
    """``validation.IsQualifiedName``: ``[prefix/]name`` as label keys must be."""
    parts = key.split("/")
    if len(parts) == 1:
        prefix, name = "", parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            return [f"{path}: Invalid value: {key!r}: prefix part must be non-empty"]
    else:
        return [
            f"{path}: Invalid value: {key!r}: a qualified name must consist of an optional "
            "DNS subdomain prefix and '/' followed by a name"
        ]
    errors: list[str] = []
    if prefix and (len(prefix) > _PREFIX_MAX or not _DNS1123_SUBDOMAIN_RE.fullmatch(prefix)):
        errors.append(
            f"{path}: Invalid value: {key!r}: prefix part must be a lowercase DNS subdomain "
            f"of at most {_PREFIX_MAX} characters"
        )
    if not name or len(name) > _NAME_MAX or not _NAME_RE.fullmatch(name):
        errors.append(
            f"{path}: Invalid value: {key!r}: name part must be 1-{_NAME_MAX} alphanumeric "
            "characters, '-', '_' or '.', starting and ending with an alphanumeric"
        )
    return errors


def _label_value_errors(value: str, path: str) -> list[str]:
    """``validation.IsValidLabelValue``: empty, or a name of at most 63 characters."""
    if value == "" or (len(value) <= _NAME_MAX and _NAME_RE.fullmatch(value)):
        return []
    return [
        f"{path}: Invalid value: {value!r}: a label value must be empty or 1-{_NAME_MAX} "
        "alphanumeric characters, '-', '_' or '.', starting and ending with an alphanumeric"
    ]


def requirement_errors(
    key: str,
    operator: str,
    values: Sequence[str],
    path: str,
    operators: Collection[str] = NODE_SELECTOR_OPERATORS,
) -> list[str]:
    """Why ``labels.NewRequirement`` would reject this requirement (empty: it is valid).

    ``path`` names the requirement, e.g. ``spec.affinity.nodeAffinity...matchExpressions[0]``.
    """
    errors = qualified_name_errors(key, f"{path}.key")
    shown = json.dumps(list(values))
    if operator not in operators:
        supported = ", ".join(f'"{op}"' for op in operators)
        errors.append(
            f'{path}.operator: Unsupported value: "{operator}": supported values: {supported}'
        )
    elif operator in ("In", "NotIn") and not values:
        errors.append(
            f"{path}.values: Invalid value: {shown}: "
            "for 'In', 'NotIn' operators, values set can't be empty"
        )
    elif operator in ("Exists", "DoesNotExist") and values:
        errors.append(
            f"{path}.values: Invalid value: {shown}: "
            "values set must be empty for 'Exists' and 'DoesNotExist'"
        )
    elif operator in ("Gt", "Lt"):
        if len(values) != 1:
            errors.append(
                f"{path}.values: Invalid value: {shown}: "
                "for 'Gt', 'Lt' operators, exactly one value is required"
            )
        for i, value in enumerate(values):
            if _parse_int64(value) is None:
                errors.append(
                    f"{path}.values[{i}]: Invalid value: {value!r}: "
                    "for 'Gt', 'Lt' operators, the value must be an integer"
                )
    for i, value in enumerate(values):
        errors.extend(_label_value_errors(value, f"{path}.values[{i}]"))
    return errors


@lru_cache(maxsize=4096)
def requirement_is_valid(key: str, operator: str, values: tuple[str, ...]) -> bool:
    """Whether ``labels.NewRequirement`` accepts this node-selector requirement.

    Cached: selectors repeat across the pods of a workload. A vectorised matcher that
    calls ``requirement_matches`` per label value must check this first, since an
    invalid requirement makes upstream's whole term match nothing.
    """
    return not requirement_errors(key, operator, values, "")


# --- label selectors -------------------------------------------------------------------


def validate_label_selector(selector: LabelSelector | None, path: str) -> list[str]:
    """Every reason ``selector`` (at field ``path``) is invalid; empty when it is valid."""
    if selector is None:
        return []
    errors: list[str] = []
    for key, value in selector.match_labels.items():
        errors.extend(qualified_name_errors(key, f"{path}.matchLabels"))
        errors.extend(_label_value_errors(value, f"{path}.matchLabels[{key}]"))
    for i, req in enumerate(selector.match_expressions):
        errors.extend(
            requirement_errors(
                req.key,
                req.operator,
                req.values,
                f"{path}.matchExpressions[{i}]",
                LABEL_SELECTOR_OPERATORS,
            )
        )
    return errors


def label_selector_matches(selector: LabelSelector | None, labels: Mapping[str, str]) -> bool:
    """Whether ``labels`` satisfy ``selector``: None matches nothing, an empty selector
    everything, an invalid one nothing (upstream fails to build it)."""
    if selector is None:
        return False
    if not selector.match_labels and not selector.match_expressions:
        return True
    for key, expected in selector.match_labels.items():
        if not requirement_is_valid(key, "In", (expected,)) or labels.get(key) != expected:
            return False
    for req in selector.match_expressions:
        values = tuple(req.values)
        if req.operator not in LABEL_SELECTOR_OPERATORS or not requirement_is_valid(
            req.key, req.operator, values
        ):
            return False
        if not requirement_matches(req.operator, values, labels.get(req.key)):
            return False
    return True


# --- node selectors --------------------------------------------------------------------


def _field_requirement_errors(req: NodeSelectorRequirement, path: str) -> list[str]:
    if req.operator not in FIELD_SELECTOR_OPERATORS:
        supported = ", ".join(f'"{op}"' for op in FIELD_SELECTOR_OPERATORS)
        return [
            f'{path}.operator: Unsupported value: "{req.operator}": supported values: {supported}'
        ]
    if len(req.values) != 1:
        return [f"{path}.values: Invalid value: {json.dumps(req.values)}: must have one element"]
    return []


def node_selector_term_errors(term: NodeSelectorTerm, path: str) -> list[str]:
    """Why upstream would fail to parse ``term`` (which then matches no node)."""
    errors: list[str] = []
    for i, req in enumerate(term.match_expressions):
        errors.extend(
            requirement_errors(req.key, req.operator, req.values, f"{path}.matchExpressions[{i}]")
        )
    for i, req in enumerate(term.match_fields):
        errors.extend(_field_requirement_errors(req, f"{path}.matchFields[{i}]"))
    return errors


def validate_node_selector(selector: NodeSelector, path: str) -> list[str]:
    """Every parse error in ``selector``'s terms, each naming its field path."""
    errors: list[str] = []
    for i, term in enumerate(selector.node_selector_terms):
        errors.extend(node_selector_term_errors(term, f"{path}.nodeSelectorTerms[{i}]"))
    return errors


def node_selector_term_is_valid(term: NodeSelectorTerm) -> bool:
    """Whether upstream parses ``term``; an unparsable term matches no node."""
    return all(
        requirement_is_valid(req.key, req.operator, tuple(req.values))
        for req in term.match_expressions
    ) and not any(_field_requirement_errors(req, "") for req in term.match_fields)


def node_selector_term_matches(
    term: NodeSelectorTerm, labels: Mapping[str, str], node_name: str
) -> bool:
    """Whether a node with ``labels`` and ``node_name`` satisfies every requirement of
    ``term``. An empty or unparsable term matches nothing.

    matchFields compare against the node's fields, of which only ``metadata.name``
    exists (an unknown field reads as ""); like upstream, they are skipped for a node
    with an empty name.
    """
    if not term.match_expressions and not term.match_fields:
        return False
    if not node_selector_term_is_valid(term):
        return False
    for req in term.match_expressions:
        if not requirement_matches(req.operator, req.values, labels.get(req.key)):
            return False
    if node_name:
        for req in term.match_fields:
            field_value = node_name if req.key == NODE_NAME_FIELD else ""
            if (field_value == req.values[0]) != (req.operator == "In"):
                return False
    return True


def node_selector_matches(
    selector: NodeSelector, labels: Mapping[str, str], node_name: str
) -> bool:
    """Whether any term of ``selector`` matches the node; no terms match nothing."""
    return any(
        node_selector_term_matches(term, labels, node_name) for term in selector.node_selector_terms
    )


def node_matches_pod(node: Node, pod: Pod) -> bool:
    """One node against the pod's ``spec.nodeSelector`` and required node affinity
    (upstream's ``RequiredNodeAffinity.Match`` without a profile's addedAffinity)."""
    labels = node.metadata.labels
    if any(labels.get(k) != v for k, v in pod.spec.node_selector.items()):
        return False
    aff = pod.spec.affinity.node_affinity if pod.spec.affinity else None
    required = aff.required_during_scheduling_ignored_during_execution if aff else None
    return required is None or node_selector_matches(required, labels, node.metadata.name)


# --- taints ----------------------------------------------------------------------------


class TolerationLike(Protocol):
    """A pod toleration or a DRA device toleration."""

    @property
    def key(self) -> str: ...
    @property
    def operator(self) -> str: ...
    @property
    def value(self) -> str: ...
    @property
    def effect(self) -> str: ...


class TaintLike(Protocol):
    """A node taint or a DRA device taint."""

    @property
    def key(self) -> str: ...
    @property
    def value(self) -> str: ...
    @property
    def effect(self) -> str: ...


def tolerates(toleration: TolerationLike, taint: TaintLike) -> bool:
    """``Toleration.ToleratesTaint``.

    An empty toleration effect matches every effect, an empty key every key; operator
    Exists matches any value, Equal (or empty) only the same value, and any other
    operator nothing.
    """
    if toleration.effect and toleration.effect != taint.effect:
        return False
    if toleration.key and toleration.key != taint.key:
        return False
    if toleration.operator == "Exists":
        return True
    if toleration.operator in ("Equal", ""):
        return toleration.value == taint.value
    return False


def find_untolerated_taint(
    taints: Sequence[Taint], tolerations: Sequence[Toleration], effects: Collection[str]
) -> Taint | None:
    """The first taint with an effect in ``effects`` that no toleration tolerates."""
    for taint in taints:
        if taint.effect not in effects:
            continue
        if not any(tolerates(toleration, taint) for toleration in tolerations):
            return taint
    return None


def format_taint(taint: Taint) -> str:
    """``{key: value}``, as in upstream's ``node(s) had untolerated taint {key: value}``."""
    return f"{{{taint.key}: {taint.value}}}"
