"""Taint and toleration matching follow upstream's v1helper."""

from __future__ import annotations

from typing import Any

import pytest
from troupe.api.objects import Taint, Toleration
from troupe.api.selectors import (
    find_untolerated_taint,
    format_taint,
    tolerates,
)

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
