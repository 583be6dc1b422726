"""The HTTP/1.1 response parser (llhttp): framing, however the bytes are split, and
refusals with llhttp's reason."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from troupe.kube.http1_parse import MAX_HEAD, ProtocolError, Reply, ResponseParser

BIG = bytes(range(256)) * 4096  # 1 MiB, every byte value


def splits(raw: bytes) -> Iterator[list[bytes]]:
    """``raw`` whole, cut in two at every position, and one byte at a time."""
    yield [raw]
    for i in range(1, len(raw)):
        yield [raw[:i], raw[i:]]
    yield [raw[i : i + 1] for i in range(len(raw))]


def parse(pieces: list[bytes], *, head_only: bool = False, eof: bool = False) -> list[Reply]:
    parser = ResponseParser()
    parser.expect(head_only)
    replies: list[Reply] = []
    for piece in pieces:
        replies += parser.feed(piece)
    if eof and (last := parser.feed_eof()) is not None:
        replies.append(last)
    return replies


FRAMING = [
    pytest.param(
        b"HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nContent-Length: 7\r\n\r\n"
        b'{"a":1}',
        {},
        Reply(201, b'{"a":1}', None, True),
        id="a body by Content-Length on a kept-alive connection",
    ),
    pytest.param(
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"4\r\nabcd\r\n1a;ext=1\r\nabcdefghijklmnopqrstuvwxyz\r\n0\r\n\r\n",
        {},
        Reply(200, b"abcdabcdefghijklmnopqrstuvwxyz", None, True),
        id="a chunked body with a chunk extension",
    ),
    pytest.param(
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: Chunked\r\n\r\n3\r\nabc\r\n0\r\nX-T: 1\r\n\r\n",
        {},
        Reply(200, b"abc", None, True),
        id="a chunked body with a trailer, header names in any case",
    ),
    pytest.param(
        b"HTTP/1.1 429 Too Many Requests\r\nRetry-After: 3\r\nContent-Length: 2\r\n\r\n{}",
        {},
        Reply(429, b"{}", "3", True),
        id="Retry-After is kept",
    ),
    pytest.param(
        b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{}",
        {},
        Reply(200, b"{}", None, False),
        id="Connection: close ends keep-alive",
    ),
    pytest.param(
        b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\n{}",
        {},
        Reply(200, b"{}", None, False),
        id="HTTP/1.0 closes by default",
    ),
    pytest.param(
        b"HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 2\r\n\r\n{}",
        {},
        Reply(200, b"{}", None, True),
        id="HTTP/1.0 with keep-alive stays open",
    ),
    pytest.param(
        b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil the end",
        {"eof": True},
        Reply(200, b"until the end", None, False),
        id="no length: the body runs until the server closes",
    ),
    pytest.param(
        b"HTTP/1.1 204 No Content\r\n\r\n",
        {},
        Reply(204, b"", None, True),
        id="204 has no body",
    ),
    pytest.param(
        b"HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\n",
        {"head_only": True},
        Reply(200, b"", None, True),
        id="the reply to HEAD has no body whatever its length",
    ),
    pytest.param(
        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nx",
        {},
        Reply(200, b"x", None, True),
        id="an interim 100 Continue is skipped",
    ),
    pytest.param(
        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n",
        {"head_only": True},
        Reply(200, b"", None, True),
        id="an interim 100 Continue before the reply to HEAD is skipped",
    ),
    pytest.param(
        b"HTTP/1.1 204 No Content\r\n\r\n",
        {"head_only": True},
        Reply(204, b"", None, True),
        id="a 204 to HEAD is one reply",
    ),
    pytest.param(
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nRetry-After: 1\r\n\r\n"
        b"1\r\nx\r\n0\r\nRetry-After: 9\r\n\r\n",
        {},
        Reply(200, b"x", "1", True),
        id="a trailer does not override a header",
    ),
    pytest.param(
        b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n",
        {},
        Reply(404, b"", None, True),
        id="an empty body",
    ),
]


@pytest.mark.parametrize(("raw", "options", "expected"), FRAMING)
def test_a_response_parses_the_same_however_it_is_split(
    raw: bytes, options: dict[str, bool], expected: Reply
) -> None:
    for pieces in splits(raw):
        assert parse(pieces, **options) == [expected], pieces


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param(
            b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(BIG), BIG),
            id="by length",
        ),
        pytest.param(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
            + b"".join(
                b"%x\r\n%s\r\n" % (len(BIG[i : i + 70000]), BIG[i : i + 70000])
                for i in range(0, len(BIG), 70000)
            )
            + b"0\r\n\r\n",
            id="chunked",
        ),
    ],
)
def test_a_large_body_arrives_intact_in_socket_sized_reads(raw: bytes) -> None:
    pieces = [raw[i : i + 65536] for i in range(0, len(raw), 65536)]
    assert parse(pieces) == [Reply(200, BIG, None, True)]


def test_several_responses_in_one_read_come_out_in_order() -> None:
    raw = (
        b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\na"
        b"HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nb\r\n0\r\n\r\n"
        b"HTTP/1.1 204 No Content\r\n\r\n"
    )
    parser = ResponseParser()
    assert parser.feed(raw) == [
        Reply(200, b"a", None, True),
        Reply(201, b"b", None, True),
        Reply(204, b"", None, True),
    ]
    assert parser.idle


def test_a_close_before_the_body_ends_yields_nothing() -> None:
    parser = ResponseParser()
    assert parser.feed(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc") == []
    assert not parser.idle
    assert parser.feed_eof() is None


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        pytest.param(b"HTTP/2 200 OK\r\n\r\n", "Expected dot", id="not HTTP/1.x"),
        pytest.param(b"HTTP/1.1 2x0 OK\r\n\r\n", "Invalid status code", id="a non-numeric status"),
        pytest.param(
            b"HTTP/1.1 2000 OK\r\n\r\n", "Invalid response status", id="a four-digit status"
        ),
        pytest.param(b"SSH-2.0-OpenSSH\r\n\r\n", "Expected HTTP/", id="not HTTP at all"),
        pytest.param(
            b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
            "Invalid character in Content-Length",
            id="a negative length",
        ),
        pytest.param(
            b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
            "Duplicate Content-Length",
            id="two different lengths",
        ),
        pytest.param(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
            "unsupported Transfer-Encoding",
            id="a transfer coding other than chunked",
        ),
        pytest.param(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
            "Invalid character in chunk size",
            id="a chunk size that is not hex",
        ),
        pytest.param(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabcd\r\n",
            "Expected LF after chunk data",
            id="a chunk longer than its size",
        ),
        pytest.param(
            b"HTTP/1.1 200 OK\r\nContent-Length 2\r\n\r\n",
            "Invalid header field char",
            id="a header line without a colon",
        ),
        pytest.param(
            b"HTTP/1.1 200 OK\r\nContent-Length : 2\r\n\r\n",
            "Invalid header field char",
            id="whitespace before the colon",
        ),
        pytest.param(
            b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n"
            b"1\r\nx\r\n0\r\n\r\n",
            "Transfer-Encoding can't be present with Content-Length",
            id="both chunked and a length: RFC 9112 6.3, possible smuggling",
        ),
        pytest.param(
            b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-Folded: a\r\n b\r\n\r\n{}",
            "Unexpected whitespace after header value",
            id="an obsolete folded header line",
        ),
        pytest.param(
            b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nx",
            "Duplicate Content-Length",
            id="the same length twice",
        ),
        pytest.param(
            b"HTTP/2.0 200 OK\r\nContent-Length: 0\r\n\r\n",
            "unsupported HTTP version 2.0",
            id="a version other than 1.0 and 1.1",
        ),
        pytest.param(
            b"HTTP/1.1 200 OK\nContent-Length: 1\n\nx",
            "Missing expected CR after response line",
            id="a line ending in LF alone",
        ),
        pytest.param(
            b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\nConnection: upgrade\r\n\r\n",
            "unexpected 101",
            id="a protocol switch with its Upgrade header",
        ),
        pytest.param(
            b"HTTP/1.1 101 Switching Protocols\r\n\r\n",
            "unexpected 101",
            id="a protocol switch nobody asked for",
        ),
        pytest.param(
            b"HTTP/1.1 200 OK\r\nX: " + b"a" * (MAX_HEAD + 1),
            "headers exceed",
            id="endless headers",
        ),
        pytest.param(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\r\n0\r\nX: "
            + b"a" * (MAX_HEAD + 1),
            "headers exceed",
            id="an endless trailer",
        ),
    ],
)
def test_a_response_that_cannot_be_framed_is_refused(raw: bytes, message: str) -> None:
    for size in (len(raw), 1 if len(raw) < 1000 else 4096):  # whole, and in pieces
        parser = ResponseParser()
        with pytest.raises(ProtocolError, match=message):
            for i in range(0, len(raw), size):
                parser.feed(raw[i : i + size])


def test_bytes_after_a_reply_that_are_no_reply_leave_the_reply_standing() -> None:
    parser = ResponseParser()
    raw = b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{}junk"
    assert parser.feed(raw) == [Reply(200, b"{}", None, False)]
    assert not parser.idle  # the pool drops the connection
    with pytest.raises(ProtocolError, match="Data after `Connection: close`"):
        parser.feed(b"more")


@pytest.mark.parametrize(
    "first",
    [
        pytest.param(b"HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\n", id="by length"),
        pytest.param(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", id="chunked"),
    ],
)
def test_after_the_reply_to_head_the_next_reply_is_framed_afresh(first: bytes) -> None:
    parser = ResponseParser()
    parser.expect(head_only=True)
    assert parser.feed(first) == [Reply(200, b"", None, True)]
    assert parser.idle
    assert parser.feed(b"HTTP/1.1 201 Created\r\nContent-Length: 1\r\n\r\nx") == [
        Reply(201, b"x", None, True)
    ]
    assert parser.idle


def test_bytes_after_the_reply_to_head_are_no_reply_to_it() -> None:
    parser = ResponseParser()
    parser.expect(head_only=True)
    raw = b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc"
    assert parser.feed(raw) == [Reply(200, b"", None, True)]
    assert not parser.idle  # the pool drops the connection
