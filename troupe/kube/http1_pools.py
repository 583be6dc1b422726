"""One ``Http1Pool`` per ``ApiClient``, configured like the client's own aiohttp pool.

``HttpTransport`` asks ``pool_for(api_client)`` for the pool its requests go
through: every transport built on one client (``KubeClient``, ``SharedInformers``,
``check_reachable``) shares it, as they share the client's aiohttp session. The pool
gets the client's server, ``connection_pool_maxsize``, TLS settings (CA, client
certificate, ``verify_ssl``, ``tls_server_name``) and is closed by the client's
``close()``. With a proxy configured there is no pool: aiohttp's proxy support is
used instead.
"""

from __future__ import annotations

import ssl
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import urlsplit
from weakref import WeakKeyDictionary

from kubernetes_asyncio.client import ApiClient

from troupe.kube.http1 import Http1Pool

_pools: WeakKeyDictionary[ApiClient, Http1Pool] = WeakKeyDictionary()


def ssl_context(cfg: Any) -> ssl.SSLContext:
    """The TLS context of a ``kubernetes_asyncio`` ``Configuration``, built as
    ``kubernetes_asyncio.client.rest.RESTClientObject`` builds its connector's."""
    ctx = ssl.create_default_context(cafile=cfg.ssl_ca_cert)
    if cfg.cert_file:
        ctx.load_cert_chain(cfg.cert_file, keyfile=cfg.key_file)
    if not cfg.verify_ssl:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    if getattr(cfg, "disable_strict_ssl_verification", False):
        ctx.verify_flags &= ~ssl.VERIFY_X509_STRICT
    return ctx


def pool_for(api_client: ApiClient) -> Http1Pool | None:
    """The client's pool; ``None`` when requests must go through a proxy (or the
    server URL is not plain http/https)."""
    pool = _pools.get(api_client)
    if pool is not None:
        return pool
    rest = api_client.rest_client
    if rest.proxy:
        return None
    cfg = api_client.configuration
    parts = urlsplit(str(cfg.host))
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    tls = parts.scheme == "https"
    pool = Http1Pool(
        parts.hostname,
        parts.port or (443 if tls else 80),
        ssl_context=ssl_context(cfg) if tls else None,
        server_hostname=rest.server_hostname or None,
        limit=int(cfg.connection_pool_maxsize or 64),
    )
    _pools[api_client] = pool
    _close_with(rest, pool)
    return pool


def _close_with(rest: Any, pool: Http1Pool) -> None:
    # ApiClient.close() closes its rest client; the pool goes with it, so callers
    # keep one thing to close.
    close_session: Callable[[], Awaitable[None]] = rest.close

    async def close() -> None:
        await pool.close()
        await close_session()

    rest.close = close
