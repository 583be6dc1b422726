"""An in-memory Lease store with the API server's optimistic concurrency, for elector tests.

Several electors may share one ``LeaseStore`` through their own ``StoreClient``, whose
``down`` flag makes every request fail (no reply) and whose ``hang`` flag makes every
request block, as a partitioned replica would see.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Callable, Mapping
from typing import Any

from troupe.api.client import ApiError


class LeaseStore:
    def __init__(self) -> None:
        self.lease: dict[str, Any] | None = None
        self.rv = 0
        self.writes: list[dict[str, Any]] = []  # every accepted spec, in order
        self.before_write: Callable[[], None] | None = None  # runs once, before the next write

    def spec(self) -> dict[str, Any]:
        return dict(self.lease["spec"]) if self.lease is not None else {}

    def put(self, lease: Mapping[str, Any], *, create: bool) -> dict[str, Any]:
        hook, self.before_write = self.before_write, None
        if hook is not None:
            hook()
        if create and self.lease is not None:
            raise ApiError(409, "leases.coordination.k8s.io already exists")
        if not create:
            if self.lease is None:
                raise ApiError(404, "leases.coordination.k8s.io not found")
            if (
                lease["metadata"].get("resourceVersion")
                != self.lease["metadata"]["resourceVersion"]
            ):
                raise ApiError(409, "the object has been modified")
        self.rv += 1
        stored = copy.deepcopy(dict(lease))
        stored["metadata"] = {**stored["metadata"], "resourceVersion": str(self.rv)}
        self.lease = stored
        self.writes.append(dict(stored["spec"]))
        return copy.deepcopy(stored)

    def held_by(self, holder: str, duration: int = 15, transitions: int = 0) -> None:
        """Another replica writes the lease (renewing it if it already holds it)."""
        base = copy.deepcopy(self.lease) if self.lease else {"metadata": {"name": "troupe"}}
        base["spec"] = {
            "holderIdentity": holder,
            "leaseDurationSeconds": duration,
            "acquireTime": "2027-01-15T08:00:00.000000Z",
            "renewTime": f"2027-01-15T08:00:{self.rv % 60:02d}.000000Z",
            "leaseTransitions": transitions,
        }
        self.put(base, create=self.lease is None)


class StoreClient:
    """``LeaseClient`` over a ``LeaseStore``."""

    def __init__(self, store: LeaseStore) -> None:
        self.store = store
        self.down = False
        self.hang = False
        self.requests = 0

    async def _gate(self) -> None:
        self.requests += 1
        await asyncio.sleep(0)
        if self.hang:
            await asyncio.Event().wait()
        if self.down:
            raise ApiError(0, "connection refused")

    async def get_lease(
        self, namespace: str, name: str, *, timeout: float
    ) -> dict[str, Any] | None:
        await self._gate()
        return copy.deepcopy(self.store.lease)

    async def create_lease(
        self, namespace: str, lease: Mapping[str, Any], *, timeout: float
    ) -> dict[str, Any]:
        await self._gate()
        return self.store.put(lease, create=True)

    async def update_lease(
        self, namespace: str, name: str, lease: Mapping[str, Any], *, timeout: float
    ) -> dict[str, Any]:
        await self._gate()
        return self.store.put(lease, create=False)
