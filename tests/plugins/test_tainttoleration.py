"""TaintToleration: which taints reject, how reasons are grouped, the score, hints."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from troupe.api.events import QueueingHint
from troupe.api.objects import Node, Pod, TaintEffect
from troupe.api.scoring import default_normalize_score
from troupe.api.selectors import find_untolerated_taint
from troupe.api.status import Code
from troupe.plugins.tainttoleration import TaintToleration
from troupe.plugins.tainttoleration.taint_toleration import (
    node_became_tolerated,
    tolerations_of_this_pod_changed,
)

from tests.plugins.builders import PodBuilder, make_node, make_pod, table_of
from tests.plugins.fakes import FakeHandle, run_filter, run_score


def plugin() -> TaintToleration:
    return TaintToleration(None, FakeHandle())


def tainted(name: str, *taints: tuple[str, str, TaintEffect]) -> Node:
    b = make_node().name(name).capacity(cpu="1", pods=10)
    for key, value, effect in taints:
        b = b.taint(key, value, effect)
    return b.obj()


GPU_NO_SCHEDULE = ("dedicated", "gpu", "NoSchedule")

FILTER_CASES = [
    pytest.param(
        make_pod(),
        [tainted("n1", GPU_NO_SCHEDULE), tainted("n2")],
        {"n1": "node(s) had untolerated taint {dedicated: gpu}"},
        id="node with untolerated taint is rejected with the taint in the message",
    ),
    pytest.param(
        make_pod().toleration("dedicated", "gpu", "NoSchedule"),
        [tainted("n1", GPU_NO_SCHEDULE)],
        {},
        id="an Equal toleration with the same value tolerates the taint",
    ),
    pytest.param(
        make_pod().toleration("dedicated", "cpu", "NoSchedule"),
        [tainted("n1", GPU_NO_SCHEDULE)],
        {"n1": "node(s) had untolerated taint {dedicated: gpu}"},
        id="an Equal toleration with another value does not",
    ),
    pytest.param(
        make_pod().toleration("dedicated", "gpu", "NoSchedule", operator="Gt"),  # type: ignore[arg-type]
        [tainted("n1", GPU_NO_SCHEDULE)],
        {"n1": "node(s) had untolerated taint {dedicated: gpu}"},
        id="a toleration with an operator troupe does not know tolerates nothing",
    ),
    pytest.param(
        make_pod().toleration("dedicated", effect="NoExecute"),
        [tainted("n1", GPU_NO_SCHEDULE)],
        {"n1": "node(s) had untolerated taint {dedicated: gpu}"},
        id="a toleration for another effect does not help",
    ),
    pytest.param(
        make_pod().toleration(operator="Exists"),
        [tainted("n1", GPU_NO_SCHEDULE, ("other", "", "NoExecute"))],
        {},
        id="an empty-key Exists toleration tolerates every taint",
    ),
    pytest.param(
        make_pod(),
        [tainted("n1", ("evict", "", "NoExecute"))],
        {"n1": "node(s) had untolerated taint {evict: }"},
        id="NoExecute taints reject like NoSchedule",
    ),
    pytest.param(
        make_pod(),
        [tainted("n1", ("soft", "x", "PreferNoSchedule"))],
        {},
        id="PreferNoSchedule taints never reject",
    ),
    pytest.param(
        make_pod().toleration("a"),
        [
            tainted(
                "n1", ("a", "1", "NoSchedule"), ("b", "2", "NoSchedule"), ("c", "3", "NoExecute")
            )
        ],
        {"n1": "node(s) had untolerated taint {b: 2}"},
        id="the node's first untolerated taint is the one named",
    ),
    pytest.param(
        make_pod(),
        [
            tainted("n1", ("b", "2", "NoSchedule"), ("a", "1", "NoSchedule")),
            tainted("n2", ("a", "1", "NoSchedule"), ("b", "2", "NoSchedule")),
            tainted("n3", ("a", "1", "NoSchedule")),
        ],
        {
            "n1": "node(s) had untolerated taint {b: 2}",
            "n2": "node(s) had untolerated taint {a: 1}",
            "n3": "node(s) had untolerated taint {a: 1}",
        },
        id="rejected nodes are grouped by their own first taint",
    ),
]


@pytest.mark.parametrize(("pod", "nodes", "rejected"), FILTER_CASES)
def test_filter(pod: PodBuilder, nodes: list[Node], rejected: dict[str, str]) -> None:
    out = run_filter(plugin(), pod.obj(), table_of(nodes))
    assert out.feasible == {n.metadata.name for n in nodes} - set(rejected)
    assert {n: r for n, (r,) in out.reasons.items()} == rejected
    assert all(c == {Code.UNSCHEDULABLE_AND_UNRESOLVABLE} for c in out.codes.values())
    if not rejected:
        assert out.status.is_skip  # nothing to reject: PreFilter skips the filter


def test_a_taint_added_after_a_cached_decision_is_seen() -> None:
    table = table_of([tainted("n1")])
    taints = plugin()
    pod = make_pod().obj()
    assert run_filter(taints, pod, table).feasible == {"n1"}
    table.update_node(tainted("n1", GPU_NO_SCHEDULE))
    assert run_filter(taints, pod, table).feasible == set()
    table.update_node(tainted("n1"))
    assert run_filter(taints, pod, table).feasible == {"n1"}


EFFECTS: list[TaintEffect] = ["NoSchedule", "PreferNoSchedule", "NoExecute"]
taint_st = st.tuples(st.sampled_from("abc"), st.sampled_from(["", "1"]), st.sampled_from(EFFECTS))


@settings(max_examples=80, deadline=None)
@given(
    st.lists(st.lists(taint_st, max_size=4), min_size=1, max_size=6),
    st.lists(
        st.tuples(
            st.sampled_from(["", "a", "b"]),
            st.sampled_from(["", "1"]),
            st.sampled_from(["", *EFFECTS]),
            st.sampled_from(["Equal", "Exists"]),
        ),
        max_size=3,
    ),
)
def test_filter_agrees_with_the_per_node_matcher(
    node_taints: list[list[tuple[str, str, TaintEffect]]],
    tolerations: list[tuple[str, str, str, str]],
) -> None:
    nodes = [tainted(f"n{i}", *ts) for i, ts in enumerate(node_taints)]
    b = make_pod()
    for key, value, effect, op in tolerations:
        if key == "" and op == "Equal":
            continue  # invalid upstream: an empty key needs Exists
        b = b.toleration(key, value, effect, op)  # type: ignore[arg-type]
    pod = b.obj()
    out = run_filter(plugin(), pod, table_of(nodes, capacity=2))
    for n in nodes:
        first = find_untolerated_taint(
            n.spec.taints, pod.spec.tolerations, ("NoSchedule", "NoExecute")
        )
        if first is None:
            assert n.metadata.name in out.feasible
        else:
            assert out.reasons[n.metadata.name] == [
                f"node(s) had untolerated taint {{{first.key}: {first.value}}}"
            ]


# The table frees the row of a taint no node carries and hands its id to the next new
# taint: the plugin, caching across updates, must read each reused row as its new taint.
node_taint_lists = st.lists(taint_st, max_size=3, unique_by=lambda t: (t[0], t[2]))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), node_taint_lists), min_size=1, max_size=12))
def test_freed_and_reused_taint_rows_are_read_as_their_new_taints(
    updates: list[tuple[int, list[tuple[str, str, TaintEffect]]]],
) -> None:
    table = table_of([tainted(f"n{i}") for i in range(4)], capacity=4)
    taints = plugin()
    pod = make_pod().obj()  # tolerates nothing
    for i, node_taints in updates:
        table.update_node(tainted(f"n{i}", *node_taints))
        out = run_filter(taints, pod, table)
        scores = run_score(taints, pod, table, normalize=False)
        for name, slot in table.index.items():
            carried = table.node(slot).spec.taints
            first = find_untolerated_taint(carried, [], ("NoSchedule", "NoExecute"))
            if first is None:
                assert name in out.feasible
            else:
                assert out.reasons[name] == [
                    f"node(s) had untolerated taint {{{first.key}: {first.value}}}"
                ]
            soft = sum(1 for t in carried if t.effect == "PreferNoSchedule")
            assert scores is not None and scores[name] == soft
    assert len(table.taint_list) <= 4 * 3 + 3  # ids reused, not one per taint seen


# --- score ---------------------------------------------------------------------------

SOFT_A = ("a", "", "PreferNoSchedule")
SOFT_B = ("b", "", "PreferNoSchedule")

SCORE_CASES = [
    pytest.param(
        make_pod(),
        [tainted("two", SOFT_A, SOFT_B), tainted("one", SOFT_A), tainted("none")],
        # counts 2, 1, 0 normalized in reverse against the maximum 2.
        {"two": 0, "one": 50, "none": 100},
        id="fewer intolerable PreferNoSchedule taints score higher",
    ),
    pytest.param(
        make_pod().toleration("a", effect="PreferNoSchedule"),
        [tainted("two", SOFT_A, SOFT_B), tainted("one", SOFT_A)],
        {"two": 0, "one": 100},
        id="a tolerated PreferNoSchedule taint does not count",
    ),
    pytest.param(
        make_pod().toleration("a", effect="NoSchedule"),
        [tainted("two", SOFT_A, SOFT_B), tainted("one", SOFT_A)],
        {"two": 0, "one": 50},
        id="a NoSchedule toleration does not cover a PreferNoSchedule taint",
    ),
    pytest.param(
        make_pod(),
        [tainted("hard", GPU_NO_SCHEDULE), tainted("none")],
        {"hard": 100, "none": 100},
        id="without PreferNoSchedule taints every node scores 100",
    ),
]


@pytest.mark.parametrize(("pod", "nodes", "expected"), SCORE_CASES)
def test_score(pod: PodBuilder, nodes: list[Node], expected: dict[str, int]) -> None:
    assert run_score(plugin(), pod.obj(), table_of(nodes)) == expected


# --- queueing hints ----------------------------------------------------------------

TOLERATES_GPU = make_pod().uid("me").toleration("dedicated", "gpu", "NoSchedule").obj()

NODE_HINTS = [
    pytest.param(
        None, tainted("n", GPU_NO_SCHEDULE), QueueingHint.QUEUE, id="a tolerated new node"
    ),
    pytest.param(
        None, tainted("n", ("x", "", "NoSchedule")), QueueingHint.SKIP, id="an untolerated new node"
    ),
    pytest.param(
        tainted("n", ("x", "", "NoSchedule")),
        tainted("n"),
        QueueingHint.QUEUE,
        id="removing the untolerated taint",
    ),
    pytest.param(
        tainted("n"), tainted("n", GPU_NO_SCHEDULE), QueueingHint.SKIP, id="already tolerated"
    ),
]


@pytest.mark.parametrize(("old", "new", "hint"), NODE_HINTS)
def test_node_hint(old: Node | None, new: Node, hint: QueueingHint) -> None:
    assert node_became_tolerated(TOLERATES_GPU, old, new) is hint


@pytest.mark.parametrize(
    ("updated", "hint"),
    [
        pytest.param(TOLERATES_GPU, QueueingHint.QUEUE, id="the pod's own toleration update"),
        pytest.param(make_pod().uid("other").obj(), QueueingHint.SKIP, id="another pod's update"),
    ],
)
def test_pod_hint(updated: Pod, hint: QueueingHint) -> None:
    assert tolerations_of_this_pod_changed(TOLERATES_GPU, updated, updated) is hint


def test_events_are_node_add_or_taint_update_and_toleration_update() -> None:
    assert [str(e.event) for e in plugin().events_to_register()] == [
        "NodeAddOrTaintUpdate",
        "PodUPDATE_POD_TOLERATIONS",
    ]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.one_of(st.integers(0, 50), st.integers(0, 10**6)), min_size=1, max_size=20),
    st.booleans(),
)
def test_normalize_matches_upstream_default_normalize(raw: list[int], reverse: bool) -> None:
    scores = np.array(raw, dtype=np.int64)
    default_normalize_score(scores, reverse)
    highest = max(raw)
    for got, value in zip(scores.tolist(), raw, strict=True):
        if highest == 0:
            want = 100 if reverse else 0
        else:
            want = 100 * value // highest
            want = 100 - want if reverse else want
        assert got == want
