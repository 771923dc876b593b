"""The Host names the drift page answers: DNS rebinding refused (421) over real HTTP on
loopback, while probes, /metrics and the webhook answer whatever Host they are sent."""

from __future__ import annotations

import http.client
import threading
from collections.abc import Iterator

import pytest

from gitsync.daemon.hosts import AllowedHosts, host_name
from gitsync.daemon.httpserver import Server
from gitsync.errors import ConfigError
from tests.unit.test_daemon_http import FakeHost, routes


@pytest.mark.parametrize(
    ("header", "name"),
    [
        ("localhost:8080", "localhost"),
        ("LOCALHOST.", "localhost"),
        ("127.0.0.1", "127.0.0.1"),
        ("[::1]:8080", "::1"),
        ("gitsync.gitsync-system.svc:8080", "gitsync.gitsync-system.svc"),
        ("evil.example:8080", "evil.example"),
        ("[::1", None),
        ("[nothost]:80", None),
        ("a b", None),
        ("host:80:80", None),
        ("host:http", None),
        ("", None),
        ("user@host", None),
    ],
)
def test_host_name(header: str, name: str | None) -> None:
    assert host_name(header) == name


def test_allowed_hosts() -> None:
    allowed = AllowedHosts(["gitsync.gitsync-system.svc", "10.0.0.9"])

    def ok(host: str, local: str = "10.1.2.3") -> bool:
        return allowed.allows({"Host": host}, local)

    assert ok("localhost:1234") and ok("127.0.0.1:8080") and ok("[::1]:80")
    assert ok("gitsync.gitsync-system.svc:8080") and ok("10.0.0.9")
    # the address the connection arrived at: the Pod IP (a dual-stack socket's view too)
    assert ok("10.1.2.3:8080") and ok("10.1.2.3", "::ffff:10.1.2.3")
    assert not ok("evil.example") and not ok("localhost.evil.example") and not ok("10.1.2.4")
    assert not allowed.allows({}, "10.1.2.3")  # no Host at all
    assert not allowed.allows({"Host": "localhost", "host": "evil.example"}, "")
    with pytest.raises(ConfigError, match="--ui-allowed-hosts: 'a b'"):
        AllowedHosts(["a b"])


@pytest.fixture
def server() -> Iterator[Server]:
    # 127.0.0.2: an address of this host that is no loopback *name*, as a Pod IP is not
    r = routes(FakeHost(), ui=True)
    srv = Server(("127.0.0.2", 0), r.handle)

    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    thread.join(10)


def _get(srv: Server, path: str, host: str | None, method: str = "GET") -> tuple[int, bytes]:
    conn = http.client.HTTPConnection(*srv.server_address, timeout=10)
    try:
        conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        if host is not None:
            conn.putheader("Host", host)
        conn.putheader("Content-Length", "0")
        conn.endheaders()
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def test_the_page_answers_only_its_own_names_over_http(server: Server) -> None:
    port = server.server_address[1]
    for own in (f"127.0.0.2:{port}", f"localhost:{port}", "127.0.0.1:9999", f"[::1]:{port}"):
        assert _get(server, "/", own)[0] == 200, own
    for host in (f"rebound.attacker.example:{port}", "127.0.0.3", None):
        for path in ("/", "/api/v1/apps", "/apps/shop/web", "/api/v1/apps/shop/web", "/ui.js"):
            code, body = _get(server, path, host)
            assert code == 421, (host, path)
            assert b"<html" not in body and b"apps" not in body
        # the kubelet's probes and Prometheus give the Pod IP, a Service name or anything:
        # they carry no drift, and the webhook is authenticated by its signature
        assert _get(server, "/healthz", host)[0] == 200
        assert _get(server, "/metrics", host)[0] == 200
        assert _get(server, "/hooks/git", host, "POST")[0] == 401
