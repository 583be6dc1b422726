"""``troupe sim``: troupe scheduling an embedded simulated cluster.

With no arguments: start the embedded API server with simulated nodes and kubelets,
start the scheduler against it over HTTP (the production client path), play the
default scenario with a progress bar, print a summary and exit 0.
``--scenario FILE`` plays a YAML scenario (docs/scenarios.md); ``--report FILE.html``
also writes an HTML page of the run (``troupe.sim.report``, docs/replay.md).
``--serve`` keeps the cluster and the scheduler running until SIGTERM/SIGINT, with a
kubeconfig written for kubectl; ``--metrics-port M`` serves the scheduler's
``/metrics``, ``/healthz``, ``/livez`` and ``/readyz`` on 127.0.0.1:M meanwhile
(``--metrics-port`` without ``--serve`` is a usage error). ``--serve --no-scheduler``
runs the API server, nodes and kubelets only: another scheduler (``troupe run`` in its own
process, kube-scheduler, ...) schedules the pods, through the kubeconfig written.
``--serve --token-auth-file F`` also authenticates the users of F (kube-apiserver's
token file format) and answers TokenReviews with them (docs/embedded-cluster.md).
"""

from __future__ import annotations

import argparse
import asyncio
import secrets
import signal
import sys
import tempfile
from pathlib import Path

from troupe.api.config import ConfigError, ResolvedConfig
from troupe.cli.profile import load_profile
from troupe.cli.render import ProgressBar, render_summary
from troupe.kube.debug_auth import DelegatedAuth, ReviewServer
from troupe.kube.health import HealthServer
from troupe.kube.transport import USER_AGENT
from troupe.scheduler.service.daemon import Connection, SchedulerDaemon
from troupe.scheduler.service.logs import configure_logging
from troupe.sim import report
from troupe.sim.apiserver.auth.authenticator import MASTERS, TokenFileError, TokenUsers, UserInfo
from troupe.sim.cluster import SimCluster
from troupe.sim.nodespec import NodeSpec
from troupe.sim.runner import ScenarioRunner, node_spec
from troupe.sim.scenario import DEFAULT_SCENARIO, ScenarioError, load_scenario
from troupe.sim.scheduler_pod import RENEW_SECONDS, SchedulerPod


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--scenario", default=None, help="YAML scenario file (docs/scenarios.md)")
    p.add_argument("--config", default=None, help="scheduler profile (default profile if unset)")
    p.add_argument("--serve", action="store_true", help="keep running until SIGTERM")
    p.add_argument("--port", type=int, default=0, help="API server port (--serve)")
    p.add_argument("--kubeconfig-out", default=None, help="write a kubeconfig here (--serve)")
    p.add_argument(
        "--metrics-port",
        type=int,
        default=None,
        help="serve /metrics and the health probes on 127.0.0.1:PORT (--serve)",
    )
    p.add_argument(
        "--token-auth-file",
        default=None,
        metavar="FILE",
        help="users the API server authenticates, as kube-apiserver's --token-auth-file "
        '(CSV: token,user,uid,"group1,group2"); TokenReviews answer with them (--serve)',
    )
    p.add_argument(
        "--no-scheduler",
        action="store_true",
        help="run no scheduler: only the API server, nodes and kubelets (--serve)",
    )
    p.add_argument("--nodes", type=int, default=None, help="simulated nodes (--serve: 10)")
    p.add_argument("--log-level", default="warning", choices=["debug", "info", "warning", "error"])
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument(
        "--report",
        default=None,
        metavar="FILE.html",
        help="also write an HTML report of the run (self-contained)",
    )
    # main() reports misused flags through the parser, as argparse reports its own.
    p.set_defaults(sim_parser=p)


ADMIN_NAME = "troupe-sim-admin"
"""The user of the kubeconfig ``--serve`` writes (group ``system:masters``)."""


def main(args: argparse.Namespace) -> int:
    parser: argparse.ArgumentParser = args.sim_parser
    if args.metrics_port is not None and not args.serve:
        # Without --serve the scheduler ends with the scenario: nothing to scrape.
        parser.error("--metrics-port needs --serve (the endpoints live as long as the cluster)")
    if args.no_scheduler and not args.serve:
        # A scenario is played against troupe: without it nothing would be scheduled.
        parser.error("--no-scheduler needs --serve (a scenario plays against troupe)")
    if args.no_scheduler and args.metrics_port is not None:
        parser.error("--metrics-port serves the scheduler's endpoints: not with --no-scheduler")
    if args.report and args.serve:
        parser.error("--report reports a scenario's run: not with --serve")
    if args.token_auth_file and not args.serve:
        parser.error("--token-auth-file needs --serve (users talk to a served cluster)")
    configure_logging(args.log_level, fmt="console")
    token_users: TokenUsers | None = None
    try:
        if args.token_auth_file:
            token_users = TokenUsers.from_file(args.token_auth_file)
        config = load_profile(args.config)
        scenario = (
            load_scenario(Path(args.scenario))
            if args.scenario
            else load_scenario(DEFAULT_SCENARIO, origin="default scenario")
        )
    except (ConfigError, ScenarioError, TokenFileError, OSError) as exc:
        print(f"troupe sim: {exc}", file=sys.stderr)
        return 1
    import uvloop

    if args.serve:
        return uvloop.run(_serve(args, config, token_users))
    return uvloop.run(_play(args, config, scenario))


async def _play(args: argparse.Namespace, config: ResolvedConfig, scenario: object) -> int:
    from troupe.sim.scenario import Scenario

    assert isinstance(scenario, Scenario)
    nodes = [node_spec(g) for g in scenario.nodes]
    if args.nodes is not None:
        nodes = [NodeSpec(count=args.nodes, zones=("zone-a", "zone-b", "zone-c"))]
    async with SimCluster(nodes) as cluster:
        with tempfile.TemporaryDirectory() as tmp:
            kubeconfig = cluster.write_kubeconfig(Path(tmp) / "kubeconfig")
            daemon = SchedulerDaemon(config, Connection(kubeconfig=str(kubeconfig)), seed=1)
            await daemon.start()
            bar = None if args.no_progress else ProgressBar(sys.stderr)
            print(
                f"troupe sim: scenario {scenario.name!r} on {len(cluster.node_names)} nodes "
                f"(API server {cluster.url})",
                file=sys.stderr,
            )
            runner = ScenarioRunner(cluster, scenario, progress=bar)
            playing = asyncio.ensure_future(runner.run())
            loop_ended = asyncio.ensure_future(daemon.wait())
            try:
                await asyncio.wait({playing, loop_ended}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                playing.cancel()
                loop_ended.cancel()
                if bar is not None:
                    bar.close()
                await daemon.stop(grace=2)
            failure = _loop_failure(loop_ended)
            if failure is not None:
                # The scenario cannot finish without the scheduler: say why it stopped.
                print(f"troupe sim: the scheduling loop failed: {failure!r}", file=sys.stderr)
                return 1
            summary = playing.result()
    print(render_summary(summary))
    if args.report:
        try:
            out = report.write(
                args.report,
                f"troupe sim: scenario {summary.scenario!r}",
                "sim",
                [report.sim_run(summary)],
            )
        except OSError as exc:
            print(f"troupe sim: cannot write the report: {exc}", file=sys.stderr)
            return 1
        print(f"troupe sim: wrote the report {out}", file=sys.stderr)
    return 0


def _loop_failure(loop_ended: asyncio.Future[None]) -> BaseException | None:
    if not loop_ended.done() or loop_ended.cancelled():
        return None
    return loop_ended.exception()


async def _serve(
    args: argparse.Namespace, config: ResolvedConfig, token_users: TokenUsers | None = None
) -> int:
    count = args.nodes if args.nodes is not None else 10
    nodes = [NodeSpec(count=count, zones=("zone-a", "zone-b", "zone-c"))] if count else []
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    # The kubeconfig's user: an administrator the API server authenticates by token, so
    # the scheduler's delegated debug endpoint can review the same credentials.
    admin_token = secrets.token_urlsafe(24)
    users = (token_users or TokenUsers({})).with_user(
        admin_token, UserInfo(ADMIN_NAME, "troupe-sim-admin", (MASTERS,))
    )
    async with SimCluster(nodes, port=args.port, token_users=users) as cluster:
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(args.kubeconfig_out) if args.kubeconfig_out else Path(tmp) / "kubeconfig"
            cluster.write_kubeconfig(out, token=admin_token)
            if args.no_scheduler:
                print(
                    f"troupe sim: serving {cluster.url} with {count} nodes and no scheduler; "
                    f"kubeconfig {out}",
                    file=sys.stderr,
                    flush=True,
                )
                await stop.wait()
                print("troupe sim: stopped", file=sys.stderr)
                return 0
            return await _serve_scheduler(args, config, cluster, out, count, stop)


async def _serve_scheduler(
    args: argparse.Namespace,
    config: ResolvedConfig,
    cluster: SimCluster,
    kubeconfig: Path,
    count: int,
    stop: asyncio.Event,
) -> int:
    daemon = SchedulerDaemon(config, Connection(kubeconfig=str(kubeconfig)))
    # The scheduler's endpoints, /debug/troupe/explain with delegated authentication
    # (docs/explain.md), published as a pod holding the leader Lease so that
    # ``troupe explain`` finds it as it would in a cluster.
    auth = await DelegatedAuth.connect(
        ReviewServer(str(kubeconfig)), ReviewServer(str(kubeconfig)), user_agent=USER_AGENT
    )
    health = HealthServer(
        "127.0.0.1",
        args.metrics_port if args.metrics_port is not None else 0,
        daemon.metrics_registry,
        live=lambda: daemon.healthy,
        ready=lambda: daemon.ready,
        explain=daemon.explain,
        debug_auth=auth,
    )
    election = config.leader_election
    published = SchedulerPod(
        cluster.store,
        namespace=election.resource_namespace,
        lease=election.resource_name,
        port=0,
    )
    renewing: asyncio.Task[None] | None = None
    try:
        # Up before the caches sync, so /readyz can be watched turning ready.
        port = await health.start()
        print(
            f"troupe sim: metrics on http://127.0.0.1:{port}/metrics (and /debug/troupe/explain)",
            file=sys.stderr,
        )
        published.port = port
        published.publish()
        renewing = asyncio.ensure_future(_renew(published))
        await daemon.start()
        print(
            f"troupe sim: serving {cluster.url} with {count} nodes; kubeconfig {kubeconfig}",
            file=sys.stderr,
            flush=True,
        )
        waiter = asyncio.ensure_future(daemon.wait())
        stopper = asyncio.ensure_future(stop.wait())
        await asyncio.wait({waiter, stopper}, return_when=asyncio.FIRST_COMPLETED)
        stopper.cancel()
        await daemon.stop(grace=5)
        failure = _loop_failure(waiter)
    finally:
        if renewing is not None:
            renewing.cancel()
        published.withdraw()
        await health.stop()
        await auth.close()
    if failure is not None:
        print(f"troupe sim: the scheduling loop failed: {failure!r}", file=sys.stderr)
        return 1
    print("troupe sim: stopped", file=sys.stderr)
    return 0


async def _renew(published: SchedulerPod) -> None:
    while True:
        await asyncio.sleep(RENEW_SECONDS)
        published.renew()
