"""In-cluster configuration end to end: a service-account token and CA in files, the
``KUBERNETES_SERVICE_HOST``/``PORT`` variables pointing at the embedded API server served
over HTTPS with a static token, as inside a pod."""

from __future__ import annotations

import ssl
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.config import incluster_config
from troupe.kube.connection import check_reachable, connect
from troupe.kube.errors import KubeConnectionError
from troupe.sim.apiserver import ApiServer

EC = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
TOKEN = "service-account-token"


def openssl(cwd: Path, *args: str) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``ca.crt`` and a server certificate for 127.0.0.1 signed by it."""
    d = tmp_path_factory.mktemp("pki")
    openssl(
        d, "req", "-x509", *EC, "-keyout", "ca.key", "-out", "ca.crt", "-days", "2",
        "-subj", "/CN=ca", "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign",
    )  # fmt: skip
    openssl(d, "req", *EC, "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=api")
    (d / "server.ext").write_text("extendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1\n")
    openssl(
        d, "x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
        "-CAcreateserial", "-days", "2", "-out", "server.crt", "-extfile", "server.ext",
    )  # fmt: skip
    return d


@pytest.fixture
async def https_server(pki: Path) -> AsyncIterator[ApiServer]:
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(pki / "server.crt", pki / "server.key")
    async with ApiServer(ssl_context=ctx, token=TOKEN) as server:
        yield server


@pytest.fixture
def pod_environment(
    https_server: ApiServer, pki: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """The service-account files and variables a pod gets; returns the token file."""
    token = tmp_path / "token"
    token.write_text(TOKEN)
    monkeypatch.setattr(incluster_config, "SERVICE_TOKEN_FILENAME", str(token))
    monkeypatch.setattr(incluster_config, "SERVICE_CERT_FILENAME", str(pki / "ca.crt"))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", https_server.host)
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", str(https_server.port))
    return token


async def test_in_cluster_connects_with_the_service_account(
    https_server: ApiServer, pod_environment: Path
) -> None:
    api = await connect(None, None, True)
    async with api:
        assert api.configuration.host == https_server.url
        assert await check_reachable(api) == "v1.37.0-troupe-sim"
        namespaces = await client.CoreV1Api(api).list_namespace()
        assert "kube-system" in [ns.metadata.name for ns in namespaces.items]


async def test_in_cluster_with_a_wrong_token_is_refused_by_name(
    https_server: ApiServer, pod_environment: Path
) -> None:
    pod_environment.write_text("not-the-token")
    api = await connect(None, None, True)
    async with api:
        with pytest.raises(KubeConnectionError, match=r"rejected the credentials \(HTTP 401\)"):
            await check_reachable(api)


async def test_a_missing_kubeconfig_points_at_real_options(tmp_path: Path) -> None:
    with pytest.raises(KubeConnectionError) as raised:
        await connect(str(tmp_path / "config"), None, False)
    message = str(raised.value)
    assert "--in-cluster" not in message
    assert "KUBERNETES_SERVICE_HOST" in message
