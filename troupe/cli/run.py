"""``troupe run``: the production daemon (wired in troupe.scheduler.daemon)."""

from __future__ import annotations

import argparse
import sys


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", required=False, help="KubeSchedulerConfiguration YAML file")
    p.add_argument("--kubeconfig", default=None)
    p.add_argument("--master", default=None, help="API server URL, overrides the kubeconfig")
    p.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])


def main(args: argparse.Namespace) -> int:
    print("troupe run: not available in this build", file=sys.stderr)
    return 2
