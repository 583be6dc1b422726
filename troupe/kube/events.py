"""Scheduler events written as ``events.k8s.io/v1`` Events, aggregated and rate limited.

``KubeClient.record_event`` hands every ``Scheduled`` / ``FailedScheduling`` / ...
event here. A stuck pod is retried for as long as it stays pending, so writes are
bounded the way client-go's ``tools/events`` EventBroadcaster bounds them (see
docs/events.md):

- isomorphic events (same regarding object, type, reason, action and note) seen
  within ``finish_after`` (6 min, client-go ``finishTime``) of the last one are one
  series: the first is created (POST), the first repeat patches
  ``series {count: 2, lastObservedTime}`` at once, later repeats only count in
  memory; a series is written again every ``refresh_every`` (30 min, client-go
  ``refreshTime``) while it continues and once more when it ends;
- a per-object token bucket (burst 25, one token per 5 min, client-go
  ``EventSourceObjectSpamFilter``) drops creates beyond it and defers series writes;
- writes go through their own qps/burst limiter (kube-scheduler's events use a
  separate client) and the bounded retry policy.

``forget(ref)`` ends the series about an object that was deleted (the daemon calls it
for every pod deleted): a deleted pod's UID never comes back, so no repeat could join
its series; without it each series stayed for ``finish_after`` after its last event,
about 14,000 at 40 pods a second, whatever the cluster's size.

Failures are logged and counted, never raised: an event is never worth failing a
scheduling cycle for.
"""

from __future__ import annotations

import random
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import structlog
from pydantic_core import to_json

from troupe.api.client import ApiError, Event, ObjectRef
from troupe.api.clock import Clock
from troupe.kube.ratelimit import KeyedBuckets, TokenBucket
from troupe.kube.retry import RetryPolicy, with_retries
from troupe.kube.transport import STRATEGIC_MERGE_PATCH, Response, Transport

log = structlog.get_logger("troupe.kube.events")

# events.k8s.io/v1 validation: note at most 1 kB; kube-scheduler's truncateMessage
# cuts to the limit and marks the cut with " ...".
NOTE_LIMIT = 1024
_TRUNCATED = " ..."


def micro_time(wall: float) -> str:
    """A ``MicroTime``: UTC, always with six fraction digits and ``Z``."""
    # Formatted by hand: datetime.strftime cost a few microseconds per event.
    seconds = int(wall // 1)
    micros = round((wall - seconds) * 1e6)
    if micros == 1_000_000:
        seconds, micros = seconds + 1, 0
    t = time.gmtime(seconds)
    return (
        f"{t.tm_year:04d}-{t.tm_mon:02d}-{t.tm_mday:02d}T"
        f"{t.tm_hour:02d}:{t.tm_min:02d}:{t.tm_sec:02d}.{micros:06d}Z"
    )


def truncate_note(note: str) -> str:
    """At most ``NOTE_LIMIT`` bytes of UTF-8 (the API server counts bytes)."""
    raw = note.encode()
    if len(raw) <= NOTE_LIMIT:
        return note
    cut = raw[: NOTE_LIMIT - len(_TRUNCATED)].decode("utf-8", "ignore")
    return cut + _TRUNCATED


@dataclass(frozen=True, slots=True)
class EventPolicy:
    finish_after: float = 360.0
    refresh_every: float = 1800.0
    tick: float = 60.0
    spam_burst: int = 25
    spam_qps: float = 1.0 / 300.0
    max_series: int = 16384


@dataclass(frozen=True, slots=True)
class _Key:
    regarding: ObjectRef
    type: str
    reason: str
    action: str
    note: str


@dataclass(slots=True)
class _Series:
    """What the recorder remembers about one isomorphic event (mutable on purpose:
    counts change with every repeat)."""

    event: Event
    name: str
    namespace: str
    event_time: float  # wall seconds of the first occurrence
    last_seen: float  # monotonic
    last_seen_wall: float
    count: int = 1
    created: bool = False
    dirty: bool = False
    last_written: float = 0.0


@dataclass(slots=True)
class EventCounters:
    created: int = 0
    series_writes: int = 0
    aggregated: int = 0
    spam_dropped: int = 0
    failed: int = 0


class EventRecorder:
    def __init__(
        self,
        transport: Transport,
        clock: Clock,
        *,
        reporting_controller: str,
        reporting_instance: str,
        limiter: TokenBucket,
        retry: RetryPolicy,
        policy: EventPolicy | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self._t = transport
        self._clock = clock
        self._controller = reporting_controller
        self._instance = reporting_instance
        self._limiter = limiter
        self._retry = retry
        self.policy = policy or EventPolicy()
        self._rng = rng or random.Random()
        self._spam = KeyedBuckets(self.policy.spam_qps, self.policy.spam_burst, clock)
        # In last-seen order: the series that ended first come first.
        self._series: OrderedDict[_Key, _Series] = OrderedDict()
        # Keys of series whose repeats were not all written (and, until the next
        # flush, of some that since were).
        self._repeated: set[_Key] = set()
        # The keys in ``_series`` by the object they are about, for ``forget``.
        self._by_object: dict[ObjectRef, list[_Key]] = {}
        self._last_name_ns = 0
        self.counters = EventCounters()

    def __len__(self) -> int:
        return len(self._series)

    # --- recording ----------------------------------------------------------------

    async def record(self, event: Event) -> None:
        now = self._clock.now()
        wall = self._clock.wall()
        key = _Key(event.regarding, event.type, event.reason, event.action, event.note)
        series = self._series.get(key)
        if series is not None and now - series.last_seen < self.policy.finish_after:
            series.count += 1
            series.last_seen = now
            series.last_seen_wall = wall
            self._series.move_to_end(key)
            self.counters.aggregated += 1
            if series.count == 2 and series.created:
                # client-go: the first repeat turns the event into a series at once.
                await self._write_series(key, series)
            else:
                self._mark_dirty(key, series)
            return
        if series is not None and series.dirty and series.created:
            # The previous series ended between flushes: write its final count first.
            await self._write_series(key, series)
        series = _Series(
            event=event,
            name=self._name_for(event.regarding),
            namespace=event.regarding.namespace or "default",
            event_time=wall,
            last_seen=now,
            last_seen_wall=wall,
        )
        if key not in self._series:
            self._by_object.setdefault(key.regarding, []).append(key)
        self._series[key] = series
        self._series.move_to_end(key)
        while len(self._series) > self.policy.max_series:
            self._drop(next(iter(self._series)))
        if not self._spam.try_acquire(event.regarding):
            self.counters.spam_dropped += 1
            self._drop(key)
            log.debug("event dropped by the per-object spam filter", object=_ref(event.regarding))
            return
        if await self._write(series, self._create_request(series), "create"):
            series.created = True
            series.last_written = self._clock.now()
            self.counters.created += 1
            if series.dirty:
                await self._write_series(key, series)
        elif self._series.get(key) is series:
            self._drop(key)

    def forget(self, regarding: ObjectRef) -> None:
        """``regarding`` was deleted: forget its series and its spam-filter bucket.
        A series with repeats still to write ends now instead, and the next flush
        writes its final count."""
        keys = self._by_object.pop(regarding, None)
        if keys is None:
            return
        ended = self._clock.now() - self.policy.finish_after
        pending = False
        for key in keys:
            series = self._series.get(key)
            if series is None:
                continue
            if series.dirty and series.created:
                # ``_series`` is in last-seen order: an ended series goes to the front.
                series.last_seen = ended
                self._series.move_to_end(key, last=False)
                pending = True
            else:
                del self._series[key]
                self._repeated.discard(key)
        if not pending:
            self._spam.forget(regarding)

    def _drop(self, key: _Key) -> None:
        """Forget the series under ``key`` (present or not)."""
        self._series.pop(key, None)
        keys = self._by_object.get(key.regarding)
        if keys is not None and key in keys:
            keys.remove(key)
            if not keys:
                del self._by_object[key.regarding]

    async def flush(self) -> None:
        """Write series that are due (refresh or end) and forget ended ones.

        Only ended series and series that took repeats are visited: ``_series`` is in
        last-seen order (every record moves its series to the end), so the ended ones
        are at its front, and ``_repeated`` holds the keys of series with repeats to
        write. Scanning every series instead took 50-290 ms at 14,000 series (40 pods
        scheduled a second for six minutes): a stall of the event loop once a minute.
        """
        finish = self.policy.finish_after
        while self._series:
            key, series = next(iter(self._series.items()))
            if self._clock.now() - series.last_seen < finish:
                break
            if series.dirty and series.created:
                await self._write_series(key, series)
            # Re-check: a repeat may have arrived while the write was in flight (and
            # moved the series to the end).
            if self._series.get(key) is series and self._clock.now() - series.last_seen >= finish:
                self._drop(key)
        now = self._clock.now()
        for key in list(self._repeated):
            repeated = self._series.get(key)
            if repeated is None or not repeated.dirty:
                self._repeated.discard(key)
            elif repeated.created and now - repeated.last_written >= self.policy.refresh_every:
                await self._write_series(key, repeated)

    async def run(self) -> None:
        """Flush periodically until cancelled."""
        while True:
            await self._clock.sleep(self.policy.tick)
            try:
                await self.flush()
            except Exception as exc:  # never let bookkeeping kill the loop
                log.warning("event flush failed", error=repr(exc))

    # --- requests -------------------------------------------------------------------

    def _name_for(self, ref: ObjectRef) -> str:
        # client-go tools/events: "<regarding name>.<unix nanoseconds in hex>".
        ns = max(int(self._clock.wall() * 1e9), self._last_name_ns + 1)
        self._last_name_ns = ns
        return f"{ref.name}.{ns:x}"

    def _body(self, series: _Series) -> dict[str, Any]:
        e = series.event
        ref = e.regarding
        regarding: dict[str, str] = {
            "kind": ref.kind,
            "name": ref.name,
            "apiVersion": ref.api_version,
        }
        if ref.namespace:
            regarding["namespace"] = ref.namespace
        if ref.uid:
            regarding["uid"] = ref.uid
        body: dict[str, Any] = {
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            "metadata": {"name": series.name, "namespace": series.namespace},
            "eventTime": micro_time(series.event_time),
            "reportingController": e.reporting_controller or self._controller,
            "reportingInstance": self._instance,
            "action": e.action,
            "reason": e.reason,
            "regarding": regarding,
            "note": truncate_note(e.note),
            "type": e.type,
        }
        if series.count > 1:
            body["series"] = self._series_field(series)
        return body

    def _series_field(self, series: _Series) -> dict[str, Any]:
        return {"count": series.count, "lastObservedTime": micro_time(series.last_seen_wall)}

    def _create_request(self, series: _Series) -> tuple[str, str, bytes, str]:
        path = f"/apis/events.k8s.io/v1/namespaces/{series.namespace}/events"
        body = to_json(self._body(series))
        return "POST", path, body, "application/json"

    async def _write_series(self, key: _Key, series: _Series) -> None:
        if not self._spam.try_acquire(series.event.regarding):
            self._mark_dirty(key, series)  # written by a later flush, if the budget allows
            return
        series.dirty = False
        path = f"/apis/events.k8s.io/v1/namespaces/{series.namespace}/events/{series.name}"
        patch = to_json({"series": self._series_field(series)})
        ok = await self._write(series, ("PATCH", path, patch, STRATEGIC_MERGE_PATCH), "series")
        if not ok and series.created is False:
            # The event vanished (TTL, deletion): client-go re-creates it with the series.
            series.name = self._name_for(series.event.regarding)
            ok = await self._write(series, self._create_request(series), "create")
            series.created = ok
        if ok:
            series.last_written = self._clock.now()
            self.counters.series_writes += 1
        else:
            self._mark_dirty(key, series)

    def _mark_dirty(self, key: _Key, series: _Series) -> None:
        series.dirty = True
        self._repeated.add(key)

    async def _write(
        self, series: _Series, request: tuple[str, str, bytes, str], what: str
    ) -> bool:
        method, path, body, content_type = request

        async def attempt() -> Response:
            await self._limiter.acquire()
            return await self._t.request(method, path, body=body, content_type=content_type)

        try:
            await with_retries(
                attempt, policy=self._retry, clock=self._clock, rng=self._rng, what=f"event {what}"
            )
        except ApiError as exc:
            if what == "series" and exc.is_not_found:
                series.created = False
                return False
            self.counters.failed += 1
            log.warning(
                "unable to write event",
                object=_ref(series.event.regarding),
                reason=series.event.reason,
                status=exc.status,
                error=exc.message,
            )
            return False
        return True


def _ref(ref: ObjectRef) -> str:
    return f"{ref.namespace}/{ref.name}" if ref.namespace else ref.name
