"""``troupe sim`` as a user runs it: a subprocess that plays a scenario, prints the
summary and exits 0. The default scenario takes a few seconds; the file scenario is
small."""

from __future__ import annotations

import asyncio
import os
import re
import sys
from pathlib import Path

from tests.integration.report_page import Report

SCENARIO = """\
name: smoke
nodes:
  - {count: 2, cpu: "4", memory: 8Gi}
steps:
  - at: 0
    pods: {name: web, count: 3, cpu: "1"}
  - at: 0
    pods: {name: big, count: 1, cpu: "16"}
  - at: 0.1
    gang: {name: pair, size: 2, cpu: "1", runSeconds: 0.2}
timeoutSeconds: 10
settleSeconds: 0.5
"""


async def troupe_sim(*args: str, timeout: float = 60.0) -> tuple[int, str, str]:
    env = {**os.environ, "COLUMNS": "200"}
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "troupe",
        "sim",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout)
    return proc.returncode or 0, out.decode(), err.decode()


def row(out: str, first: str) -> list[str]:
    """The cells of the table row that starts with ``first``."""
    for line in out.splitlines():
        cells = line.split()
        if cells and cells[0] == first:
            return cells
    raise AssertionError(f"no row {first!r} in:\n{out}")


async def test_troupe_sim_with_no_arguments_plays_the_default_scenario() -> None:
    code, out, err = await troupe_sim()
    assert code == 0, err
    assert re.match(
        r"Scenario 'default': 162 pods on 14 nodes \(144 cpu, 576Gi memory, 32 nvidia.com/gpu\)",
        out,
    ), out
    assert row(out, "web")[1:] == ["40", "40", "0"]
    assert row(out, "batch")[1:] == ["30", "30", "0"]
    assert row(out, "api")[1:] == ["20", "20", "0"]
    assert row(out, "huge")[1:] == ["1", "0", "1"]
    assert "Insufficient cpu" in out.split("Pending pods, by reason:", 1)[1]
    # Gang rows: ... minMember bound outcome ...
    assert re.search(r"^etl\s.*\s6\s+6\s+completed\s", out, re.MULTILINE), out
    assert re.search(r"^giant\s.*\s20\s+0\s+pending\s", out, re.MULTILINE), out
    # The rack-constrained gang: bound whole, its domain cell one rack.
    assert re.search(
        r"^allreduce\s+podgroup/v1beta1\s.*\s4\s+4\s+scheduled\s.*\s"
        r"troupe\.dev/rack=zone-[abc]-r[01]$",
        out,
        re.MULTILINE,
    ), out
    header = next(line for line in out.splitlines() if line.startswith("gang "))
    assert header.split()[-1] == "domain"


async def test_troupe_sim_plays_a_scenario_file(tmp_path: Path) -> None:
    scenario = tmp_path / "smoke.yaml"
    scenario.write_text(SCENARIO)
    code, out, err = await troupe_sim("--scenario", str(scenario), timeout=30)
    assert code == 0, err
    assert out.startswith("Scenario 'smoke': 6 pods on 2 nodes (8 cpu, 16Gi memory)"), out
    assert row(out, "web")[1:] == ["3", "3", "0"]
    assert row(out, "big")[1:] == ["1", "0", "1"]
    reasons = out.split("Pending pods, by reason:", 1)[1]
    assert "0/2 nodes are available: 2 Insufficient cpu." in reasons
    assert re.search(r"^pair\s+coscheduling\s+2\s.*\s2\s+2\s+completed\s", out, re.MULTILINE)


async def test_troupe_sim_report_writes_a_self_contained_page_of_the_run(tmp_path: Path) -> None:
    scenario = tmp_path / "smoke.yaml"
    scenario.write_text(SCENARIO)
    page = tmp_path / "out.html"
    code, out, err = await troupe_sim(
        "--scenario", str(scenario), "--no-progress", "--report", str(page), timeout=30
    )
    assert code == 0, err
    assert f"wrote the report {page}" in err
    report = Report(page)
    report.assert_self_contained()
    assert report.figures() == ["troupe-heatmap-0", "troupe-timeline-0"]
    assert report.data["source"] == "sim"
    [run] = report.data["runs"]
    # The same run as the summary printed: 5 of 6 pods bound, big-0 pending.
    assert re.search(r"scheduled 5, pending 1, ran to completion 2", out), out
    assert (run["label"], run["pods"], run["bound"], run["pending"]) == ("smoke", 6, 5, 1)
    [pending] = run["pendingPods"]
    assert pending["pod"] == "default/big-0"
    assert "0/2 nodes are available: 2 Insufficient cpu." in pending["reason"]
    assert pending["reason"] in out
    [gang] = run["gangs"]
    assert {k: gang[k] for k in ("name", "size", "minMember", "bound", "outcome")} == {
        "name": "pair",
        "size": 2,
        "minMember": 2,
        "bound": 2,
        "outcome": "completed",
    }
    assert 0.1 <= gang["submitted"] <= gang["firstBound"] <= gang["lastBound"]
    assert gang["lastBound"] <= gang["finished"] <= run["seconds"]
    # At the end the three web pods (1 cpu, 128Mi each) hold their requests; the
    # gang's pods completed and hold nothing.
    nodes = run["nodes"]
    assert [n["name"] for n in nodes] == ["node-0", "node-1"]
    cpu = [n["resources"]["cpu"] for n in nodes]
    assert [c["allocatable"] for c in cpu] == [4.0, 4.0]
    assert sum(c["requested"] for c in cpu) == 3.0
    for c in cpu:
        assert c["percent"] == round(100 * c["requested"] / 4, 1)
        assert c["text"] == f"{c['requested']:g} / 4"
    assert sum(n["resources"]["memory"]["requested"] for n in nodes) == 3 * 128 * 2**20
    assert sum(n["resources"]["pods"]["requested"] for n in nodes) == 3
    assert all(n["zone"] for n in nodes)  # the heatmap groups nodes by zone


async def test_troupe_sim_report_is_not_for_serve(tmp_path: Path) -> None:
    code, _, err = await troupe_sim("--serve", "--report", str(tmp_path / "x.html"), timeout=30)
    assert code == 2
    assert "--report" in err and "--serve" in err
