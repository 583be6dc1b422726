"""``kubectl troupe``: troupe's what-if commands as a kubectl plugin.

kubectl runs any executable named ``kubectl-<name>`` on ``PATH`` for ``kubectl <name>
...``, with the arguments that follow. The ``kubectl-troupe`` console script (installed
with the package, pyproject ``[project.scripts]``) is this module: ``kubectl troupe
explain|snapshot|replay ...`` are ``troupe explain|snapshot|replay`` with kubectl's
conventions for the cluster: ``--kubeconfig``, ``--context``, and ``-n/--namespace``
for a target named without its namespace (``kubectl troupe explain podgroup train -n
ml``); with none of them, ``$KUBECONFIG`` or ``~/.kube/config`` and its current
context's namespace, as kubectl. Flags go after the plugin's name (kubectl hands a
plugin the arguments that follow it). plugins/krew.yaml is the krew manifest;
docs/kubectl-plugin.md the page.
"""

from __future__ import annotations

import argparse

from troupe import __version__
from troupe.cli import dispatch, entry


def build_parser() -> argparse.ArgumentParser:
    from troupe.cli import explain, replay, snapshot

    parser = argparse.ArgumentParser(
        prog="kubectl troupe",
        description="Why a pod or gang is pending in troupe, and what would bind it.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    explain.add_arguments(
        sub.add_parser("explain", help="why a pod or pod group is not scheduled, and fixes")
    )
    snapshot.add_arguments(
        sub.add_parser("snapshot", help="write the cluster's scheduling state to a file")
    )
    replay.add_arguments(
        sub.add_parser("replay", help="schedule a snapshot offline, with what-if changes")
    )
    sub.add_parser("version", help="print the version")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "version":
        print(f"kubectl-troupe {__version__}")
        return 0
    return dispatch(args)


def plugin_entry() -> None:
    """The ``kubectl-troupe`` console command."""
    entry(main)


if __name__ == "__main__":
    plugin_entry()
