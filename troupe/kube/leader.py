"""Leader election on a ``coordination.k8s.io/v1`` Lease, so one of several replicas schedules.

``troupe run`` builds a ``LeaderElector`` from the profile's ``leaderElection`` block and
calls ``run``: it waits (standing by) until the lease is free or expired, then starts
leading (``on_started_leading``, an owned task) and renews the lease every
``retry_period``. The semantics are client-go's ``tools/leaderelection``:

- a lease is held while ``observedTime + leaseDurationSeconds`` is in the future, where
  ``observedTime`` is when *this* replica last saw the record change, on its own
  monotonic clock: clocks of different machines are never compared;
- acquiring writes ``acquireTime`` and bumps ``leaseTransitions``; renewing keeps both
  and moves ``renewTime``;
- every write is a PUT carrying the ``resourceVersion`` last read, so two replicas
  racing for an expired lease cannot both win (the loser gets 409 and re-reads);
- standby attempts are jittered (``retryPeriod * (1 + 1.2 * rand)``, ``JitterUntil``);
- a leader that cannot renew within ``renew_deadline`` stops leading;
- on a clean stop the lease is released (``ReleaseOnCancel``): holder "" and
  ``leaseDurationSeconds`` 1, so a standby takes over at its next attempt.

``leader_election_master_status{name}`` (client-go's metric, through the ``metrics``
hook, ``SchedulerMetrics.leading``) is 0 while standing by or stopped and 1 while
leading, so ``max(leader_election_master_status) == 0`` means nobody schedules.

**Fencing.** A leader writes only while it can prove the lease on its own monotonic
clock: ``may_write`` is true while the last successful renewal *was sent* less
than ``renew_deadline`` ago (the lease cannot have expired for another replica
before ``leaseDuration`` after our renewal landed, and it landed after it was
sent). The scheduler's writes go through a ``FencedTransport``
(``troupe.kube.fence``) that asks before sending each one. A leader stalled past
the deadline (SIGSTOP, a VM pause, a long GC pause, CPU throttling) finds out at
its first write or its next renewal, whichever comes first: the write is not
sent, and leadership ends at once (``Outcome.LOST``), so the process stops its
work and exits before anything else goes out.

Deviations, all in the safe direction: leadership ends at once when a renewal finds
another holder (client-go keeps polling until the deadline), and ``on_stopped_leading``
runs *before* the release, so scheduling has stopped before anyone else may start.
"""

from __future__ import annotations

import asyncio
import enum
import random
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import structlog

from troupe.api.client import ApiError
from troupe.api.clock import Clock
from troupe.kube.events import micro_time

log = structlog.get_logger("troupe.leader")

# wait.JitterUntil's factor in client-go's acquire loop.
JITTER_FACTOR = 1.2


class LeaseClient(Protocol):
    """What the elector needs from the API (``KubeClient`` implements it)."""

    async def get_lease(
        self, namespace: str, name: str, *, timeout: float
    ) -> dict[str, Any] | None: ...

    async def create_lease(
        self, namespace: str, lease: Mapping[str, Any], *, timeout: float
    ) -> dict[str, Any]: ...

    async def update_lease(
        self, namespace: str, name: str, lease: Mapping[str, Any], *, timeout: float
    ) -> dict[str, Any]: ...


class LeadershipMetrics(Protocol):
    """Where leadership is reported (``SchedulerMetrics`` implements it)."""

    def leading(self, name: str, leading: bool) -> None: ...


@dataclass(frozen=True, slots=True)
class LeaderRecord:
    """The Lease spec fields leader election reads and writes."""

    holder: str = ""
    lease_duration_seconds: int = 0
    acquire_time: str = ""
    renew_time: str = ""
    transitions: int = 0

    @classmethod
    def of(cls, lease: Mapping[str, Any]) -> LeaderRecord:
        spec = lease.get("spec") or {}
        return cls(
            holder=str(spec.get("holderIdentity") or ""),
            lease_duration_seconds=int(spec.get("leaseDurationSeconds") or 0),
            acquire_time=str(spec.get("acquireTime") or ""),
            renew_time=str(spec.get("renewTime") or ""),
            transitions=int(spec.get("leaseTransitions") or 0),
        )

    def spec(self) -> dict[str, Any]:
        return {
            "holderIdentity": self.holder,
            "leaseDurationSeconds": self.lease_duration_seconds,
            "acquireTime": self.acquire_time or None,
            "renewTime": self.renew_time or None,
            "leaseTransitions": self.transitions,
        }


class Outcome(enum.Enum):
    """Why ``LeaderElector.run`` returned."""

    STOPPED = "stopped"  # stop() was called; the lease is released if it was ours
    LOST = "lost"  # renewals failed for renew_deadline, or another replica holds the lease
    FINISHED = "finished"  # on_started_leading returned on its own; the lease is released


class LeaderElector:
    def __init__(
        self,
        client: LeaseClient,
        clock: Clock,
        *,
        namespace: str,
        name: str,
        identity: str,
        lease_duration: float,
        renew_deadline: float,
        retry_period: float,
        rng: random.Random | None = None,
        metrics: LeadershipMetrics | None = None,
    ) -> None:
        self.client = client
        self.clock = clock
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self._rng = rng or random.Random()
        self._metrics = metrics
        # Lease.spec.leaseDurationSeconds is an integer; client-go truncates. At least 1
        # so a sub-second configuration still writes a lease others can respect.
        self._duration_seconds = max(1, int(lease_duration))
        self._lease: dict[str, Any] | None = None  # last object read or written
        self._observed = LeaderRecord()
        self._observed_time = float("-inf")  # our monotonic clock
        self._last_renew = float("-inf")
        self._leading = False
        self._running = False
        self._stop = asyncio.Event()
        # Set when a write found the lease stale: leadership ends at once.
        self._fenced = asyncio.Event()

    # --- state -------------------------------------------------------------------

    @property
    def is_leader(self) -> bool:
        return self._leading

    @property
    def state(self) -> str:
        """ "leading", "standing by" or "stopped", for /readyz and logs."""
        if self._leading:
            return "leading"
        return "standing by" if self._running else "stopped"

    @property
    def healthy(self) -> bool:
        """Leader: the last successful renewal is within ``retry_period +
        renew_deadline`` (a wedged renew loop shows here before the lease expires).
        Standby: the acquire loop is running (client-go's healthz adaptor likewise
        reports a non-leader healthy)."""
        if self._leading:
            return self.clock.now() - self._last_renew <= self.retry_period + self.renew_deadline
        return self._running

    def may_write(self) -> bool:
        """Whether this replica may send a write now: it leads, and its last
        successful renewal was sent less than ``renew_deadline`` ago on its own clock.
        The first refusal ends leadership (the caller sends nothing)."""
        if self._leading and self.clock.now() - self._last_renew < self.renew_deadline:
            return True
        if self._leading and not self._fenced.is_set():
            log.error(
                "lease not renewed within the renew deadline; no more writes",
                lease=self._key,
                renewDeadline=self.renew_deadline,
                sinceRenewal=round(self.clock.now() - self._last_renew, 3),
            )
            self._fenced.set()
        return False

    @property
    def observed(self) -> LeaderRecord:
        """The lease record as last seen (holder, times, transitions)."""
        return self._observed

    def _set_leading(self, leading: bool) -> None:
        self._leading = leading
        if self._metrics is not None:
            self._metrics.leading(self.name, leading)

    def _holds(self) -> bool:
        return self._observed.holder == self.identity

    def _lease_valid(self, now: float) -> bool:
        return self._observed_time + self._observed.lease_duration_seconds > now

    # --- one attempt (client-go tryAcquireOrRenew) --------------------------------

    def _desired(self, wall: float) -> LeaderRecord:
        stamp = micro_time(wall)
        return LeaderRecord(self.identity, self._duration_seconds, stamp, stamp, 0)

    def _observe(self, lease: dict[str, Any], now: float) -> None:
        self._lease = lease
        record = LeaderRecord.of(lease)
        if record != self._observed:
            self._observed = record
            self._observed_time = now

    def _body(self, record: LeaderRecord) -> dict[str, Any]:
        metadata: dict[str, Any] = {"name": self.name, "namespace": self.namespace}
        if self._lease is not None:
            rv = (self._lease.get("metadata") or {}).get("resourceVersion")
            if rv:
                metadata["resourceVersion"] = rv
        return {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": metadata,
            "spec": record.spec(),
        }

    async def try_acquire_or_renew(self) -> bool:
        """One attempt to take or keep the lease; True when we hold it afterwards."""
        try:
            return await self._try_acquire_or_renew()
        except ApiError as exc:
            log.info("lease attempt failed", lease=self._key, error=str(exc))
            return False

    @property
    def _key(self) -> str:
        return f"{self.namespace}/{self.name}"

    async def _try_acquire_or_renew(self) -> bool:
        now, desired = self.clock.now(), self._desired(self.clock.wall())
        timeout = self.renew_deadline
        # Fast path of a renewal: write over the cached object without reading first.
        if self._holds() and self._lease_valid(now) and self._lease is not None:
            record = LeaderRecord(
                self.identity,
                self._duration_seconds,
                self._observed.acquire_time,
                desired.renew_time,
                self._observed.transitions,
            )
            try:
                updated = await self.client.update_lease(
                    self.namespace, self.name, self._body(record), timeout=timeout
                )
            except ApiError as exc:
                # 409: someone wrote the lease since; read it and decide again.
                log.debug("lease renewal fell back to a read", lease=self._key, error=str(exc))
            else:
                self._observe(updated, self.clock.now())
                return True
        lease = await self.client.get_lease(self.namespace, self.name, timeout=timeout)
        if lease is None:
            self._lease = None
            try:
                created = await self.client.create_lease(
                    self.namespace, self._body(desired), timeout=timeout
                )
            except ApiError as exc:
                if exc.is_conflict:  # another replica created it first
                    return False
                raise
            self._observe(created, self.clock.now())
            return True
        self._observe(lease, now)
        old = self._observed
        if old.holder and old.holder != self.identity and self._lease_valid(now):
            return False
        if old.holder == self.identity:
            record = LeaderRecord(
                self.identity,
                self._duration_seconds,
                old.acquire_time,
                desired.renew_time,
                old.transitions,
            )
        else:
            record = LeaderRecord(
                self.identity,
                self._duration_seconds,
                desired.acquire_time,
                desired.renew_time,
                old.transitions + 1,
            )
        try:
            updated = await self.client.update_lease(
                self.namespace, self.name, self._body(record), timeout=timeout
            )
        except ApiError as exc:
            if exc.is_conflict:  # lost a race; the next attempt re-reads
                return False
            raise
        self._observe(updated, self.clock.now())
        return True

    # --- loops -------------------------------------------------------------------

    async def _bounded(
        self, seconds: float, attempt_of: Callable[[], Coroutine[Any, Any, bool]] | None = None
    ) -> bool:
        """``try_acquire_or_renew`` (or ``attempt_of()``) abandoned after ``seconds`` on
        our clock: a request that never answers cannot hold a deadline hostage."""
        attempt = asyncio.ensure_future((attempt_of or self.try_acquire_or_renew)())
        timer = asyncio.ensure_future(self.clock.sleep(max(0.0, seconds)))
        try:
            await asyncio.wait({attempt, timer}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            timer.cancel()
            if not attempt.done():
                attempt.cancel()
            await asyncio.gather(attempt, timer, return_exceptions=True)
        return False if attempt.cancelled() else attempt.result()

    async def _acquire(self) -> None:
        """Until we hold the lease (client-go ``acquire``: jittered retries)."""
        log.info("attempting to acquire leader lease", lease=self._key, identity=self.identity)
        while True:
            sent = self.clock.now()
            if await self._bounded(self.renew_deadline):
                self._last_renew = sent
                log.info("successfully acquired lease", lease=self._key, identity=self.identity)
                return
            if self._observed.holder and self._observed.holder != self.identity:
                log.debug("lease is held by another replica", holder=self._observed.holder)
            jitter = self.retry_period * JITTER_FACTOR * self._rng.random()
            await self.clock.sleep(self.retry_period + jitter)

    async def _renew(self) -> None:
        """Renew every ``retry_period``; return when a renewal did not succeed within
        ``renew_deadline`` or another replica was seen holding the lease."""
        while True:
            deadline = self.clock.now() + self.renew_deadline
            while True:
                sent = self.clock.now()
                if sent - self._last_renew >= self.renew_deadline:
                    # Stalled past the deadline (the process was paused): the lease
                    # may be someone else's already, whatever this renewal returns.
                    log.error(
                        "lease not renewed within the renew deadline",
                        lease=self._key,
                        renewDeadline=self.renew_deadline,
                    )
                    return
                if await self._bounded(deadline - sent):
                    # The lease runs from when the renewal was sent, at the latest.
                    self._last_renew = sent
                    break
                if self._observed.holder != self.identity:
                    log.error("lease taken by another replica", holder=self._observed.holder)
                    return
                remaining = deadline - self.clock.now()
                if remaining <= 0:
                    log.error(
                        "failed to renew lease within the deadline",
                        lease=self._key,
                        renewDeadline=self.renew_deadline,
                    )
                    return
                await self.clock.sleep(min(self.retry_period, remaining))
            await self.clock.sleep(self.retry_period)

    async def release(self) -> bool:
        """Give the lease up if we hold it: holder "" and ``leaseDurationSeconds`` 1,
        written over the last version seen (a 409 means it is no longer ours).
        Abandoned after ``renew_deadline``."""
        return await self._bounded(self.renew_deadline, self._release)

    async def _release(self) -> bool:
        if not self._holds() or self._lease is None:
            return True
        stamp = micro_time(self.clock.wall())
        record = LeaderRecord("", 1, stamp, stamp, self._observed.transitions)
        try:
            released = await self.client.update_lease(
                self.namespace, self.name, self._body(record), timeout=self.renew_deadline
            )
        except ApiError as exc:
            log.warning("failed to release lease", lease=self._key, error=str(exc))
            return False
        self._observe(released, self.clock.now())
        log.info("released lease", lease=self._key)
        return True

    def stop(self) -> None:
        """Ask ``run`` to end: stop leading (or standing by) and release the lease."""
        self._stop.set()

    async def run(
        self,
        on_started_leading: Callable[[], Coroutine[Any, Any, None]],
        on_stopped_leading: Callable[[], Awaitable[None]],
    ) -> Outcome:
        """Stand by until leading, lead until the lease is lost, ``stop()`` is called
        or ``on_started_leading`` returns. Then, in this order: ``on_stopped_leading``
        is awaited (the caller stops scheduling), the leading task is cancelled if it
        still runs, and the lease is released if it is still ours. Re-raises what
        ``on_started_leading`` raised."""
        self._running = True
        self._set_leading(False)  # a standby exports 0, not nothing
        stop = asyncio.ensure_future(self._stop.wait())
        acquire = asyncio.ensure_future(self._acquire())
        try:
            await _first_of(acquire, stop, cancel=(acquire,))
            if acquire.cancelled():
                return Outcome.STOPPED
            acquire.result()
            return await self._lead(on_started_leading, on_stopped_leading, stop)
        finally:
            self._set_leading(False)
            self._running = False
            await _cancelled(acquire, stop)

    async def _lead(
        self,
        on_started_leading: Callable[[], Coroutine[Any, Any, None]],
        on_stopped_leading: Callable[[], Awaitable[None]],
        stop: asyncio.Future[Any],
    ) -> Outcome:
        self._fenced.clear()
        self._set_leading(True)
        leading = asyncio.ensure_future(on_started_leading())
        renew = asyncio.ensure_future(self._renew())
        fenced = asyncio.ensure_future(self._fenced.wait())
        try:
            await _first_of(renew, leading, stop, fenced, cancel=(renew, fenced))
            if stop.done():
                outcome = Outcome.STOPPED
            elif leading.done():
                outcome = Outcome.FINISHED
            else:
                outcome = Outcome.LOST
                log.error("leader election lost", lease=self._key, identity=self.identity)
            self._set_leading(False)
            await on_stopped_leading()
        finally:
            self._set_leading(False)
            await _cancelled(leading, renew)
        # Best effort after a loss too (a 409 shows the lease is already someone else's),
        # but briefly: the process is about to exit.
        if outcome is Outcome.LOST:
            await self._bounded(self.retry_period, self._release)
        else:
            await self.release()
        if not leading.cancelled() and (exc := leading.exception()) is not None:
            raise exc
        return outcome


async def _first_of(*tasks: asyncio.Future[Any], cancel: tuple[asyncio.Future[Any], ...]) -> None:
    """Wait for the first of ``tasks`` to finish, then cancel and reap ``cancel``."""
    try:
        await asyncio.wait(set(tasks), return_when=asyncio.FIRST_COMPLETED)
    finally:
        await _cancelled(*cancel)


async def _cancelled(*tasks: asyncio.Future[Any]) -> None:
    """Cancel what still runs of ``tasks`` (all owned here) and wait for them to end."""
    for task in tasks:
        if not task.done():
            task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
