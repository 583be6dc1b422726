"""The CompositePodGroup rule (KEP-6012): which leaves go ahead, and the pods it needs."""

from __future__ import annotations

import pytest
from troupe.api.composite import GroupNode, describe, kept_leaves, required_pods
from troupe.api.gangs import GroupKey


def leaf(name: str, min_count: int, gang: bool = True) -> GroupNode:
    return GroupNode(GroupKey(name), name, gang, min_count)


def comp(name: str, min_group_count: int | None, *children: GroupNode) -> GroupNode:
    gang = min_group_count is not None
    return GroupNode(GroupKey(name), name, gang, min_group_count or 1, children, composite=True)


ROLES = comp("job", 2, leaf("driver", 1), leaf("workers", 6))
NESTED = comp("top", 2, comp("a", 1, leaf("a1", 2), leaf("a2", 2)), leaf("b", 3))


@pytest.mark.parametrize(
    ("tree", "placed", "kept"),
    [
        pytest.param(ROLES, {"driver": 1, "workers": 7}, {"driver", "workers"}, id="both roles"),
        pytest.param(ROLES, {"driver": 1, "workers": 5}, None, id="workers below quorum: none"),
        pytest.param(ROLES, {"workers": 8}, None, id="no driver: none"),
        pytest.param(
            comp("job", 1, leaf("driver", 1), leaf("workers", 6)),
            {"driver": 1, "workers": 5},
            {"driver"},
            id="minGroupCount 1: the driver goes, the workers below quorum wait",
        ),
        pytest.param(
            NESTED, {"a1": 1, "a2": 2, "b": 3}, {"a2", "b"}, id="a nested composite at quorum"
        ),
        pytest.param(NESTED, {"a1": 1, "a2": 1, "b": 3}, None, id="a nested composite short"),
        pytest.param(
            comp("loose", None, leaf("x", 2), leaf("y", 2)),
            {"x": 2, "y": 1},
            {"x"},
            id="a basic composite keeps any child at quorum",
        ),
        pytest.param(
            comp("job", 1, leaf("solo", 1, gang=False)), {"solo": 1}, {"solo"}, id="a basic leaf"
        ),
    ],
)
def test_kept_leaves(tree: GroupNode, placed: dict[str, int], kept: set[str] | None) -> None:
    counts = {GroupKey(k): v for k, v in placed.items()}
    found = kept_leaves(tree, counts)
    assert (None if found is None else set(found)) == kept


@pytest.mark.parametrize(
    ("tree", "pods"),
    [
        pytest.param(ROLES, 7, id="driver 1 + workers 6"),
        pytest.param(comp("job", 1, leaf("driver", 1), leaf("workers", 6)), 1, id="the cheapest"),
        pytest.param(NESTED, 5, id="nested: 2 + 3"),
    ],
)
def test_required_pods(tree: GroupNode, pods: int) -> None:
    assert required_pods(tree) == pods


def test_describe_names_each_child_and_its_count() -> None:
    counts = {GroupKey("driver"): 1, GroupKey("workers"): 5}
    assert describe(ROLES, counts) == "driver 1/1, workers 5/6"
    assert describe(NESTED, {GroupKey("a2"): 2}) == "a 1/1 groups [a1 0/2, a2 2/2], b 0/3"
