"""Node selector terms (matchExpressions, matchFields) follow upstream's nodeaffinity helpers."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from troupe.api.objects import NodeSelector, NodeSelectorTerm
from troupe.api.selectors import (
    node_selector_matches,
    node_selector_term_is_valid,
    node_selector_term_matches,
    validate_node_selector,
)

# --- node selectors --------------------------------------------------------------------


def expr(key: str, operator: str, *values: str) -> dict[str, Any]:
    return {"key": key, "operator": operator, "values": list(values)}


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
