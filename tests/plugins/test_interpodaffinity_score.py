"""InterPodAffinity Score (preferred terms) and args."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest
from pydantic import ValidationError
from troupe.api.nodetable import NodeTable
from troupe.api.objects import Pod
from troupe.plugins.interpodaffinity import (
    InterPodAffinity,
    InterPodAffinityArgs,
)

from tests.plugins import fakes
from tests.plugins.builders import PodBuilder, table_of
from tests.plugins.interpod_helpers import (
    DB,
    HOST,
    NAMES,
    WEB,
    ZONES,
    plugin,
    pod,
)

# --- score -----------------------------------------------------------------------


def run_score(
    pl: InterPodAffinity, incoming: Pod, table: NodeTable, scored: Sequence[str]
) -> list[int] | None:
    got = fakes.run_score(pl, incoming, table, only=scored)
    return None if got is None else [got[n] for n in scored]


SCORE_CASES = [
    # raw: a1 +10 (db in zone a), a2 +10 -5 (web on a2), b1 0 -> 100, 50, 0.
    pytest.param(
        {"a1": [pod("d", DB).obj()], "a2": [pod("w").obj()]},
        pod("p", {"app": "x"})
        .pod_affinity("zone", DB, weight=10)
        .pod_anti_affinity(HOST, WEB, weight=5),
        None,
        [100, 50, 0],
        id="preferred affinity and anti-affinity of the incoming pod add up",
    ),
    # existing pod's required affinity to app=web in zone a: +1 for zone a.
    pytest.param(
        {"a1": [pod("d", DB).pod_affinity("zone", WEB).obj()]},
        pod("p"),
        None,
        [100, 100, 0],
        id="an existing pod's required affinity scores with hardPodAffinityWeight",
    ),
    pytest.param(
        {"a1": [pod("d", DB).pod_affinity("zone", WEB).obj()]},
        pod("p"),
        InterPodAffinityArgs(hard_pod_affinity_weight=0),
        None,
        id="hardPodAffinityWeight 0 ignores existing required affinity",
    ),
    # existing preferred anti-affinity -20 on b1: [0, 0, -20] -> 100, 100, 0.
    pytest.param(
        {"b1": [pod("d", DB).pod_anti_affinity(HOST, WEB, weight=20).obj()]},
        pod("p"),
        None,
        [100, 100, 0],
        id="an existing pod's preferred anti-affinity lowers its node",
    ),
    pytest.param(
        {"b1": [pod("d", DB).pod_anti_affinity(HOST, WEB, weight=20).obj()]},
        pod("p"),
        InterPodAffinityArgs(ignore_preferred_terms_of_existing_pods=True),
        None,
        id="ignorePreferredTermsOfExistingPods skips a pod without preferred terms",
    ),
    # raw: a1 +7 (existing preferred affinity, zone a), a2 +7 -10 = -3, b1 0.
    # min -3, max 7: a1 100*10/10=100, a2 0, b1 100*3/10=30.
    pytest.param(
        {
            "a1": [pod("d", DB).pod_affinity("zone", WEB, weight=7).obj()],
            "a2": [pod("e", {"app": "e"}).obj()],
        },
        pod("p").pod_anti_affinity(HOST, {"app": "e"}, weight=10),
        InterPodAffinityArgs(ignore_preferred_terms_of_existing_pods=True),
        [100, 0, 30],
        id="existing preferred terms still count when the incoming pod has its own",
    ),
    pytest.param(
        {"a1": [pod("d", DB).obj()]},
        pod("p"),
        None,
        None,
        id="no term anywhere skips scoring",
    ),
]


@pytest.mark.parametrize(("pods_on", "incoming", "args", "expected"), SCORE_CASES)
def test_score(
    pods_on: Mapping[str, Sequence[Pod]],
    incoming: PodBuilder,
    args: InterPodAffinityArgs | None,
    expected: list[int] | None,
) -> None:
    table = table_of(ZONES, pods_on=pods_on)
    assert run_score(plugin(args), incoming.obj(), table, NAMES) == expected


# --- args ---------------------------------------------------------------------------


def test_args_defaults_and_aliases() -> None:
    args = InterPodAffinityArgs.model_validate({})
    assert (args.hard_pod_affinity_weight, args.ignore_preferred_terms_of_existing_pods) == (
        1,
        False,
    )
    args = InterPodAffinityArgs.model_validate(
        {"hardPodAffinityWeight": 100, "ignorePreferredTermsOfExistingPods": True}
    )
    assert (args.hard_pod_affinity_weight, args.ignore_preferred_terms_of_existing_pods) == (
        100,
        True,
    )


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param(
            {"hardPodAffinityWeight": 101}, id="hardPodAffinityWeight above 100 is rejected"
        ),
        pytest.param(
            {"hardPodAffinityWeight": -1}, id="a negative hardPodAffinityWeight is rejected"
        ),
        pytest.param({"hardPodAffinityWeigth": 1}, id="a misspelt field is rejected"),
    ],
)
def test_args_errors(raw: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        InterPodAffinityArgs.model_validate(raw)
