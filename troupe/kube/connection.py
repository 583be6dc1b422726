"""Build the ``ApiClient`` troupe talks through, and check the server answers.

``connect`` is called once by the CLI (``troupe run``) and by tests and benchmarks
against the embedded cluster. It resolves credentials the way kube-scheduler does:
``--master`` overrides the server URL of whatever else is loaded; ``in_cluster``
(chosen by ``troupe run`` when no kubeconfig is given and ``KUBERNETES_SERVICE_HOST`` is
set, as inside a pod) uses the pod's service account (token rotated by
``kubernetes_asyncio``'s refresh hook); otherwise the explicit kubeconfig path,
then ``$KUBECONFIG`` (colon-separated list), then ``~/.kube/config``.
``connection_pool_maxsize`` is sized for the binding concurrency plus the
long-lived watches; it bounds both the HTTP/1.1 pool requests go through
(``http1_pools``) and aiohttp's, which carries the watches.
``check_reachable`` turns a wrong URL or dead server into one error naming the URL,
instead of a traceback on the first list.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from urllib.parse import urlsplit
from urllib.request import getproxies, proxy_bypass

import aiohttp
import yaml
from kubernetes_asyncio import config as kube_config
from kubernetes_asyncio.client import ApiClient, Configuration
from kubernetes_asyncio.config.config_exception import ConfigException

from troupe.api.client import ApiError
from troupe.kube.errors import KubeConnectionError
from troupe.kube.transport import USER_AGENT, HttpTransport, Timeouts

SERVICE_ACCOUNT_TOKEN = "/var/run/secrets/kubernetes.io/serviceaccount/token"
SERVICE_ACCOUNT_NAMESPACE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"
# Connections beyond the binding concurrency: three watches, lists, events, status patches.
EXTRA_CONNECTIONS = 16


def kubeconfig_paths(explicit: str | None) -> list[str]:
    """The kubeconfig files to read, in precedence order (clientcmd's rules)."""
    if explicit:
        return [os.path.expanduser(explicit)]
    env = os.environ.get("KUBECONFIG", "")
    if env:
        return [os.path.expanduser(p) for p in env.split(os.pathsep) if p]
    return [str(Path.home() / ".kube" / "config")]


def default_namespace(kubeconfig: str | None, context: str | None, in_cluster: bool) -> str:
    """The namespace a command uses when none is named, as kubectl picks it: the
    context's ``namespace`` (``context``, else the ``current-context`` of the first
    kubeconfig file that sets one), the service account's namespace in a pod, else
    ``default``."""
    if in_cluster:
        try:
            return Path(SERVICE_ACCOUNT_NAMESPACE).read_text().strip() or "default"
        except OSError:
            return "default"
    docs = []
    for path in kubeconfig_paths(kubeconfig):
        try:
            loaded = yaml.safe_load(Path(path).read_text())
        except (OSError, yaml.YAMLError):
            continue
        if isinstance(loaded, dict):
            docs.append(loaded)
    name = context or next((d["current-context"] for d in docs if d.get("current-context")), "")
    for doc in docs:
        for entry in doc.get("contexts") or []:
            if isinstance(entry, dict) and entry.get("name") == name:
                return str((entry.get("context") or {}).get("namespace") or "default")
    return "default"


async def connect(
    kubeconfig: str | None,
    master: str | None,
    in_cluster: bool,
    *,
    context: str | None = None,
    pool_size: int = 64,
    user_agent: str = USER_AGENT,
) -> ApiClient:
    """An ``ApiClient`` for the cluster, whose requests carry ``user_agent``. Raises
    ``KubeConnectionError`` naming the kubeconfig path (or service-account token) when
    credentials cannot be loaded."""
    cfg = Configuration()
    if in_cluster:
        try:
            kube_config.load_incluster_config(client_configuration=cfg)  # type: ignore[no-untyped-call]
        except (ConfigException, OSError) as exc:
            raise KubeConnectionError(
                f"in-cluster configuration failed ({exc}); is the service account token "
                f"mounted at {SERVICE_ACCOUNT_TOKEN} and KUBERNETES_SERVICE_HOST set?"
            ) from exc
    else:
        paths = kubeconfig_paths(kubeconfig)
        existing = [p for p in paths if os.path.exists(p)]
        if existing:
            try:
                await kube_config.load_kube_config(
                    config_file=os.pathsep.join(existing),
                    context=context,
                    client_configuration=cfg,
                    persist_config=False,
                )
            except Exception as exc:  # yaml, missing keys, bad certificates, exec plugins
                raise KubeConnectionError(
                    f"cannot load kubeconfig {', '.join(existing)}: {exc}"
                ) from exc
        elif not master:
            raise KubeConnectionError(
                f"kubeconfig {', '.join(paths)} does not exist; pass --kubeconfig, "
                "set KUBECONFIG or use --master (inside a pod, leave them unset: the "
                "service account is used when KUBERNETES_SERVICE_HOST is set)"
            )
    if master:
        # Like clientcmd's BuildConfigFromFlags: --master wins over the kubeconfig server.
        cfg.host = master.rstrip("/")
    cfg.connection_pool_maxsize = max(1, pool_size) + EXTRA_CONNECTIONS
    api = ApiClient(configuration=cfg)
    api.user_agent = user_agent
    _resolve_environment_once(api)
    return api


def env_proxy(url: str) -> str | None:
    """The proxy ``HTTPS_PROXY``/``HTTP_PROXY`` name for ``url``, unless ``NO_PROXY``
    exempts its host (what a client trusting the environment would use)."""
    parts = urlsplit(url)
    proxy = getproxies().get(parts.scheme)
    if not proxy or (parts.hostname and proxy_bypass(parts.hostname)):
        return None
    return proxy


def _resolve_environment_once(api: ApiClient) -> None:
    # kubernetes_asyncio's session trusts the environment, which makes aiohttp look
    # up netrc and proxy variables in a worker thread on every request: two thread
    # hops per binding. The API server URL is fixed, so resolve the proxy once and
    # give the rest client a session on the same connection pool that does not look.
    rest = api.rest_client
    old: aiohttp.ClientSession = rest.pool_manager
    connector = old.connector
    if connector is None:
        return
    old.detach()
    rest.pool_manager = aiohttp.ClientSession(
        connector=connector, trust_env=False, read_bufsize=2**21
    )
    proxy = env_proxy(str(api.configuration.host))
    if not rest.proxy and proxy:
        rest.proxy = proxy


async def check_reachable(api_client: ApiClient, timeout: float = 5.0) -> str:
    """GET ``/version``; the server's ``gitVersion``. Raises ``KubeConnectionError``
    naming the URL when the server does not answer or rejects the credentials."""
    transport = HttpTransport(api_client, Timeouts(connect=timeout, total=timeout))
    url = transport.base_url
    try:
        resp = await transport.request("GET", "/version", timeout=timeout)
    except ApiError as exc:
        raise KubeConnectionError(
            f"cannot reach the Kubernetes API server at {url}: {exc.message}"
        ) from exc
    if resp.status in (401, 403):
        raise KubeConnectionError(
            f"the Kubernetes API server at {url} rejected the credentials "
            f"(HTTP {resp.status}): {resp.error().message}"
        )
    if not resp.ok:
        raise KubeConnectionError(
            f"the Kubernetes API server at {url} answered /version with HTTP {resp.status}: "
            f"{resp.error().message}"
        )
    try:
        version = json.loads(resp.body)
    except ValueError:
        return ""
    return str(version.get("gitVersion", "")) if isinstance(version, dict) else ""
