"""Retry policy and error mapping: what is retried, for how long, and what is raised."""

from __future__ import annotations

import asyncio
import json
import random

import aiohttp
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kubernetes_asyncio.client.exceptions import ApiException
from troupe.api.client import ApiError
from troupe.api.clock import FakeClock
from troupe.kube.errors import (
    ResponseError,
    parse_retry_after,
    status_details,
    to_api_error,
)
from troupe.kube.retry import RetryPolicy, with_retries
from troupe.kube.transport import Response

from tests.kube.fakes import reply, status_body

POLICY = RetryPolicy(max_attempts=4, initial_backoff=0.5, max_backoff=2.0, max_total=20.0)


class Script:
    """Outcomes in order; records the clock time of each attempt."""

    def __init__(self, clock: FakeClock, *outcomes: Response | ApiError) -> None:
        self.clock = clock
        self.outcomes = list(outcomes)
        self.times: list[float] = []

    async def __call__(self) -> Response:
        self.times.append(self.clock.now())
        outcome = self.outcomes.pop(0)
        if isinstance(outcome, ApiError):
            raise outcome
        return outcome


async def run_with_clock(
    clock: FakeClock,
    script: Script,
    policy: RetryPolicy = POLICY,
    first: Response | ApiError | None = None,
    start: float | None = None,
) -> Response | ApiError:
    """Run the retries, advancing the fake clock whenever the call sleeps."""
    task = asyncio.create_task(
        with_retries(
            script,
            policy=policy,
            clock=clock,
            rng=random.Random(1),
            what="test",
            first=first,
            start=start,
        )
    )
    while not task.done():
        await asyncio.sleep(0)
        if clock.sleepers:
            clock.advance(0.05)
    try:
        return task.result()
    except ApiError as exc:
        return exc


@pytest.mark.parametrize(
    ("outcomes", "result_status", "attempts"),
    [
        pytest.param([reply(200)], 200, 1, id="a 2xx reply is returned at once"),
        pytest.param([reply(503), reply(503), reply(201)], 201, 3, id="5xx is retried"),
        pytest.param([ApiError(0, "reset"), reply(200)], 200, 2, id="no reply is retried"),
        pytest.param([reply(429), reply(200)], 200, 2, id="429 is retried"),
        pytest.param([reply(404), reply(200)], 404, 1, id="404 raises at once"),
        pytest.param([reply(409), reply(200)], 409, 1, id="409 raises at once"),
        pytest.param([reply(422), reply(200)], 422, 1, id="422 raises at once"),
        pytest.param([reply(500)] * 5, 500, 4, id="attempts are bounded"),
    ],
)
async def test_what_is_retried(
    outcomes: list[Response | ApiError], result_status: int, attempts: int
) -> None:
    clock = FakeClock()
    script = Script(clock, *outcomes)
    result = await run_with_clock(clock, script)
    status = result.status if isinstance(result, ApiError | Response) else None
    assert status == result_status
    assert len(script.times) == attempts


async def test_a_first_attempt_made_by_the_caller_is_attempt_one_of_the_policy() -> None:
    """``first``: the caller's own first attempt counts against the attempts, and the
    time budget runs from when it was made."""
    clock = FakeClock()
    start = clock.now()
    clock.advance(5.0)  # the caller's attempt took 5 s and got a 503
    script = Script(clock, reply(503), reply(503), reply(503), reply(200))
    result = await run_with_clock(clock, script, first=reply(503), start=start)
    assert isinstance(result, ResponseError) and result.status == 503
    assert len(script.times) == POLICY.max_attempts - 1
    # 5 s gone and a Retry-After of 16: past the 20 s budget, so no second attempt.
    script = Script(clock, reply(200))
    start = clock.now()
    clock.advance(5.0)
    result = await run_with_clock(clock, script, first=reply(429, retry_after="16"), start=start)
    assert isinstance(result, ResponseError) and result.status == 429
    assert script.times == []


async def test_retry_after_is_honoured_exactly() -> None:
    clock = FakeClock()
    script = Script(clock, reply(429, retry_after="7"), reply(503, retry_after="3"), reply(200))
    result = await run_with_clock(clock, script)
    assert isinstance(result, Response) and result.ok
    gaps = [b - a for a, b in zip(script.times, script.times[1:], strict=False)]
    assert gaps == [pytest.approx(7.0, abs=0.06), pytest.approx(3.0, abs=0.06)]


async def test_a_retry_after_beyond_the_time_budget_raises_now() -> None:
    clock = FakeClock()
    script = Script(clock, reply(429, retry_after="60"), reply(200))
    result = await run_with_clock(clock, script)
    assert isinstance(result, ResponseError)
    assert result.status == 429 and result.retry_after == 60.0
    assert len(script.times) == 1


async def test_permanent_errors_carry_the_status_message() -> None:
    clock = FakeClock()
    body = status_body(409, 'pod p is already assigned to node "n1"', "Conflict")
    result = await run_with_clock(clock, Script(clock, reply(409, body)))
    assert isinstance(result, ResponseError)
    assert result.message == 'test: pod p is already assigned to node "n1"'
    assert result.reason == "Conflict" and result.is_conflict


@settings(max_examples=100, deadline=None)
@given(attempt=st.integers(1, 30), seed=st.integers(0, 2**32))
def test_backoff_is_exponential_capped_and_jittered(attempt: int, seed: int) -> None:
    delay = POLICY.backoff(attempt, random.Random(seed))
    base = min(POLICY.max_backoff, POLICY.initial_backoff * 2 ** (attempt - 1))
    assert base <= delay <= base * (1 + POLICY.jitter)


@settings(max_examples=50, deadline=None)
@given(statuses=st.lists(st.sampled_from([0, 429, 500, 502, 503]), min_size=1, max_size=12))
async def test_total_time_is_bounded(statuses: list[int]) -> None:
    clock = FakeClock()
    policy = RetryPolicy(max_attempts=10, initial_backoff=1.0, max_backoff=4.0, max_total=9.0)
    outcomes: list[Response | ApiError] = [
        ApiError(0, "x") if s == 0 else reply(s) for s in statuses
    ] + [reply(200)] * 12
    script = Script(clock, *outcomes)
    await run_with_clock(clock, script, policy)
    assert script.times[-1] - script.times[0] <= policy.max_total + 0.1
    assert len(script.times) <= policy.max_attempts


# --- mapping failures onto ApiError -----------------------------------------------------


def _api_exception(status: int, body: str, headers: dict[str, str] | None = None) -> ApiException:
    exc = ApiException(status=status, reason="reason phrase")
    exc.body = body
    exc.headers = headers
    return exc


@pytest.mark.parametrize(
    ("exc", "status", "message_part", "retry_after"),
    [
        pytest.param(
            _api_exception(409, json.dumps({"kind": "Status", "message": "already bound"})),
            409,
            "already bound",
            None,
            id="ApiException with a Status body keeps its message",
        ),
        pytest.param(
            _api_exception(503, "upstream down", {"Retry-After": "2"}),
            503,
            "upstream down",
            2.0,
            id="ApiException with a text body and Retry-After",
        ),
        pytest.param(
            _api_exception(0, ""),
            0,
            "reason phrase",
            None,
            id="ApiException without a reply",
        ),
        pytest.param(
            aiohttp.ClientConnectionError("Connection reset by peer"),
            0,
            "ClientConnectionError: Connection reset by peer",
            None,
            id="a reset connection is status 0",
        ),
        pytest.param(TimeoutError(), 0, "timed out", None, id="a timeout is status 0"),
        pytest.param(
            aiohttp.ServerTimeoutError("read"),
            0,
            "timed out",
            None,
            id="aiohttp's read timeout is status 0 and says so",
        ),
        pytest.param(
            ConnectionRefusedError(111, "refused"),
            0,
            "refused",
            None,
            id="a refused connection is status 0",
        ),
    ],
)
def test_failures_map_onto_api_error(
    exc: BaseException, status: int, message_part: str, retry_after: float | None
) -> None:
    err = to_api_error(exc, "GET /x")
    assert err.status == status
    assert message_part in err.message
    assert isinstance(err, ResponseError) and err.retry_after == retry_after
    assert err.is_transient == (status == 0 or status >= 500 or status == 429)


@pytest.mark.parametrize(
    ("header", "seconds"),
    [
        pytest.param("5", 5.0, id="delay seconds"),
        pytest.param(" 0 ", 0.0, id="zero with spaces"),
        pytest.param("1.5", 1.5, id="fractional seconds"),
        pytest.param("Wed, 21 Oct 2015 07:28:00 GMT", None, id="an HTTP date is no hint"),
        pytest.param("-3", None, id="negative is no hint"),
        pytest.param(None, None, id="absent"),
    ],
)
def test_retry_after_parsing(header: str | None, seconds: float | None) -> None:
    assert parse_retry_after(header) == seconds


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        pytest.param(b'{"message":"m","reason":"NotFound"}', ("m", "NotFound"), id="Status"),
        pytest.param(b"<html>bad gateway</html>", ("<html>bad gateway</html>", ""), id="html"),
        pytest.param(b"[1]", ("[1]", ""), id="JSON that is not an object"),
        pytest.param(b"", ("", ""), id="empty"),
    ],
)
def test_status_details(body: bytes, expected: tuple[str, str]) -> None:
    assert status_details(body) == expected
