"""``troupe run``: the production daemon.

Loads the profile (a bad one fails here, naming every bad field), connects to the
API server (in-cluster when no kubeconfig is given and ``KUBERNETES_SERVICE_HOST``
is set), syncs the caches and schedules until SIGTERM/SIGINT, then stops popping,
lets in-flight bindings finish (or abandons them cleanly) and exits 0.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys

import structlog

from troupe.api.config import (
    ConfigError,
    ResolvedConfig,
    config_document,
    load_config,
    load_config_file,
)
from troupe.plugins.registry import catalog, default_registry
from troupe.scheduler.daemon import Connection, SchedulerDaemon, StartupError
from troupe.scheduler.kube import KubeConnectionError
from troupe.scheduler.logs import configure_logging

log = structlog.get_logger("troupe.run")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", default=None, help="KubeSchedulerConfiguration YAML file")
    p.add_argument("--kubeconfig", default=None, help="kubeconfig file (default: in-cluster)")
    p.add_argument("--master", default=None, help="API server URL, overrides the kubeconfig")
    p.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    p.add_argument(
        "--shutdown-grace",
        type=float,
        default=10.0,
        help="seconds in-flight bindings get to finish on SIGTERM",
    )


def main(args: argparse.Namespace) -> int:
    configure_logging(args.log_level)
    cat = catalog(default_registry())
    try:
        config = (
            load_config_file(args.config, cat)
            if args.config
            else load_config(config_document(), cat)
        )
    except ConfigError as exc:
        for problem in exc.problems:
            print(f"troupe run: {args.config}: {problem}", file=sys.stderr)
        return 1
    kubeconfig = args.kubeconfig or config.client_connection.kubeconfig or None
    in_cluster = kubeconfig is None and "KUBERNETES_SERVICE_HOST" in os.environ
    if kubeconfig is None and not in_cluster:
        kubeconfig = os.environ.get("KUBECONFIG") or os.path.expanduser("~/.kube/config")
    connection = Connection(kubeconfig=kubeconfig, master=args.master, in_cluster=in_cluster)
    import uvloop

    return uvloop.run(serve(config, connection, args.shutdown_grace))


async def serve(config: ResolvedConfig, connection: Connection, grace: float) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    daemon = SchedulerDaemon(config, connection)
    try:
        await daemon.start()
    except (KubeConnectionError, StartupError) as exc:
        log.error("cannot start", error=str(exc))
        print(f"troupe run: {exc}", file=sys.stderr)
        return 1
    waiter = asyncio.ensure_future(daemon.wait())
    stopper = asyncio.ensure_future(stop.wait())
    await asyncio.wait({waiter, stopper}, return_when=asyncio.FIRST_COMPLETED)
    stopper.cancel()
    if stop.is_set():
        log.info("signal received, shutting down", grace=grace)
    await daemon.stop(grace=grace)
    if waiter.done() and not waiter.cancelled() and waiter.exception() is not None:
        log.error("scheduling loop failed", error=repr(waiter.exception()))
        return 1
    return 0
