"""The HTTP/1.1 response parser: framing, however the bytes are split, and refusals."""

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
        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-Folded: a\r\n b\r\n\r\n{}",
        {},
        Reply(200, b"{}", None, True),
        id="an obsolete folded header line is ignored",
    ),
    pytest.param(
        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"1\r\nx\r\n0\r\n\r\n",
        {},
        Reply(200, b"x", None, False),
        id="chunked wins over Content-Length and the connection is not reused",
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
        pytest.param(b"HTTP/2 200 OK\r\n\r\n", "bad status line", id="not HTTP/1.x"),
        pytest.param(b"HTTP/1.1 2x0 OK\r\n\r\n", "bad status line", id="a non-numeric status"),
        pytest.param(b"HTTP/1.1 2000 OK\r\n\r\n", "bad status line", id="a four-digit status"),
        pytest.param(b"SSH-2.0-OpenSSH\r\n\r\n", "bad status line", id="not HTTP at all"),
        pytest.param(
            b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
            "bad Content-Length",
            id="a negative length",
        ),
        pytest.param(
            b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
            "conflicting Content-Length",
            id="two different lengths",
        ),
        pytest.param(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
            "unsupported Transfer-Encoding",
            id="a transfer coding other than chunked",
        ),
        pytest.param(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
            "bad chunk size",
            id="a chunk size that is not hex",
        ),
        pytest.param(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabcd\r\n",
            "chunk not followed by CRLF",
            id="a chunk longer than its size",
        ),
        pytest.param(
            b"HTTP/1.1 200 OK\r\nContent-Length 2\r\n\r\n",
            "malformed header line",
            id="a header line without a colon",
        ),
        pytest.param(
            b"HTTP/1.1 200 OK\r\nContent-Length : 2\r\n\r\n",
            "malformed header line",
            id="whitespace before the colon",
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
    ],
)
def test_a_response_that_cannot_be_framed_is_refused(raw: bytes, message: str) -> None:
    with pytest.raises(ProtocolError, match=message):
        ResponseParser().feed(raw)
