"""How fast the embedded API server binds with the usual watchers attached.

``python -m bench simrate [--nodes 5000] [--existing-pods 1000] [--pods 10000]
[--watchers 2] [--no-kubelets] [--profile-server FILE]``

A scheduler under test is only measured if the simulated cluster keeps up with it, so
this is the cluster's own ceiling: a fresh ``bench.server`` process (with a simulated
kubelet on every node unless ``--no-kubelets``: each binding makes the pod Running, one
more pod write and watch event) and ``--watchers`` cluster-wide pod watches plus one
events watch open over HTTP (a scheduler's pod informer, a controller's, an event
recorder's reader), read to the end of every chunk and dropped. The client then posts
``--pods`` bindings as fast as ``--concurrency`` connections allow, as ``bench e2e``'s
bind-only run does, with no scheduling at all.

Figures: ``binds_per_second`` (pods ÷ first to last binding answered),
``server_cpu_us_per_bind`` (the API server process's CPU over the same span, kubelets
included) and ``client_cpu_us_per_bind`` (this process: bindings and watch reading),
``watch_mb`` (bytes each pod watch received). Compare ``binds_per_second`` with
``bench e2e``'s troupe ``pods_per_second`` on the same cluster: the simulated cluster
is fast enough to compare schedulers while it binds well above the fastest one.
``--profile-server FILE`` writes a cProfile of the API server over the run. The last
line is one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from pathlib import Path

import aiohttp
from troupe.scheduler.service.logs import configure_logging

from bench.e2e import bind_only
from bench.peer import server_url
from bench.server import ServerProcess


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--nodes", type=int, default=5000)
    p.add_argument("--existing-pods", type=int, default=1000)
    p.add_argument("--pods", type=int, default=10000)
    p.add_argument("--concurrency", type=int, default=64)
    p.add_argument("--watchers", type=int, default=2, help="cluster-wide pod watches")
    p.add_argument("--no-kubelets", action="store_true", help="no simulated kubelets")
    p.add_argument("--qps", type=float, default=100_000.0, help="client write limit")
    p.add_argument("--profile-server", default="", help="cProfile the API server into FILE")


async def drain(session: aiohttp.ClientSession, url: str, received: list[int], i: int) -> None:
    """Watch from now on as an informer does after its list (the list itself is left
    out: a page of one gives the resourceVersion), reading to the end, counting bytes."""
    async with session.get(url, params={"limit": "1"}) as resp:
        resp.raise_for_status()
        rv = (await resp.json())["metadata"]["resourceVersion"]
    timeout = aiohttp.ClientTimeout(total=None, sock_read=None)
    params = {"watch": "true", "resourceVersion": rv}
    async with session.get(url, params=params, timeout=timeout) as resp:
        resp.raise_for_status()
        async for chunk in resp.content.iter_any():
            received[i] += len(chunk)


async def _main(args: argparse.Namespace) -> dict[str, float]:
    argv = ["--nodes", str(args.nodes), "--existing-pods", str(args.existing_pods)]
    argv += ["--pods", str(args.pods)]
    if not args.no_kubelets:
        argv.append("--kubelets")
    if args.profile_server:
        argv += ["--profile", args.profile_server]
    with tempfile.TemporaryDirectory() as tmp:
        kubeconfig = Path(tmp) / "kubeconfig"
        async with ServerProcess(argv, kubeconfig) as server, aiohttp.ClientSession() as session:
            url = server_url(kubeconfig)
            urls = [f"{url}/api/v1/pods"] * args.watchers + [f"{url}/api/v1/events"]
            received = [0] * len(urls)
            readers = [
                asyncio.create_task(drain(session, u, received, i)) for i, u in enumerate(urls)
            ]
            await asyncio.sleep(0.5)  # the watches are open before the first binding
            start = time.perf_counter()
            result = await bind_only(args, kubeconfig, server)
            seconds = time.perf_counter() - start
            for reader in readers:
                reader.cancel()
            await asyncio.gather(*readers, return_exceptions=True)
    pod_bytes = received[: args.watchers]
    return {
        "pods": args.pods,
        "nodes": args.nodes,
        "watchers": args.watchers,
        "kubelets": not args.no_kubelets,
        "seconds": round(seconds, 3),
        "binds_per_second": round(result["pods_per_second"], 1),
        "server_cpu_us_per_bind": round(result["server_cpu_us_per_pod"], 1),
        "client_cpu_us_per_bind": round(result["cpu_us_per_pod"], 1),
        "watch_mb": round(max(pod_bytes, default=0) / 1e6, 1),
    }


def run(args: argparse.Namespace) -> int:
    configure_logging("warning")
    import uvloop

    result = uvloop.run(_main(args))
    print(
        f"the embedded API server binds {result['binds_per_second']} pods/s with "
        f"{args.watchers} pod watches, an events watch"
        + ("" if args.no_kubelets else " and kubelets")
    )
    print(json.dumps(result))
    return 0
