"""Fault injection for tests: failed and slow requests, cut watches, compaction.

``ApiServer.faults`` is a ``Faults``. Rules match the HTTP method (``"*"`` for any) and a
regular expression searched in the request path; each fires ``times`` times (``-1``:
until ``reset``). A failure answers with a proper ``metav1.Status`` for its code (and a
``Retry-After`` header for 429/503 when ``retry_after`` is given), before the request
reaches the store; ``fail`` and ``delay`` return the rule, whose ``hits`` count the
requests it answered. ``drop_watches`` aborts every open watch connection mid-stream;
``compact`` forgets the watch history so any older resourceVersion gets 410 Expired.
"""

from __future__ import annotations

import asyncio
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

from troupe.sim.apiserver.machinery.errors import ApiError, status_failure

_REASONS: Final = {
    400: ("BadRequest", "the server rejected our request for an unknown reason"),
    401: ("Unauthorized", "Unauthorized"),
    403: ("Forbidden", "forbidden: injected fault"),
    404: ("NotFound", "the server could not find the requested resource"),
    405: ("MethodNotAllowed", "the server does not allow this method on the requested resource"),
    409: ("Conflict", "Operation cannot be fulfilled: injected fault"),
    410: ("Expired", "injected fault"),
    422: ("Invalid", "injected fault"),
    429: ("TooManyRequests", "Too many requests, please try again later."),
    500: ("InternalError", "Internal error occurred: injected fault"),
    503: ("ServiceUnavailable", "the server is currently unable to handle the request"),
    504: (
        "Timeout",
        "the server was unable to return a response in the time allotted, but may still "
        "be processing the request",
    ),
}


@dataclass
class Rule:
    """One injected fault; ``hits`` counts the requests it has answered."""

    method: str
    path: re.Pattern[str]
    remaining: int
    status: int = 0
    retry_after: float | None = None
    seconds: float = 0.0
    hits: int = field(default=0)

    def matches(self, method: str, path: str) -> bool:
        return (
            (self.method in ("*", method))
            and self.remaining != 0
            and self.path.search(path) is not None
        )

    def consume(self) -> None:
        self.hits += 1
        if self.remaining > 0:
            self.remaining -= 1


def fault_status(code: int, retry_after: float | None = None) -> ApiError:
    reason, message = _REASONS.get(
        code, ("InternalError", "Internal error occurred: injected fault")
    )
    details = {"retryAfterSeconds": math.ceil(retry_after)} if retry_after is not None else {}
    headers = {"Retry-After": str(math.ceil(retry_after))} if retry_after is not None else {}
    return ApiError(status_failure(code, reason, message, details), headers)


class Faults:
    def __init__(self, drop: Callable[[], int], compact: Callable[[], None]) -> None:
        self._failures: list[Rule] = []
        self._delays: list[Rule] = []
        self._drop = drop
        self._compact = compact

    def fail(
        self,
        method: str,
        path_regex: str,
        status: int,
        times: int = 1,
        retry_after: float | None = None,
    ) -> Rule:
        rule = Rule(method.upper(), re.compile(path_regex), times, status, retry_after)
        self._failures.append(rule)
        return rule

    def delay(self, method: str, path_regex: str, seconds: float, times: int = 1) -> Rule:
        rule = Rule(method.upper(), re.compile(path_regex), times, seconds=seconds)
        self._delays.append(rule)
        return rule

    def drop_watches(self) -> int:
        """Abort every open watch stream; returns how many were cut."""
        return self._drop()

    def compact(self) -> None:
        self._compact()

    def reset(self) -> None:
        self._failures.clear()
        self._delays.clear()

    @property
    def active(self) -> bool:
        return bool(self._failures or self._delays)

    async def apply(self, method: str, path: str) -> None:
        """Sleep for a matching delay, then raise a matching failure, if any."""
        for rule in self._delays:
            if rule.matches(method, path):
                rule.consume()
                await asyncio.sleep(rule.seconds)
                break
        for rule in self._failures:
            if rule.matches(method, path):
                rule.consume()
                raise fault_status(rule.status, rule.retry_after)
