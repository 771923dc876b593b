"""``git http-backend`` as a CGI behind :mod:`http.server`: the part the tests' Git server
(tests/gitserver.py) and the benchmark's (bench/gitserver.py) share.

Each server decides what to serve (auth, redirects, which root); this runs the backend for
one request and turns its CGI output back into the HTTP reply.
"""

from __future__ import annotations

import os
import subprocess
from http.server import BaseHTTPRequestHandler
from pathlib import Path


class Handler(BaseHTTPRequestHandler):
    """GET and POST both go to :meth:`serve` (the smart protocol uses both); no access log,
    one line a fetch would swamp the output."""

    def do_GET(self) -> None:
        self.serve()

    def do_POST(self) -> None:
        self.serve()

    def log_message(self, format: str, *args: object) -> None:
        pass

    def serve(self) -> None:
        raise NotImplementedError


def run_backend(
    handler: BaseHTTPRequestHandler,
    body: bytes,
    root: Path,
    home: Path,
    timeout: float,
    **extra: str,
) -> bytes:
    """The CGI output of ``git http-backend`` for the request ``handler`` holds, serving
    every repository under ``root``; ``extra`` adds variables (``REMOTE_USER``...)."""
    path, _, query = handler.path.partition("?")
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_PROJECT_ROOT": str(root),
        "GIT_HTTP_EXPORT_ALL": "1",
        "PATH_INFO": path,
        "QUERY_STRING": query,
        "REQUEST_METHOD": handler.command,
        "CONTENT_TYPE": handler.headers.get("Content-Type", ""),
        "CONTENT_LENGTH": str(len(body)),
        "REMOTE_ADDR": handler.client_address[0],
        # how web servers pass protocol v2 on (Apache: SetEnvIf Git-Protocol)
        "GIT_PROTOCOL": handler.headers.get("Git-Protocol", ""),
        "HTTP_CONTENT_ENCODING": handler.headers.get("Content-Encoding", ""),
        **extra,
    }
    cgi = subprocess.run(
        ["git", "http-backend"], input=body, env=env, capture_output=True, timeout=timeout
    )
    return cgi.stdout


def reply(handler: BaseHTTPRequestHandler, output: bytes) -> None:
    """Send CGI ``output`` (headers, a ``Status:`` line, a blank line, the body) as the
    HTTP reply, with its length."""
    head, sep, body = output.partition(b"\r\n\r\n")
    if not sep:
        head, _, body = output.partition(b"\n\n")
    status, headers = 200, []
    for line in head.decode("latin-1").splitlines():
        name, _, value = line.partition(":")
        if name.lower() == "status":
            status = int(value.split()[0])
        elif name:
            headers.append((name, value.strip()))
    handler.send_response(status)
    for name, value in headers:
        handler.send_header(name, value)
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)
