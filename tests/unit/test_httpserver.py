"""The daemon's HTTP server under hostile clients, over real sockets on loopback."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from gitsync.daemon.httpproto import Request, Response
from gitsync.daemon.httpserver import Limits, Server
from gitsync.daemon.metrics import Metrics, standard
from gitsync.daemon.routes import Routes


def echo(request: Request) -> Response:
    if request.path == "/boom":
        raise RuntimeError("a bug in a route")
    return Response(200, f"{request.method} {request.path} {len(request.body)}\n")


@contextmanager
def serving(limits: Limits, metrics: Metrics | None = None) -> Iterator[Server]:
    server = Server(("127.0.0.1", 0), echo, limits, metrics)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        thread.join(10)
        assert not thread.is_alive()


def connect(server: Server) -> socket.socket:
    return socket.create_connection(server.server_address, timeout=10)


def exchange(server: Server, raw: bytes) -> tuple[int, dict[str, str], bytes]:
    with connect(server) as sock:
        sock.sendall(raw)
        return read_response(sock)


def read_response(sock: socket.socket) -> tuple[int, dict[str, str], bytes]:
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines)}
    return int(status_line.split()[1]), headers, body


def settle(condition: Callable[[], bool]) -> None:
    """Wait for the server's loop to have seen what the test just did."""
    deadline = time.monotonic() + 10
    while not condition():
        assert time.monotonic() < deadline, "the server did not get there"
        time.sleep(0.02)


def healthz(server: Server, timeout: float = 5) -> tuple[int, float]:
    start = time.monotonic()
    url = f"http://127.0.0.1:{server.server_address[1]}/healthz"
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        return int(resp.status), time.monotonic() - start


def test_a_slow_client_is_cut_at_the_request_deadline() -> None:
    metrics = standard()
    with serving(Limits(request_timeout=2.0), metrics) as server, connect(server) as sock:
        start = time.monotonic()
        request = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
        stop = threading.Event()

        def trickle() -> None:  # one byte a second: each read alone is quick enough
            for byte in request:
                if stop.wait(1.0):
                    return
                try:
                    sock.send(bytes([byte]))
                except OSError:
                    return

        threading.Thread(target=trickle, daemon=True).start()
        status, headers, body = read_response(sock)
        elapsed = time.monotonic() - start
        stop.set()
    assert status == 408 and body == b"request not received in time\n"
    assert headers["content-type"].startswith("text/plain")
    assert 1.9 <= elapsed < 3.5, elapsed
    assert metrics.get("gitsync_http_refused_total", reason="timeout") == 1


def test_slow_clients_hold_no_thread_and_probes_still_answer() -> None:
    with serving(Limits(request_timeout=6.0)) as server:
        assert healthz(server)[0] == 200
        baseline = threading.active_count()
        slow = [connect(server) for _ in range(200)]
        try:
            # 1 byte/s from each of 200 clients, while the probe is asked
            latencies: list[float] = []
            for i in range(3):
                for sock in slow:
                    sock.send(b"GET /healthz HTTP/1.1\r\n"[i : i + 1])
                status, latency = healthz(server)
                assert status == 200
                latencies.append(latency)
                # all 200 are held (not refused), yet not one more thread is running
                assert server.open_connections() >= 200
                assert threading.active_count() - baseline <= 5
                time.sleep(1.0)
            print(f"/healthz with 200 slow clients: max {max(latencies) * 1000:.0f} ms")
            assert max(latencies) < 1.0
            # at the deadline every slow client is answered 408 and let go
            deadline = time.monotonic() + 10
            while server.open_connections() and time.monotonic() < deadline:
                time.sleep(0.1)
            assert server.open_connections() == 0
            assert read_response(slow[0])[0] == 408
        finally:
            for sock in slow:
                sock.close()


def test_over_the_cap_the_oldest_unfinished_request_makes_room() -> None:
    metrics = standard()
    with serving(Limits(max_connections=3), metrics) as server:
        idle = [connect(server) for _ in range(3)]
        settle(lambda: server.open_connections() == 3)
        # the newcomer is served at once; the one that has been sending longest goes
        start = time.monotonic()
        assert exchange(server, b"GET /x HTTP/1.1\r\n\r\n")[2] == b"GET /x 0\n"
        assert time.monotonic() - start < 1.0
        status, _, body = read_response(idle[0])
        assert status == 503 and body == b"too many connections\n"
        assert metrics.get("gitsync_http_refused_total", reason="connections") == 1
        for sock in idle:
            sock.close()


def test_over_the_cap_with_every_request_being_handled_a_newcomer_is_refused() -> None:
    release = threading.Event()
    started: list[str] = []

    def slow_route(request: Request) -> Response:
        started.append(request.path)
        release.wait(10)
        return Response(200, "done\n")

    server = Server(("127.0.0.1", 0), slow_route, Limits(max_connections=2, workers=2))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        busy = [connect(server) for _ in range(2)]
        for sock in busy:
            sock.sendall(b"GET /slow HTTP/1.1\r\n\r\n")
        settle(lambda: len(started) == 2)  # both read whole, and being handled
        with connect(server) as extra:
            status, _, body = read_response(extra)
        assert status == 503 and body == b"too many connections\n"
        release.set()
        assert [read_response(sock)[0] for sock in busy] == [200, 200]
    finally:
        release.set()
        server.shutdown()
        thread.join(10)


def test_answers_are_plain_text_without_a_server_banner() -> None:
    with serving(Limits()) as server:
        for raw, code in [
            (b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", 200),
            (b"GET /boom HTTP/1.1\r\n\r\n", 500),  # a crashing route
            (b"BREW /pot HTTP/1.1\r\n\r\n", 200),  # methods are the handler's business
            (b"GET / HTTP/9.9\r\n\r\n", 400),
            (b"nonsense\r\n\r\n", 400),
            (b"GET /x HTTP/1.1\r\nbad header line\r\n\r\n", 200),
        ]:
            status, headers, body = exchange(server, raw)
            assert status == code, raw
            assert "server" not in headers, headers
            assert headers["content-type"] == "text/plain; charset=utf-8"
            assert headers["connection"] == "close"
            assert int(headers["content-length"]) == len(body)
            text = body.decode()
            assert "Python" not in text and "<" not in text and "Traceback" not in text
        # the server survives a crashing route
        assert exchange(server, b"GET /x HTTP/1.1\r\n\r\n")[2] == b"GET /x 0\n"


def test_bodies_and_headers_are_capped() -> None:
    metrics = standard()
    limits = Limits(max_body=100, max_buffered=150, max_header_bytes=1024)
    with serving(limits, metrics) as server:
        post = b"POST /hook HTTP/1.1\r\nContent-Length: %d\r\n\r\n"
        assert exchange(server, post % 100 + b"x" * 100)[2] == b"POST /hook 100\n"
        # refused before the body is read: the client need not send it
        assert exchange(server, post % 101)[0] == 413
        assert exchange(server, b"POST /hook HTTP/1.1\r\n\r\n")[0] == 411
        assert exchange(server, b"POST /h HTTP/1.1\r\nContent-Length: -1\r\n\r\n")[0] == 411
        assert exchange(server, b"POST /h HTTP/1.1\r\nContent-Length: +1\r\n\r\nx")[0] == 411
        two = b"POST /h HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nxx"
        assert exchange(server, two)[0] == 411
        chunked = b"POST /h HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\r\n0\r\n\r\n"
        assert exchange(server, chunked)[0] == 411
        big_head = b"GET /x HTTP/1.1\r\nX-Pad: " + b"p" * 2000 + b"\r\n\r\n"
        assert exchange(server, big_head)[0] == 431
        endless_head = b"GET /x HTTP/1.1\r\nX-Pad: " + b"p" * 5000  # never ends
        assert exchange(server, endless_head)[0] == 431
        # bodies held across connections: one that fits is served beside a trickling one
        with connect(server) as first:
            first.sendall(post % 100 + b"x" * 10)
            settle(lambda: server.reserved_body_bytes() == 100)
            assert exchange(server, post % 50 + b"y" * 50)[0] == 200  # still fits
            first.sendall(b"x" * 90)
            assert read_response(first)[2] == b"POST /hook 100\n"
        # one that does not fit makes the oldest unfinished body go (see below)
        with connect(server) as first:
            first.sendall(post % 100 + b"x" * 10)
            settle(lambda: server.reserved_body_bytes() == 100)
            assert exchange(server, post % 60 + b"y" * 60)[0] == 200
            assert read_response(first)[0] == 503
    assert metrics.get("gitsync_http_refused_total", reason="too_large") == 3
    assert metrics.get("gitsync_http_refused_total", reason="busy") == 1


@pytest.mark.skipif(shutil.which("ss") is None, reason="needs ss (iproute2)")
def test_listen_backlog_is_raised() -> None:
    with serving(Limits(backlog=1024)) as server:
        port = server.server_address[1]
        out = subprocess.run(
            ["ss", "-Hltn", f"sport = :{port}"], capture_output=True, text=True, check=True
        ).stdout.split()
    # for a listening socket, ss shows the backlog as Send-Q (capped by net.core.somaxconn)
    somaxconn = int(Path("/proc/sys/net/core/somaxconn").read_text())
    assert int(out[2]) == min(1024, somaxconn) > 5


def test_probes_answer_while_every_worker_is_busy() -> None:
    """A standby passing webhooks to the leader can hold every worker for the renew
    deadline; the kubelet's probes must still answer at once."""
    release = threading.Event()

    def handler(request: Request) -> Response:
        if request.path == "/slow":
            release.wait(20)
        return Response(200, "ok\n")

    limits = Limits(workers=2)
    server = Server(
        ("127.0.0.1", 0), handler, limits, inline=lambda r: r.path in ("/healthz", "/readyz")
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    slow = [connect(server) for _ in range(limits.workers + 2)]
    try:
        for sock in slow:
            sock.sendall(b"GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
        settle(lambda: server._work["pool"].qsize() >= 2)  # both workers taken, two waiting
        status, seconds = healthz(server)
        assert status == 200 and seconds < 2, seconds
    finally:
        release.set()
        for sock in slow:
            sock.close()
        server.shutdown()
        thread.join(10)


def test_trickled_bodies_cannot_turn_real_deliveries_away() -> None:
    """Body bytes are reserved when a request announces them, before it is verified: when
    the reserve is full, the body that has been arriving longest makes room."""
    metrics = standard()
    limits = Limits(max_body=1024, max_buffered=2048, request_timeout=20)
    with serving(limits, metrics) as server:
        trickling = [connect(server) for _ in range(2)]
        try:
            for n, sock in enumerate(trickling, 1):
                sock.sendall(
                    b"POST /hooks/git HTTP/1.1\r\nHost: x\r\nContent-Length: 1024\r\n\r\nx"
                )
                # one after the other: which one is oldest is known
                settle(lambda n=n: server.reserved_body_bytes() == 1024 * n)  # type: ignore[misc]
            body = b"y" * 1024
            head = f"POST /hooks/git HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n\r\n"
            status, _, answer = exchange(server, head.encode() + body)
            assert (status, answer) == (200, b"POST /hooks/git 1024\n")
            # the oldest trickler was told to retry; the newer one is still served
            assert read_response(trickling[0])[0] == 503
            trickling[1].sendall(b"x" * 1023)
            assert read_response(trickling[1])[2] == b"POST /hooks/git 1024\n"
            assert metrics.get("gitsync_http_refused_total", reason="busy") == 1
        finally:
            for sock in trickling:
                sock.close()


def test_a_polled_page_never_locks_out_the_probes_or_the_webhook() -> None:
    """256 page requests that have fully arrived and wait on a stuck handler: those
    past the pool's queue are answered 503 at once instead of holding every connection,
    so the kubelet's probes and a push (its own worker) are still answered."""
    release = threading.Event()
    metrics = standard()

    def handler(request: Request) -> Response:
        if request.path == "/healthz":
            return Response(200, "ok\n")
        if request.path == "/hooks/git":
            return Response(202, "sync triggered\n")
        release.wait(60)  # the page, stuck (a huge manifest, a slow machine)
        return Response(200, "page\n")

    limits = Limits()
    server = Server(
        ("127.0.0.1", 0),
        handler,
        limits,
        metrics,
        inline=lambda r: r.path == "/healthz",
        urgent=lambda r: r.path == "/hooks/git",
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    page = [connect(server) for _ in range(limits.max_connections)]
    try:
        for sock in page:
            sock.sendall(b"GET /api/v1/apps/shop/web HTTP/1.1\r\nHost: x\r\n\r\n")

        def dispatched() -> int:
            handling = sum(1 for c in list(server._conns.values()) if c.state == "handling")
            shed = metrics.get("gitsync_http_refused_total", reason="queue")
            return handling + int(shed)

        settle(lambda: dispatched() == len(page))  # every page request read whole
        probes = [healthz(server)[0] for _ in range(8)]
        assert probes == [200] * 8
        hook = b"POST /hooks/git HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}"
        assert exchange(server, hook)[0] == 202
        release.set()
        statuses = [read_response(sock)[0] for sock in page]
        queued = limits.workers + limits.max_queued
        assert statuses.count(200) == queued and statuses.count(503) == len(page) - queued
    finally:
        release.set()
        for sock in page:
            sock.close()
        server.shutdown()
        thread.join(10)


def test_a_push_is_not_queued_behind_the_page() -> None:
    """With connections to spare, a webhook request still does not wait for the page's
    workers: it has a worker of its own."""
    release = threading.Event()

    def handler(request: Request) -> Response:
        if request.path == "/hooks/git":
            return Response(202, "sync triggered\n")
        release.wait(60)
        return Response(200, "page\n")

    limits = Limits(workers=2)
    server = Server(("127.0.0.1", 0), handler, limits, urgent=lambda r: r.path == "/hooks/git")
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    page = [connect(server) for _ in range(limits.workers + 2)]
    try:
        for sock in page:
            sock.sendall(b"GET /api/v1/apps HTTP/1.1\r\nHost: x\r\n\r\n")
        settle(lambda: server._work["pool"].qsize() >= 2)  # both workers taken, two waiting
        hook = b"POST /hooks/git HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}"
        assert exchange(server, hook)[0] == 202
    finally:
        release.set()
        for sock in page:
            sock.close()
        server.shutdown()
        thread.join(10)


def test_clients_that_never_take_their_answers_cannot_keep_the_probes_out() -> None:
    """Answers that their clients do not read hold connections until the deadline; a
    newcomer takes the place of the one slowest to take its answer."""
    big = "x" * (8 << 20)  # more than the socket buffers of both ends hold

    def handler(request: Request) -> Response:
        return Response(200, "ok\n" if request.path == "/healthz" else big)

    metrics = standard()
    limits = Limits(max_connections=4, request_timeout=30.0)
    server = Server(
        ("127.0.0.1", 0), handler, limits, metrics, inline=lambda r: r.path == "/healthz"
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    readers = []
    try:
        for _ in range(limits.max_connections):
            sock = socket.socket()
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.connect(server.server_address)
            sock.sendall(b"GET /big HTTP/1.1\r\nHost: x\r\n\r\n")
            readers.append(sock)
        settle(
            lambda: (
                sum(1 for c in list(server._conns.values()) if c.state == "writing")
                == limits.max_connections
            )
        )
        assert healthz(server)[0] == 200
        assert metrics.get("gitsync_http_refused_total", reason="connections") == 1
    finally:
        for sock in readers:
            sock.close()
        server.shutdown()
        thread.join(10)


# A connection flood from another process, on loopback only and bounded in count and
# time: each connection sends nothing and is held for a while (the last HOLD of them),
# then reset, so that neither end keeps a port in TIME_WAIT.
_FLOOD = """
import collections, socket, struct, sys, time
port, count, seconds, hold = (float(a) for a in sys.argv[1:])
held = collections.deque()
end = time.monotonic() + seconds
opened = 0
while opened < count and time.monotonic() < end:
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.settimeout(0.5)
    try:
        sock.connect(("127.0.0.1", int(port)))
        opened += 1
    except OSError:
        sock.close()
        continue
    held.append(sock)
    while len(held) > hold:
        held.popleft().close()
for sock in held:
    sock.close()
"""


def test_a_connection_flood_never_pushes_a_probe_out() -> None:
    """Thousands of connections a second that send nothing each take the place of the
    oldest unfinished request: the kubelet's probe, once its request has arrived, must
    never be that one."""
    metrics = standard()
    limits = Limits()
    server = Server(
        ("127.0.0.1", 0),
        lambda _request: Response(200, "ok\n"),
        limits,
        metrics,
        inline=Routes.inline,
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    flood = subprocess.Popen(
        [sys.executable, "-c", _FLOOD, str(server.server_address[1]), "100000", "8", "1000"]
    )
    try:
        # the flood is on: the connections are full and newcomers take others' places
        settle(lambda: metrics.get("gitsync_http_refused_total", reason="connections") > 500)
        start, before = (
            time.monotonic(),
            metrics.get("gitsync_http_refused_total", reason="connections"),
        )
        answers: list[int | str] = []
        for _ in range(20):
            time.sleep(0.1)  # a kubelet's period, shortened: spread over the flood
            try:
                # the liveness probe's timeoutSeconds (deploy/deployment.yaml)
                answers.append(healthz(server, timeout=3)[0])
            except urllib.error.HTTPError as e:
                answers.append(f"{e.code} {e.read().decode().strip()}")
            except OSError as e:
                answers.append(repr(e))
        # every probe was asked while the flood went on
        assert flood.poll() is None, "the flood ended before the probes did"
        refused = metrics.get("gitsync_http_refused_total", reason="connections") - before
        rate = refused / (time.monotonic() - start)
        failed = [a for a in answers if a != 200]
        assert not failed, f"{len(failed)} of {len(answers)} probes failed: {failed}"
    finally:
        flood.kill()
        flood.wait(30)
        server.shutdown()
        thread.join(10)
    print(f"flood: {rate:.0f} connections/s pushed out while 20 probes were answered")
