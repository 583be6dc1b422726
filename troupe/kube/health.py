"""The scheduler's HTTP endpoints: ``/metrics``, ``/healthz``, ``/livez``, ``/readyz``.

``troupe run`` and ``troupe sim --serve --metrics-port`` start one ``HealthServer``
next to a ``SchedulerDaemon``: ``/metrics`` serves the daemon's registry in the
Prometheus text format, the probes ask the daemon (``live``: the scheduling loop
and the informers are alive; ``ready``: caches synced). kube-scheduler serves the
same paths on its secure port 10259; troupe serves plain HTTP there, and
docs/metrics.md shows how to put TLS in front.
"""

from __future__ import annotations

from collections.abc import Callable

from aiohttp import web
from prometheus_client import CollectorRegistry
from prometheus_client.aiohttp import make_aiohttp_handler

DEFAULT_HOST = "0.0.0.0"
DEFAULT_PORT = 10259
"""kube-scheduler's serving port, so probes and scrape configs carry over."""


class HealthServer:
    def __init__(
        self,
        host: str,
        port: int,
        registry: CollectorRegistry,
        *,
        live: Callable[[], bool],
        ready: Callable[[], bool],
    ) -> None:
        self.host, self.port = host, port
        self._live, self._ready = live, ready
        app = web.Application()
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
