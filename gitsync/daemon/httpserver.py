"""The daemon's HTTP server: probes, metrics and the push webhook on one port.

The port may face the internet (the webhook), and the Pod is small, so no client may
hold more than a bounded share of it for a bounded time:

- one thread reads every connection through a selector, so a slow client costs a
  socket and a small buffer, never a thread; a few workers run the handler, and only
  on a request that has fully arrived;
- three lanes: probes are answered by that thread itself (``inline``), urgent requests
  (the webhook) have a worker of their own, and the rest (the drift page, /metrics)
  share the pool; at most ``max_queued`` requests wait per lane, and one more is
  answered 503 at once, so however hard the page is polled, fully arrived requests
  never fill the connections, and probes and the webhook are still answered;
- a request (request line, headers and body) must arrive whole within
  ``request_timeout`` seconds of the connection, however slowly it trickles in;
- at most ``max_connections`` are open at once; one more takes the place of the
  request that has been arriving longest (read first: a probe that has arrived whole
  is answered, not pushed out by a flood), or else of an answer the client is slowest
  to take (refused only when all are being handled);
- headers are capped per request, bodies per request and across all requests;
- a response is plain text, closes the connection, and names no server or version.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import selectors
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from gitsync.daemon.httpproto import (
    BadRequest,
    Handler,
    Request,
    Response,
    body_length,
    parse_head,
    render,
)
from gitsync.daemon.metrics import Metrics
from gitsync.errors import quote

log = logging.getLogger(__name__)

_CHUNK = 16384
# after answering, read and drop what the client still sends for this long before
# closing: closing with unread data resets the connection, and the client may lose
# the answer (a 413 sent before the body was read)
_LINGER = 1.0
#: how long the loop, stopping, waits for each worker's answer in progress
WORKER_JOIN_TIMEOUT = 10.0


@dataclass(frozen=True)
class Limits:
    request_timeout: float = 10.0
    max_connections: int = 256
    max_header_bytes: int = 8192
    max_body: int = 1 << 20
    #: body bytes held across all connections at once (headers are bounded by the above)
    max_buffered: int = 4 << 20
    backlog: int = 1024
    workers: int = 4
    #: requests that have arrived and wait for a worker, per lane; more are answered 503
    max_queued: int = 16


State = Literal["head", "body", "handling", "writing", "closing"]
Lane = Literal["pool", "urgent"]


@dataclass(eq=False)
class _Conn:
    sock: socket.socket
    peer: str
    deadline: float
    local: str = ""
    state: State = "head"
    buf: bytearray = field(default_factory=bytearray)
    need: int = 0
    reserved: int = 0
    out: bytes = b""
    method: str = ""
    path: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    lane: Lane | None = None


class Server:
    """``serve_forever()`` in one thread, ``shutdown()`` from another (as socketserver)."""

    def __init__(
        self,
        address: tuple[str, int],
        handler: Handler,
        limits: Limits | None = None,
        metrics: Metrics | None = None,
        clock: Callable[[], float] = time.monotonic,
        inline: Callable[[Request], bool] = lambda _request: False,
        urgent: Callable[[Request], bool] = lambda _request: False,
    ) -> None:
        self.handler = handler
        #: requests answered by the loop itself, not queued for a worker: cheap routes
        #: (probes) that must never wait behind a slow one
        self.inline = inline
        #: requests with a worker of their own (the webhook): never behind the page
        self.urgent = urgent
        self.limits = limits or Limits()
        self.metrics = metrics
        self._clock = clock
        host, port = address
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        # OSError (in use, no such address) goes to the caller, which names the flag
        self._listener = socket.create_server(
            (host.strip("[]"), port), family=family, backlog=self.limits.backlog
        )
        self._listener.setblocking(False)
        self.server_address: tuple[str, int] = self._listener.getsockname()[:2]
        self._selector = selectors.DefaultSelector()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._conns: dict[socket.socket, _Conn] = {}
        self._buffered = 0
        self._work: dict[Lane, queue.SimpleQueue[tuple[_Conn, Request] | None]] = {
            "pool": queue.SimpleQueue(),
            "urgent": queue.SimpleQueue(),
        }
        #: requests handed to a lane and not answered yet (the loop's own count)
        self._pending: dict[Lane, int] = {"pool": 0, "urgent": 0}
        self._done: queue.SimpleQueue[tuple[_Conn, Response]] = queue.SimpleQueue()
        self._stop = threading.Event()
        self._stopped = threading.Event()
        self._serving = False
        self._accept_paused_until = 0.0

    # --- lifecycle ------------------------------------------------------------------

    def serve_forever(self) -> None:
        self._serving = True
        pool: list[Lane] = ["pool"] * self.limits.workers
        lanes: list[Lane] = ["urgent", *pool]
        workers = [
            threading.Thread(
                target=self._worker, args=(lane,), name=f"http-{lane}-{i}", daemon=True
            )
            for i, lane in enumerate(lanes)
        ]
        for w in workers:
            w.start()
        self._selector.register(self._listener, selectors.EVENT_READ, "accept")
        self._selector.register(self._wake_r, selectors.EVENT_READ, "wake")
        try:
            while not self._stop.is_set():
                self._step()
        finally:
            for lane in lanes:
                self._work[lane].put(None)
            for conn in list(self._conns.values()):
                self._close(conn)
            self._selector.close()
            self.server_close()
            # the workers are this loop's: each ends after the answer it is working on
            for w in workers:
                w.join(WORKER_JOIN_TIMEOUT)
            self._stopped.set()

    def shutdown(self) -> None:
        """Stop ``serve_forever`` and wait until it has returned."""
        self._stop.set()
        self._wake()
        if self._serving:
            self._stopped.wait()

    def server_close(self) -> None:
        """Release the port (``serve_forever`` does it when it stops)."""
        for sock in (self._listener, self._wake_r, self._wake_w):
            sock.close()

    def open_connections(self) -> int:
        return len(self._conns)

    def reserved_body_bytes(self) -> int:
        return self._buffered

    # --- the loop -------------------------------------------------------------------

    def _step(self) -> None:
        now = self._clock()
        if self._accept_paused_until and now >= self._accept_paused_until:
            self._accept_paused_until = 0.0
            self._selector.register(self._listener, selectors.EVENT_READ, "accept")
        deadlines = [c.deadline for c in self._conns.values() if c.state != "handling"]
        timeout = max(0.0, min([now + 1.0, *deadlines]) - now)
        for key, _mask in self._selector.select(timeout):
            if key.data == "accept":
                self._accept()
            elif key.data == "wake":
                self._drain_wake()
            elif isinstance(key.data, _Conn):
                conn = key.data
                if conn.state == "writing":
                    self._send(conn)
                else:
                    self._receive(conn)
        while True:
            try:
                conn, response = self._done.get_nowait()
            except queue.Empty:
                break
            self._release(conn)
            if conn.lane is not None:
                self._pending[conn.lane] -= 1
                conn.lane = None
            self._answer(conn, response)
        self._expire(self._clock())

    def _accept(self) -> None:
        while True:
            try:
                sock, addr = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as e:
                # out of file descriptors: stop accepting for a moment rather than spin
                log.warning("http: accept failed: %s", e.strerror)
                self._selector.unregister(self._listener)
                self._accept_paused_until = self._clock() + 0.1
                return
            sock.setblocking(False)
            if len(self._conns) >= self.limits.max_connections and not self._make_room():
                self._refuse(sock)
                continue
            peer = f"{addr[0]}:{addr[1]}" if isinstance(addr, tuple) else str(addr)
            conn = _Conn(
                sock, peer, self._clock() + self.limits.request_timeout, local=_local(sock)
            )
            self._conns[sock] = conn
            self._selector.register(sock, selectors.EVENT_READ, conn)

    def _make_room(self) -> bool:
        # an unfinished request first; then a connection that has its answer and only
        # lingers; then the answer its client is slowest to take (a slow reader must
        # not keep the kubelet's probes out any more than a slow writer)
        if self._evict_unfinished():
            return True
        if self._evict_oldest(("closing",), ""):
            return True
        if self._evict_oldest(("writing",), ""):  # no 503 after part of its answer
            self._count("connections")
            return True
        return False

    def _evict_unfinished(self) -> bool:
        """Drop the request that has been arriving longest, but read it first.

        Under a flood the loop falls behind, and one accept drains a backlog of hundreds:
        a probe accepted there would be the oldest unfinished request before the loop
        ever read it, though its request is whole in the socket's buffer. Read, it is
        answered (or found gone) instead of refused, and the next oldest goes.
        """
        while True:
            reading = [c for c in self._conns.values() if c.state in ("head", "body")]
            if not reading:
                return False
            oldest = min(reading, key=lambda c: c.deadline)
            self._receive(oldest)
            if self._conns.get(oldest.sock) is not oldest:
                return True  # closed: the client was gone
            if oldest.state in ("head", "body"):
                self._close(oldest, refused="connections")
                return True

    def _evict_oldest(self, states: tuple[State, ...], reason: str) -> bool:
        """Make room by dropping the connection (in one of ``states``) nearest its
        deadline: of requests, the one that has been sending longest.

        Refusing the newcomer instead would let whoever holds the connections first keep
        them, probes (and the kubelet's restarts) included; the oldest unfinished request
        is the likeliest to be a slow client, and a real one is retried.
        """
        reading = [c for c in self._conns.values() if c.state in states]
        if not reading:
            return False
        oldest = min(reading, key=lambda c: c.deadline)
        self._close(oldest, refused=reason)
        return True

    def _refuse(self, sock: socket.socket, reason: str = "connections") -> None:
        self._count(reason)
        text = "too many connections\n" if reason == "connections" else "busy, retry\n"
        # best effort and never waited for: this costs the server nothing more
        with contextlib.suppress(OSError):
            sock.send(render(Response(503, text)))
        sock.close()

    def _receive(self, conn: _Conn) -> None:
        want = _CHUNK if conn.state != "body" else max(1, min(_CHUNK, conn.need - len(conn.buf)))
        try:
            data = conn.sock.recv(want)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._close(conn)
            return
        if not data:  # the client is gone (or done, when we linger)
            self._close(conn)
            return
        if conn.state == "closing":
            return
        conn.buf += data
        try:
            if conn.state == "head":
                self._head(conn)
            if conn.state == "body" and len(conn.buf) >= conn.need:
                self._dispatch(conn)
        except BadRequest as e:
            self._count(e.reason)
            self._answer(conn, Response(e.status, e.message + "\n"))

    def _head(self, conn: _Conn) -> None:
        end = conn.buf.find(b"\r\n\r\n")
        limit = self.limits.max_header_bytes
        if end < 0 and len(conn.buf) <= limit:
            return
        if end < 0 or end + 4 > limit:
            raise BadRequest(431, "request headers too large", "too_large")
        method, path, message = parse_head(bytes(conn.buf[: end + 4]))
        length = body_length(method, message, self.limits.max_body)
        while self._buffered + length > self.limits.max_buffered:
            # bodies are reserved before anything is verified: without making room, a
            # few clients announcing large bodies and trickling them would turn every
            # real delivery away until their deadline
            if not self._evict_oldest(("body",), "busy"):
                raise BadRequest(503, "busy: too many request bodies at once, retry", "busy")
        self._buffered += length
        conn.reserved = length
        conn.method, conn.path, conn.need = method, path, length
        conn.headers = {k: v for k, v in message.items()}
        conn.buf = conn.buf[end + 4 :]
        conn.state = "body"

    def _dispatch(self, conn: _Conn) -> None:
        body = bytes(conn.buf[: conn.need])
        request = Request(conn.method, conn.path, conn.headers, body, conn.peer, conn.local)
        conn.buf = bytearray()
        if self.inline(request):
            self._answer(conn, self._call(request))
            return
        lane: Lane = "urgent" if self.urgent(request) else "pool"
        workers = 1 if lane == "urgent" else self.limits.workers
        if self._pending[lane] >= workers + self.limits.max_queued:
            # shed, not queued: a queue without bound holds every connection a busy
            # page is polled on, and then the probes are refused and the Pod restarted
            self._count("queue")
            self._answer(conn, Response(503, "busy, retry\n", headers=(("Retry-After", "1"),)))
            return
        self._pending[lane] += 1
        conn.lane = lane
        conn.state = "handling"
        self._selector.unregister(conn.sock)
        self._work[lane].put((conn, request))

    def _answer(self, conn: _Conn, response: Response) -> None:
        # method and path are the client's: quoted, so they cannot forge a log line
        log.debug(
            "http: %s %s %s -> %d", conn.peer, quote(conn.method), quote(conn.path), response.status
        )
        self._release(conn)
        conn.out = render(response)
        conn.buf = bytearray()
        # the answer gets its own time: a slow handler is not the client's fault
        conn.deadline = self._clock() + self.limits.request_timeout
        if conn.state == "handling":
            self._selector.register(conn.sock, selectors.EVENT_WRITE, conn)
        else:
            self._selector.modify(conn.sock, selectors.EVENT_WRITE, conn)
        conn.state = "writing"
        self._send(conn)

    def _send(self, conn: _Conn) -> None:
        try:
            sent = conn.sock.send(conn.out)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._close(conn)
            return
        conn.out = conn.out[sent:]
        if conn.out:
            return
        try:
            conn.sock.shutdown(socket.SHUT_WR)
        except OSError:
            self._close(conn)
            return
        conn.state = "closing"
        conn.deadline = min(conn.deadline, self._clock() + _LINGER)
        self._selector.modify(conn.sock, selectors.EVENT_READ, conn)

    def _expire(self, now: float) -> None:
        for conn in list(self._conns.values()):
            if conn.state == "handling" or conn.deadline > now:
                continue
            if conn.state in ("head", "body"):
                self._count("timeout")
                self._answer(conn, Response(408, "request not received in time\n"))
                # the client is slow by definition: do not wait on it to take the answer
                conn.deadline = min(conn.deadline, now + _LINGER)
            else:
                self._close(conn)

    def _release(self, conn: _Conn) -> None:
        self._buffered -= conn.reserved
        conn.reserved = 0

    def _close(self, conn: _Conn, refused: str = "") -> None:
        self._release(conn)
        self._conns.pop(conn.sock, None)
        if conn.state != "handling":
            with contextlib.suppress(KeyError, ValueError):
                self._selector.unregister(conn.sock)
        if refused:
            self._refuse(conn.sock, refused)
        else:
            conn.sock.close()

    # --- workers --------------------------------------------------------------------

    def _worker(self, lane: Lane) -> None:
        while (item := self._work[lane].get()) is not None:
            conn, request = item
            self._done.put((conn, self._call(request)))
            self._wake()

    def _call(self, request: Request) -> Response:
        try:
            return self.handler(request)
        except Exception:
            # a bug in one route must not take the server down
            log.exception("http: %s %s failed", quote(request.method), quote(request.path))
            return Response(500, "internal error\n")

    def _wake(self) -> None:
        # OSError: the buffer is full, so the loop is awake anyway
        with contextlib.suppress(OSError):
            self._wake_w.send(b"\0")

    def _drain_wake(self) -> None:
        try:
            while self._wake_r.recv(4096):
                pass
        except OSError:
            pass

    def _count(self, reason: str) -> None:
        if self.metrics is not None:
            self.metrics.inc("gitsync_http_refused_total", reason=reason)


def _local(sock: socket.socket) -> str:
    try:
        return str(sock.getsockname()[0])
    except OSError:
        return ""  # gone already: the first read will say so
