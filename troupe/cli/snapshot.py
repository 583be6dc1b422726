"""``troupe snapshot --kubeconfig K -o FILE``: a cluster's scheduling state in one file.

A thin command over the what-if engine's reader (``troupe.whatif.read``, the one
``troupe explain`` reads a cluster with): nodes, pods, namespaces, PriorityClasses,
PodDisruptionBudgets and every gang object the cluster serves, in pages, written as a
``TroupeSnapshot`` (``troupe.sim.snapshot_file``): YAML when FILE ends
``.yaml``/``.yml``, JSON otherwise.
Secrets and ConfigMaps are never read. ``troupe replay FILE`` schedules it offline
(docs/replay.md). A progress line on stderr when stderr is a terminal.
"""

from __future__ import annotations

import argparse
import sys
from typing import TextIO

from troupe.sim.snapshot_file import Snapshot, write_snapshot
from troupe.whatif.errors import WhatIfError
from troupe.whatif.read import ClusterAddress, read_cluster


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--kubeconfig", default=None, help="kubeconfig (default: $KUBECONFIG)")
    p.add_argument("--context", default=None, help="kubeconfig context")
    p.add_argument("-o", "--output", required=True, help="file to write (.yaml/.yml: YAML)")
    p.add_argument("--page-size", type=int, default=500, help="objects per list request")


class Counter:
    """``snapshot: pods  12000 objects`` redrawn in place (terminals only)."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.tty = stream.isatty()
        self.drawn = False

    def __call__(self, resource: str, count: int) -> None:
        if self.tty:
            self.stream.write(f"\rtroupe snapshot: {resource:<22} {count:>8} objects")
            self.stream.flush()
            self.drawn = True

    def close(self) -> None:
        if self.drawn:
            self.stream.write("\n")
            self.stream.flush()


async def _snapshot(args: argparse.Namespace) -> Snapshot:
    counter = Counter(sys.stderr)
    try:
        return await read_cluster(
            ClusterAddress(args.kubeconfig, context=args.context),
            counter,
            page_size=max(1, args.page_size),
        )
    finally:
        counter.close()


def main(args: argparse.Namespace) -> int:
    import uvloop

    try:
        snapshot = uvloop.run(_snapshot(args))
    except WhatIfError as exc:
        print(f"troupe snapshot: {exc}", file=sys.stderr)
        return 1
    write_snapshot(snapshot, args.output)
    counts = ", ".join(f"{len(v)} {k}" for k, v in snapshot.resources.items() if v)
    print(f"troupe snapshot: wrote {args.output} ({counts})", file=sys.stderr)
    return 0
