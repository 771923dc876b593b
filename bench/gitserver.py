"""A Git repository served over smart HTTP on loopback (``git http-backend`` as a CGI).

gitsync and Flux must read the very same remote, and Flux's source-controller
speaks only http(s) and ssh (go-git has no file:// in GitRepository, nor the
dumb HTTP protocol), so the benchmark serves its bare repository this way.
"""

from __future__ import annotations

import threading
from http.server import ThreadingHTTPServer
from pathlib import Path
from types import TracebackType

from testenv import githttp


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    root: Path


class _Backend(githttp.Handler):
    server: _Server

    def serve(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        root = self.server.root
        githttp.reply(self, githttp.run_backend(self, body, root, home=root, timeout=60))


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
