"""A Git repository served over smart HTTP on loopback (``git http-backend`` as a CGI).

gitsync and Flux must read the very same remote, and Flux's source-controller
speaks only http(s) and ssh (go-git has no file:// in GitRepository, nor the
dumb HTTP protocol), so the benchmark serves its bare repository this way.
"""

from __future__ import annotations

import os
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    root: Path


class _Backend(BaseHTTPRequestHandler):
    server: _Server

    def do_GET(self) -> None:
        self._serve()

    def do_POST(self) -> None:
        self._serve()

    def log_message(self, format: str, *args: object) -> None:
        pass  # one line per fetch would swamp the benchmark's output

    def _serve(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        path, _, query = self.path.partition("?")
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(self.server.root),
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_PROJECT_ROOT": str(self.server.root),
            "GIT_HTTP_EXPORT_ALL": "1",
            "PATH_INFO": path,
            "QUERY_STRING": query,
            "REQUEST_METHOD": self.command,
            "CONTENT_TYPE": self.headers.get("Content-Type", ""),
            "CONTENT_LENGTH": str(len(body)),
            "REMOTE_ADDR": self.client_address[0],
            "GIT_PROTOCOL": self.headers.get("Git-Protocol", ""),
            "HTTP_CONTENT_ENCODING": self.headers.get("Content-Encoding", ""),
        }
        cgi = subprocess.run(
            ["git", "http-backend"], input=body, env=env, capture_output=True, timeout=60
        )
        head, sep, payload = cgi.stdout.partition(b"\r\n\r\n")
        if not sep:
            head, _, payload = cgi.stdout.partition(b"\n\n")
        status, headers = 200, []
        for line in head.decode("latin-1").splitlines():
            name, _, value = line.partition(":")
            if name.lower() == "status":
                status = int(value.split()[0])
            elif name:
                headers.append((name, value.strip()))
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


class GitHttpServer:
    """Serves every bare repository under ``root``; ``url(name)`` is one's address."""

    def __init__(self, root: Path) -> None:
        self._server = _Server(("127.0.0.1", 0), _Backend)
        self._server.root = root
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="bench-git-http", daemon=True
        )

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/{name}"

    def __enter__(self) -> GitHttpServer:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)
