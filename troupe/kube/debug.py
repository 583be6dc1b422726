"""A client of the scheduler's debug endpoint (``troupe explain``): find the scheduler
that serves, and ask it for its last diagnosis.

Two ways to reach ``/debug/troupe/explain`` (docs/explain.md):

* **Through the API server** (no flag): the leader Lease names the scheduler that
  schedules (``holderIdentity`` is ``<pod name>_<uuid>``, as ``troupe run`` and
  kube-scheduler write it), its pod is read for the port named ``metrics`` (else
  10259), and the request goes through the pod's ``proxy`` subresource
  (``/api/v1/namespaces/NS/pods/NAME:PORT/proxy/debug/troupe/explain``) with the
  kubeconfig's own connection: its server, TLS, client certificate or bearer token.
  The API server consumes the caller's ``Authorization`` header (upstream's
  authentication filter removes it), so the bearer token the kubeconfig holds is sent
  a second time in ``X-Troupe-Authorization`` for the scheduler's own delegated check
  (TokenReview, then SubjectAccessReview; ``troupe.kube.debug_auth``).
* **Directly** (``--server URL``): ``Authorization: Bearer <token>``.

Either way a failure raises ``DebugEndpointError`` with one line saying what failed
(``status`` 401/403 when the scheduler refused, 0 when it could not be asked).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Final

import aiohttp
from kubernetes_asyncio.client import ApiClient

from troupe.api.client import ApiError
from troupe.kube.connection import connect
from troupe.kube.errors import KubeConnectionError
from troupe.kube.health import DEFAULT_PORT, EXPLAIN_PATH, FORWARDED_AUTHORIZATION
from troupe.kube.transport import HttpTransport, Timeouts

METRICS_PORT_NAME: Final = "metrics"
_TIMEOUT: Final = aiohttp.ClientTimeout(total=15, connect=5)
NO_BEARER: Final = (
    "the kubeconfig sends no bearer token for the scheduler to review (a client "
    'certificate, say): see docs/explain.md, "Client certificates"'
)


class DebugEndpointError(RuntimeError):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True, slots=True)
class SchedulerPod:
    """The pod of the scheduler that holds the Lease, and its debug port."""

    namespace: str
    name: str
    port: int
    lease: str  # "namespace/name" of the Lease that named it

    @property
    def proxy_path(self) -> str:
        return f"/api/v1/namespaces/{self.namespace}/pods/{self.name}:{self.port}/proxy"


def _query(kind: str, namespace: str, name: str, sub: str) -> dict[str, str]:
    query = {"kind": kind, "namespace": namespace, "name": name}
    if sub:
        query["sub"] = sub
    return query


def _answer(status: int, body: str, where: str) -> dict[str, Any] | None:
    if status == 404 and body.startswith("{") and '"found"' in body:
        return None
    if status != 200:
        raise DebugEndpointError(status, f"{where}: {status} {body.strip()[:300]}")
    found: dict[str, Any] = json.loads(body)
    return found


async def fetch_explanation(
    server: str, token: str, kind: str, namespace: str, name: str, sub: str = ""
) -> dict[str, Any] | None:
    """The scheduler's last diagnosis of a pod or group, asked at ``server`` directly,
    or None when it has none (the pod is bound, unknown, or not attempted yet). Raises
    ``DebugEndpointError`` when the scheduler refuses (401/403) or cannot be reached."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    url = server.rstrip("/") + EXPLAIN_PATH
    try:
        async with (
            aiohttp.ClientSession(timeout=_TIMEOUT) as session,
            session.get(url, params=_query(kind, namespace, name, sub), headers=headers) as resp,
        ):
            return _answer(resp.status, await resp.text(), url)
    except aiohttp.ClientError as exc:
        raise DebugEndpointError(0, f"cannot reach the scheduler at {url}: {exc}") from exc


async def _get_json(api: ApiClient, path: str, what: str) -> dict[str, Any] | None:
    """GET ``path`` through the API server: the object, or None on 404."""
    transport = HttpTransport(api, Timeouts(connect=5.0, total=15.0))
    try:
        resp = await transport.request("GET", path)
    except ApiError as exc:  # no reply at all
        raise DebugEndpointError(0, f"cannot read {what}: {exc}") from exc
    if resp.status == 404:
        return None
    if not resp.ok:
        raise DebugEndpointError(0, f"cannot read {what}: {resp.error().message}")
    found: dict[str, Any] = json.loads(resp.body)
    return found


def holder_pod(identity: str) -> str:
    """The pod name in a Lease's ``holderIdentity`` (``<pod>_<uuid>``, or the pod alone)."""
    return identity.rsplit("_", 1)[0] if "_" in identity else identity


def debug_port(pod: dict[str, Any]) -> int:
    """The container port named ``metrics``, else kube-scheduler's 10259."""
    for container in (pod.get("spec") or {}).get("containers") or []:
        for port in container.get("ports") or []:
            if port.get("name") == METRICS_PORT_NAME and port.get("containerPort"):
                return int(port["containerPort"])
    return DEFAULT_PORT


async def locate_scheduler(api: ApiClient, leases: list[tuple[str, str]]) -> SchedulerPod:
    """The pod of the scheduler holding the first of ``leases`` (namespace, name) that
    exists. Raises ``DebugEndpointError`` saying why none can be asked."""
    for namespace, lease_name in leases:
        where = f"{namespace}/{lease_name}"
        lease = await _get_json(
            api,
            f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{lease_name}",
            f"the Lease {where}",
        )
        if lease is None:
            continue
        identity = str((lease.get("spec") or {}).get("holderIdentity") or "")
        if not identity:
            raise DebugEndpointError(0, f"the Lease {where} has no holder: no scheduler leads")
        name = holder_pod(identity)
        pod = await _get_json(
            api, f"/api/v1/namespaces/{namespace}/pods/{name}", f"the pod {namespace}/{name}"
        )
        if pod is None:
            raise DebugEndpointError(
                0, f"the Lease {where} is held by {identity!r}; no pod {namespace}/{name} exists"
            )
        return SchedulerPod(namespace, name, debug_port(pod), where)
    named = " or ".join(f"{ns}/{n}" for ns, n in leases)
    raise DebugEndpointError(0, f"no leader Lease {named}: is troupe running in this cluster?")


async def bearer_of(api: ApiClient) -> str:
    """The ``Authorization`` value the kubeconfig's connection sends ("" for a client
    certificate or no credentials); refreshed as the client refreshes it."""
    headers: dict[str, str] = {}
    await api.update_params_for_auth(headers, [], ["BearerToken"])
    for key, value in headers.items():
        if key.lower() == "authorization":
            return str(value)
    return ""


async def fetch_explanation_via(
    api: ApiClient,
    pod: SchedulerPod,
    kind: str,
    namespace: str,
    name: str,
    sub: str = "",
    *,
    token: str = "",
) -> dict[str, Any] | None:
    """As ``fetch_explanation``, through the API server's proxy to the scheduler's pod,
    with the kubeconfig's credentials (see the module doc); ``token``: the bearer token
    for the scheduler instead of the kubeconfig's."""
    authorization = await bearer_of(api)
    forwarded = f"Bearer {token}" if token else authorization
    headers = {"Accept": "application/json"}
    if authorization:
        headers["Authorization"] = authorization
    if forwarded:
        headers[FORWARDED_AUTHORIZATION] = forwarded
    base = str(api.configuration.host).rstrip("/")
    url = base + pod.proxy_path + EXPLAIN_PATH
    rest = api.rest_client
    extra: dict[str, Any] = {}
    if rest.proxy:
        extra["proxy"] = rest.proxy
    if rest.server_hostname:
        extra["server_hostname"] = rest.server_hostname
    where = f"the scheduler pod {pod.namespace}/{pod.name} (through the API server)"
    try:
        async with rest.pool_manager.get(
            url,
            params=_query(kind, namespace, name, sub),
            headers=headers,
            timeout=_TIMEOUT,
            **extra,
        ) as resp:
            body = await resp.text()
            if resp.status == 503:
                raise DebugEndpointError(0, f"cannot reach {where}: {_message(body)}")
            refused = _api_server_status(body)
            if resp.status in (401, 403) and refused:
                # The API server's own refusal (a Status): the scheduler was not reached.
                raise DebugEndpointError(
                    0, f"the API server refused the proxy to {where}: {resp.status} {refused}"
                )
            if resp.status == 401 and not forwarded:
                raise DebugEndpointError(401, f"{where}: 401 {NO_BEARER}")
            return _answer(resp.status, body, where)
    except aiohttp.ClientError as exc:
        raise DebugEndpointError(0, f"cannot reach {where}: {exc}") from exc


def _api_server_status(body: str) -> str:
    """The message of a Kubernetes ``Status`` in ``body``, or "" when it is not one."""
    try:
        doc = json.loads(body)
    except ValueError:
        return ""
    if isinstance(doc, dict) and doc.get("kind") == "Status":
        return str(doc.get("message") or doc.get("reason") or "")
    return ""


def _message(body: str) -> str:
    try:
        return str(json.loads(body).get("message") or body.strip())
    except (ValueError, AttributeError):
        return body.strip()[:300]


@dataclass(frozen=True, slots=True)
class Asked:
    """What the scheduler answered, and which scheduler."""

    record: dict[str, Any] | None  # None: no failed attempt recorded
    where: str  # the scheduler asked, for the report


async def ask_scheduler(
    kubeconfig: str | None,
    master: str | None,
    in_cluster: bool,
    context: str | None,
    *,
    leases: list[tuple[str, str]],
    kind: str,
    namespace: str,
    name: str,
    sub: str = "",
    token: str = "",
) -> Asked:
    """Find the scheduler holding one of ``leases`` in the cluster the kubeconfig
    names and ask it through the API server (see the module doc). Raises
    ``DebugEndpointError``."""
    try:
        api = await connect(kubeconfig, master, in_cluster, context=context, pool_size=2)
    except KubeConnectionError as exc:
        raise DebugEndpointError(0, str(exc)) from exc
    try:
        pod = await locate_scheduler(api, leases)
        record = await fetch_explanation_via(api, pod, kind, namespace, name, sub, token=token)
        return Asked(record, f"pod {pod.namespace}/{pod.name}, holder of the Lease {pod.lease}")
    finally:
        await api.close()


async def kubeconfig_bearer(
    kubeconfig: str | None, master: str | None, in_cluster: bool, context: str | None
) -> str:
    """The bearer token the kubeconfig's connection sends ("" when it sends none)."""
    try:
        api = await connect(kubeconfig, master, in_cluster, context=context, pool_size=1)
    except KubeConnectionError as exc:
        raise DebugEndpointError(0, str(exc)) from exc
    try:
        scheme, _, token = (await bearer_of(api)).partition(" ")
        return token.strip() if scheme.lower() == "bearer" else ""
    finally:
        await api.close()
