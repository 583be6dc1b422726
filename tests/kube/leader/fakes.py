"""An in-memory Lease store with the API server's optimistic concurrency, for elector tests.

Several electors may share one ``LeaseStore`` through their own ``StoreClient``, whose
``down`` flag makes every request fail (no reply) and whose ``hang`` flag makes every
request block, as a partitioned replica would see. ``StoreClient.watch_lease`` hears
every change of the store, in order, as the Lease watch would (nothing while the
client is down, hung or its ``watching`` flag is off: a watch that is reconnecting).
Others write the Lease with ``held_by``, ``edit`` (any spec, typed or not) and
``delete``.
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
        self.watchers: list[asyncio.Queue[dict[str, Any] | None]] = []

    def _changed(self) -> None:
        for queue in self.watchers:
            queue.put_nowait(copy.deepcopy(self.lease))

    def spec(self) -> dict[str, Any]:
        spec = self.lease["spec"] if self.lease is not None else None
        return dict(spec) if isinstance(spec, dict) else {}

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
        spec = stored["spec"]
        self.writes.append(dict(spec) if isinstance(spec, dict) else {})
        self._changed()
        return copy.deepcopy(stored)

    def edit(self, **spec: Any) -> None:
        """Someone (an operator, a tool) writes these spec fields over the Lease."""
        assert self.lease is not None
        lease = copy.deepcopy(self.lease)
        lease["spec"].update(spec)
        self.put(lease, create=False)

    def delete(self) -> None:
        """Someone deletes the Lease (``kubectl delete lease``)."""
        self.rv += 1
        self.lease = None
        self._changed()

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
        self.watching = True
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

    async def watch_lease(
        self,
        namespace: str,
        name: str,
        observe: Callable[[Mapping[str, Any] | None], None],
    ) -> None:
        queue: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        self.store.watchers.append(queue)
        try:
            if self.store.lease is not None and self._hears():
                observe(copy.deepcopy(self.store.lease))  # the informer's first list
            while True:
                lease = await queue.get()
                if self._hears():
                    observe(lease)
        finally:
            self.store.watchers.remove(queue)

    def _hears(self) -> bool:
        return self.watching and not (self.down or self.hang)
