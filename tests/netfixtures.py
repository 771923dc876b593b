"""Network pieces on loopback for the Kubernetes transport tests: a CONNECT proxy that
counts its tunnels, and TLS certificates made with openssl."""

from __future__ import annotations

import select
import socket
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Proxy:
    url: str
    tunnels: list[str] = field(default_factory=list)  # "host:port" of each CONNECT
    auth: list[str] = field(default_factory=list)  # Proxy-Authorization headers seen


@contextmanager
def connect_proxy() -> Iterator[Proxy]:
    """An HTTP proxy that knows only CONNECT (what a client does for https://)."""
    listener = socket.create_server(("127.0.0.1", 0))
    proxy = Proxy(f"http://127.0.0.1:{listener.getsockname()[1]}")
    stop = threading.Event()

    def pipe(a: socket.socket, b: socket.socket) -> None:
        with a, b:
            while not stop.is_set():
                ready, _, _ = select.select([a, b], [], [], 0.2)
                for src in ready:
                    data = src.recv(65536)
                    if not data:
                        return
                    (b if src is a else a).sendall(data)

    def handle(client: socket.socket) -> None:
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = client.recv(4096)
            if not chunk:
                client.close()
                return
            head += chunk
        lines = head.decode("latin-1").split("\r\n")
        method, target, _ = lines[0].split(" ", 2)
        if method != "CONNECT":
            client.sendall(b"HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n")
            client.close()
            return
        proxy.tunnels.append(target)
        proxy.auth += [
            ln.split(":", 1)[1].strip()
            for ln in lines
            if ":" in ln and ln.lower().startswith("proxy-authorization:")
        ]
        host, _, port = target.rpartition(":")
        upstream = socket.create_connection((host, int(port)), timeout=10)
        client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        pipe(client, upstream)

    def serve() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                client, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=handle, args=(client,), daemon=True).start()

    thread = threading.Thread(target=serve, name="connect-proxy", daemon=True)
    thread.start()
    try:
        yield proxy
    finally:
        stop.set()
        thread.join(timeout=5)
        listener.close()


def self_signed(
    directory: Path, name: str = "server", san: str = "IP:127.0.0.1"
) -> tuple[Path, Path]:
    """(certificate, key) for 127.0.0.1 (or ``san``), signed by nobody: a CA no client
    trusts."""
    cert, key = directory / f"{name}.crt", directory / f"{name}.key"
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256"),
            *("-nodes", "-days", "1"),
            *("-subj", f"/CN={name}", "-addext", f"subjectAltName={san}"),
            *("-keyout", str(key), "-out", str(cert)),
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return cert, key
