"""The scheduler's HTTP endpoints: ``/metrics``, ``/healthz``, ``/livez``, ``/readyz``.

``troupe run`` and ``troupe sim --serve --metrics-port`` start one ``HealthServer``
next to a ``SchedulerDaemon``: ``/metrics`` serves the daemon's registry in the
Prometheus text format, the probes ask the daemon (``live``: the scheduling loop
and the informers are alive; ``ready``: caches synced). kube-scheduler serves the
same paths on its secure port 10259; troupe serves plain HTTP there, and
docs/metrics.md shows how to put TLS in front.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from aiohttp import web
from prometheus_client import CollectorRegistry
from prometheus_client.aiohttp import make_aiohttp_handler

from troupe.kube.debug_auth import DebugAuth, StaticToken

DEFAULT_HOST = "0.0.0.0"
DEFAULT_PORT = 10259
"""kube-scheduler's serving port, so probes and scrape configs carry over."""

EXPLAIN_PATH = "/debug/troupe/explain"

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
    ) -> None:
        """``explain`` with ``debug_auth``: serve ``/debug/troupe/explain`` to the
        callers it lets through (``debug_auth.py``: a shared token, or delegated to the
        API server's TokenReview and SubjectAccessReview; docs/explain.md);
        ``debug_token`` is short for ``debug_auth=StaticToken(debug_token)``. Without
        either the path is not served at all. ``/metrics`` and the probes are open."""
        self.host, self.port = host, port
        self._live, self._ready = live, ready
        self._explain = explain
        if debug_auth is None and debug_token:
            debug_auth = StaticToken(debug_token)
        self._auth = debug_auth
        app = web.Application()
        if explain is not None and debug_auth is not None:
            app.router.add_get(EXPLAIN_PATH, self._explain_handler)
        app.router.add_get("/metrics", make_aiohttp_handler(registry))
        app.router.add_get("/healthz", self._livez)
        app.router.add_get("/livez", self._livez)
        app.router.add_get("/readyz", self._readyz)
        self._runner = web.AppRunner(app, access_log=None)
        self._site: web.TCPSite | None = None

    async def start(self) -> int:
        """Listen; returns the bound port (useful with port 0)."""
        await self._runner.setup()
        self._site = web.TCPSite(self._runner, self.host, self.port)
        await self._site.start()
        server = self._site._server
        sockets = getattr(server, "sockets", None) or ()
        for sock in sockets:
            self.port = int(sock.getsockname()[1])
            break
        return self.port

    async def stop(self) -> None:
        await self._runner.cleanup()
        self._site = None

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
        header = request.headers.get("Authorization", "")
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
