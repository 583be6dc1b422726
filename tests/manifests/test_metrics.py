"""Every series the Grafana dashboard and the alert rules query is one troupe exports
(``metric_names.py``), or one Prometheus / kube-state-metrics writes."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest

from tests.manifests.manifest_files import MANIFESTS, ROOT, one
from tests.manifests.metric_names import (
    EXPORTED_METRICS,
    EXTERNAL_METRICS,
    queryable_names,
)

# PromQL words that look like identifiers but name no series.
_KEYWORDS = {
    "by", "without", "on", "ignoring", "group_left", "group_right", "bool",
    "and", "or", "unless", "offset", "inf", "nan",
}  # fmt: skip
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'')
_MATCHERS = re.compile(r"\{[^{}]*\}")
_RANGE = re.compile(r"\[[^\[\]]*\]")
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)")
_IDENT = re.compile(r"(?<![\w:$.])([a-zA-Z_:][a-zA-Z0-9_:]*)\b(?!\s*\()")


def metric_names(expr: str) -> set[str]:
    """Series names in a PromQL expression: identifiers that are neither functions,
    keywords, label names (inside braces or grouping lists) nor durations."""
    text = _STRING.sub('""', expr)
    text = _MATCHERS.sub("", text)
    text = _RANGE.sub("", text)
    text = _GROUPING.sub("", text)
    text = re.sub(r"\b\d+(?:\.\d+)?(?:e[+-]?\d+)?\b", "", text)
    return {m for m in _IDENT.findall(text) if m.lower() not in _KEYWORDS}


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        pytest.param("up", {"up"}, id="a bare name is a series"),
        pytest.param(
            'sum by (result) (rate(a_total{job="x", result="error"}[5m])) / sum(rate(a_total[5m]))',
            {"a_total"},
            id="functions, grouping labels and matchers are not series",
        ),
        pytest.param(
            "histogram_quantile(0.99, sum by (le, verb) "
            '(rate(b_bucket{j=~"$job"}[$__rate_interval])))',
            {"b_bucket"},
            id="quantiles and Grafana variables are not series",
        ),
        pytest.param(
            "max(g) > 0 and on() absent(h == 1) unless c offset 5m",
            {"g", "h", "c"},
            id="every operand of a binary operator is a series",
        ),
        pytest.param("label_values(d_total, job)", {"d_total", "job"}, id="a label_values call"),
    ],
)
def test_metric_names_are_found_in_promql(expr: str, expected: set[str]) -> None:
    assert metric_names(expr) == expected


def _dashboard_exprs(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "expr" and isinstance(value, str):
                yield value
            else:
                yield from _dashboard_exprs(value)
    elif isinstance(node, list):
        for item in node:
            yield from _dashboard_exprs(item)


DASHBOARD = json.loads((MANIFESTS / "dashboards" / "troupe.json").read_text())
DASHBOARD_EXPRS = list(_dashboard_exprs(DASHBOARD))
# Template variables query label values of a series: `label_values(<series>, <label>)`.
VARIABLE_SERIES = [
    re.sub(r"\{.*\}", "", v["query"]["query"].split("(", 1)[1].split(",")[0]).strip()
    for v in DASHBOARD["templating"]["list"]
    if v["type"] == "query"
]
ALERTS = [r for g in one("PrometheusRule")["spec"]["groups"] for r in g["rules"]]


@pytest.mark.parametrize("expr", DASHBOARD_EXPRS, ids=lambda e: e[:80])
def test_dashboard_queries_only_exported_metrics(expr: str) -> None:
    names = metric_names(expr)
    assert names, "a query that names no series"
    assert names <= queryable_names()


@pytest.mark.parametrize("series", VARIABLE_SERIES)
def test_dashboard_variables_read_exported_metrics(series: str) -> None:
    assert series in queryable_names()


@pytest.mark.parametrize("rule", ALERTS, ids=lambda r: r["alert"])
def test_alert_queries_only_known_metrics(rule: dict[str, Any]) -> None:
    names = metric_names(rule["expr"])
    assert names, "a rule that names no series"
    assert names <= queryable_names() | set(EXTERNAL_METRICS)


def test_the_alerts_the_issue_asks_for() -> None:
    assert [r["alert"] for r in ALERTS] == [
        "TroupeSchedulerDown",
        "TroupeNoLeader",
        "TroupeSchedulingFailureRateHigh",
        "TroupeGangPendingTooLong",
        "TroupeGangPartlyBound",
        "TroupeBindErrors",
    ]


def test_every_dashboard_panel_has_a_query_and_a_unique_id() -> None:
    panels = [p for p in DASHBOARD["panels"] if p["type"] != "row"]
    assert all(p["targets"] and all(t["expr"] for t in p["targets"]) for p in panels)
    ids = [p["id"] for p in DASHBOARD["panels"]]
    assert len(ids) == len(set(ids))


def test_every_exported_metric_is_shown_on_the_dashboard() -> None:
    shown = set().union(*map(metric_names, DASHBOARD_EXPRS))
    families = {n.removesuffix("_sum").removesuffix("_count") for n in shown}
    assert set(EXPORTED_METRICS) <= shown | families


METRICS_SOURCE = (ROOT / "troupe" / "scheduler" / "observe" / "metrics.py").read_text()


@pytest.mark.parametrize("name", EXPORTED_METRICS, ids=lambda n: n)
def test_the_metrics_module_defines_the_listed_metric(name: str) -> None:
    # process_* come from prometheus_client's process collector, registered there.
    family = name.removesuffix("_bucket")
    expected = "PROCESS_COLLECTOR" if name.startswith("process_") else f'"{family}"'
    assert expected in METRICS_SOURCE
