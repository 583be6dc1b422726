"""HTTP/1.1 response parser for ``http1``'s connections, on llhttp (``httptools``).

llhttp is Node.js's HTTP parser; ``httptools`` (by the authors of uvloop) binds it.
Fed whatever bytes arrive (a response split over many reads, or several responses
in one), ``ResponseParser`` returns whole replies: status, body (by
``Content-Length``, chunked, or until the server closes) and the few headers troupe
acts on (``Retry-After``, whether the connection stays open). llhttp frames the
bytes; what it leaves to its caller is done here:

- the reply to a HEAD request has no body, whatever its headers say;
- interim responses (100 Continue, 103 Early Hints) are skipped, a 101 refused;
- a body that runs until the server closes ends at ``feed_eof``;
- the bytes that frame a response (headers, chunk lines, trailers) are bounded by
  ``MAX_HEAD``: llhttp buffers nothing, ``httptools`` buffers a header's value;
- a transfer coding other than ``chunked`` is refused rather than read until close.

Anything llhttp cannot frame raises ``ProtocolError`` naming llhttp's reason: a
mis-framed response leaves the connection unusable, so the caller discards it
rather than guess where the next response starts.
"""

from __future__ import annotations

from typing import NamedTuple

from httptools import HttpParserError, HttpParserUpgrade, HttpResponseParser

# The bytes of one response that are not its body (headers, chunk lines, trailers);
# the API server sends a few hundred.
MAX_HEAD = 1 << 20

# The headers troupe acts on.
_CONTENT_LENGTH, _TRANSFER_ENCODING, _RETRY_AFTER = range(3)
_WANTED = {
    b"content-length": _CONTENT_LENGTH,
    b"transfer-encoding": _TRANSFER_ENCODING,
    b"retry-after": _RETRY_AFTER,
}


class ProtocolError(ConnectionError):
    """The server's bytes are not a well-framed HTTP/1.1 response."""


class _NoCallbacks:
    """What a closed parser's llhttp calls back: nothing."""


# llhttp holds bound methods of the parser it calls back, so a parser and its llhttp
# are a reference cycle; a closed parser swaps its llhttp for this one.
_CLOSED = HttpResponseParser(_NoCallbacks())


class Reply(NamedTuple):
    status: int
    body: bytes
    retry_after: str | None
    keep_alive: bool


class ResponseParser:
    """One response at a time; ``expect(head_only)`` before each request."""

    __slots__ = (
        "_body",
        "_broken",
        "_framing",
        "_head_only",
        "_headers_done",
        "_in_message",
        "_llhttp",
        "_pending",
        "_replies",
        "_retry_after",
        "_sized",
        "_status",
    )

    def __init__(self) -> None:
        self._llhttp = HttpResponseParser(self)
        self._replies: list[Reply] = []
        self._body: list[bytes] = []
        self._status = 0
        self._retry_after: str | None = None
        self._sized = False  # Content-Length or chunked: the body does not run until close
        self._headers_done = False
        self._in_message = False
        self._framing = 0  # bytes of the current response that are not its body
        self._head_only = False
        self._pending = bytearray()  # the head of a reply to HEAD, until it is whole
        self._broken: ProtocolError | None = None

    def close(self) -> None:
        """The connection is gone: release llhttp (a reference cycle with this parser,
        which only a full collection would free) and refuse any later bytes."""
        self._llhttp = _CLOSED
        self._broken = ProtocolError("the connection is closed")

    def expect(self, head_only: bool = False) -> None:
        """The next response answers a request whose reply has no body (HEAD)."""
        self._head_only = head_only

    @property
    def idle(self) -> bool:
        """No byte of a response is buffered or half-parsed."""
        return self.is_idle()

    def is_idle(self) -> bool:
        """``idle``, as a method: a property is a Python call from C on every reply."""
        return not self._in_message and not self._pending and self._broken is None

    def feed(self, data: bytes) -> list[Reply]:
        """Every response completed by ``data`` (normally none or one)."""
        if self._head_only:
            return self._feed_head_only(data)
        return self._feed(data)

    def feed_eof(self) -> Reply | None:
        """The server closed: a body read until close ends here; any other partial
        response is lost (``None``)."""
        if not self._headers_done or self._sized or self._broken is not None:
            return None
        self._in_message = False
        return self._reply(False)

    def _feed(self, data: bytes) -> list[Reply]:
        if self._broken is not None:
            raise self._broken
        replies = self._replies = []
        self._framing += len(data)
        try:
            self._llhttp.feed_data(data)
        except (HttpParserError, HttpParserUpgrade) as exc:
            cause = exc.__context__
            error = (
                cause
                if isinstance(cause, ProtocolError)
                else ProtocolError(f"malformed HTTP response: {exc}")
            )
            if not replies:
                raise error from exc
            # A whole reply, then bytes that are not one (after `Connection: close`,
            # say): the reply stands, and the connection is not idle, so it goes.
            self._broken = error
            return replies
        if self._framing > MAX_HEAD:
            raise ProtocolError(f"response headers exceed {MAX_HEAD} bytes")
        return replies

    def _feed_head_only(self, data: bytes) -> list[Reply]:
        # llhttp cannot be told that a response has no body (httptools does not pass
        # on_headers_complete's "skip body" return), so it is fed the head alone, and
        # a fresh llhttp takes whatever follows.
        pending = self._pending
        pending += data
        replies: list[Reply] = []
        while self._head_only:
            end = pending.find(b"\r\n\r\n")
            if end < 0:
                if len(pending) > MAX_HEAD:
                    raise ProtocolError(f"response headers exceed {MAX_HEAD} bytes")
                return replies
            head = bytes(pending[: end + 4])
            del pending[: end + 4]
            replies += self._feed(head)  # an interim response leaves _head_only set
        self._llhttp = HttpResponseParser(self)
        self._in_message = self._headers_done = False
        rest = bytes(pending)
        pending.clear()
        if rest:
            try:
                replies += self._feed(rest)
            except ProtocolError as error:
                self._broken = error  # as in _feed: the reply stands, the connection goes
        return replies

    def _reply(self, keep_alive: bool) -> Reply:
        body = self._body
        data = body[0] if len(body) == 1 else b"".join(body)
        self._body = []
        self._framing = 0
        # tuple.__new__: a NamedTuple's own __new__ is Python, called from C per reply.
        return tuple.__new__(Reply, (self._status, data, self._retry_after, keep_alive))

    # --- llhttp's callbacks ------------------------------------------------------------

    def on_message_begin(self) -> None:
        self._in_message = True
        self._headers_done = False
        self._retry_after = None
        self._sized = False

    def on_header(self, name: bytes, value: bytes) -> None:
        if self._headers_done:
            return  # a chunked trailer: nothing troupe acts on
        kind = _WANTED.get(name.lower())
        if kind is None:
            return
        if kind == _RETRY_AFTER:
            self._retry_after = value.strip().decode("latin-1")
        elif kind == _TRANSFER_ENCODING:
            if value.strip().lower() != b"chunked":
                raise ProtocolError(f"unsupported Transfer-Encoding {value.strip()!r}")
            self._sized = True
        else:
            self._sized = True

    def on_headers_complete(self) -> None:
        self._headers_done = True
        llhttp = self._llhttp
        status = self._status = llhttp.get_status_code()
        if llhttp.get_http_version() not in ("1.1", "1.0"):
            raise ProtocolError(f"unsupported HTTP version {llhttp.get_http_version()}")
        if status == 101:
            raise ProtocolError("unexpected 101 Switching Protocols")
        if self._head_only and status >= 200:
            # The reply to HEAD ends here. llhttp would read a body by the headers,
            # so its keep-alive verdict is False for one without Content-Length:
            # one more connection, never a mis-framed one.
            self._head_only = self._in_message = False
            self._replies.append(self._reply(llhttp.should_keep_alive()))

    def on_body(self, body: bytes) -> None:
        self._body.append(body)
        self._framing -= len(body)

    def on_message_complete(self) -> None:
        if not self._in_message:
            return  # the reply to HEAD, given at its headers (a 204 or 304 ends here)
        self._in_message = False
        if self._status < 200:
            self._framing = 0
            return  # interim response (100 Continue, 103 Early Hints): the real one follows
        self._replies.append(self._reply(self._llhttp.should_keep_alive()))
