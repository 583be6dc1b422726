"""Selector and toleration matching follow upstream labels / nodeaffinity / v1helper."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from troupe.api.objects import LabelSelector, NodeSelector, NodeSelectorTerm, Taint, Toleration
from troupe.api.selectors import (
    find_untolerated_taint,
    format_taint,
    label_selector_matches,
    node_selector_matches,
    node_selector_term_is_valid,
    node_selector_term_matches,
    requirement_errors,
    requirement_matches,
    tolerates,
    validate_label_selector,
    validate_node_selector,
)

# --- requirements ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("operator", "values", "value", "matches"),
    [
        pytest.param("In", ["a", "b"], "b", True, id="In matches a listed value"),
        pytest.param("In", ["a", "b"], "c", False, id="In rejects an unlisted value"),
        pytest.param("In", ["a"], None, False, id="In rejects an absent key"),
        pytest.param("In", [""], "", True, id="In matches an empty value when it is listed"),
        pytest.param("NotIn", ["a"], "c", True, id="NotIn matches an unlisted value"),
        pytest.param("NotIn", ["a", "c"], "c", False, id="NotIn rejects a listed value"),
        pytest.param("NotIn", ["a"], None, True, id="NotIn matches an absent key"),
        pytest.param("Exists", [], "", True, id="Exists matches any value even empty"),
        pytest.param("Exists", [], None, False, id="Exists rejects an absent key"),
        pytest.param("DoesNotExist", [], None, True, id="DoesNotExist matches an absent key"),
        pytest.param("DoesNotExist", [], "x", False, id="DoesNotExist rejects a present key"),
        pytest.param("Gt", ["5"], "6", True, id="Gt matches a larger integer"),
        pytest.param("Gt", ["5"], "5", False, id="Gt rejects an equal integer"),
        pytest.param("Gt", ["9"], "10", True, id="Gt compares numbers not strings"),
        pytest.param("Gt", ["+1"], "2", True, id="Gt accepts an explicit plus sign"),
        pytest.param("Lt", ["5"], "4", True, id="Lt matches a smaller integer"),
        pytest.param("Lt", ["-1"], "-2", True, id="Lt handles negative integers"),
        pytest.param("Lt", ["5"], "5", False, id="Lt rejects an equal integer"),
        pytest.param("Gt", ["1"], "2.5", False, id="Gt rejects a non-integer label"),
        pytest.param("Gt", ["x"], "2", False, id="Gt rejects a non-integer bound"),
        pytest.param("Lt", ["5"], " 1", False, id="Lt rejects a label with whitespace"),
        pytest.param("Gt", ["1"], "1_000", False, id="Gt rejects underscores in digits"),
        pytest.param("Gt", ["1"], str(2**63), False, id="Gt rejects a label past int64"),
        pytest.param("Gt", ["1"], None, False, id="Gt rejects an absent key"),
        pytest.param("Gt", ["1", "2"], "5", False, id="Gt with two values matches nothing"),
        pytest.param("Lt", [], "5", False, id="Lt without a value matches nothing"),
        pytest.param("Equals", ["a"], "a", False, id="an unknown operator matches nothing"),
    ],
)
def test_requirement_matches(
    operator: str, values: Sequence[str], value: str | None, matches: bool
) -> None:
    assert requirement_matches(operator, values, value) is matches


_label_values = st.text(alphabet="ab01-", max_size=3)


@settings(max_examples=200)
@given(st.lists(_label_values, max_size=4), _label_values)
def test_not_in_is_the_negation_of_in_for_a_present_key(values: list[str], value: str) -> None:
    assert requirement_matches("NotIn", values, value) is not requirement_matches(
        "In", values, value
    )


@settings(max_examples=200)
@given(st.integers(-(2**63), 2**63 - 1), st.integers(-(2**63), 2**63 - 1))
def test_gt_and_lt_compare_int64s(label: int, bound: int) -> None:
    assert requirement_matches("Gt", [str(bound)], str(label)) is (label > bound)
    assert requirement_matches("Lt", [str(bound)], str(label)) is (label < bound)


# --- label selectors -------------------------------------------------------------------


def label_selector(**body: Any) -> LabelSelector:
    return LabelSelector.model_validate(body)


def expr(key: str, operator: str, *values: str) -> dict[str, Any]:
    return {"key": key, "operator": operator, "values": list(values)}


LABELS = {"app": "web", "tier": "frontend", "empty": ""}


@pytest.mark.parametrize(
    ("selector", "matches"),
    [
        pytest.param(None, False, id="a missing selector matches nothing"),
        pytest.param(label_selector(), True, id="an empty selector matches everything"),
        pytest.param(label_selector(matchLabels={"app": "web"}), True, id="equal labels match"),
        pytest.param(
            label_selector(matchLabels={"app": "db"}), False, id="a different value fails"
        ),
        pytest.param(label_selector(matchLabels={"zone": "a"}), False, id="a missing label fails"),
        pytest.param(
            label_selector(matchLabels={"empty": ""}), True, id="an empty label value matches"
        ),
        pytest.param(
            label_selector(matchExpressions=[expr("tier", "In", "frontend", "backend")]),
            True,
            id="In over the label's value matches",
        ),
        pytest.param(
            label_selector(matchExpressions=[expr("zone", "NotIn", "a")]),
            True,
            id="NotIn matches when the label is absent",
        ),
        pytest.param(
            label_selector(
                matchLabels={"app": "web"}, matchExpressions=[expr("tier", "DoesNotExist")]
            ),
            False,
            id="labels and expressions are ANDed",
        ),
        pytest.param(
            label_selector(matchExpressions=[expr("zone", "NotIn")]),
            False,
            id="NotIn without values is invalid and matches nothing",
        ),
        pytest.param(
            label_selector(matchExpressions=[expr("app", "Exists", "web")]),
            False,
            id="Exists with values is invalid and matches nothing",
        ),
        pytest.param(
            label_selector(matchExpressions=[expr("bad key", "DoesNotExist")]),
            False,
            id="an invalid key makes the selector match nothing",
        ),
        pytest.param(
            label_selector(matchLabels={"app": "-web-"}),
            False,
            id="an invalid label value makes the selector match nothing",
        ),
    ],
)
def test_label_selector_matches(selector: LabelSelector | None, matches: bool) -> None:
    assert label_selector_matches(selector, LABELS) is matches


@pytest.mark.parametrize(
    ("selector", "errors"),
    [
        pytest.param(None, [], id="a missing selector is valid"),
        pytest.param(
            label_selector(
                matchLabels={"example.com/app": "web"},
                matchExpressions=[expr("tier", "In", "a"), expr("gpu", "Exists")],
            ),
            [],
            id="a well-formed selector has no errors",
        ),
        pytest.param(
            label_selector(matchExpressions=[expr("tier", "In")]),
            [
                "spec.selector.matchExpressions[0].values: Invalid value: []: "
                "for 'In', 'NotIn' operators, values set can't be empty"
            ],
            id="In without values is reported at its path",
        ),
        pytest.param(
            label_selector(matchExpressions=[expr("tier", "In", "a"), expr("gpu", "Exists", "x")]),
            [
                'spec.selector.matchExpressions[1].values: Invalid value: ["x"]: '
                "values set must be empty for 'Exists' and 'DoesNotExist'"
            ],
            id="Exists with values is reported at its index",
        ),
        pytest.param(
            label_selector(matchLabels={"a/b/c": "x"}),
            [
                "spec.selector.matchLabels: Invalid value: 'a/b/c': a qualified name must "
                "consist of an optional DNS subdomain prefix and '/' followed by a name"
            ],
            id="a key with two slashes is reported",
        ),
    ],
)
def test_validate_label_selector(selector: LabelSelector | None, errors: list[str]) -> None:
    assert validate_label_selector(selector, "spec.selector") == errors


@pytest.mark.parametrize(
    ("operator", "values", "fragment"),
    [
        pytest.param("Gt", ["1", "2"], "exactly one value is required", id="Gt needs one value"),
        pytest.param("Lt", ["ten"], "the value must be an integer", id="Lt needs an integer"),
        pytest.param("Near", [], 'Unsupported value: "Near"', id="unknown operators"),
        pytest.param("In", ["x" * 64], "a label value must be", id="values over 63 characters"),
    ],
)
def test_requirement_errors_name_the_problem(
    operator: str, values: list[str], fragment: str
) -> None:
    errors = requirement_errors("k", operator, values, "term.matchExpressions[0]")
    assert len(errors) == 1
    assert errors[0].startswith("term.matchExpressions[0].")
    assert fragment in errors[0]


def test_requirement_errors_accept_a_valid_gt() -> None:
    assert requirement_errors("example.com/cores", "Gt", ["3"], "p") == []


def test_a_negative_gt_bound_is_not_a_valid_label_value() -> None:
    # Upstream NewRequirement validates every value as a label value, Gt/Lt included.
    errors = requirement_errors("cores", "Gt", ["-3"], "p")
    assert errors == [
        "p.values[0]: Invalid value: '-3': a label value must be empty or 1-63 alphanumeric "
        "characters, '-', '_' or '.', starting and ending with an alphanumeric"
    ]


# --- node selectors --------------------------------------------------------------------


def term(
    expressions: Sequence[dict[str, Any]] = (), fields: Sequence[dict[str, Any]] = ()
) -> NodeSelectorTerm:
    return NodeSelectorTerm.model_validate(
        {"matchExpressions": list(expressions), "matchFields": list(fields)}
    )


NODE_LABELS = {"zone": "a", "cores": "16"}


@pytest.mark.parametrize(
    ("the_term", "node_name", "matches"),
    [
        pytest.param(term(), "n1", False, id="an empty term matches nothing"),
        pytest.param(
            term([expr("zone", "In", "a"), expr("cores", "Gt", "8")]),
            "n1",
            True,
            id="expressions that all hold match",
        ),
        pytest.param(
            term([expr("zone", "In", "a"), expr("cores", "Lt", "8")]),
            "n1",
            False,
            id="expressions are ANDed",
        ),
        pytest.param(
            term(fields=[expr("metadata.name", "In", "n1")]),
            "n1",
            True,
            id="matchFields In matches the node's name",
        ),
        pytest.param(
            term(fields=[expr("metadata.name", "NotIn", "n1")]),
            "n1",
            False,
            id="matchFields NotIn excludes the node's name",
        ),
        pytest.param(
            term([expr("zone", "In", "a")], [expr("metadata.name", "In", "n2")]),
            "n1",
            False,
            id="labels and fields must both match",
        ),
        pytest.param(
            term(fields=[expr("spec.podCIDR", "In", "")]),
            "n1",
            True,
            id="an unknown field compares as the empty string",
        ),
        pytest.param(
            term(fields=[expr("metadata.name", "In", "n2")]),
            "",
            True,
            id="a node without a name skips matchFields like upstream",
        ),
        pytest.param(
            term([expr("zone", "NotIn")]),
            "n1",
            False,
            id="NotIn without values makes the term match nothing",
        ),
        pytest.param(
            term([expr("cores", "Gt", "-1")]),
            "n1",
            False,
            id="a negative Gt bound makes the term match nothing like upstream",
        ),
        pytest.param(
            term([expr("cores", "Gt", "8", "9")]),
            "n1",
            False,
            id="Gt with two values makes the term match nothing",
        ),
        pytest.param(
            term(fields=[expr("metadata.name", "In", "n1", "n2")]),
            "n1",
            False,
            id="a field requirement with two values matches nothing",
        ),
        pytest.param(
            term(fields=[expr("metadata.name", "Exists")]),
            "n1",
            False,
            id="a field requirement with Exists matches nothing",
        ),
    ],
)
def test_node_selector_term_matches(
    the_term: NodeSelectorTerm, node_name: str, matches: bool
) -> None:
    assert node_selector_term_matches(the_term, NODE_LABELS, node_name) is matches


@pytest.mark.parametrize(
    ("the_term", "valid"),
    [
        pytest.param(
            term([expr("zone", "In", "a")], [expr("metadata.name", "NotIn", "n1")]),
            True,
            id="a well-formed term is valid",
        ),
        pytest.param(term([expr("zone", "NotIn")]), False, id="NotIn without values is not"),
        pytest.param(term([expr("zone", "Exists", "a")]), False, id="Exists with values is not"),
        pytest.param(
            term(fields=[expr("metadata.name", "Gt", "1")]), False, id="Gt on a field is not"
        ),
    ],
)
def test_node_selector_term_is_valid(the_term: NodeSelectorTerm, valid: bool) -> None:
    assert node_selector_term_is_valid(the_term) is valid


def node_selector(*terms: NodeSelectorTerm) -> NodeSelector:
    return NodeSelector(node_selector_terms=list(terms))


@pytest.mark.parametrize(
    ("selector", "matches"),
    [
        pytest.param(node_selector(), False, id="no terms match nothing"),
        pytest.param(
            node_selector(term([expr("zone", "In", "b")]), term([expr("zone", "In", "a")])),
            True,
            id="terms are ORed",
        ),
        pytest.param(
            node_selector(term([expr("zone", "In")]), term([expr("cores", "Exists")])),
            True,
            id="an invalid term does not stop a valid one from matching",
        ),
        pytest.param(
            node_selector(term(), term([expr("zone", "DoesNotExist")])),
            False,
            id="an empty term never matches on its own",
        ),
    ],
)
def test_node_selector_matches(selector: NodeSelector, matches: bool) -> None:
    assert node_selector_matches(selector, NODE_LABELS, "n1") is matches


def test_validate_node_selector_names_each_bad_term() -> None:
    selector = node_selector(
        term([expr("zone", "In", "a")]),
        term([expr("cores", "Gt", "many")], [expr("metadata.name", "In", "a", "b")]),
    )
    assert validate_node_selector(selector, "affinity") == [
        "affinity.nodeSelectorTerms[1].matchExpressions[0].values[0]: Invalid value: 'many': "
        "for 'Gt', 'Lt' operators, the value must be an integer",
        'affinity.nodeSelectorTerms[1].matchFields[0].values: Invalid value: ["a", "b"]: '
        "must have one element",
    ]


# --- taints ----------------------------------------------------------------------------


def taint(key: str, value: str = "", effect: str = "NoSchedule") -> Taint:
    return Taint.model_validate({"key": key, "value": value, "effect": effect})


def toleration(**body: Any) -> Toleration:
    return Toleration.model_validate(body)


GPU_TAINT = taint("dedicated", "gpu")


@pytest.mark.parametrize(
    ("the_toleration", "the_taint", "tolerated"),
    [
        pytest.param(
            toleration(key="dedicated", value="gpu", effect="NoSchedule"),
            GPU_TAINT,
            True,
            id="Equal with the same key, value and effect tolerates",
        ),
        pytest.param(
            toleration(key="dedicated", value="cpu"),
            GPU_TAINT,
            False,
            id="Equal with a different value does not tolerate",
        ),
        pytest.param(
            toleration(key="dedicated", operator="Exists"),
            GPU_TAINT,
            True,
            id="Exists tolerates any value of its key",
        ),
        pytest.param(
            toleration(operator="Exists"),
            taint("anything", "x", "NoExecute"),
            True,
            id="Exists with an empty key tolerates every taint",
        ),
        pytest.param(
            toleration(key="dedicated", value="gpu"),
            taint("dedicated", "gpu", "NoExecute"),
            True,
            id="an empty effect matches every effect",
        ),
        pytest.param(
            toleration(key="dedicated", value="gpu", effect="NoExecute"),
            GPU_TAINT,
            False,
            id="a different effect does not tolerate",
        ),
        pytest.param(
            toleration(key="other", operator="Exists"),
            GPU_TAINT,
            False,
            id="a different key does not tolerate",
        ),
        pytest.param(
            toleration(),
            taint("anything", ""),
            True,
            id="Equal with an empty key compares only the value like upstream",
        ),
        pytest.param(
            toleration(key="dedicated", operator="", value="gpu"),
            GPU_TAINT,
            True,
            id="an empty operator means Equal",
        ),
        pytest.param(
            toleration(key="dedicated", operator="Gt", value="gpu"),
            GPU_TAINT,
            False,
            id="an unknown operator tolerates nothing, even with the same value",
        ),
        pytest.param(
            toleration(operator="exists"),
            GPU_TAINT,
            False,
            id="operators are case-sensitive",
        ),
    ],
)
def test_tolerates(the_toleration: Toleration, the_taint: Taint, tolerated: bool) -> None:
    assert tolerates(the_toleration, the_taint) is tolerated


SCHEDULING_EFFECTS = frozenset({"NoSchedule", "NoExecute"})


@pytest.mark.parametrize(
    ("taints", "tolerations", "expected"),
    [
        pytest.param([], [], None, id="a node without taints has nothing untolerated"),
        pytest.param([GPU_TAINT], [], GPU_TAINT, id="a taint without tolerations is untolerated"),
        pytest.param(
            [taint("soft", effect="PreferNoSchedule")],
            [],
            None,
            id="taints with other effects are ignored",
        ),
        pytest.param(
            [GPU_TAINT, taint("spot", "true", "NoExecute")],
            [toleration(key="dedicated", operator="Exists")],
            taint("spot", "true", "NoExecute"),
            id="the first taint no toleration covers is returned",
        ),
        pytest.param(
            [taint("a"), taint("b")],
            [],
            taint("a"),
            id="taints are checked in node order",
        ),
        pytest.param(
            [GPU_TAINT, taint("spot", "true", "NoExecute")],
            [toleration(operator="Exists")],
            None,
            id="a wildcard toleration covers everything",
        ),
    ],
)
def test_find_untolerated_taint(
    taints: list[Taint], tolerations: list[Toleration], expected: Taint | None
) -> None:
    assert find_untolerated_taint(taints, tolerations, SCHEDULING_EFFECTS) == expected


@pytest.mark.parametrize(
    ("the_taint", "text"),
    [
        pytest.param(GPU_TAINT, "{dedicated: gpu}", id="key and value in braces"),
        pytest.param(
            taint("node.kubernetes.io/unreachable"),
            "{node.kubernetes.io/unreachable: }",
            id="an empty value leaves a blank after the colon",
        ),
    ],
)
def test_format_taint(the_taint: Taint, text: str) -> None:
    assert format_taint(the_taint) == text
