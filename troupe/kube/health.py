"""The scheduler's HTTP endpoints: ``/metrics``, ``/healthz``, ``/livez``, ``/readyz``.

``troupe run`` and ``troupe sim --serve --metrics-port`` start one ``HealthServer``
next to a ``SchedulerDaemon``: ``/metrics`` serves the daemon's registry in the
Prometheus text format (or OpenMetrics), the probes ask the daemon (``live``: the
scheduling loop and the informers are alive; ``ready``: caches synced).
kube-scheduler serves the same paths on its secure port 10259; troupe serves plain
HTTP there, and docs/metrics.md shows how to put TLS in front.

Whoever reaches the port must not be able to starve it (docs/operations.md, "The
metrics port"): a ``ConnectionGuard`` (``http_guard.py``) closes connections that do
not send a request head in time and keeps the connections below a limit under the
file limit, a new connection at the limit taking the place of a stalled one so the
probes are always answered; ``/metrics`` is rendered at most once a second
(``metrics_cache.py``); malformed requests are counted and logged once a minute
without tracebacks (``serving_log.py``). The ``ServingLimits`` say how much.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from typing import Any

from aiohttp import web
from prometheus_client import CollectorRegistry

from troupe.kube.debug_auth import DebugAuth, StaticToken
from troupe.kube.http_guard import ConnectionGuard, ServingLimits, connection_limit
from troupe.kube.metrics_cache import CachedMetrics
from troupe.kube.serving_log import EVICTED, HEADER_TIMEOUTS, AiohttpLog, ServingReport

DEFAULT_HOST = "0.0.0.0"
"""All addresses: the kubelet probes the pod's IP. The manifests' NetworkPolicy says
who else may connect (docs/operations.md, "The metrics port")."""
DEFAULT_PORT = 10259
"""kube-scheduler's serving port, so probes and scrape configs carry over."""
SHUTDOWN_TIMEOUT = 2.0
"""Seconds a request in progress gets to finish when the server stops."""

EXPLAIN_PATH = "/debug/troupe/explain"
FORWARDED_AUTHORIZATION = "X-Troupe-Authorization"
"""The caller's ``Authorization`` again, for requests that reach the scheduler through
the API server's pod proxy: the API server consumes the header itself (upstream's
authentication filter removes it before proxying), so ``troupe explain`` sends the
kubeconfig's bearer token a second time here. It is checked exactly as the
``Authorization`` header is; ``Authorization`` wins when both are present."""

Explain = Callable[[str, str, str, str], "dict[str, Any] | None"]
"""(kind "pod" or "podgroup", namespace, name, sub) -> the last diagnosis, or None."""


class HealthServer:
    def __init__(
        self,
        host: str,
        port: int,
        registry: CollectorRegistry,
        *,
        live: Callable[[], bool],
        ready: Callable[[], bool],
        explain: Explain | None = None,
        debug_token: str | None = None,
        debug_auth: DebugAuth | None = None,
        limits: ServingLimits | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``explain`` with ``debug_auth``: serve ``/debug/troupe/explain`` to the
        callers it lets through (``debug_auth.py``: a shared token, or delegated to the
        API server's TokenReview and SubjectAccessReview; docs/explain.md), their
        bearer token in ``Authorization`` or, through the API server's pod proxy, in
        ``X-Troupe-Authorization``;
        ``debug_token`` is short for ``debug_auth=StaticToken(debug_token)``. Without
        either the path is not served at all. ``/metrics`` and the probes are open.
        ``limits``: timeouts, the connection limit (at most a quarter of the file
        limit), the age of a cached ``/metrics`` and how often refusals are logged;
        ``clock`` times the last two."""
        self.host, self.port = host, port
        self._live, self._ready = live, ready
        self._explain = explain
        if debug_auth is None and debug_token:
            debug_auth = StaticToken(debug_token)
        self._auth = debug_auth
        self.limits = limits = limits if limits is not None else ServingLimits()
        self.report = ServingReport(limits.report_interval, clock)
        self.guard = ConnectionGuard(
            limit=connection_limit(limits.max_connections),
            header_timeout=limits.header_timeout,
            on_close=self._closed,
        )
        self.metrics = CachedMetrics(registry, max_age=limits.metrics_max_age, clock=clock)
        app = web.Application(middlewares=[self.guard.middleware])
        if explain is not None and debug_auth is not None:
            app.router.add_get(EXPLAIN_PATH, self._explain_handler)
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/healthz", self._livez)
        app.router.add_get("/livez", self._livez)
        app.router.add_get("/readyz", self._readyz)
        self._runner = web.AppRunner(
            app,
            access_log=None,
            logger=AiohttpLog(self.report),
            keepalive_timeout=limits.idle_timeout,
            shutdown_timeout=SHUTDOWN_TIMEOUT,
        )
        self._server: asyncio.Server | None = None

    async def start(self) -> int:
        """Listen; returns the bound port (useful with port 0)."""
        await self._runner.setup()
        server = self._runner.server
        assert server is not None
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            self.guard.factory(server), self.host, self.port, reuse_address=True
        )
        for sock in self._server.sockets:
            self.port = int(sock.getsockname()[1])
            break
        return self.port

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        await self._runner.cleanup()
        self.guard.abort_all()
        self.report.flush()

    def _closed(self, why: str, peer: str) -> None:
        kind = HEADER_TIMEOUTS if why == "header timeout" else EVICTED
        self.report.note(kind, why, peer)

    async def _metrics(self, request: web.Request) -> web.Response:
        accept = ",".join(request.headers.getall("Accept", []))
        encoding = ",".join(request.headers.getall("Accept-Encoding", []))
        exposition = self.metrics.get(accept, encoding)
        headers = {"Content-Type": exposition.content_type}
        if exposition.gzipped:
            headers["Content-Encoding"] = "gzip"
        return web.Response(body=exposition.body, headers=headers)

    @staticmethod
    def _probe(ok: bool, what: str) -> web.Response:
        # The body mirrors kube-apiserver-style probes: "ok", or the failing check.
        if ok:
            return web.Response(text="ok")
        return web.Response(status=500, text=f"[-]{what} failed: not ok\n")

    async def _livez(self, request: web.Request) -> web.Response:
        return self._probe(self._live(), "scheduling loop and informers")

    async def _readyz(self, request: web.Request) -> web.Response:
        return self._probe(self._ready(), "informer caches synced")

    async def _explain_handler(self, request: web.Request) -> web.Response:
        assert self._auth is not None
        header = request.headers.get("Authorization", "") or request.headers.get(
            FORWARDED_AUTHORIZATION, ""
        )
        refused = await self._auth.check(header, "get", EXPLAIN_PATH)
        if refused is not None:
            return web.Response(status=refused.status, text=refused.message + "\n")
        assert self._explain is not None
        q = request.query
        kind = q.get("kind", "")
        if kind not in ("pod", "podgroup") or not q.get("namespace") or not q.get("name"):
            return web.Response(
                status=400, text="kind=pod|podgroup, namespace and name are required\n"
            )
        found = self._explain(kind, q["namespace"], q["name"], q.get("sub", ""))
        if found is None:
            return web.json_response(
                {"kind": kind, "found": False, "reason": "no failed attempt is recorded"},
                status=404,
            )
        return web.Response(
            text=json.dumps({**found, "found": True}, default=str),
            content_type="application/json",
        )
