"""NodeAffinity: nodeSelector, required and preferred terms, addedAffinity, hints."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError
from troupe.api.events import QueueingHint
from troupe.api.objects import Affinity, Node, NodeSelector
from troupe.api.objects import NodeAffinity as NodeAffinitySpec
from troupe.api.status import Code
from troupe.plugins.nodeaffinity import NodeAffinity, NodeAffinityArgs
from troupe.plugins.nodeaffinity.node_affinity import node_matches_pod

from tests.plugins.builders import PodBuilder, make_node, make_pod, table_of
from tests.plugins.fakes import FakeHandle, run_filter, run_score

POD_REASON = "node(s) didn't match Pod's node affinity/selector"
ENFORCED_REASON = "node(s) didn't match scheduler-enforced node affinity"
ZONE_A_ONLY = {
    "addedAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}
            ]
        }
    }
}


def affinity(args: dict[str, object] | None = None) -> NodeAffinity:
    model = NodeAffinityArgs.model_validate(args) if args is not None else None
    return NodeAffinity(model, FakeHandle())


def labelled(name: str, **labels: str) -> Node:
    return make_node().name(name).capacity(cpu="1", pods=10).labels(labels).obj()


NODES = [
    labelled("a-ssd", zone="a", disk="ssd", cores="8"),
    labelled("a-hdd", zone="a", disk="hdd", cores="4"),
    labelled("b-ssd", zone="b", disk="ssd"),
    labelled("bare"),
]

FILTER_CASES = [
    pytest.param(
        make_pod().node_selector(zone="a"),
        {"a-ssd", "a-hdd"},
        id="a nodeSelector keeps nodes with the labels",
    ),
    pytest.param(
        make_pod().node_selector(zone="a", disk="ssd"),
        {"a-ssd"},
        id="every nodeSelector label must match",
    ),
    pytest.param(
        make_pod()
        .node_affinity_term(("zone", "In", ["b"]))
        .node_affinity_term(("disk", "In", ["hdd"])),
        {"b-ssd", "a-hdd"},
        id="required terms are ORed",
    ),
    pytest.param(
        make_pod().node_affinity_term(("zone", "In", ["a"]), ("disk", "NotIn", ["ssd"])),
        {"a-hdd"},
        id="expressions within a term are ANDed",
    ),
    pytest.param(
        make_pod().node_affinity_term(("zone", "NotIn", ["a"])),
        {"b-ssd", "bare"},
        id="NotIn also matches nodes without the label",
    ),
    pytest.param(
        make_pod().node_affinity_term(("cores", "Gt", ["5"])), {"a-ssd"}, id="Gt compares integers"
    ),
    pytest.param(
        make_pod().node_affinity_term(("disk", "DoesNotExist", [])), {"bare"}, id="DoesNotExist"
    ),
    pytest.param(
        make_pod().node_selector(zone="a").node_affinity_term(("disk", "In", ["ssd"])),
        {"a-ssd"},
        id="nodeSelector and required affinity must both match",
    ),
    pytest.param(
        make_pod().node_affinity_term(("zone", "In", [])).node_affinity_term(("zone", "In", ["b"])),
        {"b-ssd"},
        id="an unparsable term matches nothing while the others still count",
    ),
    pytest.param(
        make_pod().node_affinity_term(fields=[("metadata.name", "NotIn", ["bare"])]),
        {"a-ssd", "a-hdd", "b-ssd"},
        id="matchFields on metadata.name",
    ),
]


@pytest.mark.parametrize(("pod", "feasible"), FILTER_CASES)
def test_filter(pod: PodBuilder, feasible: set[str]) -> None:
    out = run_filter(affinity(), pod.obj(), table_of(NODES))
    assert out.feasible == feasible
    rejected = {n.metadata.name for n in NODES} - feasible
    assert out.reasons == {n: [POD_REASON] for n in rejected}
    assert all(c == {Code.UNSCHEDULABLE_AND_UNRESOLVABLE} for c in out.codes.values())


def test_required_affinity_with_no_terms_matches_no_node() -> None:
    pod = make_pod().obj()
    pod.spec.affinity = Affinity(
        node_affinity=NodeAffinitySpec(
            required_during_scheduling_ignored_during_execution=NodeSelector()
        )
    )
    assert run_filter(affinity(), pod, table_of(NODES)).feasible == set()


def test_a_pod_without_constraints_skips_the_filter() -> None:
    out = run_filter(affinity(), make_pod().obj(), table_of(NODES))
    assert out.status.is_skip


def test_a_selector_every_node_matches_skips_the_filter() -> None:
    out = run_filter(
        affinity(), make_pod().node_affinity_term(("zone", "NotIn", ["z"])).obj(), table_of(NODES)
    )
    assert out.status.is_skip


def test_metadata_name_terms_restrict_the_cycle_to_those_nodes() -> None:
    pod = (
        make_pod()
        .node_affinity_term(fields=[("metadata.name", "In", ["a-ssd"])])
        .node_affinity_term(fields=[("metadata.name", "In", ["bare"])])
        .obj()
    )
    out = run_filter(affinity(), pod, table_of(NODES))
    assert out.node_names == {"a-ssd", "bare"}
    assert out.feasible == {"a-ssd", "bare"}


def test_conflicting_metadata_name_terms_fail_prefilter() -> None:
    pod = make_pod().node_affinity_term(
        fields=[("metadata.name", "In", ["a-ssd"]), ("metadata.name", "In", ["bare"])]
    )
    out = run_filter(affinity(), pod.obj(), table_of(NODES))
    assert out.status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert out.status.reasons == ("pod affinity terms conflict",)


def test_added_affinity_rejects_with_its_own_reason() -> None:
    out = run_filter(
        affinity(ZONE_A_ONLY), make_pod().node_selector(disk="ssd").obj(), table_of(NODES)
    )
    assert out.feasible == {"a-ssd"}
    assert out.reasons == {
        "a-hdd": [POD_REASON],
        "b-ssd": [ENFORCED_REASON],
        "bare": [ENFORCED_REASON],
    }


def test_added_affinity_applies_to_pods_without_constraints() -> None:
    out = run_filter(affinity(ZONE_A_ONLY), make_pod().obj(), table_of(NODES))
    assert out.feasible == {"a-ssd", "a-hdd"}


def test_a_label_change_is_seen_after_a_cached_mask() -> None:
    table = table_of(NODES)
    plugin = affinity()
    pod = make_pod().node_selector(zone="b").obj()
    assert run_filter(plugin, pod, table).feasible == {"b-ssd"}
    table.update_node(labelled("bare", zone="b"))
    assert run_filter(plugin, pod, table).feasible == {"b-ssd", "bare"}


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.dictionaries(st.sampled_from(["zone", "disk"]), st.sampled_from(["a", "b"])),
        min_size=1,
        max_size=6,
    ),
    st.lists(
        st.lists(
            st.tuples(
                st.sampled_from(["zone", "disk"]),
                st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist"]),
                st.lists(st.sampled_from(["a", "b"]), min_size=1, max_size=2),
            ),
            min_size=1,
            max_size=2,
        ),
        max_size=3,
    ),
    st.dictionaries(st.sampled_from(["zone", "disk"]), st.sampled_from(["a", "b"]), max_size=1),
)
def test_filter_agrees_with_the_per_node_matcher(
    node_labels: list[dict[str, str]],
    terms: list[list[tuple[str, str, list[str]]]],
    selector: dict[str, str],
) -> None:
    nodes = [labelled(f"n{i}", **labels) for i, labels in enumerate(node_labels)]
    b = make_pod().node_selector(selector)
    for term in terms:
        b = b.node_affinity_term(
            *((k, op, [] if op in ("Exists", "DoesNotExist") else v) for k, op, v in term)
        )
    pod = b.obj()
    out = run_filter(affinity(), pod, table_of(nodes, capacity=2))
    assert out.feasible == {n.metadata.name for n in nodes if node_matches_pod(n, pod)}


# --- score ---------------------------------------------------------------------------

SCORE_CASES = [
    pytest.param(
        {},
        make_pod()
        .preferred_node_term(2, ("zone", "In", ["a"]))
        .preferred_node_term(5, ("disk", "In", ["ssd"])),
        # sums 7, 2, 5, 0 normalized against 7.
        {"a-ssd": 100, "a-hdd": 28, "b-ssd": 71, "bare": 0},
        id="matching preferred terms add their weights",
    ),
    pytest.param(
        {
            "addedAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 3,
                        "preference": {
                            "matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]
                        },
                    }
                ]
            }
        },
        make_pod().preferred_node_term(1, ("disk", "In", ["hdd"])),
        # a-hdd 1, b-ssd 3 -> 33 and 100.
        {"a-ssd": 0, "a-hdd": 33, "b-ssd": 100, "bare": 0},
        id="added preferred terms count like the pod's own",
    ),
]


@pytest.mark.parametrize(("args", "pod", "expected"), SCORE_CASES)
def test_score(args: dict[str, object], pod: PodBuilder, expected: dict[str, int]) -> None:
    assert run_score(affinity(args), pod.obj(), table_of(NODES)) == expected


def test_a_pod_without_preferences_is_not_scored() -> None:
    assert run_score(affinity(), make_pod().node_selector(zone="a").obj(), table_of(NODES)) is None


# --- queueing hints ----------------------------------------------------------------

WANTS_ZONE_A = make_pod().node_selector(zone="a").obj()

HINTS = [
    pytest.param(
        {}, None, labelled("n", zone="a"), QueueingHint.QUEUE, id="a matching node is added"
    ),
    pytest.param(
        {}, None, labelled("n", zone="b"), QueueingHint.SKIP, id="a non-matching node is added"
    ),
    pytest.param(
        {}, labelled("n"), labelled("n", zone="a"), QueueingHint.QUEUE, id="a node gains the label"
    ),
    pytest.param(
        {},
        labelled("n", zone="a"),
        labelled("n", zone="a", x="y"),
        QueueingHint.SKIP,
        id="a node that already matched changes",
    ),
    pytest.param(
        {
            "addedAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "pool", "operator": "Exists"}]}
                    ]
                }
            }
        },
        None,
        labelled("n", zone="a"),
        QueueingHint.SKIP,
        id="a node outside the added affinity",
    ),
]


@pytest.mark.parametrize(("args", "old", "new", "hint"), HINTS)
def test_node_hint(
    args: dict[str, object], old: Node | None, new: Node, hint: QueueingHint
) -> None:
    assert affinity(args).node_now_matches(WANTS_ZONE_A, old, new) is hint


def test_args_reject_an_unparsable_added_term_naming_the_field() -> None:
    bad = {
        "addedAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In"}]}]
            }
        }
    }
    with pytest.raises(
        ValidationError, match=r"nodeSelectorTerms\[0\].matchExpressions\[0\].values"
    ):
        NodeAffinityArgs.model_validate(bad)
