"""The ``pods/proxy`` subresource: ``/api/v1/namespaces/NS/pods/[SCHEME:]NAME[:PORT]/proxy/PATH``.

As kube-apiserver's pod proxy (``pkg/registry/core/pod/rest/subresources.go``
``ProxyREST`` and ``ResourceLocation``): the request is forwarded to the pod's
``status.podIP`` at ``PORT`` (80 when none is given; scheme ``http`` unless ``https:``
is named) with its method, query, body and headers, and the pod's answer comes back
as it is. As upstream's authentication filter, the caller's ``Authorization`` header
is not forwarded (it was consumed by the API server), nor are impersonation headers;
the embedded server authorizes nothing (``authn.py``), so any authenticated caller may
use it. Refusals use upstream's Status: ``pods "x" not found`` (404); a pod with no IP
yet, or one that does not answer, ``error trying to reach service: ...`` (503).

Only ``troupe sim --serve`` has pods with addresses a proxy can reach: its scheduler
is published as a pod on loopback (``troupe.sim.scheduler_pod``), which is how
``troupe explain`` finds the scheduler's debug endpoint as it would in a cluster.
"""

from __future__ import annotations

from typing import Final

import aiohttp
from aiohttp import web

from troupe.sim.apiserver.machinery import errors
from troupe.sim.apiserver.machinery.errors import ApiError, status_failure
from troupe.sim.apiserver.storage.store import Store

# Not forwarded: consumed by the API server, or hop-by-hop (RFC 9110 7.6.1).
_DROPPED: Final = frozenset(
    {
        "authorization",
        "host",
        "connection",
        "keep-alive",
        "proxy-authorization",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "content-length",
    }
)
_TIMEOUT: Final = aiohttp.ClientTimeout(total=30, connect=5)


def proxied(parts: list[str]) -> tuple[str, str] | None:
    """(namespace, pod segment) when ``parts`` (the request path split at ``/``) name a
    pod's proxy subresource, else None."""
    if len(parts) < 7 or parts[:3] != ["api", "v1", "namespaces"]:
        return None
    return (parts[3], parts[5]) if parts[4] == "pods" and parts[6] == "proxy" else None


def _location(target: str) -> tuple[str, str, int]:
    """``[scheme:]name[:port]`` -> (scheme, name, port)."""
    pieces = target.split(":")
    scheme = "http"
    if len(pieces) == 3:
        scheme, name, port = pieces
    elif len(pieces) == 2:
        name, port = pieces
    else:
        name, port = pieces[0], ""
    if scheme not in ("http", "https") or (port and not port.isdigit()):
        raise errors.bad_request(f"invalid pod proxy target {target!r}")
    return scheme, name, int(port) if port else 80


def _unreachable(message: str) -> ApiError:
    return ApiError(
        status_failure(503, "ServiceUnavailable", f"error trying to reach service: {message}")
    )


async def proxy_to_pod(
    request: web.Request, store: Store, namespace: str, target: str, tail: str
) -> web.Response:
    """Forward ``request`` to the pod ``target`` names, at ``tail`` (the path after
    ``/proxy``, with its leading slash)."""
    scheme, name, port = _location(target)
    pod = store.find(store.resolve("pods"), namespace, name)
    if pod is None:
        raise ApiError(status_failure(404, "NotFound", f'pods "{name}" not found'))
    ip = (pod.get("status") or {}).get("podIP")
    if not ip:
        raise _unreachable(f'pod "{name}" has no IP address yet')
    headers = {k: v for k, v in request.headers.items() if k.lower() not in _DROPPED}
    headers = {k: v for k, v in headers.items() if not k.lower().startswith("impersonate-")}
    url = f"{scheme}://{ip}:{port}{tail or '/'}"
    body = await request.read()
    try:
        async with (
            aiohttp.ClientSession(timeout=_TIMEOUT) as session,
            session.request(
                request.method,
                url,
                params=request.query,
                data=body or None,
                headers=headers,
                ssl=False,  # kube-apiserver does not verify a pod's certificate either
            ) as resp,
        ):
            data = await resp.read()
            out = web.Response(status=resp.status, body=data)
            if "Content-Type" in resp.headers:
                out.headers["Content-Type"] = resp.headers["Content-Type"]
            return out
    except (aiohttp.ClientError, OSError, TimeoutError) as exc:
        raise _unreachable(f"{type(exc).__name__}: {exc}") from exc
