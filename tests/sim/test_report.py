"""The HTML report's page builder on hand-made data: escaping, empty runs, the
heatmap's numbers and the timeline's segments."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from troupe.sim import report
from troupe.sim.usage import NodeUsage

from tests.integration.report_page import Report


def run(**fields: Any) -> dict[str, Any]:
    return {
        "label": "r",
        "seconds": 10.0,
        "pods": 0,
        "bound": 0,
        "pending": 0,
        "timedOut": False,
        "timesNote": report.SIM_TIMES,
        "nodes": [],
        "gangs": [],
        "pendingPods": [],
        **fields,
    }


def gang(name: str, **fields: Any) -> dict[str, Any]:
    return {
        "namespace": "ml",
        "name": name,
        "api": "podgroup/v1beta1",
        "size": 2,
        "minMember": 2,
        "bound": 0,
        "boundBefore": 0,
        "outcome": "pending",
        "submitted": 1.0,
        "firstBound": None,
        "lastBound": None,
        "finished": None,
        **fields,
    }


def test_nodes_json_sorts_by_zone_and_rack_and_converts_units() -> None:
    nodes = report.nodes_json(
        [
            NodeUsage("b", "zone-b", "", {"cpu": 4000, "memory": 2**33}, {"cpu": 1500}),
            NodeUsage(
                "a",
                "zone-a",
                "r1",
                {"cpu": 8000, "pods": 110, "nvidia.com/gpu": 4, "ephemeral-storage": 10},
                {"cpu": 8000, "pods": 3, "nvidia.com/gpu": 1},
            ),
        ]
    )
    assert [n["name"] for n in nodes] == ["a", "b"]
    assert list(nodes[0]["resources"]) == ["cpu", "pods", "nvidia.com/gpu"]
    assert nodes[0]["resources"]["cpu"] == {
        "requested": 8.0,
        "allocatable": 8.0,
        "percent": 100.0,
        "text": "8 / 8",
    }
    assert nodes[0]["resources"]["nvidia.com/gpu"]["percent"] == 25.0
    assert nodes[1]["resources"]["cpu"]["text"] == "1.5 / 4"
    assert nodes[1]["resources"]["memory"] == {
        "requested": 0,
        "allocatable": 2**33,
        "percent": 0.0,
        "text": "0 / 8Gi",
    }


def test_timeline_segments() -> None:
    fig = report.timeline(
        run(
            gangs=[
                gang("done", bound=2, firstBound=2.0, lastBound=3.0, finished=5.0),
                gang("waits"),
                gang("before", bound=2, boundBefore=2),
            ]
        )
    )
    bars = {t.name: (list(t.y), list(t.base), list(t.x)) for t in fig.data}
    assert bars["waiting"] == (["ml/done", "ml/waits"], [1.0, 1.0], [1.0, 9.0])
    assert bars["binding"] == (["ml/done"], [2.0], [1.0])
    assert bars["bound"] == (["ml/done"], [3.0], [2.0])
    assert bars["bound in the snapshot"] == (["ml/before"], [0.0], [10.0])


def test_page_escapes_markup_and_embeds_the_data(tmp_path: Path) -> None:
    nasty = "</script><script src='https://evil.example/x.js'></script> & <b>"
    nodes = report.nodes_json([NodeUsage("n<1>", "z", "", {"cpu": 1000}, {})])
    data = run(
        label="<b>run</b>",
        nodes=nodes,
        gangs=[gang(nasty)],
        pendingPods=[{"pod": "ml/p", "reason": nasty}],
    )
    page = report.write(tmp_path / "r.html", nasty, "sim", [data])
    r = Report(page)
    r.assert_self_contained()
    assert r.data == {"title": nasty, "source": "sim", "runs": [data]}
    assert r.figures() == ["troupe-heatmap-0", "troupe-timeline-0"]
    assert "&lt;/script&gt;&lt;script src=" in r.text  # the pending table, escaped


def test_page_of_a_run_without_nodes_or_gangs(tmp_path: Path) -> None:
    r = Report(report.write(tmp_path / "r.html", "empty", "replay", [run()]))
    assert r.figures() == []
    assert "No nodes at the end of the run." in r.text
    assert "No gangs in this run." in r.text
    assert "No pod is pending." in r.text
    assert not r.external
