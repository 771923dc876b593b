"""Real Git servers on loopback for the source tests: git daemon, git http-backend (over
HTTP or HTTPS), file://; sshd is in tests/sshserver.py.

Every server is a child of the test process, started per test and stopped (by its own
process id) when the test ends.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import os
import secrets
import signal
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

AUTHOR = {
    "GIT_AUTHOR_NAME": "Test",
    "GIT_AUTHOR_EMAIL": "test@example.com",
    "GIT_COMMITTER_NAME": "Test",
    "GIT_COMMITTER_EMAIL": "test@example.com",
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for_port(port: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.02)
    raise TimeoutError(f"nothing listens on 127.0.0.1:{port}")


class Upstream:
    """A bare repository served to the code under test, and a clone that pushes to it."""

    def __init__(self, base: Path, name: str = "repo.git") -> None:
        self.base = base  # what servers export
        self.bare = base / name
        self.work = base.parent / f"work-{name}"
        self.home = base.parent / "upstream-home"
        self.home.mkdir(exist_ok=True)
        self.env = {
            **os.environ,
            **AUTHOR,
            "HOME": str(self.home),
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": os.devnull,
        }
        self.git("init", "--quiet", "--bare", "--initial-branch=main", str(self.bare))
        self.git("init", "--quiet", "--initial-branch=main", str(self.work))
        self.git("-C", str(self.work), "remote", "add", "origin", str(self.bare))

    @property
    def file_url(self) -> str:
        return f"file://{self.bare}"

    def git(self, *args: str) -> str:
        out = subprocess.run(
            ["git", *args], env=self.env, check=True, capture_output=True, text=True, timeout=30
        )
        return out.stdout.strip()

    def wgit(self, *args: str) -> str:
        return self.git("-C", str(self.work), *args)

    def commit(self, files: Mapping[str, str | None], message: str = "change") -> str:
        """Write (or, for None, delete) files, commit, push to main; return the sha."""
        for rel, text in files.items():
            p = self.work / rel
            if text is None:
                p.unlink()
            else:
                p.parent.mkdir(parents=True, exist_ok=True)
                p.write_text(text)
        self.wgit("add", "--all")
        self.wgit("commit", "--quiet", "--allow-empty", "-m", message)
        self.wgit("push", "--quiet", "--force", "origin", "HEAD:refs/heads/main")
        return self.wgit("rev-parse", "HEAD")

    def tag(self, name: str, *, annotated: bool) -> str:
        """Tag HEAD; return the sha of the tag object (annotated) or of the commit."""
        self.wgit("tag", *(["-a", "-m", name] if annotated else []), name)
        self.wgit("push", "--quiet", "origin", f"refs/tags/{name}")
        return self.wgit("rev-parse", name)

    def rewrite(self, files: dict[str, str]) -> str:
        """Replace main with an unrelated history and force-push it."""
        self.wgit("checkout", "--quiet", "--orphan", f"rewrite-{time.monotonic_ns()}")
        self.wgit("rm", "-r", "--quiet", "--force", "--ignore-unmatch", ".")
        return self.commit(files, "rewritten history")


@pytest.fixture
def upstream(tmp_path: Path) -> Upstream:
    base = tmp_path / "srv"
    base.mkdir()
    return Upstream(base)


@pytest.fixture
def cache_dir(tmp_path: Path) -> Path:
    return tmp_path / "cache"


@pytest.fixture
def git_daemon(upstream: Upstream) -> Iterator[str]:
    """``git daemon`` exporting the upstream; yields its git:// URL."""
    port = free_port()
    proc = subprocess.Popen(
        [
            "git",
            "daemon",
            "--reuseaddr",
            f"--base-path={upstream.base}",
            "--export-all",
            f"--port={port}",
            "--listen=127.0.0.1",
            str(upstream.base),
        ],
        env=upstream.env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # its per-connection children share its process group
    )
    try:
        wait_for_port(port)
        yield f"git://127.0.0.1:{port}/{upstream.bare.name}"
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)


@dataclass
class HttpGit:
    url: str
    token: str
    requests: list[str] = field(default_factory=list)  # request lines and auth headers seen
    set_token: Callable[[str], None] = lambda _: None  # what the server accepts from now on


class _Backend(BaseHTTPRequestHandler):
    """Runs ``git http-backend`` as a CGI for each request, after HTTP Basic auth."""

    server: _Server

    def do_GET(self) -> None:
        self._serve()

    def do_POST(self) -> None:
        self._serve()

    def log_message(self, format: str, *args: object) -> None:
        pass

    def _serve(self) -> None:
        auth = self.headers.get("Authorization", "")
        self.server.seen.append(f"{self.headers.get('Host')} {self.requestline} {auth}")
        if self.path.startswith("/moved.git/"):  # a redirect to another host name
            port = self.server.server_address[1]
            self.send_response(301)
            self.send_header("Location", f"http://localhost:{port}/repo.git/{self.path[11:]}")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if not self._authorized():
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="git"')
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = self._body()
        path, _, query = self.path.partition("?")
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(self.server.home),
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_PROJECT_ROOT": str(self.server.root),
            "GIT_HTTP_EXPORT_ALL": "1",
            "PATH_INFO": path,
            "QUERY_STRING": query,
            "REQUEST_METHOD": self.command,
            "CONTENT_TYPE": self.headers.get("Content-Type", ""),
            "CONTENT_LENGTH": str(len(body)),
            "REMOTE_USER": "git",
            "REMOTE_ADDR": self.client_address[0],
            # how web servers pass protocol v2 on (Apache: SetEnvIf Git-Protocol)
            "GIT_PROTOCOL": self.headers.get("Git-Protocol", ""),
            "HTTP_CONTENT_ENCODING": self.headers.get("Content-Encoding", ""),
        }
        cgi = subprocess.run(
            ["git", "http-backend"], input=body, env=env, capture_output=True, timeout=30
        )
        self._reply(cgi.stdout)

    def _authorized(self) -> bool:
        scheme, _, value = self.headers.get("Authorization", "").partition(" ")
        if scheme != "Basic":
            return False
        try:
            _, _, password = base64.b64decode(value).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return False
        return hmac.compare_digest(password.encode(), self.server.token.encode())

    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks: list[bytes] = []
            while True:
                size = int(self.rfile.readline().split(b";")[0], 16)
                chunk = self.rfile.read(size)
                self.rfile.readline()
                if size == 0:
                    return b"".join(chunks)
                chunks.append(chunk)
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _reply(self, output: bytes) -> None:
        head, _, body = output.partition(b"\r\n\r\n")
        if not _:
            head, _, body = output.partition(b"\n\n")
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
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    root: Path
    home: Path
    token: str
    seen: list[str]


@contextmanager
def serve_http_git(
    upstream: Upstream, token: str, tls: tuple[Path, Path] | None = None
) -> Iterator[HttpGit]:
    """``git http-backend`` behind HTTP Basic auth (any user, password = ``token``), over
    TLS when ``tls`` (certificate, key) is given; the token can be changed while it runs."""
    server = _Server(("127.0.0.1", 0), _Backend)
    if tls is not None:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(*tls)
        server.socket = ctx.wrap_socket(server.socket, server_side=True)
    server.root = upstream.base
    server.home = upstream.home
    server.token = token
    server.seen = []
    thread = threading.Thread(target=server.serve_forever, name="http-git", daemon=True)
    thread.start()
    port = server.server_address[1]
    scheme = "https" if tls is not None else "http"

    def set_token(new: str) -> None:
        server.token = new

    try:
        yield HttpGit(
            f"{scheme}://127.0.0.1:{port}/{upstream.bare.name}", token, server.seen, set_token
        )
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


@pytest.fixture
def http_git(upstream: Upstream) -> Iterator[HttpGit]:
    """``git http-backend`` behind HTTP Basic auth (any user, password = the token)."""
    with serve_http_git(upstream, "tok-" + secrets.token_hex(16)) as server:
        yield server


@pytest.fixture
def silent_server() -> Iterator[str]:
    """Accepts connections and never answers: a hung Git server."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    port = listener.getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}/repo.git"
    finally:
        listener.close()


@pytest.fixture
def dead_url() -> str:
    """An http:// URL where nothing listens."""
    return f"http://127.0.0.1:{free_port()}/repo.git"


@pytest.fixture
def git_processes() -> Callable[[], list[str]]:
    return git_children


def git_children(exclude: frozenset[int] = frozenset()) -> list[str]:
    """``pid comm state`` of this process's children whose command is git (from /proc)."""
    me, found = os.getpid(), []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) in exclude:
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue  # gone meanwhile
        comm = stat[stat.index("(") + 1 : stat.rindex(")")]
        state, ppid = stat[stat.rindex(")") + 2 :].split()[:2]
        if int(ppid) == me and (comm.startswith("git") or comm == "ssh"):
            found.append(f"{entry} {comm} {state}")
    return found
