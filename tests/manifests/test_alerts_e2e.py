"""The alerts of manifests/components/prometheus/prometheusrule.yaml see what they are
about in a real run.

``recorded_run`` (tests/manifests/production_run.py) scrapes ``/metrics`` at each
phase of a leader's life: leading with a gang that never fits, after that gang was
retried (it moves between queues), with bindings refused by RBAC (403), and after
another holder took the Lease. Each alert's selector (metric name and label matchers,
Prometheus's ``job`` label aside: the scrape adds it) is applied to those scrapes.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.manifests.manifest_files import one
from tests.manifests.production_run import ProductionRun
from tests.scheduler.observe.test_scrape_e2e import Samples

RULES = {r["alert"]: r for g in one("PrometheusRule")["spec"]["groups"] for r in g["rules"]}
_SELECTOR = re.compile(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\{([^{}]*)\}")
_MATCHER = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"\s*,?')


def selector(expr: str) -> tuple[str, list[tuple[str, str, str]]]:
    """The one ``metric{matchers}`` an alert expression reads."""
    (found,) = _SELECTOR.findall(expr)
    name, body = found
    return name, [m.groups() for m in _MATCHER.finditer(body)]


def _label_matches(value: str, op: str, want: str) -> bool:
    if op == "=":
        return value == want
    if op == "!=":
        return value != want
    hit = re.fullmatch(want, value) is not None
    return hit if op == "=~" else not hit


def selected(samples: Samples, expr: str) -> dict[tuple[tuple[str, str], ...], float]:
    """The samples an alert's selector picks out of one scrape."""
    name, matchers = selector(expr)
    return {
        labels: value
        for (sample, labels), value in samples.items()
        if sample == name
        and all(
            _label_matches(dict(labels).get(label, ""), op, want)
            for label, op, want in matchers
            if label != "job"
        )
    }


def rule(name: str) -> dict[str, Any]:
    return RULES[name]


def test_selectors_are_read_as_prometheus_does() -> None:
    expr = 'sum(rate(m_total{job="j", a="x", b!="y", c=~"5..", d!~"z.*"}[5m])) > 0'
    samples: Samples = {
        ("m_total", (("a", "x"), ("b", "q"), ("c", "503"), ("d", "w"))): 2.0,
        ("m_total", (("a", "x"), ("b", "y"), ("c", "503"), ("d", "w"))): 3.0,
        ("m_total", (("a", "x"), ("b", "q"), ("c", "403"), ("d", "w"))): 4.0,
        ("m_total", (("a", "x"), ("b", "q"), ("c", "500"), ("d", "zz"))): 5.0,
        ("n_total", (("a", "x"),)): 6.0,
    }
    assert list(selected(samples, expr).values()) == [2.0]


def test_no_leader_holds_while_leading_and_fires_after_the_lease_is_lost(
    recorded_run: ProductionRun,
) -> None:
    expr = rule("TroupeNoLeader")["expr"]
    assert expr.startswith("max(") and expr.endswith(") == 0")
    leading = selected(recorded_run.scrapes["leading"], expr)
    lost = selected(recorded_run.scrapes["lease lost"], expr)
    assert list(leading.values()) == [1.0], "the leader exports 1 under the alert's name label"
    assert list(lost.values()) == [0.0]
    assert recorded_run.exit_status == 1
    assert recorded_run.lease["spec"]["holderIdentity"] == "other_1"


def test_gang_pending_too_long_tracks_the_gang_across_queue_moves(
    recorded_run: ProductionRun,
) -> None:
    expr = rule("TroupeGangPendingTooLong")["expr"]
    assert expr.endswith("> 1800"), "30 minutes, as docs/metrics.md says"
    before, after = "leading", "after a retry"
    (age_before,) = selected(recorded_run.scrapes[before], expr).values()
    (age_after,) = selected(recorded_run.scrapes[after], expr).values()
    # The least time that can separate the two readings: from the first answer to
    # the second request (a slow answer on a loaded machine cannot shrink it).
    elapsed = recorded_run.scrape_sent_at[after] - recorded_run.scraped_at[before]
    # At least a second old at the first scrape (the run waits one), and the retry
    # in between (the gang left the unschedulable queue and came back) did not
    # reset it.
    assert age_before >= 1.0
    assert age_after >= age_before + elapsed - 0.05

    # Between the scrapes the huge pod and the gang left the unschedulable queue
    # (a bound pod was deleted) and failed again: the old signal,
    # scheduler_queued_entities{queue="unschedulable"}, dropped to 0 meanwhile.
    def delta(event: str, queue: str) -> float:
        key = ("scheduler_queue_incoming_pods_total", (("event", event), ("queue", queue)))
        return recorded_run.scrapes[after].get(key, 0.0) - recorded_run.scrapes[before].get(
            key, 0.0
        )

    assert delta("AssignedPodDelete", "active") == 2
    assert delta("ScheduleAttemptFailure", "unschedulable") == 2


def test_bind_errors_see_a_binding_refused_with_403(recorded_run: ProductionRun) -> None:
    expr = rule("TroupeBindErrors")["expr"]
    healthy = selected(recorded_run.scrapes["leading"], expr)
    forbidden = selected(recorded_run.scrapes["bindings forbidden"], expr)
    assert sum(healthy.values()) == 0
    assert sum(forbidden.values()) >= 1
    # The refusal was a 403 on a POST: no 5xx at all.
    codes = {
        dict(labels)["code"]
        for (n, labels), v in recorded_run.scrapes["bindings forbidden"].items()
        if n == "rest_client_requests_total" and dict(labels)["method"] == "POST" and v > 0
    }
    assert "403" in codes
    assert not any(code.startswith("5") for code in codes)


@pytest.mark.parametrize(
    "name",
    ["TroupeNoLeader", "TroupeGangPendingTooLong", "TroupeBindErrors", "TroupeGangPartlyBound"],
)
def test_the_alert_reads_one_series_troupe_exports(recorded_run: ProductionRun, name: str) -> None:
    metric, _ = selector(rule(name)["expr"])
    scraped = {n for n, _ in recorded_run.scrapes["leading"]}
    assert metric in scraped
