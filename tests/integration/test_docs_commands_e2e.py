"""Every command shown in docs/explain.md and docs/gangs.md runs as written on
``troupe sim --serve``, and prints what the page shows.

A page marks each ``console`` block with the cluster it runs on, in an HTML comment
before it: ``<!-- docs-test: docs/examples/FILE.yaml -->`` (a fresh ``troupe sim
--serve --nodes 0`` with FILE applied by kubectl), or ``<!-- docs-test: none: WHY -->``
for commands that need a deployed troupe (a Secret, a port-forward): a block without a
mark fails the test. In a marked block every ``$ `` line is run with bash from the
repository's root, ``KUBECONFIG`` set and the venv first on ``PATH`` (so ``kubectl
troupe`` finds the plugin); ``troupe sim --serve``, ``export`` and ``kubectl apply -f``
of the block's file are the harness's own. Each must exit 0, and every line the page
shows after it must be in its output, once durations (``0.31s``, ``2s ago``) and the
node a member that fits would go to (``fits (on node-2)``) are set aside; ``...``
stands for lines left out.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.integration.served import Served, kubectl, run, troupe_sim_serve

ROOT = Path(__file__).resolve().parents[2]
PAGES = ("docs/explain.md", "docs/gangs.md")
MARK = re.compile(r"<!-- docs-test: (.+?) -->")
HARNESS = ("troupe sim --serve", "export ")


@dataclass
class Command:
    page: str
    line: int
    text: str
    shown: list[str] = field(default_factory=list)


def blocks(page: str) -> Iterator[tuple[str, list[Command]]]:
    """(mark, commands) of every console block of ``page``."""
    lines = (ROOT / page).read_text().splitlines()
    mark, inside, commands = "", False, []
    for number, line in enumerate(lines, start=1):
        found = MARK.search(line)
        if found and not inside:
            mark = found.group(1)
        elif line.startswith("```console") and not inside:
            inside, commands = True, []
            assert mark, f"{page}:{number}: a console block without a docs-test mark"
        elif line.startswith("```") and inside:
            yield mark, commands
            inside, mark = False, ""
        elif inside and line.startswith("$ "):
            commands.append(Command(page, number, line[2:]))
        elif inside and commands:
            commands[-1].shown.append(line)


def scenarios() -> dict[str, list[Command]]:
    out: dict[str, list[Command]] = {}
    for page in PAGES:
        for mark, commands in blocks(page):
            if not mark.startswith("none: "):
                out.setdefault(mark, []).extend(commands)
    return out


def normal(text: str) -> str:
    """A line as compared: ages read ``Ns``, a column's padding (which follows its
    widest cell, an age of ``0s`` or ``12s``) two spaces."""
    text = re.sub(r"\b\d+(\.\d+)?s\b", "Ns", text)
    text = re.sub(r"fits \(on [^)]+\)", "fits (on N)", text)
    return re.sub(r" {2,}", "  ", text).rstrip()


def settled(served: Served) -> bool:
    """Every pod for troupe has been tried: bound, or told why not."""
    import json

    pods = json.loads(kubectl(served, "get", "pods", "-A", "-o", "json"))["items"]
    for pod in pods:
        if pod["spec"].get("schedulerName") != "troupe-scheduler" or pod["spec"].get("nodeName"):
            continue
        kinds = {c["type"] for c in (pod.get("status") or {}).get("conditions") or []}
        if "PodScheduled" not in kinds:
            return False
    return True


def test_every_console_block_is_marked_and_every_scenario_exists() -> None:
    found = scenarios()
    assert found, "no console blocks found"
    for mark in found:
        assert (ROOT / mark).is_file(), mark


@pytest.mark.parametrize("scenario", sorted(scenarios()))
def test_the_commands_run_as_written(scenario: str, tmp_path: Path) -> None:
    own = (*HARNESS, f"kubectl apply -f {scenario}")
    commands = [c for c in scenarios()[scenario] if not c.text.startswith(own)]
    with troupe_sim_serve(tmp_path, "--nodes", "0") as served:
        kubectl(served, "apply", "-f", str(ROOT / scenario))
        deadline = time.monotonic() + 60
        while not settled(served):
            assert time.monotonic() < deadline, "the scheduler never tried every pod"
            time.sleep(0.2)
        for command in commands:
            text = command.text.replace("/tmp/kc", str(served.kubeconfig))
            done = run(served, "bash", "-c", f"cd {ROOT} && {text}")
            where = f"{command.page}:{command.line}: {command.text}"
            assert done.returncode == 0, f"{where}\n{done.stderr}"
            got = [normal(line) for line in (done.stdout + done.stderr).splitlines()]
            for line in command.shown:
                if line.strip() in ("", "..."):
                    continue
                assert normal(line) in got, f"{where}\nnot in the output: {line!r}\n" + "\n".join(
                    got
                )
