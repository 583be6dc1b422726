"""``troupe snapshot --kubeconfig K -o FILE``: a cluster's scheduling state in one file.

Reads nodes, pods, namespaces, PriorityClasses, PodDisruptionBudgets and every gang
object the cluster serves (``troupe.kube.snapshot``) and writes a ``TroupeSnapshot``
(``troupe.sim.snapshot_file``): YAML when FILE ends ``.yaml``/``.yml``, JSON otherwise.
Secrets and ConfigMaps are never read. ``troupe replay FILE`` schedules it offline
(docs/replay.md). A progress line on stderr when stderr is a terminal.
"""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime
from typing import TextIO

from troupe.api.client import ApiError
from troupe.kube.connection import connect
from troupe.kube.errors import KubeConnectionError
from troupe.kube.snapshot import capture
from troupe.kube.transport import HttpTransport
from troupe.sim.snapshot_file import Snapshot, write_snapshot


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
    api = await connect(args.kubeconfig, None, False, context=args.context, pool_size=4)
    counter = Counter(sys.stderr)
    try:
        taken = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        version, gang_versions, resources = await capture(
            HttpTransport(api), counter, page_size=max(1, args.page_size)
        )
    finally:
        counter.close()
        await api.close()
    return Snapshot(
        taken_at=taken,
        server_version=version,
        gang_versions=gang_versions,
        resources=resources,
    )


def main(args: argparse.Namespace) -> int:
    import uvloop

    try:
        snapshot = uvloop.run(_snapshot(args))
    except (KubeConnectionError, ApiError) as exc:
        print(f"troupe snapshot: {exc}", file=sys.stderr)
        return 1
    write_snapshot(snapshot, args.output)
    counts = ", ".join(f"{len(v)} {k}" for k, v in snapshot.resources.items() if v)
    print(f"troupe snapshot: wrote {args.output} ({counts})", file=sys.stderr)
    return 0
