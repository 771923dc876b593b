from __future__ import annotations

from email.message import Message
from http.client import parse_headers
from io import BytesIO

import pytest

from gitsync.daemon.httpproto import BadRequest, Response, body_length, parse_head, render


def test_parse_head() -> None:
    method, path, headers = parse_head(b"POST /hooks/git?x=1 HTTP/1.1\r\nX-A: b\r\n\r\n")
    assert (method, path, headers["x-a"]) == ("POST", "/hooks/git", "b")


@pytest.mark.parametrize(
    "line",
    [
        b"GET /x HTTP/2.0",
        b"GET /x",
        b"GET  /x HTTP/1.1",
        b"get /x HTTP/1.1",
        b"GET http://h/x HTTP/1.1",
        b"G\xc3\xa9T /x HTTP/1.1",
    ],
)
def test_malformed_request_lines(line: bytes) -> None:
    with pytest.raises(BadRequest) as err:
        parse_head(line + b"\r\n\r\n")
    assert err.value.status == 400


def headers(raw: str) -> Message:
    return parse_headers(BytesIO((raw + "\r\n").encode("latin-1")))


@pytest.mark.parametrize(
    ("method", "raw", "length"),
    [
        ("GET", "", 0),
        ("POST", "Content-Length: 10\r\n", 10),
        ("POST", "Content-Length:  7 \r\n", 7),
        ("POST", "Content-Length: 7\r\nContent-Length: 7\r\n", 7),
        ("POST", "Content-Length: 100\r\n", 100),
    ],
)
def test_body_length(method: str, raw: str, length: int) -> None:
    assert body_length(method, headers(raw), max_body=100) == length


@pytest.mark.parametrize(
    ("method", "raw", "status"),
    [
        ("POST", "", 411),
        ("POST", "Content-Length: 7\r\nContent-Length: 8\r\n", 411),
        ("POST", "Content-Length: -1\r\n", 411),
        ("POST", "Content-Length: 0x10\r\n", 411),
        ("POST", "Content-Length: \u00b2\r\n", 411),  # a digit to str.isdigit, not to HTTP
        ("POST", "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n", 411),
        ("GET", "Content-Length: 99999999999999999999\r\n", 411),
        ("POST", "Content-Length: 101\r\n", 413),
    ],
)
def test_body_length_refused(method: str, raw: str, status: int) -> None:
    with pytest.raises(BadRequest) as err:
        body_length(method, headers(raw), max_body=100)
    assert err.value.status == status


def test_render_is_plain_and_closes() -> None:
    raw = render(Response(503, "busy\n", headers=(("Retry-After", "1"),)))
    head, _, body = raw.partition(b"\r\n\r\n")
    assert head.split(b"\r\n")[0] == b"HTTP/1.1 503 Service Unavailable"
    assert b"Content-Length: 5" in head and b"Connection: close" in head
    assert b"Retry-After: 1" in head and b"Server" not in head
    assert body == b"busy\n"
