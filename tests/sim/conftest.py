"""Fixtures for the embedded-cluster tests: a running ``ApiServer``, a raw HTTP client
bound to it, a kubernetes-asyncio ``ApiClient`` loaded from its kubeconfig, and kubectl."""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from kubernetes_asyncio import client, config
from troupe.sim.apiserver import ApiServer


class Http:
    """Thin JSON client: every call returns (status, body as JSON or text)."""

    def __init__(self, session: aiohttp.ClientSession, base: str) -> None:
        self.session = session
        self.base = base

    async def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        content_type: str = "application/json",
        params: dict[str, str] | None = None,
    ) -> tuple[int, Any]:
        data = None if body is None else json.dumps(body)
        headers = {"Content-Type": content_type} if data is not None else {}
        async with self.session.request(
            method, self.base + path, data=data, headers=headers, params=params
        ) as response:
            text = await response.text()
            try:
                return response.status, json.loads(text)
            except ValueError:
                return response.status, text

    async def get(self, path: str, **params: str) -> tuple[int, Any]:
        return await self.request("GET", path, params=params or None)

    async def post(self, path: str, body: Any) -> tuple[int, Any]:
        return await self.request("POST", path, body)

    async def put(self, path: str, body: Any) -> tuple[int, Any]:
        return await self.request("PUT", path, body)

    async def patch(self, path: str, body: Any, content_type: str) -> tuple[int, Any]:
        return await self.request("PATCH", path, body, content_type=content_type)

    async def delete(self, path: str, body: Any = None, **params: str) -> tuple[int, Any]:
        return await self.request("DELETE", path, body, params=params or None)

    async def watch(self, path: str, *, limit: int = 1000, **params: str) -> list[dict[str, Any]]:
        """Read a watch stream until it ends (or ``limit`` events)."""
        events: list[dict[str, Any]] = []
        async with self.session.get(
            self.base + path, params={"watch": "true", **params}
        ) as response:
            assert response.status == 200
            async for line in response.content:
                if line.strip():
                    events.append(json.loads(line))
                if len(events) >= limit:
                    break
        return events


def pod(name: str, labels: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}], **spec},
    }


def status(code: int, reason: str, message: str, details: dict[str, Any] | None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
    }
    if details is not None:
        body["details"] = details
    body["code"] = code
    return body


@pytest.fixture
async def server() -> AsyncIterator[ApiServer]:
    api = ApiServer(bookmark_interval=0.2)
    await api.start()
    try:
        yield api
    finally:
        await api.stop()


@pytest.fixture
async def http(server: ApiServer) -> AsyncIterator[Http]:
    async with aiohttp.ClientSession() as session:
        yield Http(session, server.url)


@pytest.fixture
def kubeconfig(server: ApiServer, tmp_path: Path) -> Path:
    return server.write_kubeconfig(tmp_path / "kubeconfig")


@pytest.fixture
async def kube(kubeconfig: Path) -> AsyncIterator[client.ApiClient]:
    configuration = client.Configuration()
    await config.load_kube_config(str(kubeconfig), client_configuration=configuration)
    async with client.ApiClient(configuration) as api:
        yield api


def kubectl_path() -> str:
    path = shutil.which("kubectl")
    if path is None:
        pytest.fail(
            "kubectl is not installed: these tests check the server against the real kubectl"
        )
    return path


async def kubectl(kubeconfig: Path, *args: str, stdin: str | None = None) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        kubectl_path(),
        "--kubeconfig",
        str(kubeconfig),
        "--cache-dir",
        str(kubeconfig.parent / "kube-cache"),
        *args,
        stdin=asyncio.subprocess.PIPE if stdin is not None else None,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await process.communicate(stdin.encode() if stdin is not None else None)
    return process.returncode or 0, out.decode(), err.decode()
