"""A client of the scheduler's debug endpoints (``troupe explain``)."""

from __future__ import annotations

import json
from typing import Any

import aiohttp

from troupe.kube.health import EXPLAIN_PATH


class DebugEndpointError(RuntimeError):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


async def fetch_explanation(
    server: str, token: str, kind: str, namespace: str, name: str, sub: str = ""
) -> dict[str, Any] | None:
    """The scheduler's last diagnosis of a pod or group, or None when it has none (the
    pod is bound, unknown, or not attempted yet). Raises ``DebugEndpointError`` when
    the scheduler refuses (401/403) or cannot be reached."""
    query = {"kind": kind, "namespace": namespace, "name": name}
    if sub:
        query["sub"] = sub
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    url = server.rstrip("/") + EXPLAIN_PATH
    try:
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=15)) as session,
            session.get(url, params=query, headers=headers) as resp,
        ):
            body = await resp.text()
            if resp.status == 404 and body.startswith("{"):
                return None
            if resp.status != 200:
                raise DebugEndpointError(resp.status, f"{url}: {resp.status} {body.strip()}")
            found: dict[str, Any] = json.loads(body)
            return found
    except aiohttp.ClientError as exc:
        raise DebugEndpointError(0, f"cannot reach the scheduler at {url}: {exc}") from exc
