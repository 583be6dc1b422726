"""``troupe run``: the production daemon.

Loads the profile (a bad one fails here, naming every bad field) and connects to the
API server (in-cluster when no kubeconfig is given and ``KUBERNETES_SERVICE_HOST`` is
set). It serves ``/metrics``, ``/healthz``, ``/livez`` and ``/readyz`` on
``--bind-address:--secure-port`` (default 0.0.0.0:10259, plain HTTP) before anything
else, with header and idle timeouts and at most ``--max-connections`` connections
(``troupe.kube.health``; the soft file limit is first raised to the hard one, as Go
programs do), and ``/debug/troupe/explain`` with ``--debug-auth``: delegated to the API
server's TokenReview and SubjectAccessReview as kube-scheduler's ``/debug/*``, or a
shared ``--debug-token-file`` (docs/explain.md). With ``leaderElection.leaderElect``
(the default; ``--leader-elect=false`` turns it off) it stands by until it holds the
profile's Lease, then syncs the caches and schedules. As kube-scheduler does, losing
the lease stops scheduling at once and exits 1 so the pod restarts. On SIGTERM/SIGINT
it stops popping, lets in-flight bindings finish (or abandons them cleanly), releases
the lease so a standby takes over without waiting out a lease duration, and exits 0.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import socket
import uuid
from dataclasses import dataclass

import structlog

from troupe import __version__
from troupe.api.client import ApiError
from troupe.api.clock import RealClock
from troupe.api.config import ConfigError, ResolvedConfig
from troupe.cli.profile import load_profile
from troupe.kube import KubeClient, KubeConnectionError, check_reachable, connect
from troupe.kube.debug_auth import DebugAuth, DelegatedAuth, ReviewServer, StaticToken
from troupe.kube.health import DEFAULT_HOST, DEFAULT_PORT, HealthServer
from troupe.kube.http_guard import ServingLimits, raise_open_file_limit
from troupe.kube.leader import LeaderElector, Outcome
from troupe.kube.transport import USER_AGENT
from troupe.scheduler.service.daemon import Connection, SchedulerDaemon, StartupError
from troupe.scheduler.service.logs import configure_logging

log = structlog.get_logger("troupe.run")


def parse_bool(text: str) -> bool:
    value = text.strip().lower()
    if value in ("true", "t", "1", "yes"):
        return True
    if value in ("false", "f", "0", "no"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


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
    p.add_argument(
        "--bind-address",
        default=DEFAULT_HOST,
        help="address of /metrics, /healthz, /readyz (default all addresses: the kubelet "
        "probes the pod IP; the manifests' NetworkPolicy limits who else connects)",
    )
    p.add_argument(
        "--secure-port",
        "--port",
        dest="port",
        type=int,
        default=DEFAULT_PORT,
        help="port of /metrics, /healthz, /readyz (plain HTTP; put TLS in front)",
    )
    p.add_argument(
        "--max-connections",
        type=int,
        default=ServingLimits().max_connections,
        help="connections the endpoints hold at once (at most a quarter of the file "
        "limit); at the limit a new one replaces a stalled one, so probes get in",
    )
    p.add_argument(
        "--debug-auth",
        choices=["token", "delegated"],
        default=None,
        help="who may read /debug/troupe/explain: 'delegated' asks the API server "
        "(TokenReview, then SubjectAccessReview for get on the path, as kube-scheduler); "
        "'token' the holders of --debug-token-file. Default: 'token' with "
        "--debug-token-file, else the path is not served (docs/explain.md)",
    )
    p.add_argument(
        "--debug-token-file",
        default=None,
        help="serve /debug/troupe/explain to callers presenting this file's token "
        "as a bearer token (--debug-auth=token)",
    )
    p.add_argument(
        "--authentication-kubeconfig",
        default=None,
        help="kubeconfig of the API server answering TokenReviews "
        "(--debug-auth=delegated; default: the scheduler's own connection)",
    )
    p.add_argument(
        "--authorization-kubeconfig",
        default=None,
        help="kubeconfig of the API server answering SubjectAccessReviews "
        "(--debug-auth=delegated; default: the scheduler's own connection)",
    )
    p.add_argument(
        "--leader-elect",
        type=parse_bool,
        nargs="?",
        const=True,
        default=None,
        help="elect a leader among replicas (default: the profile's leaderElection.leaderElect)",
    )


@dataclass(frozen=True, slots=True)
class Options:
    grace: float
    leader_elect: bool
    bind_address: str
    port: int
    max_connections: int = ServingLimits().max_connections
    # The lease holder identity; empty: a fresh one (``identity()``).
    identity: str = ""
    # The bearer token of /debug/troupe/explain (debug_auth "token").
    debug_token: str = ""
    # Who may read /debug/troupe/explain: "token", "delegated", or "" (not served).
    debug_auth: str = ""
    # Delegated: the kubeconfigs of the review API servers; "": the scheduler's own.
    authentication_kubeconfig: str = ""
    authorization_kubeconfig: str = ""


def identity() -> str:
    """This replica's lease holder identity: ``<pod or host name>_<uuid>``, as
    kube-scheduler builds it, so a restarted container never mistakes its
    predecessor's still-valid lease for its own."""
    return f"{os.environ.get('POD_NAME') or socket.gethostname()}_{uuid.uuid4()}"


def user_agent(identity: str) -> str:
    """What this replica's requests say they come from: client-go's
    ``<program>/<version> (<comment>)`` shape with the lease identity as the
    comment, so the API server's audit log names the replica behind every write."""
    return f"{USER_AGENT}/{__version__} ({identity})"


def main(args: argparse.Namespace) -> int:
    configure_logging(args.log_level)
    try:
        config = load_profile(args.config)
    except ConfigError as exc:
        for problem in exc.problems:
            log.error("invalid configuration", file=args.config or "(default)", err=problem)
        return 1
    kubeconfig = args.kubeconfig or config.client_connection.kubeconfig or None
    in_cluster = kubeconfig is None and "KUBERNETES_SERVICE_HOST" in os.environ
    if kubeconfig is None and not in_cluster:
        kubeconfig = os.environ.get("KUBECONFIG") or os.path.expanduser("~/.kube/config")
    if args.max_connections < 1:
        log.error("--max-connections must be at least 1", got=args.max_connections)
        return 1
    mode = args.debug_auth or ("token" if args.debug_token_file else "")
    if mode == "token" and not args.debug_token_file:
        log.error("--debug-auth=token needs --debug-token-file")
        return 1
    if mode == "delegated" and args.debug_token_file:
        log.error("--debug-token-file is for --debug-auth=token, not delegated")
        return 1
    if mode != "delegated" and (args.authentication_kubeconfig or args.authorization_kubeconfig):
        log.error(
            "--authentication-kubeconfig and --authorization-kubeconfig need --debug-auth=delegated"
        )
        return 1
    debug_token = ""
    if args.debug_token_file:
        try:
            with open(args.debug_token_file, encoding="utf-8") as f:
                debug_token = f.read().strip()
        except OSError as exc:
            log.error("cannot read the debug token", file=args.debug_token_file, err=str(exc))
            return 1
        if len(debug_token) < 16:
            log.error("the debug token is shorter than 16 characters", file=args.debug_token_file)
            return 1
    me = identity()
    connection = Connection(
        kubeconfig=kubeconfig,
        master=args.master,
        in_cluster=in_cluster,
        user_agent=user_agent(me),
    )
    options = Options(
        grace=args.shutdown_grace,
        leader_elect=(
            config.leader_election.leader_elect if args.leader_elect is None else args.leader_elect
        ),
        bind_address=args.bind_address,
        port=args.port,
        max_connections=args.max_connections,
        identity=me,
        debug_token=debug_token,
        debug_auth=mode,
        authentication_kubeconfig=args.authentication_kubeconfig or "",
        authorization_kubeconfig=args.authorization_kubeconfig or "",
    )
    import uvloop

    return uvloop.run(serve(config, connection, options))


class Probes:
    """What ``/livez`` and ``/readyz`` report, through every phase of the process.

    Standing by healthily is ready (kube-scheduler's readyz passes on a standby), so
    a rollout does not wait for a replica that must not schedule. Leading, ready
    means the caches synced; live means the elector renews in time and, once
    started, the scheduling loop and informers run.
    """

    def __init__(self, daemon: SchedulerDaemon) -> None:
        self.daemon = daemon
        self.elector: LeaderElector | None = None
        self.started = False

    def live(self) -> bool:
        elector_ok = self.elector is None or self.elector.healthy
        return elector_ok and (not self.started or self.daemon.healthy)

    def ready(self) -> bool:
        if self.elector is not None and not self.elector.is_leader:
            return self.elector.healthy
        return self.started and self.daemon.ready


async def serve(config: ResolvedConfig, connection: Connection, options: Options) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    daemon = SchedulerDaemon(config, connection)
    probes = Probes(daemon)
    try:
        debug_auth = await _debug_auth(connection, options)
    except KubeConnectionError as exc:
        return _cannot_start(exc)
    # As Go's runtime: the soft file limit up to the hard one (connections, watches).
    open_files = raise_open_file_limit()
    # First, so probes and scrapes answer while standing by and while caches sync.
    health = HealthServer(
        options.bind_address,
        options.port,
        daemon.metrics_registry,
        live=probes.live,
        ready=probes.ready,
        explain=daemon.explain,
        debug_auth=debug_auth,
        limits=ServingLimits(max_connections=options.max_connections),
    )
    try:
        port = await health.start()
    except OSError as exc:
        await _close(debug_auth)
        return _cannot_start(
            OSError(f"cannot serve on {options.bind_address}:{options.port}: {exc.strerror}")
        )
    log.info(
        "serving /metrics, /healthz, /livez, /readyz"
        + (", /debug/troupe/explain" if debug_auth is not None else ""),
        address=options.bind_address,
        port=port,
        debug_auth=debug_auth.mode if debug_auth is not None else "off",
        maxConnections=health.guard.limit,
        openFiles=open_files,
    )
    if isinstance(debug_auth, DelegatedAuth):
        for problem in await debug_auth.probe():
            # Fail closed: every request to /debug/troupe/explain will be refused (503).
            log.error(
                "delegated authentication of /debug/troupe/explain cannot work; "
                "every request to it is refused",
                err=problem,
                hint="the scheduler needs create on tokenreviews and subjectaccessreviews "
                "(ClusterRole system:auth-delegator), from an API server that serves them",
            )
    try:
        if options.leader_elect:
            return await serve_elected(config, connection, options, probes, stop)
        try:
            await daemon.start()
        except START_ERRORS as exc:
            # Close what opened before the failure (connection pool, informers).
            await daemon.stop(grace=0.0)
            return _cannot_start(exc)
        probes.started = True
        return await _schedule_until_stopped(daemon, stop, options.grace)
    finally:
        await health.stop()
        await _close(debug_auth)


async def _debug_auth(connection: Connection, options: Options) -> DebugAuth | None:
    """What guards /debug/troupe/explain. Delegated: reviews go through the scheduler's
    own connection unless a kubeconfig flag names another (``--master`` then does not
    apply to it)."""
    if options.debug_auth == "token":
        return StaticToken(options.debug_token)
    if options.debug_auth != "delegated":
        return None
    c = connection
    own = ReviewServer(c.kubeconfig, c.master, c.in_cluster)

    def server(kubeconfig: str) -> ReviewServer:
        return ReviewServer(kubeconfig) if kubeconfig else own

    return await DelegatedAuth.connect(
        server(options.authentication_kubeconfig),
        server(options.authorization_kubeconfig),
        user_agent=c.user_agent,
    )


async def _close(auth: DebugAuth | None) -> None:
    if isinstance(auth, DelegatedAuth):
        await auth.close()


START_ERRORS = (KubeConnectionError, StartupError, ApiError)
"""What ``SchedulerDaemon.start`` raises when the cluster cannot be used: unreachable,
caches never synced, or a request refused (a 403 on API discovery when the
ClusterRole lacks a rule). Reported on one log line, exit 1, never a traceback."""


def _cannot_start(exc: Exception) -> int:
    if isinstance(exc, ApiError) and exc.status in (401, 403):
        log.error(
            "cannot start",
            err=str(exc),
            hint="the API server refused troupe's credentials or RBAC; "
            "compare the ClusterRole with manifests/rbac.yaml",
        )
    else:
        log.error("cannot start", err=str(exc))
    return 1


async def _schedule_until_stopped(
    daemon: SchedulerDaemon, stop: asyncio.Event, grace: float
) -> int:
    waiter = asyncio.ensure_future(daemon.wait())
    stopper = asyncio.ensure_future(stop.wait())
    await asyncio.wait({waiter, stopper}, return_when=asyncio.FIRST_COMPLETED)
    stopper.cancel()
    if stop.is_set():
        log.info("signal received, shutting down", grace=grace)
    await daemon.stop(grace=grace)
    if waiter.done() and not waiter.cancelled() and waiter.exception() is not None:
        failure = waiter.exception()
        log.error("scheduling loop failed", err=repr(failure), exc_info=failure)
        return 1
    return 0


async def serve_elected(
    config: ResolvedConfig,
    connection: Connection,
    options: Options,
    probes: Probes,
    stop: asyncio.Event,
) -> int:
    """Stand by, lead, and end as the lease and the signals say (see the module doc)."""
    c = connection
    daemon = probes.daemon
    le = config.leader_election
    # Its own connection, as kube-scheduler's separate leader-election client: lease
    # renewals never wait for a connection behind a burst of bindings.
    try:
        api = await connect(
            c.kubeconfig, c.master, c.in_cluster, pool_size=2, user_agent=c.user_agent
        )
    except KubeConnectionError as exc:
        return _cannot_start(exc)
    try:
        try:
            await check_reachable(api)
        except KubeConnectionError as exc:
            return _cannot_start(exc)
        clock = RealClock()
        me = options.identity or identity()
        cc = config.client_connection
        leases = KubeClient(
            api,
            clock,
            qps=cc.qps,
            burst=cc.burst,
            scheduler_name=config.profiles[0].scheduler_name,
            instance=me,
        )
        elector = LeaderElector(
            leases,
            clock,
            namespace=le.resource_namespace,
            name=le.resource_name,
            identity=me,
            lease_duration=le.lease_duration,
            renew_deadline=le.renew_deadline,
            retry_period=le.retry_period,
            metrics=daemon.metrics,
        )
        probes.elector = elector
        # Every write of the scheduler asks the elector first (lease fencing).
        daemon.fence = elector.fence

        async def lead() -> None:
            try:
                await daemon.start()
            except BaseException:
                # Leadership ended while the caches were syncing, or start failed:
                # close what opened.
                await daemon.stop(grace=0.0)
                raise
            probes.started = True
            await daemon.wait()

        async def stopped_leading() -> None:
            if probes.started:
                # Lost: stop popping at once (grace 0); a standby may bind soon.
                await daemon.stop(grace=options.grace if stop.is_set() else 0.0)

        async def stop_on_signal() -> None:
            await stop.wait()
            log.info("signal received, shutting down", grace=options.grace)
            elector.stop()

        signals = asyncio.ensure_future(stop_on_signal())
        try:
            outcome = await elector.run(lead, stopped_leading)
        except START_ERRORS as exc:
            return _cannot_start(exc)
        except Exception as exc:
            log.error("scheduling loop failed", err=repr(exc), exc_info=exc)
            return 1
        finally:
            signals.cancel()
            await asyncio.gather(signals, return_exceptions=True)
        if outcome is Outcome.LOST:
            # As kube-scheduler: exit so the pod restarts and stands by again.
            log.error(
                "leaderelection lost; exiting", lease=f"{le.resource_namespace}/{le.resource_name}"
            )
            return 1
        return 0
    finally:
        await api.close()
