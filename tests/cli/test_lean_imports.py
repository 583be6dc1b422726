"""``troupe run`` loads only what scheduling needs: the embedded cluster, the what-if
engine, plotly and the offline commands stay out of its process, so its start-up
(exec to first binding, ``python -m bench peer``'s ``start s``) stays short. Each
case runs a fresh interpreter, as the console command does, and reads
``sys.modules`` after the command's imports."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

HEAVY = ("plotly", "troupe.whatif", "troupe.sim", "troupe.cli.explain", "troupe.cli.replay")

# Parse the command line as ``troupe`` does, import the command's module, load the
# profile as ``troupe run`` does before it connects, then list what is loaded.
PROBE = textwrap.dedent(
    """
    import json, sys
    from troupe.cli import build_parser, command_module
    argv = sys.argv[1:]
    args = build_parser(argv).parse_args(argv)
    if args.command == "run":
        command_module("run")
        from troupe.cli.profile import load_profile
        load_profile(None)
    print(json.dumps(sorted(sys.modules)))
    """
)


def loaded_after(*argv: str) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, check=True
    ).stdout
    return set(json.loads(out))


def heavy_in(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY))


@pytest.mark.parametrize(
    "argv",
    [
        ("run", "--config", "/etc/troupe/config.yaml"),
        ("validate-config", "profile.yaml"),
        ("version",),
    ],
    ids=["run", "validate-config", "version"],
)
def test_scheduling_commands_do_not_import_the_offline_machinery(argv: tuple[str, ...]) -> None:
    modules = loaded_after(*argv)
    assert heavy_in(modules) == []


def test_run_still_loads_the_scheduler_and_the_kube_layer() -> None:
    # The probe is real: the run path does import what it needs.
    modules = loaded_after("run")
    assert {"troupe.cli.run", "troupe.kube", "troupe.scheduler.service.daemon"} <= modules


def test_the_probe_sees_heavy_modules_when_a_command_needs_them() -> None:
    # ``troupe sim`` does need the embedded cluster: the check can fail.
    assert "troupe.sim" in heavy_in(loaded_after("sim", "--nodes", "3"))


def test_the_full_parser_still_knows_every_command_s_flags() -> None:
    from troupe.cli import build_parser

    args = build_parser().parse_args(["sim", "--nodes", "3"])
    assert args.command == "sim" and args.nodes == 3
