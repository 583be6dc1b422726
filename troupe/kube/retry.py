"""Bounded retries of transient API failures.

``with_retries`` runs one request (a coroutine factory) until it gets a 2xx reply,
a permanent failure, or the policy's bounds are reached:

- transient: no reply (status 0: refused, reset, timed out), 429, 5xx. The next
  attempt waits the reply's ``Retry-After`` seconds when present (client-go's
  ``checkWait`` does the same for 429 and 5xx), otherwise an exponential backoff
  with jitter (``wait.Jitter``: delay × (1 + jitter × rand));
- permanent: any other 4xx raises ``ApiError(status, Status.message)`` at once;
- bounds: ``max_attempts`` attempts, and no wait that would end past
  ``max_total`` seconds after the first attempt (the last error is raised).

Unlike client-go, which retries 5xx only when the server sent ``Retry-After``,
troupe also retries a bare 5xx: the scheduler's writes are either idempotent or
guarded (a retried binding is detected by ``KubeClient.bind``). Waiting goes
through the injected Clock, so tests never sleep.
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import structlog

from troupe.api.client import ApiError
from troupe.api.clock import Clock
from troupe.kube.errors import ResponseError
from troupe.kube.transport import Response

log = structlog.get_logger("troupe.kube")


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    max_attempts: int = 5
    initial_backoff: float = 0.2
    max_backoff: float = 5.0
    max_total: float = 30.0
    jitter: float = 0.25

    def backoff(self, failed_attempts: int, rng: random.Random) -> float:
        """Delay after the ``failed_attempts``-th failure (1-based)."""
        base = min(self.max_backoff, self.initial_backoff * 2.0 ** (failed_attempts - 1))
        return base * (1.0 + self.jitter * rng.random())


NO_RETRY = RetryPolicy(max_attempts=1)


def is_transient(err: ApiError) -> bool:
    return err.is_transient


def is_ambiguous(err: ApiError) -> bool:
    """The request may have been applied although it failed (no reply, or a 5xx
    from a proxy or a server that timed out after writing)."""
    return err.status == 0 or err.status >= 500


async def with_retries(
    op: Callable[[], Awaitable[Response]],
    *,
    policy: RetryPolicy,
    clock: Clock,
    rng: random.Random,
    what: str,
    retry_on: Callable[[ApiError], bool] = is_transient,
    on_failure: Callable[[ApiError], None] | None = None,
    first: Response | ApiError | None = None,
    start: float | None = None,
) -> Response:
    """The first 2xx reply of ``op``; raises the last ``ApiError`` otherwise.

    ``first``: the outcome of a first attempt the caller made itself (at ``start``,
    by ``clock``), so that a request that succeeds at once costs none of this."""
    if start is None:
        start = clock.now()
    attempt = 0
    while True:
        attempt += 1
        if first is not None:
            outcome, first = first, None
        else:
            try:
                outcome = await op()
            except ApiError as exc:
                outcome = exc
        if isinstance(outcome, ApiError):
            err = outcome
        elif outcome.ok:
            return outcome
        else:
            err = outcome.error(what)
        if on_failure is not None:
            on_failure(err)
        if attempt >= policy.max_attempts or not retry_on(err):
            raise err
        hinted = err.retry_after if isinstance(err, ResponseError) else None
        delay = hinted if hinted is not None else policy.backoff(attempt, rng)
        if clock.now() - start + delay > policy.max_total:
            raise err
        log.debug(
            "retrying API request", what=what, attempt=attempt, status=err.status, delay=delay
        )
        await clock.sleep(delay)
