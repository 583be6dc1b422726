"""Errors of the kube client module, and the one place transport failures become
``troupe.api.client.ApiError``.

Every request made by ``troupe.kube`` ends either in a 2xx response or in an
``ApiError``: HTTP failures carry their status and the ``message`` of the ``Status``
body the API server sent; failures with no response (connection refused or reset,
timeouts, TLS errors) carry status 0. The retry policy (``retry.py``) reads
``ResponseError.retry_after`` to honour ``Retry-After``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

import aiohttp
from kubernetes_asyncio.client.exceptions import ApiException

from troupe.api.client import ApiError

# Enough of a body to explain a failure in a log line without flooding it.
_MAX_BODY_IN_MESSAGE = 500


class KubeConnectionError(Exception):
    """The API server cannot be configured or reached. The message names the
    kubeconfig path or the server URL at fault."""


class ResponseError(ApiError):
    """An ``ApiError`` with what the retry policy needs from the response."""

    def __init__(
        self, status: int, message: str, *, reason: str = "", retry_after: float | None = None
    ) -> None:
        super().__init__(status, message)
        self.reason = reason  # Status.reason: AlreadyExists, Conflict, NotFound, ...
        self.retry_after = retry_after


def parse_retry_after(value: str | None) -> float | None:
    """Seconds from a ``Retry-After`` header. Like client-go, only the delay-seconds
    form is understood; an HTTP date or garbage means "no hint"."""
    if not value:
        return None
    try:
        seconds = float(value.strip())
    except ValueError:
        return None
    return seconds if seconds >= 0 else None


def status_details(body: bytes | str | None) -> tuple[str, str]:
    """``(message, reason)`` of a ``Status`` body; a non-JSON body becomes the message."""
    if not body:
        return "", ""
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    try:
        data = json.loads(text)
    except ValueError:
        return text.strip()[:_MAX_BODY_IN_MESSAGE], ""
    if not isinstance(data, dict):
        return text.strip()[:_MAX_BODY_IN_MESSAGE], ""
    message = data.get("message")
    reason = data.get("reason")
    return (
        message if isinstance(message, str) else text.strip()[:_MAX_BODY_IN_MESSAGE],
        reason if isinstance(reason, str) else "",
    )


def response_error(
    status: int, body: bytes | str | None, retry_after: str | None = None, what: str = ""
) -> ResponseError:
    message, reason = status_details(body)
    if not message:
        message = f"HTTP {status}"
    if what:
        message = f"{what}: {message}"
    return ResponseError(status, message, reason=reason, retry_after=parse_retry_after(retry_after))


def to_api_error(exc: BaseException, what: str = "") -> ApiError:
    """Map any failure of a request onto ``ApiError`` (status 0: no response)."""
    prefix = f"{what}: " if what else ""
    if isinstance(exc, ApiError):
        return exc
    if isinstance(exc, ApiException):
        headers: Mapping[str, str] = exc.headers or {}
        return response_error(
            int(exc.status or 0),
            exc.body or exc.reason,
            headers.get("Retry-After"),
            what,
        )
    if isinstance(exc, aiohttp.ClientResponseError):
        retry_after = exc.headers.get("Retry-After") if exc.headers else None
        return response_error(exc.status, exc.message, retry_after, what)
    # aiohttp's ServerTimeoutError is both a ClientError and a TimeoutError: say "timed out".
    if isinstance(exc, TimeoutError):
        return ResponseError(0, f"{prefix}request timed out")
    if isinstance(exc, aiohttp.ClientError | OSError):
        detail = str(exc) or type(exc).__name__
        return ResponseError(0, f"{prefix}{type(exc).__name__}: {detail}")
    return ResponseError(0, f"{prefix}{exc!r}")
