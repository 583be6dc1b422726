"""Requirement and label selector matching and validation follow upstream's labels package."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from troupe.api.objects import LabelSelector
from troupe.api.selectors import (
    label_selector_matches,
    requirement_errors,
    requirement_matches,
    validate_label_selector,
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
