"""HTTP/1.1 messages as the daemon's server reads and writes them. Pure: no I/O.

Only what the probes, metrics and the webhook need: a request line and headers, a body
announced by ``Content-Length``, and a plain-text answer that closes the connection.
Anything else is refused with a :class:`BadRequest` before a route sees it.
"""

from __future__ import annotations

import email.message
import http.client
import io
import re
from collections.abc import Callable
from dataclasses import dataclass
from http import HTTPStatus

_LENGTH = re.compile(r"[0-9]{1,15}")


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    peer: str
    #: the address the connection arrived at (the Pod IP, or loopback)
    local: str = ""


@dataclass(frozen=True)
class Response:
    status: int
    body: str
    content_type: str = "text/plain; charset=utf-8"
    headers: tuple[tuple[str, str], ...] = ()


Handler = Callable[[Request], Response]


class BadRequest(Exception):
    """A request refused before the handler sees it; ``reason`` labels the metric."""

    def __init__(self, status: int, message: str, reason: str = "bad_request") -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.reason = reason


def parse_head(head: bytes) -> tuple[str, str, email.message.Message]:
    """Method, path (without the query) and headers of a request head ending in CRLFCRLF."""
    line, _, rest = head.partition(b"\r\n")
    parts = line.split(b" ")
    if len(parts) != 3 or not re.fullmatch(rb"HTTP/1\.[01]", parts[2]):
        raise BadRequest(400, "malformed request line")
    method, target = parts[0], parts[1]
    if not method.isalpha() or not method.isupper() or not target.startswith(b"/"):
        raise BadRequest(400, "malformed request line")
    try:
        headers = http.client.parse_headers(io.BytesIO(rest))
    except http.client.HTTPException as e:
        raise BadRequest(431, "request headers too large", "too_large") from e
    path = target.split(b"?", 1)[0].decode("ascii", "replace")
    return method.decode("ascii"), path, headers


def body_length(method: str, headers: email.message.Message, max_body: int) -> int:
    """The body length the headers announce, checked before any of the body is read."""
    if headers.get("Transfer-Encoding") is not None:
        # only Content-Length: a chunked body's size is unknown until it has been read
        raise BadRequest(411, "a Content-Length is required (no Transfer-Encoding)")
    values = {v.strip() for v in headers.get_all("Content-Length") or []}
    if not values:
        if method == "POST":
            raise BadRequest(411, "a Content-Length is required")
        return 0
    # several different lengths, or a sign or a space in one: smuggling, never guessing
    if len(values) != 1 or not _LENGTH.fullmatch(next(iter(values))):
        raise BadRequest(411, "invalid Content-Length")
    length = int(next(iter(values)))
    if length > max_body:
        raise BadRequest(413, f"body over {max_body} bytes", "too_large")
    return length


def render(response: Response) -> bytes:
    data = response.body.encode()
    try:
        phrase = HTTPStatus(response.status).phrase
    except ValueError:
        phrase = ""
    lines = [
        f"HTTP/1.1 {response.status} {phrase}",
        f"Content-Type: {response.content_type}",
        f"Content-Length: {len(data)}",
        "Connection: close",
        # unless the response says otherwise (the page's JSON: revalidated by its ETag)
        *(() if _has(response, "Cache-Control") else ("Cache-Control: no-store",)),
        "X-Content-Type-Options: nosniff",
        *(f"{k}: {v}" for k, v in response.headers),
    ]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + data


def _has(response: Response, name: str) -> bool:
    return any(k.lower() == name.lower() for k, _ in response.headers)


def header(request: Request, name: str) -> str:
    """A request header by name, in any case ("" when absent)."""
    wanted = name.lower()
    return next((v for k, v in request.headers.items() if k.lower() == wanted), "")
