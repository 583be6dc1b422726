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

A Lease troupe cannot read (``lease_record.read_record``: a field of the wrong type)
is held by another replica that never renews: a standby waits out its own
``lease_duration`` from when it last saw the Lease change, then overwrites it.

``leader_election_master_status{name}`` (client-go's metric, through the ``metrics``
hook, ``SchedulerMetrics.leading``) is 0 while standing by or stopped and 1 while
leading, so ``max(leader_election_master_status) == 0`` means nobody schedules.

**Fencing.** A leader writes only while its ``WriteFence`` (``troupe.kube.fence``) is
open; the scheduler's writes go through a ``FencedTransport`` that asks it first. It
holds while the last successful renewal *was sent* less than ``renew_deadline`` ago
on our own clock (the lease cannot have expired for another replica before
``leaseDuration`` after our renewal landed, and it landed after it was sent), and
while no version of the Lease seen since says otherwise: while leading, the elector
watches its Lease (``LeaseClient.watch_lease``) and judges every version it sees
there or reads itself. Deleted, another holder or unreadable closes the fence at
once; a ``leaseDurationSeconds`` shorter than the time since our last renewal closes
it, one shorter than ``renew_deadline`` moves its end in. A leader stalled past the
deadline (SIGSTOP, a VM pause, a long GC pause) finds out at its first write or next
renewal. Every closure ends leadership (``Outcome.LOST``): the process stops and
exits, as kube-scheduler does, and leads again only by acquiring the Lease as a
standby. While the watch reconnects, a change is seen at the next renewal.

Deviations from client-go, all in the safe direction: leadership ends at once when
the Lease shows another holder, is deleted (client-go re-creates it at its next
renewal) or is unreadable (client-go's API server never sends one); and
``on_stopped_leading`` runs *before* the release, so scheduling has stopped before
anyone else may start.
"""

from __future__ import annotations

import asyncio
import enum
import random
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from typing import Any, Protocol

import structlog

from troupe.api.client import ApiError
from troupe.api.clock import Clock
from troupe.kube.events import micro_time
from troupe.kube.fence import WriteFence
from troupe.kube.lease_record import LeaderRecord, LeaseSeen, is_newer, resource_version

log = structlog.get_logger("troupe.leader")

# wait.JitterUntil's factor in client-go's acquire loop.
JITTER_FACTOR = 1.2

LeaseObserver = Callable[[Mapping[str, Any] | None], None]
"""Called with each version of the Lease a watch sees (None: it was deleted)."""


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

    async def watch_lease(self, namespace: str, name: str, observe: LeaseObserver) -> None:
        """List and watch the Lease until cancelled, calling ``observe`` with each
        version seen (the current one first)."""
        ...


class LeadershipMetrics(Protocol):
    """Where leadership is reported (``SchedulerMetrics`` implements it)."""

    def leading(self, name: str, leading: bool) -> None: ...


class Outcome(enum.Enum):
    """Why ``LeaderElector.run`` returned."""

    STOPPED = "stopped"  # stop() was called; the lease is released if it was ours
    LOST = "lost"  # the fence closed: renewals lapsed, or the Lease is no longer ours
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
        self._seen = LeaseSeen(namespace, name)
        self._last_renew = float("-inf")
        self._leading = False
        self._running = False
        self._stop = asyncio.Event()
        # What the scheduler's writes ask (FencedTransport); closed, leadership ends.
        self.fence = WriteFence(clock)

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
        """Whether this replica may send a write now (``WriteFence.may_write``): it
        leads, its last successful renewal was sent less than ``renew_deadline`` ago
        on its own clock, and no version of the Lease seen since says otherwise. The
        first refusal ends leadership (the caller sends nothing)."""
        return self.fence.may_write()

    @property
    def observed(self) -> LeaderRecord:
        """The lease record as last seen (holder, times, transitions)."""
        return self._seen.record

    def _set_leading(self, leading: bool) -> None:
        self._leading = leading
        if self._metrics is not None:
            self._metrics.leading(self.name, leading)

    def _holds(self) -> bool:
        return self._seen.holds(self.identity)

    def _lease_valid(self, now: float) -> bool:
        # An unreadable Lease: held by someone who never renews, for our own duration.
        return self._seen.valid(now, self.lease_duration)

    @property
    def _key(self) -> str:
        return f"{self.namespace}/{self.name}"

    # --- what is seen of the Lease ------------------------------------------------

    def _observe(self, lease: dict[str, Any], now: float, *, judge: bool) -> None:
        """Take in a version of the Lease (read, written or watched). ``judge``: it
        may have been written by someone else, so a leader checks it still holds."""
        if self._seen.take(lease, now) and self._seen.record.problem:
            log.error(
                "lease cannot be read; treated as held by another replica",
                lease=self._key,
                err=self._seen.record.problem,
            )
        if judge:
            self._judge("read")

    def _gone(self, now: float, seen_by: str) -> None:
        self._seen.gone(now)
        if self._leading:
            self.fence.close("lease deleted", seenBy=seen_by)

    def _judge(self, seen_by: str) -> None:
        """While leading: close the fence unless the Lease seen last is still ours
        with a duration that covers the time since our last renewal."""
        if not self._leading:
            return
        record = self._seen.record
        if record.problem:
            self.fence.close(
                "lease cannot be read; treated as held by another replica",
                err=record.problem,
                seenBy=seen_by,
            )
        elif record.holder != self.identity:
            self.fence.close("lease taken by another replica", holder=record.holder, seenBy=seen_by)
        else:
            self.fence.shorten(record.lease_duration_seconds, seenBy=seen_by)

    def _watched(self, lease: Mapping[str, Any] | None) -> None:
        """One version of the Lease from the watch (None: deleted)."""
        if not self._leading:
            return
        now = self.clock.now()
        if lease is None:
            self._gone(now, "watch")
            return
        if not is_newer(resource_version(lease), self._seen.version):
            return  # one we have seen, or an older one our own writes went over
        self._observe(dict(lease), now, judge=False)
        self._judge("watch")

    async def _watch(self) -> None:
        """The Lease watch while leading. If it fails, renewals still see changes."""
        try:
            await self.client.watch_lease(self.namespace, self.name, self._watched)
        except Exception as exc:
            log.error(
                "lease watch failed; changes are seen at the next renewal",
                lease=self._key,
                err=repr(exc),
            )

    # --- one attempt (client-go tryAcquireOrRenew) --------------------------------

    def _ours(self, old: LeaderRecord | None, stamp: str) -> LeaderRecord:
        """The record we write: a renewal keeps ``acquireTime`` and the transitions, a
        takeover starts anew with one more transition, a new Lease has none."""
        me, seconds = self.identity, self._duration_seconds
        if old is None:
            return LeaderRecord(me, seconds, stamp, stamp, 0)
        if old.holder == me and not old.problem:
            return LeaderRecord(me, seconds, old.acquire_time, stamp, old.transitions)
        return LeaderRecord(me, seconds, stamp, stamp, old.transitions + 1)

    async def try_acquire_or_renew(self) -> bool:
        """One attempt to take or keep the lease; True when we hold it afterwards."""
        try:
            return await self._try_acquire_or_renew()
        except ApiError as exc:
            log.info("lease attempt failed", lease=self._key, error=str(exc))
            return False

    async def _write(self, record: LeaderRecord, *, create: bool = False) -> None:
        """Create or update the Lease with ``record``; a 409 raises."""
        c, body, timeout = self.client, self._seen.body(record), self.renew_deadline
        if create:
            written = await c.create_lease(self.namespace, body, timeout=timeout)
        else:
            written = await c.update_lease(self.namespace, self.name, body, timeout=timeout)
        self._observe(written, self.clock.now(), judge=False)

    async def _try_acquire_or_renew(self) -> bool:
        now, stamp = self.clock.now(), micro_time(self.clock.wall())
        seen = self._seen
        # Fast path of a renewal: write over the cached object without reading first.
        if self._holds() and self._lease_valid(now) and seen.lease is not None:
            try:
                await self._write(self._ours(seen.record, stamp))
            except ApiError as exc:
                # 409: someone wrote the lease since; read it and decide again.
                log.debug("lease renewal fell back to a read", lease=self._key, error=str(exc))
            else:
                return True
        lease = await self.client.get_lease(self.namespace, self.name, timeout=self.renew_deadline)
        if lease is None:
            if self._leading:  # deleted under us: leadership ends, it is not re-created
                self._gone(now, "read")
                return False
            seen.lease = None
            return await self._unless_conflict(self._write(self._ours(None, stamp), create=True))
        self._observe(lease, now, judge=True)
        if self.fence.closure is not None and self._leading:
            return False  # judged: not ours any more
        old = seen.record
        if old.held_by_another(self.identity) and self._lease_valid(now):
            return False
        if old.problem:
            log.warning(
                "taking over a lease that could not be read for a lease duration",
                lease=self._key,
                err=old.problem,
            )
        return await self._unless_conflict(self._write(self._ours(old, stamp)))

    @staticmethod
    async def _unless_conflict(write: Coroutine[Any, Any, None]) -> bool:
        """True once ``write`` is done; False on a 409 (another replica created or
        wrote the Lease first: the next attempt re-reads)."""
        try:
            await write
        except ApiError as exc:
            if exc.is_conflict:
                return False
            raise
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
            if self._seen.record.held_by_another(self.identity):
                log.debug("lease is held by another replica", holder=self._seen.record.holder)
            jitter = self.retry_period * JITTER_FACTOR * self._rng.random()
            await self.clock.sleep(self.retry_period + jitter)

    def _renewal_seconds(self) -> float:
        """How long after a renewal was sent we may write: ``renew_deadline``, or our
        own ``leaseDurationSeconds`` if that is shorter."""
        return min(self.renew_deadline, float(self._duration_seconds))

    async def _renew(self) -> None:
        """Renew every ``retry_period``; return, with the fence closed, when a renewal
        did not succeed within ``renew_deadline`` or the Lease is no longer ours."""
        while True:
            deadline = self.clock.now() + self.renew_deadline
            while True:
                sent = self.clock.now()
                if not self.fence.may_write():
                    # Stalled past the deadline (the process was paused): the lease
                    # may be someone else's already, whatever this renewal returns.
                    return
                if await self._bounded(deadline - sent):
                    # The lease runs from when the renewal was sent, at the latest.
                    self._last_renew = sent
                    self.fence.renewed(sent, self._renewal_seconds())
                    break
                if self.fence.closure is not None:
                    return
                remaining = deadline - self.clock.now()
                if remaining <= 0:
                    self.fence.close(
                        "failed to renew lease within the deadline",
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
        if not self._holds() or self._seen.lease is None:
            return True
        stamp = micro_time(self.clock.wall())
        record = LeaderRecord("", 1, stamp, stamp, self._seen.record.transitions)
        try:
            await self._write(record)
        except ApiError as exc:
            log.warning("failed to release lease", lease=self._key, error=str(exc))
            return False
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
        self.fence.open(self._last_renew, self._renewal_seconds(), lease=self._key)
        self._set_leading(True)
        watch = asyncio.ensure_future(self._watch())
        leading = asyncio.ensure_future(on_started_leading())
        renew = asyncio.ensure_future(self._renew())
        fenced = asyncio.ensure_future(self.fence.closed.wait())
        try:
            await _first_of(renew, leading, stop, fenced, cancel=(renew, fenced, watch))
            if stop.done():
                outcome = Outcome.STOPPED
            elif leading.done():
                outcome = Outcome.FINISHED
            else:
                outcome = Outcome.LOST
                log.error("leader election lost", lease=self._key, identity=self.identity)
            self._end_term(outcome)
            await on_stopped_leading()
        finally:
            self._end_term(Outcome.STOPPED)
            await _cancelled(leading, renew, watch)
        # Best effort after a loss too (a 409 shows the lease is already someone else's),
        # but briefly: the process is about to exit.
        if outcome is Outcome.LOST:
            await self._bounded(self.retry_period, self._release)
        else:
            await self.release()
        if not leading.cancelled() and (exc := leading.exception()) is not None:
            raise exc
        return outcome

    def _end_term(self, outcome: Outcome) -> None:
        """No more writes: leadership ends (the fence is closed already after a loss)."""
        self._set_leading(False)
        self.fence.close(f"stopped leading ({outcome.value})", quiet=True)


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
