"""Leader election's timing against the real API server: a Lease taken over by another
holder, and an API server that stops answering (a loopback TCP proxy that stalls)."""

from __future__ import annotations

import contextlib
import datetime as dt
import socket
import threading
import time
from collections.abc import Iterator

import pytest

from gitsync.kube.client import Kube, load_configuration, resource_path
from gitsync.kube.holders import WATCH_ANNOTATION
from gitsync.kube.leader import LeaderElector
from tests.support import wait_until

LEASE = "gitsync-leader"


class StallingProxy:
    """Forwards TCP between loopback clients and ``upstream`` until ``stall()``: from
    then on bytes are held (not dropped, not refused), as by a hung API server or a
    half-open connection. TLS passes through untouched."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self._flowing = threading.Event()
        self._flowing.set()
        self._closed = threading.Event()
        self._sockets: list[socket.socket] = []
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def stall(self) -> None:
        self._flowing.clear()

    def resume(self) -> None:
        self._flowing.set()

    def close(self) -> None:
        self._closed.set()
        self._flowing.set()
        self._listener.close()
        for s in self._sockets:
            s.close()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
                server = socket.create_connection(self.upstream, timeout=5)
            except OSError:
                return
            server.settimeout(None)
            self._sockets += [client, server]
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                self._flowing.wait()
                if self._closed.is_set():
                    return
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)


class Campaign:
    """An elector running in a thread, with the times of its callbacks."""

    def __init__(self, elector: LeaderElector) -> None:
        self.elector = elector
        self.log: list[tuple[str, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=elector.run,
            args=(self._stop, lambda: self._note("started"), lambda: self._note("stopped")),
            daemon=True,
        )
        self._thread.start()

    def _note(self, what: str) -> None:
        self.log.append((what, time.monotonic()))

    def events(self) -> list[str]:
        return [what for what, _ in self.log]

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(self.elector.renew_deadline + 5)
        assert not self._thread.is_alive()


@pytest.fixture
def campaigns() -> Iterator[list[Campaign]]:
    running: list[Campaign] = []
    yield running
    for c in running:
        c.stop()


def watching(namespace: str) -> dict[str, str]:
    """What gitsync run says on its Lease, watching ``namespace`` (so that an uninstall
    scoped to another namespace, run meanwhile, leaves this elector out)."""
    return {WATCH_ANNOTATION: namespace}


def lease(kube: Kube, namespace: str) -> dict[str, object]:
    spec = kube.get(resource_path("coordination.k8s.io/v1", "leases", namespace, LEASE))["spec"]
    assert isinstance(spec, dict)
    return spec


def test_a_lease_taken_over_ends_leadership_at_the_next_renewal(
    kube: Kube, namespace: str, campaigns: list[Campaign]
) -> None:
    elector = LeaderElector(
        kube, namespace, LEASE, "replica-a", retry_period=0.5, annotations=watching(namespace)
    )
    c = Campaign(elector)
    campaigns.append(c)
    wait_until(elector.is_leader, timeout=15, what="replica-a to lead")

    # another replica writes itself into the Lease (as after a partition of ours)
    path = resource_path("coordination.k8s.io/v1", "leases", namespace, LEASE)
    body = kube.get(path)
    body["spec"]["holderIdentity"] = "replica-b"
    body["spec"]["renewTime"] = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    kube.request("PUT", path, body=body)
    taken = time.monotonic()

    wait_until(lambda: not elector.is_leader(), timeout=15, what="replica-a to step down")
    stepped_down = time.monotonic() - taken
    # one retry period (0.5 s) and a Lease read, not the rest of the 10 s renew deadline
    assert stepped_down < elector.renew_deadline / 2, f"still leading {stepped_down:.1f}s later"
    assert c.events() == ["started", "stopped"]
    # and the API server still names replica-b: a live Lease of another is not written over
    time.sleep(4 * elector.retry_period)
    assert lease(kube, namespace)["holderIdentity"] == "replica-b"
    assert not elector.is_leader()


def test_a_stalled_api_server_cannot_stretch_leadership_or_hang_a_lease_call(
    kubeconfig: str, kube: Kube, namespace: str, campaigns: list[Campaign]
) -> None:
    host, port = kube.host.removeprefix("https://").rsplit(":", 1)
    proxy = StallingProxy((host, int(port)))
    try:
        config = load_configuration(kubeconfig)
        config.host = f"https://127.0.0.1:{proxy.port}"  # the serving cert names 127.0.0.1
        proxied = Kube(config)
        renew_deadline = 3.0
        elector = LeaderElector(
            proxied,
            namespace,
            LEASE,
            "replica-a",
            renew_deadline=renew_deadline,
            retry_period=0.5,
            annotations=watching(namespace),
        )
        c = Campaign(elector)
        campaigns.append(c)
        wait_until(elector.is_leader, timeout=15, what="replica-a to lead")

        proxy.stall()
        stalled = time.monotonic()
        wait_until(lambda: not elector.is_leader(), timeout=30, what="replica-a to step down")
        # leadership ends within the renew deadline of the last renewal...
        assert time.monotonic() - stalled <= renew_deadline + 0.5
        # ...and is announced then, not when a 30 s request timeout fires
        wait_until(lambda: "stopped" in c.events(), timeout=30, what="on_stopped")
        stopped_at = next(t for what, t in c.log if what == "stopped")
        assert stopped_at - stalled <= renew_deadline + 1.0, f"{stopped_at - stalled:.1f}s"
        renewed_last = lease(kube, namespace)["renewTime"]

        # a standby's Lease call through the stalled connection returns in time too
        standby = LeaderElector(proxied, namespace, LEASE, "replica-b", renew_deadline=2.0)
        t0 = time.monotonic()
        assert standby.request_sync() is False
        asked = time.monotonic() - t0
        assert asked <= standby.renew_deadline + 0.5, f"request_sync took {asked:.1f}s"
        # the API server saw no renewal meanwhile (what is stored, not what we believe)
        assert lease(kube, namespace)["renewTime"] == renewed_last
        assert not elector.is_leader()

        proxy.resume()
        # the API server answers again and nobody else took the Lease: leading again,
        # announced as a new start (so the operator resyncs what it refused meanwhile)
        wait_until(elector.is_leader, timeout=30, what="replica-a to lead again")
        assert c.events() == ["started", "stopped", "started"]
        assert lease(kube, namespace)["holderIdentity"] == "replica-a"
    finally:
        proxy.close()
