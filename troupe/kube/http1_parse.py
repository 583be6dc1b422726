"""Incremental HTTP/1.1 response parser for ``http1``'s connections.

Fed whatever bytes arrive (a response split over many reads, or several responses
in one), it yields whole replies: status, body (by ``Content-Length``, chunked, or
until the server closes) and the few headers troupe acts on (``Retry-After``,
whether the connection stays open). Anything it cannot frame with certainty raises
``ProtocolError``: a mis-framed response leaves the connection unusable, so the
caller discards it rather than guess where the next response starts.
"""

from __future__ import annotations

from typing import NamedTuple

MAX_HEAD = 1 << 20  # status line + headers; the API server sends a few hundred bytes
_MAX_CHUNK_LINE = 4096  # chunk size plus extensions
_HEX = frozenset(b"0123456789abcdefABCDEF")

_SPACE = (b" ", b"\t")
# The headers troupe acts on.
_CONTENT_LENGTH, _TRANSFER_ENCODING, _CONNECTION, _RETRY_AFTER = range(4)
_WANTED = {
    b"content-length": _CONTENT_LENGTH,
    b"transfer-encoding": _TRANSFER_ENCODING,
    b"connection": _CONNECTION,
    b"retry-after": _RETRY_AFTER,
}

# What the parser waits for next.
_HEAD, _LENGTH, _CHUNK_SIZE, _CHUNK_DATA, _TRAILER, _UNTIL_CLOSE = range(6)


class ProtocolError(ConnectionError):
    """The server's bytes are not a well-framed HTTP/1.1 response."""


class Reply(NamedTuple):
    status: int
    body: bytes
    retry_after: str | None
    keep_alive: bool


class ResponseParser:
    """One response at a time; ``expect(head_only)`` before each request."""

    __slots__ = (
        "_body",
        "_buf",
        "_head_only",
        "_keep_alive",
        "_remaining",
        "_retry_after",
        "_state",
        "_status",
    )

    def __init__(self) -> None:
        self._buf = bytearray()
        self._body = bytearray()
        self._state = _HEAD
        self._status = 0
        self._retry_after: str | None = None
        self._keep_alive = True
        self._remaining = 0
        self._head_only = False

    def expect(self, head_only: bool = False) -> None:
        """The next response answers a request whose reply has no body (HEAD)."""
        self._head_only = head_only

    @property
    def idle(self) -> bool:
        """No byte of a response is buffered or half-parsed."""
        return self._state == _HEAD and not self._buf

    def feed(self, data: bytes) -> list[Reply]:
        """Every response completed by ``data`` (normally none or one)."""
        if self._state == _HEAD and not self._buf and (end := data.find(b"\r\n\r\n")) >= 0:
            # The common case, a whole response in one read, without buffer copies.
            first = self._start(data[:end])
            rest = data[end + 4 :]
            if self._state == _LENGTH and len(rest) == self._remaining:
                return [self._finish(rest)]
            replies = [] if first is None else [first]
            if not rest:
                return replies
            self._buf += rest
            return replies + self._drain()
        self._buf += data
        return self._drain()

    def _drain(self) -> list[Reply]:
        replies: list[Reply] = []
        while True:
            before = (self._state, len(self._buf))
            reply = self._step()
            if reply is not None:
                replies.append(reply)
            elif (self._state, len(self._buf)) == before:
                return replies

    def feed_eof(self) -> Reply | None:
        """The server closed: a body read until close ends here; any other partial
        response is lost (``None``)."""
        if self._state != _UNTIL_CLOSE:
            return None
        body = bytes(self._buf)
        self._buf.clear()
        return self._finish(body)

    def _step(self) -> Reply | None:
        buf = self._buf
        state = self._state
        if state == _HEAD:
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                if len(buf) > MAX_HEAD:
                    raise ProtocolError(f"response headers exceed {MAX_HEAD} bytes")
                return None
            head = bytes(buf[:end])
            del buf[: end + 4]
            return self._start(head)
        if state == _LENGTH:
            n = self._remaining
            if len(buf) < n:
                return None
            if len(buf) == n:
                body = bytes(buf)
                buf.clear()
            else:
                body = bytes(buf[:n])
                del buf[:n]
            return self._finish(body)
        if state == _CHUNK_SIZE:
            return self._chunk_size()
        if state == _CHUNK_DATA:
            n = self._remaining
            if len(buf) < n + 2:
                return None
            if buf[n : n + 2] != b"\r\n":
                raise ProtocolError("chunk not followed by CRLF")
            self._body += buf[:n]
            del buf[: n + 2]
            self._state = _CHUNK_SIZE
            return self._chunk_size()
        if state == _TRAILER:
            return self._trailer()
        return None  # _UNTIL_CLOSE: everything up to the close is the body

    def _start(self, head: bytes) -> Reply | None:
        lines = head.split(b"\r\n")
        status, keep_alive = _status_line(lines[0])
        length: int | None = None
        chunked = False
        retry_after: str | None = None
        for line in lines[1:]:
            name, sep, value = line.partition(b":")
            kind = _WANTED.get(name.lower())
            if kind is None:
                if (sep and name and name[-1:] not in _SPACE) or line[:1] in _SPACE:
                    continue  # a header troupe ignores, or an obsolete folded line of one
                raise ProtocolError(f"malformed header line {line[:80]!r}")
            if kind == _CONTENT_LENGTH:
                length = _content_length(value, length)
            elif kind == _TRANSFER_ENCODING:
                if value.strip().lower() != b"chunked":
                    raise ProtocolError(f"unsupported Transfer-Encoding {value.strip()!r}")
                chunked = True
            elif kind == _CONNECTION:
                tokens = {t.strip() for t in value.lower().split(b",")}
                if b"close" in tokens:
                    keep_alive = False
                elif b"keep-alive" in tokens:
                    keep_alive = True
            else:
                retry_after = value.strip().decode("latin-1")
        if 100 <= status < 200:
            if status == 101:
                raise ProtocolError("unexpected 101 Switching Protocols")
            return None  # interim response (100 Continue, 103 Early Hints): the real one follows
        self._status, self._retry_after, self._keep_alive = status, retry_after, keep_alive
        if self._head_only or status in (204, 304):
            return self._finish(b"")
        if chunked:
            # RFC 9112 6.3: Transfer-Encoding wins over Content-Length, and such a
            # message may have been an attempt at smuggling: do not reuse the connection.
            if length is not None:
                self._keep_alive = False
            self._state = _CHUNK_SIZE
        elif length is not None:
            if length == 0:
                return self._finish(b"")
            self._remaining = length
            self._state = _LENGTH
        else:
            self._keep_alive = False
            self._state = _UNTIL_CLOSE
        return None

    def _chunk_size(self) -> Reply | None:
        buf = self._buf
        end = buf.find(b"\r\n")
        if end < 0:
            if len(buf) > _MAX_CHUNK_LINE:
                raise ProtocolError("chunk size line too long")
            return None
        size_field = bytes(buf[:end]).partition(b";")[0].strip()
        if not size_field or len(size_field) > 16 or not _HEX.issuperset(size_field):
            raise ProtocolError(f"bad chunk size {bytes(buf[:end])[:40]!r}")
        del buf[: end + 2]
        size = int(size_field, 16)
        if size == 0:
            self._state = _TRAILER
            return self._trailer()
        self._remaining = size
        self._state = _CHUNK_DATA
        return None

    def _trailer(self) -> Reply | None:
        buf = self._buf
        if buf[:2] == b"\r\n":
            del buf[:2]
        else:
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                if len(buf) > MAX_HEAD:
                    raise ProtocolError(f"chunked trailer exceeds {MAX_HEAD} bytes")
                return None
            del buf[: end + 4]
        body = bytes(self._body)
        self._body.clear()
        return self._finish(body)

    def _finish(self, body: bytes) -> Reply:
        self._state = _HEAD
        self._head_only = False
        return Reply(self._status, body, self._retry_after, self._keep_alive)


def _status_line(line: bytes) -> tuple[int, bool]:
    """Status code, and whether the connection persists by default (HTTP/1.1)."""
    version = line[:9]
    code = line[9:12]
    if (
        version not in (b"HTTP/1.1 ", b"HTTP/1.0 ")
        or not code.isdigit()
        or len(code) != 3
        or line[12:13] not in (b"", b" ")
    ):
        raise ProtocolError(f"bad status line {line[:80]!r}")
    return int(code), version == b"HTTP/1.1 "


def _content_length(value: bytes, previous: int | None) -> int:
    field = value.strip()
    if not field.isdigit():
        raise ProtocolError(f"bad Content-Length {field[:40]!r}")
    length = int(field)
    if previous is not None and previous != length:
        raise ProtocolError("conflicting Content-Length headers")
    return length
