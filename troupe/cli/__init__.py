"""The ``troupe`` command: ``run`` (the production daemon), ``sim`` (the embedded
cluster), ``explain`` (why a pod or gang is pending), ``snapshot`` and ``replay`` (a
cluster's state, scheduled offline), ``validate-config``, ``version``.

Only the chosen command's module is imported: its flags are added to the parser and
its ``main`` runs. ``troupe run`` so never loads the embedded cluster, the what-if
engine or plotly (``tests/cli/test_lean_imports.py``), which took most of its
start-up (docs/benchmarks.md, "Start-up").
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from collections.abc import Callable
from typing import NoReturn, Protocol, cast

from troupe import __version__

# command -> (module with ``add_arguments`` and ``main``, help); None: built in here.
COMMANDS: dict[str, tuple[str | None, str]] = {
    "version": (None, "print the version"),
    "validate-config": (None, "check a KubeSchedulerConfiguration profile"),
    "run": ("troupe.cli.run", "schedule pods in a Kubernetes cluster"),
    "sim": ("troupe.cli.sim", "run troupe on an embedded simulated cluster"),
    "explain": ("troupe.cli.explain", "why a pod or pod group is not scheduled, and fixes"),
    "snapshot": ("troupe.cli.snapshot", "write a cluster's scheduling state to a file"),
    "replay": ("troupe.cli.replay", "schedule a snapshot offline, with what-if changes"),
}


class Command(Protocol):
    """What a command module offers: its flags, and the command itself."""

    def add_arguments(self, p: argparse.ArgumentParser) -> None: ...

    def main(self, args: argparse.Namespace) -> int: ...


def command_module(name: str) -> Command:
    module, _ = COMMANDS[name]
    assert module is not None, name
    return cast(Command, importlib.import_module(module))


def chosen_command(argv: list[str]) -> str | None:
    """The command named on the command line: the first word that is not an option
    (``troupe`` takes no option with a value before it)."""
    return next((a for a in argv if not a.startswith("-")), None)


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The parser, with the flags of the command ``argv`` names only (every
    command's flags when ``argv`` is None)."""
    parser = argparse.ArgumentParser(
        prog="troupe", description="A gang-aware secondary scheduler for Kubernetes."
    )
    parser.add_argument("--version", action="version", version=f"troupe {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    chosen = None if argv is None else chosen_command(argv)
    for name, (module, help_text) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text)
        if name == "validate-config":
            p.add_argument("file")
        elif module is not None and (argv is None or name == chosen):
            command_module(name).add_arguments(p)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    return dispatch(build_parser(argv).parse_args(argv))


def dispatch(args: argparse.Namespace) -> int:
    """Run the command ``args.command`` names (``troupe`` and ``kubectl troupe``)."""
    if args.command == "version":
        print(f"troupe {__version__}")
        return 0
    if args.command == "validate-config":
        from troupe.cli.validate import validate_config

        return validate_config(args.file)
    return command_module(args.command).main(args)


def entry(main: Callable[[], int] = main) -> NoReturn:
    """The ``troupe`` console command and ``python -m troupe``: ``main``, then exit at
    once. Everything was stopped and flushed by then; what is left is the
    interpreter freeing every object one by one, which took seconds after a large
    run (9 s after 10,000 pods in ``troupe sim --serve``) and kept a stopping
    scheduler's pod Terminating for nothing. Output cut short by its reader (``troupe
    explain ... | head``) ends the command quietly, as a shell tool ends on SIGPIPE."""
    try:
        code = main()
        logging.shutdown()
        sys.stdout.flush()
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = 141  # 128 + SIGPIPE, what a shell reports for a command a pipe closed on
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    entry()
