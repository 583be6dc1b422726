"""``ApiServer``: the embedded Kubernetes-compatible API server on loopback.

An aiohttp application with one catch-all route: the path is parsed the way
``RequestInfoFactory`` does (``/api/v1/...``, ``/apis/<g>/<v>/...``, optional
``namespaces/<ns>``, resource, name, subresource) and dispatched to the verb handlers,
the watch streamer, discovery, ``/version``, health and OpenAPI endpoints, and the
pods' ``proxy`` subresource (``endpoints/proxy.py``). Faults are
applied before any handler runs. Users (``troupe sim``), integration tests and
benchmarks start one and talk to it with kubernetes-asyncio or kubectl; in-process code
uses ``ApiServer.store`` directly.
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from aiohttp import web

from troupe.api.clock import Clock
from troupe.sim.apiserver.auth.authenticator import Authenticator, TokenUsers
from troupe.sim.apiserver.endpoints import discovery, handlers, openapi, proxy
from troupe.sim.apiserver.endpoints.request import ResourceRequest, json_response, selectors
from troupe.sim.apiserver.endpoints.reviews import Reviews
from troupe.sim.apiserver.endpoints.watch import TRUE_VALUES, WatchStreams, serve_watch
from troupe.sim.apiserver.harness.faults import Faults
from troupe.sim.apiserver.harness.ledger import WriteLedger
from troupe.sim.apiserver.machinery import errors
from troupe.sim.apiserver.machinery.encoding import dumps
from troupe.sim.apiserver.machinery.errors import ApiError, status_failure
from troupe.sim.apiserver.registry.bootstrap import WORKLOAD_VERSIONS, new_store
from troupe.sim.kubeconfig import write_kubeconfig

log = logging.getLogger(__name__)

_HEALTH: Final = ("healthz", "readyz", "livez")
_NAMESPACE_SUBRESOURCES: Final = ("status", "finalize")


@dataclass(frozen=True, slots=True)
class AuditRecord:
    """One answered request: method, path, HTTP status, and the Status message of a
    refusal (empty on success)."""

    method: str
    path: str
    code: int
    message: str


class ApiServer:
    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        bookmark_interval: float = 60.0,
        history: int = 10000,
        clock: Clock | None = None,
        ssl_context: ssl.SSLContext | None = None,
        token: str | None = None,
        token_users: TokenUsers | None = None,
        workload_versions: Iterable[str] = WORKLOAD_VERSIONS,
    ) -> None:
        """``ssl_context`` serves HTTPS; ``token`` requires ``Authorization: Bearer <token>``
        on every request but the health probes (a static-token authenticator, so clients'
        credential handling can be checked end to end); ``token_users``: the users of a
        ``--token-auth-file`` (``auth/authenticator.py``), whose tokens are accepted too and whom
        TokenReviews answer; ``workload_versions``: which ``scheduling.k8s.io`` versions
        of Workload and PodGroup are served."""
        self.host = host
        self.port = port
        self.bookmark_interval = bookmark_interval
        self.store = new_store(history=history, clock=clock, workload_versions=workload_versions)
        self.streams = WatchStreams()
        self.faults = Faults(self.streams.drop_all, self.store.compact)
        self.url = ""
        self.ssl_context = ssl_context
        self.token = token
        self.authenticator = Authenticator(token, token_users)
        self.reviews = Reviews(self.store, self.authenticator)
        self._audit: list[AuditRecord] | None = None
        self._ledger: WriteLedger | None = None
        self._runner: web.AppRunner | None = None

    async def start(self) -> str:
        """Listen; returns the base URL ``http(s)://127.0.0.1:<port>``."""
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(
            app, access_log=None, handle_signals=False, shutdown_timeout=0.5
        )
        await self._runner.setup()
        site = web.TCPSite(
            self._runner, self.host, self.port, backlog=1024, ssl_context=self.ssl_context
        )
        await site.start()
        address = self._runner.addresses[0]
        self.port = int(address[1])
        scheme = "https" if self.ssl_context is not None else "http"
        self.url = f"{scheme}://{self.host}:{self.port}"
        return self.url

    async def stop(self) -> None:
        self.store.close_watchers()
        await self.store.close()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> ApiServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def write_kubeconfig(self, path: str | Path, *, token: str = "") -> Path:
        """A kubeconfig for this server, with ``token`` as the user's bearer token."""
        if not self.url:
            raise RuntimeError("start the server before writing a kubeconfig")
        return write_kubeconfig(path, self.url, token=token)

    # --- dispatch ----------------------------------------------------------------------

    def start_audit(self) -> list[AuditRecord]:
        """Record every request answered from now on (the list is appended to in place);
        a test reads what the server decided, e.g. why a binding was refused."""
        self._audit = []
        return self._audit

    def record_writes(self, lease_namespace: str, lease_name: str) -> WriteLedger:
        """Record every write accepted from now on, with its User-Agent and that Lease's
        holder, and every accepted binding (``harness/ledger.py``)."""
        self._ledger = WriteLedger(self.store, lease_namespace, lease_name)
        return self._ledger

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        ledger = self._ledger
        holder = ledger.arrived(request.method) if ledger is not None else None
        try:
            if self.authenticator.active:
                self._authenticate(request)
            if self.faults.active:
                await self.faults.apply(request.method, request.path)
            response = await self._route(request)
            if ledger is not None and holder is not None and 200 <= response.status < 300:
                agent = request.headers.get("User-Agent", "")
                ledger.accepted(request.method, request.path, agent, holder)
            if self._audit is not None:
                self._audit.append(AuditRecord(request.method, request.path, response.status, ""))
            return response
        except ApiError as error:
            if self._audit is not None:
                self._audit.append(
                    AuditRecord(request.method, request.path, error.code, str(error))
                )
            return web.Response(
                body=dumps(error.status),
                status=error.code,
                content_type="application/json",
                headers=error.headers,
            )
        except ConnectionError:
            # The client went away mid-request (say, while a fault delayed it): nothing
            # was written and nobody is left to answer.
            return web.Response(status=400)
        except Exception as error:
            log.exception("%s %s failed", request.method, request.path)
            body = status_failure(500, "InternalError", f"Internal error occurred: {error}", {})
            return web.Response(body=dumps(body), status=500, content_type="application/json")

    def _authenticate(self, request: web.Request) -> None:
        if request.path.strip("/") in _HEALTH:
            return
        if self.authenticator.request_user(request.headers.get("Authorization", "")) is None:
            raise ApiError(status_failure(401, "Unauthorized", "Unauthorized"))

    async def _route(self, request: web.Request) -> web.StreamResponse:
        parts = [p for p in request.path.split("/") if p]
        method = request.method
        if not parts:
            return json_response(
                {
                    "paths": [
                        "/api",
                        "/api/v1",
                        "/apis",
                        "/healthz",
                        "/livez",
                        "/openapi/v2",
                        "/openapi/v3",
                        "/readyz",
                        "/version",
                    ]
                }
            )
        head = parts[0]
        if head in _HEALTH:
            return web.Response(text="ok", content_type="text/plain")
        if head == "version":
            return json_response(discovery.version_info(self.store.registry))
        pod_proxy = proxy.proxied(parts)
        if pod_proxy is not None:
            namespace, target = pod_proxy
            marker = f"/pods/{target}/proxy"
            tail = request.path[request.path.index(marker) + len(marker) :]
            return await proxy.proxy_to_pod(request, self.store, namespace, target, tail)
        registry = self.store.registry
        if head == "openapi" and len(parts) > 1 and parts[1] == "v3":
            doc = (
                openapi.index(registry)
                if len(parts) == 2
                else openapi.group_version_document(registry, "/".join(parts[2:]))
            )
            if doc is not None:
                return json_response(doc)
        if head not in ("api", "apis"):
            raise errors.not_found_path()
        accept = request.headers.get("Accept", "")
        if head == "api":
            if len(parts) == 1:
                if discovery.wants_aggregated(accept):
                    return self._aggregated(discovery.aggregated(registry, core=True))
                return json_response(discovery.api_versions(f"{self.host}:{self.port}"))
            if parts[1] != "v1":
                raise errors.not_found_path()
            group, version, rest = "", "v1", parts[2:]
        else:
            if len(parts) == 1:
                if discovery.wants_aggregated(accept):
                    return self._aggregated(discovery.aggregated(registry, core=False))
                return json_response(discovery.api_group_list(registry))
            if len(parts) == 2:
                group_doc = discovery.api_group(registry, parts[1])
                if group_doc is None:
                    raise errors.not_found_path()
                return json_response(group_doc)
            group, version, rest = parts[1], parts[2], parts[3:]
        if not rest:
            resources = discovery.api_resource_list(registry, group, version)
            if resources is None:
                raise errors.not_found_path()
            return json_response(resources)
        req = self._parse_resource(group, version, rest)
        return await self._verb(request, method, req)

    def _aggregated(self, body: dict[str, Any]) -> web.Response:
        response = web.Response(body=dumps(body), status=200)
        response.headers["Content-Type"] = discovery.AGGREGATED_CONTENT_TYPE
        return response

    def _parse_resource(self, group: str, version: str, rest: list[str]) -> ResourceRequest:
        namespace: str | None = None
        if rest[0] == "namespaces" and len(rest) > 2 and rest[2] not in _NAMESPACE_SUBRESOURCES:
            namespace, rest = rest[1], rest[2:]
        if len(rest) > 3:
            raise errors.not_found_path()
        rt = self.store.registry.lookup(group, version, rest[0])
        if rt is None:
            raise errors.not_found_path()
        name = rest[1] if len(rest) > 1 else None
        subresource = rest[2] if len(rest) > 2 else None
        if namespace is not None and not rt.namespaced:
            raise errors.not_found_path()
        if rt.namespaced and name is not None and namespace is None:
            raise errors.not_found_path()
        if subresource is not None and subresource not in rt.subresources:
            raise errors.not_found_path()
        return ResourceRequest(rt, namespace, name, subresource)

    async def _verb(
        self, request: web.Request, method: str, req: ResourceRequest
    ) -> web.StreamResponse:
        review = self.reviews.handlers.get(req.rt.key)
        if review is not None:
            return await review(request, req)
        store = self.store
        if method != "GET" and request.query.get("dryRun"):
            # Refuse rather than silently persisting what the client meant to try.
            raise errors.bad_request("dryRun is not supported by the embedded API server")
        if req.name is None:
            if method == "GET":
                if request.query.get("watch", "") in TRUE_VALUES:
                    labels, fields = selectors(req.rt, request.query)
                    return await serve_watch(
                        request,
                        store,
                        req.rt,
                        req.namespace,
                        labels,
                        fields,
                        bookmark_interval=self.bookmark_interval,
                        streams=self.streams,
                    )
                return handlers.list_objects(
                    store, req, request.query, request.headers.get("Accept", "")
                )
            if method == "POST":
                if req.rt.namespaced and req.namespace is None:
                    raise errors.not_found_path()
                return await handlers.create(store, req, request)
            if method == "DELETE":
                return await handlers.delete_collection(store, req, request)
            raise errors.method_not_allowed()
        if req.subresource in ("binding", "eviction"):
            if method != "POST":
                raise errors.method_not_allowed()
            return await handlers.subresource_post(store, req, request)
        if method == "GET":
            return handlers.get(store, req)
        if method == "PUT":
            return await handlers.update(store, req, request)
        if method == "PATCH":
            return await handlers.patch(store, req, request)
        if method == "DELETE" and req.subresource is None:
            return await handlers.delete(store, req, request)
        raise errors.method_not_allowed()
