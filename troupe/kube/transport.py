"""Raw HTTP to the API server, configured by a ``kubernetes_asyncio`` ``ApiClient``.

The generated kubernetes-asyncio methods build and decode OpenAPI model objects,
which is slow and, for ``pods/binding``, wrong (the Status reply fails to decode).
troupe therefore sends pre-serialized JSON bytes and reads raw bytes back, with the
server, TLS settings, proxy and bearer-token hook that ``kubernetes_asyncio``
configured from the kubeconfig. ``KubeClient`` (writes) and ``Informer`` (list +
watch) call ``Transport``; unit tests substitute a scripted fake with the same protocol.

``HttpTransport`` sends requests through ``http1``'s lean keep-alive pool (one per
``ApiClient``, ``http1_pools``) and watches through the client's aiohttp session;
with a proxy configured everything goes through aiohttp (``AiohttpTransport``).

Every request carries a timeout (connect and total): a half-open connection never
hangs a binding or a watch.

``observe_requests(api_client, observer)`` makes every transport built on that
client afterwards report each request (method, host, status code or ``<error>``,
seconds): for a request until its whole reply is read (like client-go's
``rest_client_request_duration_seconds``), for a watch until its headers. The
daemon feeds client-go's ``rest_client_*`` metrics from it.
"""

from __future__ import annotations

import re
import time
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import quote, urlencode, urlsplit
from weakref import WeakKeyDictionary

import aiohttp
from kubernetes_asyncio.client import ApiClient

from troupe.kube.errors import ResponseError, response_error, to_api_error
from troupe.kube.http1 import encode_request
from troupe.kube.http1_pools import pool_for

JSON = "application/json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"

Query = Mapping[str, str]

USER_AGENT = "troupe-scheduler"
"""The User-Agent when ``connect`` is given none; ``troupe run`` sends its lease identity
in it (``troupe-scheduler/<version> (<identity>)``) so the API server's audit log, and
the embedded cluster's write records, tell replicas apart."""

# Characters a request target may carry as they are; anything else is percent-encoded.
_UNSAFE_IN_PATH = re.compile(r"[^A-Za-z0-9\-._~/%:@!$&'()*+,;=]")

RequestObserver = Callable[[str, str, str, float], None]
"""(method, host, status code or ``<error>``, seconds) of one request."""

NO_REPLY = "<error>"
"""The ``code`` of a request that got no reply (client-go's label value)."""

_observers: WeakKeyDictionary[ApiClient, RequestObserver] = WeakKeyDictionary()


def observe_requests(api_client: ApiClient, observer: RequestObserver) -> None:
    """Report every request of the transports later built on ``api_client``."""
    _observers[api_client] = observer


def _ignore(method: str, host: str, code: str, seconds: float) -> None:
    return None


@dataclass(frozen=True, slots=True)
class Timeouts:
    """Seconds allowed to connect and for a whole (non-watch) request."""

    connect: float = 5.0
    total: float = 30.0


# Not frozen: made for every request, and a frozen dataclass's __init__ sets each
# field through object.__setattr__, three times the cost. Treat it as immutable.
@dataclass(slots=True)
class Response:
    status: int
    body: bytes
    retry_after: str | None = None

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    def error(self, what: str = "") -> ResponseError:
        return response_error(self.status, self.body, self.retry_after, what)


class WatchStream(Protocol):
    """An open streaming response: its status, and its body line by line."""

    @property
    def status(self) -> int: ...

    async def body(self) -> bytes:
        """The whole body (for a non-200 reply)."""
        ...

    def lines(self) -> AsyncIterator[bytes]:
        """Non-blank lines, without their line end, until the server ends the
        response."""
        ...


class Transport(Protocol):
    @property
    def base_url(self) -> str: ...

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: Query | None = None,
        body: bytes | None = None,
        content_type: str = JSON,
        timeout: float | None = None,
    ) -> Response:
        """One request. Returns any HTTP reply; raises ``ApiError(0, ...)`` when there
        is no reply (refused, reset, timed out)."""
        ...

    def stream(
        self, path: str, *, query: Query, timeout: float
    ) -> AbstractAsyncContextManager[WatchStream]:
        """A streaming GET (watch). Failures with no reply raise ``ApiError(0, ...)``."""
        ...


class _AiohttpStream:
    def __init__(self, resp: aiohttp.ClientResponse) -> None:
        self._resp = resp

    @property
    def status(self) -> int:
        return self._resp.status

    async def body(self) -> bytes:
        return await self._resp.read()

    async def lines(self) -> AsyncIterator[bytes]:
        # Whatever has arrived, split here: one watch write carries several events,
        # and aiohttp's readline costs a pass of its own through its buffer per line.
        content = self._resp.content
        pieces: list[bytes] = []  # a line not ended yet
        while True:
            data = await content.readany()
            if not data:
                break
            end = data.find(b"\n")
            if end < 0:
                pieces.append(data)
                continue
            if pieces:
                pieces.append(data[:end])
                line = b"".join(pieces)
                pieces = []
                if line and not line.isspace():
                    yield line
                data = data[end + 1 :]
            *complete, rest = data.split(b"\n")
            for line in complete:
                if line and not line.isspace():
                    yield line
            if rest:
                pieces.append(rest)
        line = b"".join(pieces)
        if line and not line.isspace():
            yield line


class AiohttpTransport:
    """``Transport`` over a configured ``kubernetes_asyncio`` ``ApiClient``'s aiohttp
    session: watches, and requests through a proxy."""

    def __init__(self, api_client: ApiClient, timeouts: Timeouts | None = None) -> None:
        self._api = api_client
        self.timeouts = timeouts or Timeouts()
        cfg = api_client.configuration
        self._base_url: str = str(cfg.host).rstrip("/")
        self._host = urlsplit(self._base_url).netloc
        self._observe: RequestObserver = _observers.get(api_client, _ignore)
        rest = api_client.rest_client
        self._session: aiohttp.ClientSession = rest.pool_manager
        self._extra: dict[str, Any] = {}
        if rest.proxy:
            self._extra["proxy"] = rest.proxy
        if rest.proxy_headers:
            self._extra["proxy_headers"] = rest.proxy_headers
        if rest.server_hostname:
            self._extra["server_hostname"] = rest.server_hostname
        self._user_agent = api_client.user_agent or USER_AGENT
        self._timeout = aiohttp.ClientTimeout(
            total=self.timeouts.total, connect=self.timeouts.connect
        )

    @property
    def base_url(self) -> str:
        return self._base_url

    async def _headers(self, content_type: str | None) -> dict[str, str]:
        headers = {"Accept": JSON, "User-Agent": self._user_agent}
        if content_type is not None:
            headers["Content-Type"] = content_type
        # Runs the configuration's token-refresh hook (in-cluster tokens rotate).
        await self._api.update_params_for_auth(headers, [], ["BearerToken"])
        return headers

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: Query | None = None,
        body: bytes | None = None,
        content_type: str = JSON,
        timeout: float | None = None,
    ) -> Response:
        headers = await self._headers(content_type if body is not None else None)
        client_timeout = (
            self._timeout
            if timeout is None
            else aiohttp.ClientTimeout(total=timeout, connect=min(timeout, self.timeouts.connect))
        )
        start = time.perf_counter()
        try:
            async with self._session.request(
                method,
                self._base_url + path,
                params=query,
                data=body,
                headers=headers,
                timeout=client_timeout,
                **self._extra,
            ) as resp:
                self._observe(method, self._host, str(resp.status), time.perf_counter() - start)
                data = await resp.read()
                return Response(resp.status, data, resp.headers.get("Retry-After"))
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            self._observe(method, self._host, NO_REPLY, time.perf_counter() - start)
            raise to_api_error(exc, f"{method} {path}") from exc

    @asynccontextmanager
    async def stream(
        self, path: str, *, query: Query, timeout: float
    ) -> AsyncIterator[WatchStream]:
        headers = await self._headers(None)
        client_timeout = aiohttp.ClientTimeout(total=timeout, connect=self.timeouts.connect)
        start = time.perf_counter()
        opened = False
        try:
            async with self._session.get(
                self._base_url + path,
                params=query,
                headers=headers,
                timeout=client_timeout,
                **self._extra,
            ) as resp:
                opened = True
                self._observe("GET", self._host, str(resp.status), time.perf_counter() - start)
                yield _AiohttpStream(resp)
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            if not opened:
                self._observe("GET", self._host, NO_REPLY, time.perf_counter() - start)
            raise to_api_error(exc, f"GET {path}") from exc


class HttpTransport:
    """``Transport`` over a configured ``kubernetes_asyncio`` ``ApiClient``: requests
    through the client's ``Http1Pool``, watches through its aiohttp session."""

    def __init__(self, api_client: ApiClient, timeouts: Timeouts | None = None) -> None:
        self._api = api_client
        self.timeouts = timeouts or Timeouts()
        self._aiohttp = AiohttpTransport(api_client, self.timeouts)
        self._pool = pool_for(api_client)
        self._base_url = self._aiohttp.base_url
        parts = urlsplit(self._base_url)
        self._host = parts.netloc
        self._prefix = parts.path
        self._observe: RequestObserver = _observers.get(api_client, _ignore)
        agent = api_client.user_agent or USER_AGENT
        self._fixed = f"Host: {parts.netloc}\r\nUser-Agent: {agent}\r\nAccept: {JSON}\r\n".encode()
        self._auth: dict[str, str] = {}
        self._head = self._fixed

    @property
    def base_url(self) -> str:
        return self._base_url

    async def _refresh_auth(self) -> None:
        # The configuration's token-refresh hook runs on every request (in-cluster
        # tokens rotate). The header lines are only re-rendered when the token changed.
        if not self._auth and "BearerToken" not in self._api.configuration.api_key:
            # No bearer token (client certificates, or no credentials): the client
            # would add no header and call no hook, so there is nothing to ask it
            # (two coroutines on every request).
            return
        auth: dict[str, str] = {}
        await self._api.update_params_for_auth(auth, [], ["BearerToken"])
        if auth != self._auth:
            lines = "".join(f"{name}: {value}\r\n" for name, value in auth.items())
            breaks = len(auth)  # one CRLF per header line, none inside a value
            if not lines.isascii() or lines.count("\n") != breaks or lines.count("\r") != breaks:
                raise ResponseError(
                    0,
                    "the kubeconfig credentials are not a valid header: line break or "
                    "non-ASCII character in the token",
                )
            self._head = self._fixed + lines.encode()
            self._auth = auth

    def _target(self, path: str, query: Query | None) -> str:
        target = self._prefix + path
        if _UNSAFE_IN_PATH.search(target):
            target = quote(target, safe="/%:@!$&'()*+,;=~")
        return f"{target}?{urlencode(query)}" if query else target

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: Query | None = None,
        body: bytes | None = None,
        content_type: str = JSON,
        timeout: float | None = None,
    ) -> Response:
        pool = self._pool
        if pool is None:
            return await self._aiohttp.request(
                method, path, query=query, body=body, content_type=content_type, timeout=timeout
            )
        await self._refresh_auth()
        data = encode_request(method, self._target(path, query), self._head, body, content_type)
        total = self.timeouts.total if timeout is None else timeout
        start = time.perf_counter()
        try:
            reply = await pool.request(
                data,
                connect_timeout=min(total, self.timeouts.connect),
                timeout=total,
                head_only=method == "HEAD",
            )
        except (OSError, TimeoutError) as exc:
            self._observe(method, self._host, NO_REPLY, time.perf_counter() - start)
            raise to_api_error(exc, f"{method} {path}") from exc
        self._observe(method, self._host, str(reply.status), time.perf_counter() - start)
        return Response(reply.status, reply.body, reply.retry_after)

    def stream(
        self, path: str, *, query: Query, timeout: float
    ) -> AbstractAsyncContextManager[WatchStream]:
        return self._aiohttp.stream(path, query=query, timeout=timeout)
