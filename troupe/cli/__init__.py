"""The ``troupe`` command: ``run`` (the production daemon), ``sim`` (the embedded
cluster), ``explain`` (why a pod or gang is pending), ``snapshot`` and ``replay`` (a
cluster's state, scheduled offline), ``validate-config``, ``version``."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from typing import NoReturn

from troupe import __version__


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="troupe", description="A gang-aware secondary scheduler for Kubernetes."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("version", help="print the version")
    validate = sub.add_parser("validate-config", help="check a KubeSchedulerConfiguration profile")
    validate.add_argument("file")
    from troupe.cli import explain, replay, run, sim, snapshot

    run.add_arguments(sub.add_parser("run", help="schedule pods in a Kubernetes cluster"))
    sim.add_arguments(sub.add_parser("sim", help="run troupe on an embedded simulated cluster"))
    explain.add_arguments(
        sub.add_parser("explain", help="why a pod or pod group is not scheduled, and fixes")
    )
    snapshot.add_arguments(
        sub.add_parser("snapshot", help="write a cluster's scheduling state to a file")
    )
    replay.add_arguments(
        sub.add_parser("replay", help="schedule a snapshot offline, with what-if changes")
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "version":
        print(f"troupe {__version__}")
        return 0
    if args.command == "validate-config":
        from troupe.cli.validate import validate_config

        return validate_config(args.file)
    if args.command == "run":
        from troupe.cli import run

        return run.main(args)
    if args.command == "explain":
        from troupe.cli import explain

        return explain.main(args)
    if args.command == "sim":
        from troupe.cli import sim

        return sim.main(args)
    if args.command == "snapshot":
        from troupe.cli import snapshot

        return snapshot.main(args)
    if args.command == "replay":
        from troupe.cli import replay

        return replay.main(args)
    return 2


def entry() -> NoReturn:
    """The ``troupe`` console command and ``python -m troupe``: ``main``, then exit at
    once. Everything was stopped and flushed by then; what is left is the
    interpreter freeing every object one by one, which took seconds after a large
    run (9 s after 10,000 pods in ``troupe sim --serve``) and kept a stopping
    scheduler's pod Terminating for nothing."""
    code = main()
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    entry()
