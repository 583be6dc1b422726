"""``troupe sim``: the embedded cluster with troupe scheduling on it."""

from __future__ import annotations

import argparse
import sys


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--scenario", default=None, help="YAML scenario file (docs/scenarios.md)")


def main(args: argparse.Namespace) -> int:
    print("troupe sim: not available in this build", file=sys.stderr)
    return 2
