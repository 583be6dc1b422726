"""TLS through the ``http1`` pool, against a TLS scripted server with certificates
made by the ``openssl`` CLI: every kubeconfig TLS setting gives the same outcome as
``kubernetes_asyncio``'s own aiohttp session."""

from __future__ import annotations

import shutil
import ssl
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from troupe.api.client import ApiError
from troupe.kube.connection import connect
from troupe.kube.http1_pools import pool_for
from troupe.kube.transport import AiohttpTransport, HttpTransport, Timeouts, Transport

from tests.kube.scripted_http import ScriptedServer, answer

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl CLI")

EC = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]


def openssl(cwd: Path, *args: str) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def issue(cwd: Path, name: str, ca: str, extensions: str) -> None:
    """``<name>.crt`` / ``<name>.key`` signed by ``<ca>``."""
    openssl(
        cwd, "req", *EC, "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={name}"
    )
    (cwd / f"{name}.ext").write_text(extensions)
    openssl(
        cwd, "x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.crt", "-CAkey", f"{ca}.key",
        "-CAcreateserial", "-days", "2", "-out", f"{name}.crt", "-extfile", f"{name}.ext",
    )  # fmt: skip


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("pki")
    for ca in ("ca", "other-ca"):
        openssl(
            d, "req", "-x509", *EC, "-keyout", f"{ca}.key", "-out", f"{ca}.crt", "-days", "2",
            "-subj", f"/CN={ca}", "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign",
        )  # fmt: skip
    server = "extendedKeyUsage=serverAuth\nsubjectAltName="
    issue(d, "by-ip", "ca", server + "IP:127.0.0.1\n")
    issue(d, "by-name", "ca", server + "DNS:kube.test\n")
    issue(d, "client", "ca", "extendedKeyUsage=clientAuth\n")
    return d


def server_context(pki: Path, cert: str, require_client_cert: bool) -> ssl.SSLContext:
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(pki / f"{cert}.crt", pki / f"{cert}.key")
    if require_client_cert:
        ctx.verify_mode = ssl.CERT_REQUIRED
        ctx.load_verify_locations(pki / "ca.crt")
    return ctx


def kubeconfig(path: Path, server: str, cluster: dict[str, Any], user: dict[str, Any]) -> Path:
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": server, **cluster}}],
                "users": [{"name": "u", "user": {"token": "t", **user}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    return path


def same_tls_settings(api: Any) -> bool:
    """The pool's context and the aiohttp connector's agree on everything they check."""
    pool = pool_for(api)
    assert pool is not None
    ours, theirs = pool._ssl, api.rest_client.pool_manager.connector._ssl
    assert isinstance(ours, ssl.SSLContext) and isinstance(theirs, ssl.SSLContext)
    return (
        all(
            getattr(ours, a) == getattr(theirs, a)
            for a in ("verify_mode", "check_hostname", "verify_flags", "options", "minimum_version")
        )
        and ours.get_ca_certs() == theirs.get_ca_certs()
    )


async def outcome(transport: Transport) -> str:
    try:
        return str((await transport.request("GET", "/version")).status)
    except ApiError as exc:
        assert exc.status == 0
        return "no reply"


@pytest.mark.parametrize(
    ("cert", "mtls", "cluster", "user", "expected"),
    [
        pytest.param("by-ip", False, {"certificate-authority": "ca"}, {}, "200", id="CA file"),
        pytest.param(
            "by-name",
            False,
            {"certificate-authority": "ca", "tls-server-name": "kube.test"},
            {},
            "200",
            id="tls-server-name checks the certificate's name",
        ),
        pytest.param(
            "by-name",
            False,
            {"certificate-authority": "ca"},
            {},
            "no reply",
            id="a certificate for another name is refused",
        ),
        pytest.param(
            "by-ip", False, {"certificate-authority": "other-ca"}, {}, "no reply", id="wrong CA"
        ),
        pytest.param(
            "by-name",
            False,
            {"insecure-skip-tls-verify": True},
            {},
            "200",
            id="insecure-skip-tls-verify",
        ),
        pytest.param(
            "by-ip",
            True,
            {"certificate-authority": "ca"},
            {"client-certificate": "client.crt", "client-key": "client.key"},
            "200",
            id="a client certificate",
        ),
        pytest.param(
            "by-ip",
            True,
            {"certificate-authority": "ca"},
            {},
            "no reply",
            id="no client certificate where one is required",
        ),
    ],
)
async def test_tls_settings_give_the_same_outcome_as_aiohttp(
    pki: Path,
    tmp_path: Path,
    cert: str,
    mtls: bool,
    cluster: dict[str, Any],
    user: dict[str, Any],
    expected: str,
) -> None:
    if "certificate-authority" in cluster:
        cluster = {
            **cluster,
            "certificate-authority": str(pki / f"{cluster['certificate-authority']}.crt"),
        }
    user = {k: str(pki / v) for k, v in user.items()}
    routes = {"*": answer(200, b'{"gitVersion":"v1.36.0"}')}
    async with ScriptedServer(routes, server_context(pki, cert, mtls)) as server:
        path = kubeconfig(tmp_path / "config", server.url, cluster, user)
        api = await connect(str(path), None, False)
        try:
            timeouts = Timeouts(connect=2.0, total=2.0)
            lean = HttpTransport(api, timeouts)
            assert same_tls_settings(api)
            assert await outcome(lean) == expected
            assert await outcome(AiohttpTransport(api, timeouts)) == expected
            if expected == "200":
                assert server.requests[0].headers["authorization"] == "Bearer t"
        finally:
            await api.close()
