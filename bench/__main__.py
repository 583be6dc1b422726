"""Entry point: ``python -m bench basic --nodes 5000 --existing-pods 1000 --pods 10000``,
``python -m bench e2e ...``, ``python -m bench gang [--shapes all|GxS,...]``,
``python -m bench churn --rounds 5 --pods 6000``, ``python -m bench chaos [--quick] [--seed N]``,
``python -m bench soak --minutes 30``,
``python -m bench preemption [--shapes 1x1000,100x8,1x64@rack] [--minimum]``,
``python -m bench scale --nodes 5000 --existing-pods 1000 --pods 50000``,
``python -m bench peer --scheduler-cmd "PATH --config {config}" [--quick]``,
``python -m bench simrate --nodes 5000 --existing-pods 1000 --pods 10000 --watchers 2``,
``python -m bench dra [--nodes 512] [--pods 64] [--per-pod 8]``,
``python -m bench taints --nodes 5000 --values 10000 --carriers 250``,
``python -m bench startup [--nodes 1000] [--runs 9] [--watching N]``,
``python -m bench port [--stalled 1100] [--malformed 20000]``."""

from __future__ import annotations

import argparse
import sys

from bench import (
    basic,
    chaos,
    churn,
    dra,
    e2e,
    gang,
    peer,
    port,
    preemption,
    scale,
    simrate,
    soak,
    startup,
    taints,
    transport,
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench")
    sub = parser.add_subparsers(dest="name", required=True)
    basic.add_arguments(sub.add_parser("basic", help="SchedulingBasic in process"))
    e2e.add_arguments(sub.add_parser("e2e", help="SchedulingBasic over HTTP vs bind-only"))
    gang.add_arguments(sub.add_parser("gang", help="gang shapes: troupe vs Coscheduling"))
    transport.add_arguments(sub.add_parser("transport", help="client CPU per API request"))
    churn.add_arguments(sub.add_parser("churn", help="memory after rounds of create/bind/delete"))
    chaos.add_arguments(sub.add_parser("chaos", help="two replicas under faults; invariants"))
    soak.add_arguments(sub.add_parser("soak", help="memory and loop lag under steady churn"))
    scale.add_arguments(sub.add_parser("scale", help="the daemon's memory with many pods"))
    preemption.add_arguments(
        sub.add_parser("preemption", help="gang preemption on a full cluster; vs brute force")
    )
    peer.add_arguments(
        sub.add_parser("peer", help="troupe and another scheduler binary side by side")
    )
    simrate.add_arguments(
        sub.add_parser("simrate", help="the embedded API server's binds/s with watchers")
    )
    dra.add_arguments(sub.add_parser("dra", help="the DRA allocator: per node and a GPU gang"))
    taints.add_arguments(
        sub.add_parser("taints", help="distinct timestamp taints over time: memory, time")
    )
    startup.add_arguments(sub.add_parser("startup", help="the daemon's start-up time"))
    port.add_arguments(sub.add_parser("port", help="the metrics port under hostile clients"))
    args = parser.parse_args(argv)
    if args.name == "basic":
        return basic.run(args)
    if args.name == "e2e":
        return e2e.run(args)
    if args.name == "port":
        return port.run(args)
    if args.name == "gang":
        return gang.run(args)
    if args.name == "transport":
        return transport.run(args)
    if args.name == "churn":
        return churn.run(args)
    if args.name == "chaos":
        return chaos.run(args)
    if args.name == "soak":
        return soak.run(args)
    if args.name == "scale":
        return scale.run(args)
    if args.name == "preemption":
        return preemption.run(args)
    if args.name == "peer":
        return peer.run(args)
    if args.name == "simrate":
        return simrate.run(args)
    if args.name == "dra":
        return dra.run(args)
    if args.name == "taints":
        return taints.run(args)
    if args.name == "startup":
        return startup.run(args)
    return 2


if __name__ == "__main__":
    sys.exit(main())
