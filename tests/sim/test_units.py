"""Pure pieces of the embedded API server: strategic merge patch, JSON merge and JSON
patch, and request selectors, as tables plus hypothesis invariants."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from troupe.sim.apiserver.machinery.patch import (
    PatchError,
    json_patch,
    merge_patch,
    strategic_merge_patch,
)
from troupe.sim.apiserver.machinery.selectors import (
    SelectorError,
    parse_field_selector,
    parse_label_selector,
)

CONTAINERS = {
    "spec": {"containers": [{"name": "a", "image": "a:1"}, {"name": "b", "image": "b:1"}]}
}

STRATEGIC = [
    pytest.param(
        CONTAINERS,
        {"spec": {"containers": [{"name": "b", "image": "b:2"}]}},
        {"spec": {"containers": [{"name": "a", "image": "a:1"}, {"name": "b", "image": "b:2"}]}},
        id="containers merge by name",
    ),
    pytest.param(
        {"spec": {"containers": [{"name": "a", "ports": [{"containerPort": 80, "name": "http"}]}]}},
        {"spec": {"containers": [{"name": "a", "ports": [{"containerPort": 443}]}]}},
        {
            "spec": {
                "containers": [
                    {
                        "name": "a",
                        "ports": [{"containerPort": 80, "name": "http"}, {"containerPort": 443}],
                    }
                ]
            }
        },
        id="ports merge by containerPort inside a merged container",
    ),
    pytest.param(
        {
            "spec": {
                "containers": [
                    {"name": "a", "env": [{"name": "X", "value": "1"}, {"name": "Y", "value": "2"}]}
                ]
            }
        },
        {"spec": {"containers": [{"name": "a", "env": [{"name": "X", "$patch": "delete"}]}]}},
        {"spec": {"containers": [{"name": "a", "env": [{"name": "Y", "value": "2"}]}]}},
        id="env item deleted by name",
    ),
    pytest.param(
        {"metadata": {"ownerReferences": [{"uid": "1", "name": "x"}], "finalizers": ["a"]}},
        {"metadata": {"ownerReferences": [{"uid": "2", "name": "y"}], "finalizers": ["b"]}},
        {
            "metadata": {
                "ownerReferences": [{"uid": "1", "name": "x"}, {"uid": "2", "name": "y"}],
                "finalizers": ["a", "b"],
            }
        },
        id="owner references merge by uid and finalizers union",
    ),
    pytest.param(
        {"spec": {"tolerations": [{"key": "a"}], "nodeSelector": {"x": "1", "y": "2"}}},
        {"spec": {"tolerations": [{"key": "b"}], "nodeSelector": {"$patch": "replace", "z": "3"}}},
        {"spec": {"tolerations": [{"key": "b"}], "nodeSelector": {"z": "3"}}},
        id="lists without a merge key are replaced; $patch replace on a map",
    ),
    pytest.param(
        {"metadata": {"labels": {"a": "1", "b": "2"}}},
        {"metadata": {"labels": {"a": None}}},
        {"metadata": {"labels": {"b": "2"}}},
        id="null deletes a key",
    ),
    pytest.param(
        {"metadata": {"finalizers": ["a", "b", "c"]}},
        {"metadata": {"$deleteFromPrimitiveList/finalizers": ["b"]}},
        {"metadata": {"finalizers": ["a", "c"]}},
        id="deleteFromPrimitiveList removes values",
    ),
    pytest.param(
        {"spec": {"volumes": [{"name": "v", "emptyDir": {}}]}},
        {"spec": {"$patch": "delete"}},
        {},
        id="$patch delete on a map removes it",
    ),
]


@pytest.mark.parametrize(("original", "patch", "expected"), STRATEGIC)
def test_strategic_merge_patch(original: Any, patch: Any, expected: Any) -> None:
    assert strategic_merge_patch(original, patch) == expected


def test_strategic_merge_patch_without_merge_key_is_rejected() -> None:
    with pytest.raises(PatchError, match="does not contain declared merge key: name"):
        strategic_merge_patch(CONTAINERS, {"spec": {"containers": [{"image": "x"}]}})


JSON_PATCHES = [
    pytest.param(
        [{"op": "add", "path": "/a/-", "value": 3}], {"a": [1, 2, 3], "b": {"c": 1}}, id="append"
    ),
    pytest.param(
        [{"op": "add", "path": "/a/0", "value": 0}], {"a": [0, 1, 2], "b": {"c": 1}}, id="insert"
    ),
    pytest.param([{"op": "remove", "path": "/a/1"}], {"a": [1], "b": {"c": 1}}, id="remove index"),
    pytest.param(
        [{"op": "replace", "path": "/b/c", "value": 9}], {"a": [1, 2], "b": {"c": 9}}, id="replace"
    ),
    pytest.param(
        [{"op": "move", "from": "/b/c", "path": "/d"}], {"a": [1, 2], "b": {}, "d": 1}, id="move"
    ),
    pytest.param(
        [{"op": "copy", "from": "/a/0", "path": "/e"}],
        {"a": [1, 2], "b": {"c": 1}, "e": 1},
        id="copy",
    ),
    pytest.param(
        [{"op": "add", "path": "/b/x~1y", "value": 1}],
        {"a": [1, 2], "b": {"c": 1, "x/y": 1}},
        id="escaped key",
    ),
]


@pytest.mark.parametrize(("ops", "expected"), JSON_PATCHES)
def test_json_patch(ops: list[dict[str, Any]], expected: Any) -> None:
    original = {"a": [1, 2], "b": {"c": 1}}
    assert json_patch(original, ops) == expected
    assert original == {"a": [1, 2], "b": {"c": 1}}


@pytest.mark.parametrize(
    ("ops", "message"),
    [
        pytest.param(
            [{"op": "replace", "path": "/zz", "value": 1}],
            'replace operation does not apply: doc is missing path: "/zz"',
            id="replace missing",
        ),
        pytest.param(
            [{"op": "test", "path": "/b/c", "value": 2}],
            "testing value /b/c failed: test failed",
            id="test mismatch",
        ),
        pytest.param([{"op": "frob", "path": "/b"}], "Unexpected kind: frob", id="unknown op"),
    ],
)
def test_json_patch_errors(ops: list[dict[str, Any]], message: str) -> None:
    with pytest.raises(PatchError, match=message.replace("(", r"\(")):
        json_patch({"a": [1, 2], "b": {"c": 1}}, ops)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=3),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=2), children, max_size=3)
    ),
    max_leaves=8,
)


@settings(max_examples=150)
@given(json_values, json_values)
def test_merge_patch_is_idempotent(target: Any, patch: Any) -> None:
    once = merge_patch(target, patch)
    assert merge_patch(once, patch) == once


label_maps = st.dictionaries(
    st.sampled_from(["a", "b", "c"]), st.sampled_from(["x", "y"]), max_size=3
)


@settings(max_examples=150)
@given(label_maps, label_maps)
def test_equality_selector_matches_exactly_the_supersets(
    selector: dict[str, str], labels: dict[str, str]
) -> None:
    text = ",".join(f"{k}={v}" for k, v in selector.items())
    expected = all(labels.get(k) == v for k, v in selector.items())
    assert parse_label_selector(text).matches(labels) is expected
    assert parse_label_selector(selector).matches(labels) is expected


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("a in (x", id="unclosed set"),
        pytest.param("=x", id="missing key"),
        pytest.param("a b", id="two words"),
        pytest.param("a=x,", id="trailing comma"),
    ],
)
def test_bad_label_selectors_do_not_parse(text: str) -> None:
    with pytest.raises(SelectorError):
        parse_label_selector(text)


def test_field_selector_escapes_and_operators() -> None:
    selector = parse_field_selector(r"metadata.name=a\,b,status.phase!=Running")
    assert [(r.field, r.negated, r.value) for r in selector.requirements] == [
        ("metadata.name", False, "a,b"),
        ("status.phase", True, "Running"),
    ]
    assert selector.matches({"metadata": {"name": "a,b"}, "status": {"phase": "Pending"}})
    with pytest.raises(SelectorError, match="can't understand 'nonsense'"):
        parse_field_selector("nonsense")
