"""What malformed and hostile requests get from the scheduler's HTTP endpoints: a 400
and one log line per interval without a traceback, and never the debug endpoint's
answer without the token (path tricks, request smuggling, HTTP/1.0 and 0.9,
oversized headers)."""

from __future__ import annotations

import logging
from typing import Any

import pytest
import structlog
from troupe.kube.http_guard import ServingLimits
from troupe.kube.serving_log import MALFORMED

from tests.kube.health_clients import Frozen, exchange, get, serving, status_of

MALFORMED_REQUESTS = [
    pytest.param(b"GARBAGE\r\n\r\n", id="not HTTP at all"),
    pytest.param(
        b"GET /healthz HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n", id="header without colon"
    ),
    pytest.param(b"GET /healthz HTTP/7.3\r\nHost: x\r\n\r\n", id="unknown HTTP version"),
    pytest.param(b"GET /healthz HTTP/1.1\r\nHost: x\x00y\r\n\r\n", id="NUL in a header"),
    pytest.param(
        b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 70_000 + b"\r\n\r\n",
        id="oversized header",
    ),
    pytest.param(
        b"POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        id="Content-Length with Transfer-Encoding",
    ),
]


@pytest.mark.parametrize("raw", MALFORMED_REQUESTS)
async def test_a_malformed_request_is_answered_400_and_logged_without_a_traceback(
    raw: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.DEBUG), structlog.testing.capture_logs() as logs:
        async with serving(clock=Frozen()) as server:
            reply = await exchange(server.port, raw)
            assert status_of(reply) == 400
            assert b"Traceback" not in reply
            assert server.report.total[MALFORMED] == 1
    assert not [r for r in caplog.records if r.name.startswith("aiohttp")]
    (line,) = logs
    assert line["log_level"] == "info" and line[MALFORMED] == 1
    assert "exc_info" not in line


async def test_a_flood_of_malformed_requests_logs_one_line_per_interval() -> None:
    clock = Frozen()
    interval = 60.0
    with structlog.testing.capture_logs() as logs:
        async with serving(clock=clock, limits=ServingLimits(report_interval=interval)) as server:
            for i in range(200):
                assert status_of(await exchange(server.port, b"GARBAGE %d\r\n\r\n" % i)) == 400
            assert len(logs) == 1
            clock.now += interval
            await exchange(server.port, b"GARBAGE\r\n\r\n")
            assert len(logs) == 2
            # The probes answered throughout.
            assert status_of(await exchange(server.port, get("/healthz"))) == 200
    first, second = logs
    assert first[MALFORMED] == 1 and second[MALFORMED] == 200
    assert all("exc_info" not in line for line in logs)


async def test_a_failing_handler_is_logged_with_its_traceback_once_per_interval() -> None:
    def explain(*args: str) -> dict[str, Any]:
        raise RuntimeError("a bug in explain")

    clock = Frozen()
    path = "/debug/troupe/explain?kind=pod&namespace=default&name=p"
    auth = f"Authorization: Bearer {TOKEN}"
    with structlog.testing.capture_logs() as logs:
        async with serving(clock=clock, explain=explain, debug_token=TOKEN) as server:
            for _ in range(3):
                assert status_of(await exchange(server.port, get(path, auth))) == 500
    (line,) = logs
    assert line["log_level"] == "error" and isinstance(line["exc_info"], RuntimeError)


TOKEN = "s3cret-debug-token-0123456789"
SECRET = "the-diagnosis-marker"
QUERY = "?kind=pod&namespace=default&name=p"


def _explain_recording(calls: list[tuple[str, ...]]) -> Any:
    def explain(*args: str) -> dict[str, Any]:
        calls.append(args)
        return {"message": SECRET}

    return explain


HOSTILE = [
    pytest.param(get("/debug/troupe/explain" + QUERY), id="no token"),
    pytest.param(get("/debug/troupe/explain" + QUERY, "Authorization: Bearer nope"), id="wrong"),
    pytest.param(get("/debug/troupe/explain" + QUERY, version="HTTP/1.0"), id="HTTP/1.0"),
    pytest.param(b"GET /debug/troupe/explain" + QUERY.encode() + b"\r\n", id="HTTP/0.9"),
    pytest.param(get("//debug/troupe/explain" + QUERY), id="double slash"),
    pytest.param(get("/debug/troupe/explain/" + QUERY), id="trailing slash"),
    pytest.param(get("/debug/troupe/./explain" + QUERY), id="dot segment"),
    pytest.param(get("/debug/x/../troupe/explain" + QUERY), id="dot-dot segment"),
    pytest.param(get("/debug/troupe/%65xplain" + QUERY), id="percent-encoded letter"),
    pytest.param(get("/debug%2Ftroupe%2Fexplain" + QUERY), id="percent-encoded slashes"),
    pytest.param(get("/DEBUG/troupe/explain" + QUERY), id="upper case"),
    pytest.param(get("/metrics/../debug/troupe/explain" + QUERY), id="from an open path"),
    pytest.param(
        b"POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 70\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
        b"GET /debug/troupe/explain" + QUERY.encode() + b" HTTP/1.1\r\nHost: x\r\n\r\n",
        id="smuggled behind Content-Length and Transfer-Encoding",
    ),
    pytest.param(
        b"GET /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nContent-Length: 60\r\n\r\n"
        b"GET /debug/troupe/explain" + QUERY.encode() + b" HTTP/1.1\r\nHost: x\r\n\r\n",
        id="smuggled behind two Content-Lengths",
    ),
    pytest.param(
        get("/debug/troupe/explain" + QUERY, "Authorization: Bearer " + "a" * 100_000),
        id="oversized token",
    ),
    pytest.param(
        get("/debug/troupe/explain" + QUERY, f"Authorization: Basic {TOKEN}"),
        id="the token under another scheme",
    ),
]


@pytest.mark.parametrize("raw", HOSTILE)
async def test_the_debug_endpoint_answers_nobody_without_the_token(raw: bytes) -> None:
    calls: list[tuple[str, ...]] = []
    limits = ServingLimits(header_timeout=2.0)
    async with serving(limits=limits, explain=_explain_recording(calls), debug_token=TOKEN) as s:
        reply = await exchange(s.port, raw)
    assert SECRET.encode() not in reply
    assert calls == []
    assert status_of(reply) in (0, 400, 401, 403, 404, 405, 431)


@pytest.mark.parametrize("version", ["HTTP/1.1", "HTTP/1.0"])
async def test_the_debug_endpoint_answers_the_token(version: str) -> None:
    """The hostile cases above fail for the right reason: with the token, it answers."""
    calls: list[tuple[str, ...]] = []
    async with serving(explain=_explain_recording(calls), debug_token=TOKEN) as s:
        raw = get(
            "/debug/troupe/explain" + QUERY, f"Authorization: Bearer {TOKEN}", version=version
        )
        reply = await exchange(s.port, raw)
    assert status_of(reply) == 200 and SECRET.encode() in reply
    assert calls == [("pod", "default", "p", "")]
