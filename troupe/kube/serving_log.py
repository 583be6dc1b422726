"""What the scheduler's HTTP endpoints refuse, logged once per interval.

aiohttp logs every malformed request at ``error`` with its traceback: a client
sending garbage to the metrics port wrote 48 MB of log in 15 s (1 KB a request) and
the process kept the memory. ``HealthServer`` gives aiohttp an ``AiohttpLog``
instead, which hands each such record to a ``ServingReport``:

- malformed requests (aiohttp's ``HttpProcessingError``: a bad request line, header
  or method, oversized lines, smuggling attempts), connections reset by the peer,
  and the connections ``ConnectionGuard`` closed (header timeouts, the connection
  limit) are counted; one ``info`` line, without a traceback, says how many of each
  were seen since the last one, with the last error and peer. The first one is
  logged at once, the next no sooner than ``interval`` seconds later (60 s by
  default, ``ServingLimits.report_interval``).
- an exception raised by one of troupe's own handlers is a bug: it is logged at
  ``error`` with its traceback, also at most once per interval (with the count of
  those not logged).

aiohttp's debug chatter (premature disconnections, lingering) is dropped.
"""

from __future__ import annotations

import logging
import sys
import time
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any, Final

import structlog
from aiohttp.http_exceptions import HttpProcessingError

log = structlog.get_logger("troupe.kube.health")

MALFORMED: Final = "malformedRequests"
CONNECTION_ERRORS: Final = "connectionErrors"
HEADER_TIMEOUTS: Final = "headerTimeouts"
EVICTED: Final = "evictedAtLimit"
OTHER: Final = "otherServerMessages"


class ServingReport:
    """Counts what the endpoints refused or closed and logs it once per ``interval``."""

    def __init__(self, interval: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._interval = interval
        self._clock = clock
        self._counts: Counter[str] = Counter()
        self._last: tuple[str, str] = ("", "")
        self._next_line = float("-inf")
        self._next_error = float("-inf")
        self._errors_not_logged = 0
        self.lines = 0  # lines logged, for tests
        self.total: Counter[str] = Counter()

    def note(self, kind: str, detail: str, peer: str = "") -> None:
        """One refused request or closed connection of ``kind`` (a ``*_`` constant)."""
        self._counts[kind] += 1
        self.total[kind] += 1
        self._last = (detail, peer)
        now = self._clock()
        if now >= self._next_line:
            self._emit(now)

    def handler_failed(self, message: str, exc: BaseException) -> None:
        now = self._clock()
        if now < self._next_error:
            self._errors_not_logged += 1
            return
        self._next_error = now + self._interval
        not_logged, self._errors_not_logged = self._errors_not_logged, 0
        self.lines += 1
        log.error(message, exc_info=exc, notLoggedSinceLast=not_logged)

    def flush(self) -> None:
        """Log what was counted since the last line (at shutdown)."""
        if self._counts:
            self._emit(self._clock())

    def _emit(self, now: float) -> None:
        counts, self._counts = dict(self._counts), Counter()
        self._next_line = now + self._interval
        self.lines += 1
        detail, peer = self._last
        log.info(
            "HTTP endpoints refused requests or closed connections",
            **counts,
            lastError=detail,
            lastPeer=peer,
            reportInterval=self._interval,
        )


def _exception(exc_info: object) -> BaseException | None:
    if isinstance(exc_info, BaseException):
        return exc_info
    if isinstance(exc_info, tuple) and len(exc_info) == 3:
        found = exc_info[1]
        return found if isinstance(found, BaseException) else None
    return sys.exc_info()[1] if exc_info is True else None


class AiohttpLog(logging.LoggerAdapter[logging.Logger]):
    """The ``logger`` of aiohttp's request handlers: every record goes to a
    ``ServingReport`` (see the module doc), none to aiohttp's own logger."""

    def __init__(self, report: ServingReport) -> None:
        super().__init__(logging.getLogger("aiohttp.server"), {})
        self.report = report

    def log(
        self,
        level: int,
        msg: object,
        *args: object,
        exc_info: Any = None,
        stack_info: bool = False,
        stacklevel: int = 1,
        extra: Mapping[str, object] | None = None,
        **kwargs: object,
    ) -> None:
        exc = _exception(exc_info)
        # aiohttp's error lines are "Error handling request from %s" with the peer.
        peer = str(args[0]) if args and isinstance(args[0], str) else ""
        if isinstance(exc, HttpProcessingError):
            self.report.note(MALFORMED, f"{type(exc).__name__}: {exc.message}", peer)
        elif isinstance(exc, ConnectionError):
            self.report.note(CONNECTION_ERRORS, f"{type(exc).__name__}: {exc}", peer)
        elif exc is not None and level >= logging.ERROR:
            self.report.handler_failed(_text(msg, args), exc)
        elif level >= logging.WARNING:
            self.report.note(OTHER, _text(msg, args), peer)
        # Anything else is aiohttp's debug chatter.


def _text(msg: object, args: tuple[object, ...]) -> str:
    try:
        return str(msg) % args if args else str(msg)
    except (TypeError, ValueError):
        return str(msg)
