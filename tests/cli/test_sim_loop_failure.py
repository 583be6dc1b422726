"""``troupe sim`` says so and exits 1 when the scheduling loop dies, instead of
printing a summary of a scenario nobody scheduled."""

from __future__ import annotations

from pathlib import Path

import pytest
from troupe.cli import main
from troupe.scheduler.loop.schedule_one import Scheduler

SCENARIO = """\
name: crash
nodes:
  - {count: 1, cpu: "4", memory: 8Gi}
steps:
  - at: 0
    pods: {name: web, count: 2, cpu: "1"}
timeoutSeconds: 30
settleSeconds: 0.2
"""


def test_a_dead_scheduling_loop_fails_the_run_with_its_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    async def broken(self: Scheduler) -> bool:
        raise RuntimeError("the loop broke")

    monkeypatch.setattr(Scheduler, "schedule_one", broken)
    scenario = tmp_path / "crash.yaml"
    scenario.write_text(SCENARIO)
    code = main(["sim", "--scenario", str(scenario), "--no-progress"])
    out, err = capsys.readouterr()
    assert code == 1
    assert "the scheduling loop failed: RuntimeError('the loop broke')" in err
    assert "Scenario" not in out  # no summary of a run that did not happen
