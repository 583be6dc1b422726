"""InterPodAffinity with a namespaceSelector, evaluated against namespace labels as
upstream: a term looks in the union of ``namespaces`` and the namespaces whose labels
the selector matches; ``{}`` matches every namespace; a placed pod's selector is
matched against the labels of the incoming pod's namespace."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import pytest
from troupe.api.framework import NamespaceLabels
from troupe.api.objects import (
    LabelSelector,
    LabelSelectorRequirement,
    Namespace,
    ObjectMeta,
    Pod,
)
from troupe.api.podinfo import PodInfo
from troupe.plugins.interpodaffinity import InterPodAffinity

from tests.plugins import fakes
from tests.plugins.builders import table_of
from tests.plugins.fakes import FakeHandle
from tests.plugins.interpod_helpers import DB, HOST, NAMES, WEB, ZONES, plugin, pod, run_filter

TEAM_A = {"team": "a"}
LABELS: Mapping[str, Mapping[str, str]] = {
    "default": {},
    "ml-a": TEAM_A,
    "ml-b": {"team": "b"},
    "web": {},
}


def ns(name: str, labels: Mapping[str, str] | None = None) -> Namespace:
    return Namespace(metadata=ObjectMeta(name=name, labels=dict(labels or {})))


def namespaces(labels: Mapping[str, Mapping[str, str]] = LABELS) -> NamespaceLabels:
    return NamespaceLabels(ns(name, value) for name, value in labels.items())


def team_in(*teams: str) -> LabelSelector:
    return LabelSelector(
        match_expressions=[LabelSelectorRequirement(key="team", operator="In", values=list(teams))]
    )


def without_team() -> LabelSelector:
    return LabelSelector(
        match_expressions=[LabelSelectorRequirement(key="team", operator="DoesNotExist")]
    )


def keeps_web_away(namespace: str, selector: LabelSelector | Mapping[str, str]) -> Pod:
    """A placed db pod in ``namespace`` with a required zone anti-affinity to web pods
    of the namespaces ``selector`` matches."""
    b = pod("d", DB).namespace(namespace)
    return b.pod_anti_affinity("zone", WEB, namespace_selector=selector).obj()


def likes_web(namespace: str) -> Pod:
    """A placed db pod in ``namespace`` preferring (weight 10) web pods of team a."""
    b = pod("d", DB).namespace(namespace)
    return b.pod_affinity("zone", WEB, weight=10, namespace_selector=TEAM_A).obj()


# --- filter ------------------------------------------------------------------------

FILTER_CASES = [
    pytest.param(
        {"a1": [pod("w").namespace("ml-a").obj()]},
        pod("p", DB).pod_anti_affinity("zone", WEB, namespace_selector=TEAM_A).obj(),
        {"a1": "anti", "a2": "anti", "b1": "ok"},
        id="required anti-affinity with a namespaceSelector is enforced in a matching namespace",
    ),
    pytest.param(
        {"a1": [pod("w").namespace("ml-b").obj()]},
        pod("p", DB).pod_anti_affinity("zone", WEB, namespace_selector=TEAM_A).obj(),
        {"a1": "ok", "a2": "ok", "b1": "ok"},
        id="a namespaceSelector ignores pods of namespaces whose labels do not match",
    ),
    pytest.param(
        {"a1": [pod("w").namespace("web").obj()]},
        pod("p", DB).pod_anti_affinity("zone", WEB, namespace_selector={}).obj(),
        {"a1": "anti", "a2": "anti", "b1": "ok"},
        id="an empty namespaceSelector matches every namespace",
    ),
    pytest.param(
        {"a1": [pod("w").namespace("ml-a").obj()], "b1": [pod("v").namespace("ml-b").obj()]},
        pod("p", DB)
        .pod_anti_affinity("zone", WEB, namespaces=["ml-b"], namespace_selector=TEAM_A)
        .obj(),
        {"a1": "anti", "a2": "anti", "b1": "anti"},
        id="namespaces and the namespaceSelector's matches are a union",
    ),
    pytest.param(
        {"b1": [pod("w").namespace("ml-b").obj()]},
        pod("p", DB).pod_anti_affinity("zone", WEB, namespace_selector=team_in("a", "b")).obj(),
        {"a1": "ok", "a2": "ok", "b1": "anti"},
        id="a namespaceSelector with matchExpressions",
    ),
    pytest.param(
        {"a1": [pod("w").namespace("gone").obj()]},
        pod("p", DB).pod_anti_affinity("zone", WEB, namespace_selector=without_team()).obj(),
        {"a1": "ok", "a2": "ok", "b1": "ok"},
        id="the incoming pod's selector selects only namespaces the informer has seen",
    ),
    pytest.param(
        {"a1": [pod("w").namespace("ml-b").obj()]},
        pod("p", DB).namespace("ml-a").pod_anti_affinity("zone", WEB).obj(),
        {"a1": "ok", "a2": "ok", "b1": "ok"},
        id="no namespaces and no selector: only the pod's own namespace",
    ),
    pytest.param(
        {"b1": [pod("d", DB).namespace("ml-a").obj()]},
        pod("p").pod_affinity("zone", DB, namespace_selector=TEAM_A).obj(),
        {"a1": "affinity", "a2": "affinity", "b1": "ok"},
        id="required affinity counts pods of the namespaces its selector matches",
    ),
    pytest.param(
        {"b1": [pod("d", DB).namespace("ml-b").obj()]},
        pod("p").pod_affinity("zone", DB, namespace_selector=TEAM_A).obj(),
        {"a1": "affinity", "a2": "affinity", "b1": "affinity"},
        id="required affinity finds no pod outside the selected namespaces",
    ),
    pytest.param(
        {"a1": [keeps_web_away("ml-b", TEAM_A)]},
        pod("p").namespace("ml-a").obj(),
        {"a1": "existing", "a2": "existing", "b1": "ok"},
        id="a placed pod's anti-affinity selector matches the incoming pod's namespace labels",
    ),
    pytest.param(
        {"a1": [keeps_web_away("ml-a", TEAM_A)]},
        pod("p").namespace("ml-b").obj(),
        None,
        id="a placed pod's anti-affinity selector ignores a pod of a non-matching namespace",
    ),
    pytest.param(
        {"a1": [keeps_web_away("default", without_team())]},
        pod("p").namespace("gone").obj(),
        {"a1": "existing", "a2": "existing", "b1": "ok"},
        id="a placed pod's selector sees no labels on a namespace the informer has not seen",
    ),
]


@pytest.mark.parametrize(("pods_on", "incoming", "expected"), FILTER_CASES)
def test_filter_with_namespace_selectors(
    pods_on: Mapping[str, Sequence[Pod]], incoming: Pod, expected: dict[str, str] | None
) -> None:
    table = table_of(ZONES, pods_on)
    assert run_filter(plugin(namespaces=namespaces()), incoming, table) == expected


def test_a_relabelled_namespace_changes_the_incoming_pods_verdict() -> None:
    store = namespaces()
    pl = plugin(namespaces=store)
    table = table_of(ZONES, {"a1": [pod("w").namespace("ml-b").obj()]})
    # One PodInfo across attempts, as the queue keeps it: its resolved terms are
    # cached and must follow the labels.
    info = PodInfo.of(pod("p", DB).pod_anti_affinity("zone", WEB, namespace_selector=TEAM_A).obj())
    assert run_filter(pl, info, table) == {"a1": "ok", "a2": "ok", "b1": "ok"}
    store.put(ns("ml-b", TEAM_A))
    assert run_filter(pl, info, table) == {"a1": "anti", "a2": "anti", "b1": "ok"}
    store.put(ns("ml-b", {"team": "b"}))
    assert run_filter(pl, info, table) == {"a1": "ok", "a2": "ok", "b1": "ok"}
    store.put(ns("ml-b", TEAM_A))
    store.remove("ml-b")
    assert run_filter(pl, info, table) == {"a1": "ok", "a2": "ok", "b1": "ok"}


def test_a_relabelled_namespace_changes_a_placed_pods_verdict() -> None:
    store = namespaces()
    pl = plugin(namespaces=store)
    table = table_of(ZONES, {"b1": [keeps_web_away("ml-b", TEAM_A)]})
    info = PodInfo.of(pod("p").namespace("web").obj())
    assert run_filter(pl, info, table) is None
    store.put(ns("web", TEAM_A))
    assert run_filter(pl, info, table) == {"a1": "ok", "a2": "ok", "b1": "existing"}
    store.put(ns("web", {}))
    assert run_filter(pl, info, table) is None


class CountingLister:
    """A lister that records each full listing: what resolving a selector costs."""

    def __init__(self, store: NamespaceLabels) -> None:
        self.store = store
        self.listings = 0

    @property
    def generation(self) -> int:
        return self.store.generation

    def labels_of(self, name: str) -> Mapping[str, str] | None:
        return self.store.labels_of(name)

    def items(self) -> Iterable[tuple[str, Mapping[str, str]]]:
        self.listings += 1
        return self.store.items()


def test_pods_sharing_a_selector_resolve_it_once_per_label_change() -> None:
    lister = CountingLister(namespaces())
    pl = InterPodAffinity(None, FakeHandle(namespaces=lister))
    table = table_of(ZONES, {"a1": [pod("w").namespace("ml-a").obj()]})
    replicas = [
        pod(f"p{i}", DB).pod_anti_affinity("zone", WEB, namespace_selector=TEAM_A).obj()
        for i in range(3)
    ]
    for replica in replicas:
        assert run_filter(pl, replica, table) == {"a1": "anti", "a2": "anti", "b1": "ok"}
    assert lister.listings == 1
    lister.store.put(ns("ml-c", TEAM_A))
    assert run_filter(pl, replicas[0], table) == {"a1": "anti", "a2": "anti", "b1": "ok"}
    assert lister.listings == 2


# --- score -------------------------------------------------------------------------

SCORE_CASES = [
    # raw: a1 -10, a2 -10 (a web pod of ml-a in zone a), b1 0.
    pytest.param(
        {"a1": [pod("w").namespace("ml-a").obj()]},
        pod("p", DB).pod_anti_affinity("zone", WEB, weight=10, namespace_selector=TEAM_A).obj(),
        [0, 0, 100],
        id="preferred anti-affinity with a namespaceSelector counts pods of matching namespaces",
    ),
    pytest.param(
        {"a1": [pod("w").namespace("ml-b").obj()]},
        pod("p", DB).pod_anti_affinity("zone", WEB, weight=10, namespace_selector=TEAM_A).obj(),
        None,
        id="preferred anti-affinity with a namespaceSelector ignores other namespaces",
    ),
    # raw: b1 +10 (the placed pod's preferred affinity to web pods of team a).
    pytest.param(
        {"b1": [likes_web("ml-b")]},
        pod("p").namespace("ml-a").obj(),
        [0, 0, 100],
        id="a placed pod's preferred affinity selector matches the incoming pod's namespace",
    ),
    pytest.param(
        {"b1": [likes_web("ml-a")]},
        pod("p").namespace("ml-b").obj(),
        None,
        id="a placed pod's preferred affinity selector ignores a non-matching namespace",
    ),
]


@pytest.mark.parametrize(("pods_on", "incoming", "expected"), SCORE_CASES)
def test_score_with_namespace_selectors(
    pods_on: Mapping[str, Sequence[Pod]], incoming: Pod, expected: list[int] | None
) -> None:
    table = table_of(ZONES, pods_on)
    got = fakes.run_score(plugin(namespaces=namespaces()), incoming, table, only=NAMES)
    assert (None if got is None else [got[n] for n in NAMES]) == expected


# --- queueing hints ------------------------------------------------------------------

ANTI_A = pod("target", {"app": "x"}).pod_anti_affinity(HOST, WEB, namespace_selector=TEAM_A).obj()
AFFINE_A = pod("target", {"app": "x"}).pod_affinity(HOST, DB, namespace_selector=TEAM_A).obj()
PLAIN_B = pod("target", {"app": "x"}).namespace("ml-b").obj()
NAMED = (
    pod("target", {"app": "x"})
    .pod_anti_affinity(HOST, WEB, namespaces=["ml-a"], namespace_selector=TEAM_A)
    .obj()
)


@pytest.mark.parametrize(
    ("target", "old", "new", "queue"),
    [
        pytest.param(
            ANTI_A,
            ns("ml-a", TEAM_A),
            ns("ml-a", {"team": "b"}),
            True,
            id="a namespace leaving an anti-affinity selector queues",
        ),
        pytest.param(
            ANTI_A,
            ns("ml-b", {"team": "b"}),
            ns("ml-b", TEAM_A),
            False,
            id="a namespace joining an anti-affinity selector skips",
        ),
        pytest.param(
            ANTI_A, ns("ml-a", TEAM_A), None, True, id="a deleted selected namespace queues"
        ),
        pytest.param(
            AFFINE_A,
            ns("ml-b", {"team": "b"}),
            ns("ml-b", TEAM_A),
            True,
            id="a namespace joining an affinity selector queues",
        ),
        pytest.param(
            AFFINE_A,
            None,
            ns("ml-c", TEAM_A),
            True,
            id="a new namespace an affinity selector matches queues",
        ),
        pytest.param(
            AFFINE_A,
            ns("ml-a", TEAM_A),
            ns("ml-a", {"team": "a", "tier": "x"}),
            False,
            id="a relabel that keeps the selector's verdict skips",
        ),
        pytest.param(
            NAMED,
            ns("ml-a", TEAM_A),
            ns("ml-a", {}),
            False,
            id="a namespace the term names skips",
        ),
        pytest.param(
            PLAIN_B,
            ns("ml-b", {"team": "b"}),
            ns("ml-b", TEAM_A),
            True,
            id="the pod's own namespace relabelled queues (placed pods' selectors read it)",
        ),
        pytest.param(
            PLAIN_B,
            ns("ml-a", TEAM_A),
            ns("ml-a", {}),
            False,
            id="another namespace relabelled skips a pod without selectors",
        ),
    ],
)
def test_namespace_hint(
    target: Pod, old: Namespace | None, new: Namespace | None, queue: bool
) -> None:
    hint = plugin(namespaces=namespaces()).after_namespace_change(target, old, new)
    assert (hint.name == "QUEUE") is queue


@pytest.mark.parametrize(
    ("target", "old", "new", "queue"),
    [
        pytest.param(
            AFFINE_A,
            None,
            pod("d", DB).namespace("ml-a").node("n1").obj(),
            True,
            id="a pod placed in a namespace the affinity selector matches queues",
        ),
        pytest.param(
            AFFINE_A,
            None,
            pod("d", DB).namespace("ml-b").node("n1").obj(),
            False,
            id="a pod placed in a namespace the affinity selector does not match skips",
        ),
        pytest.param(
            pod("target", {"app": "x"}).namespace("ml-a").obj(),
            pod("d", DB).namespace("ml-b").node("n1")
            .pod_anti_affinity(HOST, {"app": "x"}, namespace_selector=TEAM_A).obj(),
            None,
            True,
            id="a deleted pod whose anti-affinity selector matched the pod's namespace queues",
        ),
        pytest.param(
            PLAIN_B,
            pod("d", DB).namespace("ml-b").node("n1")
            .pod_anti_affinity(HOST, {"app": "x"}, namespace_selector=TEAM_A).obj(),
            None,
            False,
            id="a deleted pod whose anti-affinity selector missed the pod's namespace skips",
        ),
    ],
)  # fmt: skip
def test_pod_hint_with_namespace_selectors(
    target: Pod, old: Pod | None, new: Pod | None, queue: bool
) -> None:
    hint = plugin(namespaces=namespaces()).after_pod_change(target, old, new)
    assert (hint.name == "QUEUE") is queue
