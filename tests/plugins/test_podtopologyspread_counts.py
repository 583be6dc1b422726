"""PodTopologySpread's incremental pod counts equal a recount; warm and cold evaluations agree."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from troupe.api.nodetable import NodeTable
from troupe.api.objects import (
    LabelSelector,
    LabelSelectorRequirement,
)
from troupe.api.podcounts import CountsCache, PodClause, PodMatcher
from troupe.api.podinfo import PodInfo
from troupe.api.selectors import label_selector_matches

from tests.plugins.builders import make_pod, table_of
from tests.plugins.spread_helpers import (
    WEB,
    node,
    plugin,
    run_filter,
    spread,
    web,
    webs,
)
from tests.plugins.table_churn import TableChurn

# --- incremental counts ------------------------------------------------------------

NAMESPACES = ("default", "other")
LABEL_SETS = ({"app": "web"}, {"app": "db"}, {"app": "web", "tier": "x"}, {})
MATCHERS = (
    PodMatcher((PodClause.of(frozenset({"default"}), LabelSelector(match_labels=WEB)),), True),
    PodMatcher((PodClause.of(None, LabelSelector(match_labels={"tier": "x"})),)),
    PodMatcher((PodClause.of(frozenset(NAMESPACES), LabelSelector()),)),
)

Op = tuple[str, int, int, int, bool]


def brute_counts(table: NodeTable, matcher: PodMatcher) -> list[int]:
    return [
        sum(1 for p in table.pods[s].values() if matcher.matches(p.record))
        for s in range(table.capacity)
    ]


ops = st.lists(
    st.tuples(
        st.sampled_from(["add", "add", "add", "remove", "drop-node", "new-node"]),
        st.integers(0, 7),
        st.integers(0, len(LABEL_SETS) - 1),
        st.integers(0, 1),
        st.booleans(),
    ),
    max_size=60,
)


@settings(max_examples=120, deadline=None)
@given(ops)
def test_incremental_counts_equal_a_recount(sequence: list[Op]) -> None:
    table = table_of([node(f"n{i}", "ab"[i % 2]) for i in range(3)], capacity=2)
    cache = CountsCache(maxsize=len(MATCHERS))
    churn = TableChurn(table, node)
    for step, (op, n, labels, ns, terminating) in enumerate(sequence):
        pod = None
        if op == "add":
            b = make_pod().name(f"p{step}").namespace(NAMESPACES[ns]).labels(LABEL_SETS[labels])
            pod = PodInfo.of((b.terminating() if terminating else b).obj())
        churn.step(step, op, n, pod)
        for matcher in MATCHERS:
            assert cache.counts(table, matcher).tolist() == brute_counts(table, matcher)


def test_counts_cache_evicts_the_least_recently_used() -> None:
    table = table_of([node("n0", "a")], pods_on={"n0": webs("w", 1)})
    cache = CountsCache(maxsize=2)
    for matcher in (*MATCHERS, MATCHERS[1]):
        cache.counts(table, matcher)
    assert len(cache) == 2
    assert MATCHERS[0] not in cache
    assert MATCHERS[1] in cache and MATCHERS[2] in cache


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.booleans()), min_size=1, max_size=25))
def test_warm_filter_equals_a_cold_one(moves: list[tuple[int, bool]]) -> None:
    table = table_of([node(f"n{i}", "abc"[i % 3]) for i in range(6)])
    warm = plugin()
    pod = spread(web("p"), max_skew=1)
    infos: list[tuple[PodInfo, str]] = []
    for i, (n, remove) in enumerate(moves):
        if remove and infos:
            info, where = infos.pop()
            table.remove_pod(info, where)
        else:
            info = PodInfo.of(web(f"w{i}").obj())
            table.add_pod(info, f"n{n}")
            infos.append((info, f"n{n}"))
        assert run_filter(warm, pod, table) == run_filter(plugin(), pod, table)


KEYS = ("app", "tier", "bad key!")
VALUES = ("web", "db", "")
requirements = st.builds(
    lambda k, op, vs: LabelSelectorRequirement(key=k, operator=op, values=list(vs)),
    st.sampled_from(KEYS),
    st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist"]),
    st.lists(st.sampled_from(VALUES), max_size=2),
)
selectors = st.none() | st.builds(
    lambda labels, exprs: LabelSelector(match_labels=labels, match_expressions=exprs),
    st.dictionaries(st.sampled_from(KEYS), st.sampled_from(VALUES), max_size=2),
    st.lists(requirements, max_size=2),
)


@settings(max_examples=200, deadline=None)
@given(selectors, st.dictionaries(st.sampled_from(KEYS), st.sampled_from(VALUES), max_size=3))
def test_pod_clause_matches_like_the_selector_matcher(
    selector: LabelSelector | None, labels: dict[str, str]
) -> None:
    clause = PodClause.of(None, selector)
    assert clause.matches("any", labels) is label_selector_matches(selector, labels)
