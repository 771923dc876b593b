"""The Kubernetes transport on loopback: kubectl's namespace rule, the configuration's
proxy, and which failures are permanent (TLS trust, refused credentials) or temporary."""

from __future__ import annotations

import base64
import http.server
import json
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client as k8s_client
from kubernetes.config import kube_config

from gitsync.errors import APIConfigError, APITimeoutError, ConfigError
from gitsync.kube import kubeconfig as kubemod
from gitsync.kube.client import Kube
from gitsync.kube.kubeconfig import default_namespace
from tests.gitserver import free_port
from tests.netfixtures import connect_proxy, self_signed

# --- kubectl's namespace rule ------------------------------------------------------------


def kubeconfig(path: Path, namespaces: dict[str, str | None], current: str) -> Path:
    contexts = [
        {"name": name, "context": {"cluster": "c", "user": "u"} | ({"namespace": ns} if ns else {})}
        for name, ns in namespaces.items()
    ]
    path.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": contexts,
                "current-context": current,
            }
        )
    )
    return path


@pytest.fixture
def no_default_kubeconfig(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No $KUBECONFIG, no ~/.kube/config: what a Pod sees. Returns the namespace file."""
    monkeypatch.setattr(kube_config, "KUBE_CONFIG_DEFAULT_LOCATION", str(tmp_path / "none"))
    monkeypatch.delenv("POD_NAMESPACE", raising=False)
    ns_file = tmp_path / "serviceaccount" / "namespace"
    monkeypatch.setattr(kubemod, "SERVICEACCOUNT_NAMESPACE", ns_file)
    return ns_file


def test_the_context_namespace_is_the_default(tmp_path: Path) -> None:
    path = str(kubeconfig(tmp_path / "kc", {"team": "team-a", "bare": None}, "team"))
    assert default_namespace(path) == "team-a"
    assert default_namespace(path, "bare") == "default"
    assert default_namespace(path, "no-such-context") == "default"
    assert default_namespace(str(tmp_path / "missing")) == "default"


def test_the_default_kubeconfig_wins_over_the_pod(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_default_kubeconfig: Path
) -> None:
    path = kubeconfig(tmp_path / "kc", {"team": "team-b"}, "team")
    monkeypatch.setattr(kube_config, "KUBE_CONFIG_DEFAULT_LOCATION", str(path))
    no_default_kubeconfig.parent.mkdir()
    no_default_kubeconfig.write_text("gitsync-system")
    assert default_namespace() == "team-b"


def test_in_a_pod_its_own_namespace_is_the_default(
    monkeypatch: pytest.MonkeyPatch, no_default_kubeconfig: Path
) -> None:
    assert default_namespace() == "default"  # no file: not in a Pod
    no_default_kubeconfig.parent.mkdir()
    no_default_kubeconfig.write_text("gitsync-system\n")
    assert default_namespace() == "gitsync-system"
    monkeypatch.setenv("POD_NAMESPACE", "from-env")  # client-go reads it first
    assert default_namespace() == "from-env"


# --- the transport -----------------------------------------------------------------------


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        status = 401 if self.path.startswith("/401") else 200
        body = b'{"kind":"Status","code":401}' if status == 401 else b'{"major":"1"}'
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


class TLSServer:
    def __init__(
        self, directory: Path, *, client_ca: Path | None = None, san: str = "IP:127.0.0.1"
    ) -> None:
        self.cert, key = self_signed(directory, san=san)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(self.cert, key)
        #: the server names clients asked for (SNI)
        self.sni: list[str | None] = []
        ctx.sni_callback = lambda _sock, name, _ctx: self.sni.append(name)
        if client_ca is not None:
            ctx.verify_mode = ssl.CERT_REQUIRED
            ctx.load_verify_locations(client_ca)
            # TLS 1.2 checks the client's certificate inside the handshake, so the refusal
            # reaches the client as an alert (1.3 may close first: a plain EOF)
            ctx.maximum_version = ssl.TLSVersion.TLSv1_2
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self.server.daemon_threads = True
        self.server.socket = ctx.wrap_socket(self.server.socket, server_side=True)
        self.url = f"https://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


@pytest.fixture
def tls_server(tmp_path: Path) -> Iterator[TLSServer]:
    server = TLSServer(tmp_path)
    yield server
    server.close()


def configuration(host: str, ca: Path | None, **kw: object) -> k8s_client.Configuration:
    cfg = k8s_client.Configuration()
    cfg.host = host
    cfg.ssl_ca_cert = str(ca) if ca else None
    for key, value in kw.items():
        setattr(cfg, key, value)
    return cfg


def test_a_trusted_server_answers(tls_server: TLSServer) -> None:
    assert Kube(configuration(tls_server.url, tls_server.cert)).get("/version") == {"major": "1"}


def test_an_untrusted_server_is_a_permanent_error_naming_it(
    tls_server: TLSServer, tmp_path: Path
) -> None:
    other_ca, _ = self_signed(tmp_path, "other")
    with pytest.raises(APIConfigError) as info:
        Kube(configuration(tls_server.url, other_ca)).check()
    assert not info.value.temporary
    assert f"TLS with the API server {tls_server.url} failed" in str(info.value)
    assert "certificate is not trusted" in str(info.value)


@pytest.mark.parametrize("client_cert", [False, True])
def test_a_refused_client_certificate_is_a_permanent_error(
    tmp_path: Path, client_cert: bool
) -> None:
    client_ca, _ = self_signed(tmp_path, "client-ca")
    server = TLSServer(tmp_path, client_ca=client_ca)
    extra = {}
    if client_cert:  # one the server's client CA did not sign
        cert, key = self_signed(tmp_path, "stranger")
        extra = {"cert_file": str(cert), "key_file": str(key)}
    try:
        with pytest.raises(APIConfigError, match="the server refused the handshake"):
            Kube(configuration(server.url, server.cert, **extra)).get("/version")
    finally:
        server.close()


def test_an_unreadable_ca_file_is_a_permanent_error(tls_server: TLSServer, tmp_path: Path) -> None:
    with pytest.raises(APIConfigError, match="cannot read"):
        Kube(configuration(tls_server.url, tmp_path / "missing-ca.crt")).get("/version")


def test_unauthorized_is_a_permanent_error_naming_the_server(tls_server: TLSServer) -> None:
    with pytest.raises(APIConfigError) as info:
        Kube(configuration(tls_server.url, tls_server.cert)).get("/401")
    assert info.value.status == 401 and not info.value.temporary
    assert f"the API server {tls_server.url} did not accept the credentials" in str(info.value)


def test_a_server_that_is_down_is_temporary() -> None:
    with pytest.raises(APITimeoutError) as info:
        Kube(configuration(f"https://127.0.0.1:{free_port()}", None)).get("/version")
    assert info.value.temporary


def test_tls_server_name_is_the_name_sent_and_checked(tmp_path: Path) -> None:
    """The kubeconfig's tls-server-name: the name sent as SNI and checked in the server's
    certificate, whatever address the server URL has."""
    server = TLSServer(tmp_path, san="DNS:api.cluster.internal")
    try:
        with pytest.raises(APIConfigError, match="certificate is not trusted"):
            Kube(configuration(server.url, server.cert)).get("/version")
        named = configuration(server.url, server.cert, tls_server_name="api.cluster.internal")
        assert Kube(named).get("/version") == {"major": "1"}
        assert server.sni[-1] == "api.cluster.internal"
    finally:
        server.close()


@pytest.mark.parametrize("proxy", ["ftp://proxy.example:21", "http://"])
def test_a_proxy_that_cannot_be_used_is_a_config_error_naming_it(proxy: str) -> None:
    with pytest.raises(ConfigError, match=r"^proxy .*only http, https and socks"):
        Kube(configuration("https://127.0.0.1:6443", None, proxy=proxy))


def test_the_configured_proxy_carries_every_request(tls_server: TLSServer) -> None:
    with connect_proxy() as proxy:
        kube = Kube(configuration(tls_server.url, tls_server.cert, proxy=proxy.url))
        assert kube.get("/version") == {"major": "1"}
    assert proxy.tunnels == [tls_server.url.removeprefix("https://")]


def test_proxy_credentials_go_in_proxy_authorization(tls_server: TLSServer) -> None:
    with connect_proxy() as proxy:
        url = proxy.url.replace("http://", "http://me:p%40ss@")
        Kube(configuration(tls_server.url, tls_server.cert, proxy=url)).get("/version")
    assert proxy.auth == ["Basic " + base64.b64encode(b"me:p@ss").decode()]


@pytest.mark.parametrize("no_proxy", ["", "127.0.0.1", "127.0.0.0/8", "example.com"])
def test_the_environments_proxy_and_no_proxy(
    tls_server: TLSServer, monkeypatch: pytest.MonkeyPatch, no_proxy: str
) -> None:
    with connect_proxy() as proxy:
        for name in ("https_proxy", "HTTPS_PROXY"):
            monkeypatch.setenv(name, proxy.url)
        for name in ("no_proxy", "NO_PROXY"):
            monkeypatch.setenv(name, no_proxy)
        kube = Kube(configuration(tls_server.url, tls_server.cert))
        assert kube.get("/version") == {"major": "1"}
    bypassed = no_proxy.startswith("127.")
    assert len(proxy.tunnels) == (0 if bypassed else 1)
