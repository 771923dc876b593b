"""Network faults between gitsync and kube-apiserver, through a TCP fault proxy: latency,
stalled connections (half-open: the bytes stop, the socket stays up) and resets. Every
client call ends within its timeout with a gitsync error, watches reconnect, and nothing
hangs: each blocking call runs under a watchdog that fails the test past a bound."""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from gitsync.errors import APIError, GitsyncError
from gitsync.kube.client import Kube, path_of
from gitsync.kube.informer import BEHIND_SECONDS, SILENCE_SECONDS, WATCH_SECONDS
from gitsync.reconcile.controller import Controller, ControllerConfig
from tests.faultproxy import FaultProxy
from tests.faults.harness import Daemon, PrivateControlPlane, apps_files, report, wait_converged
from tests.gitserver import Upstream
from tests.support import get, myapp, wait_until

pytestmark = [pytest.mark.faults, pytest.mark.integration]

TIMEOUT = 3.0  # the client's own bound in these tests


def guarded(fn: Callable[[], Any], bound: float) -> tuple[float, BaseException | None]:
    """Run ``fn`` in a thread; fail the test if it is still running after ``bound``."""
    outcome: list[BaseException | None] = [None]

    def run() -> None:
        try:
            fn()
        except BaseException as e:  # handed back to the test
            outcome[0] = e

    start = time.monotonic()
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(bound)
    if thread.is_alive():
        pytest.fail(f"a call through the fault proxy hung past {bound:.0f}s", pytrace=False)
    return time.monotonic() - start, outcome[0]


@pytest.fixture
def proxy(private_cp: PrivateControlPlane) -> Iterator[FaultProxy]:
    target = urlsplit(private_cp.server)
    p = FaultProxy(target.hostname or "127.0.0.1", target.port or 443).start()
    yield p
    p.stop()


@pytest.fixture
def proxied_kubeconfig(private_cp: PrivateControlPlane, proxy: FaultProxy, tmp_path: Path) -> Path:
    config = json.loads(private_cp.kubeconfig.read_text())
    # the serving certificate names 127.0.0.1, so TLS passes through the proxy untouched
    config["clusters"][0]["cluster"]["server"] = f"https://127.0.0.1:{proxy.port}"
    path = tmp_path / "proxied.kubeconfig"
    path.write_text(json.dumps(config))
    return path


def test_every_call_ends_within_its_bound(
    proxy: FaultProxy, proxied_kubeconfig: Path, pkube: Kube, pns: str
) -> None:
    kube = Kube.from_kubeconfig(str(proxied_kubeconfig), timeout=TIMEOUT)
    ns_path = f"/api/v1/namespaces/{pns}"
    bound = 3 * TIMEOUT + 20  # generous on a loaded machine; a hang is unbounded
    worst = 0.0
    try:
        # latency: slower, and still within the bound
        proxy.latency = 0.2
        took, err = guarded(lambda: kube.get(ns_path), bound)
        assert err is None, err
        proxy.latency = 0.0

        # (what, applies to connections already open, the fault)
        cases: list[tuple[str, bool, Callable[[], None]]] = [
            ("new connections stall", False, lambda: setattr(proxy, "mode", "stall")),
            ("open connections stall", True, proxy.stall_all),
            ("new connections reset", False, lambda: setattr(proxy, "mode", "reset")),
            ("open connections reset", True, proxy.reset_all),
        ]
        for what, on_open, fault in cases:
            proxy.mode = "pass"
            # a client with a pooled connection, or a fresh one that must connect
            client = (
                kube if on_open else Kube.from_kubeconfig(str(proxied_kubeconfig), timeout=TIMEOUT)
            )
            if on_open:
                assert client.get(ns_path)["metadata"]["name"] == pns
            fault()
            took, err = guarded(lambda: client.get(ns_path), bound)  # noqa: B023 - joined here
            print(f"{what}: GET ended after {took:.1f}s with {type(err).__name__}: {err}")
            worst = max(worst, took)
            if what == "open connections reset":
                # a reset pooled connection either fails the call at once with a gitsync
                # error or is found dead before the request and replaced
                assert err is None or isinstance(err, GitsyncError), err
            else:
                assert isinstance(err, APIError), err
            if not on_open:
                client.close()

        # a watch on a stalled connection ends by its read timeout
        proxy.mode = "stall"

        def watch() -> None:
            for _ in kube.stream(path_of("MyApp", pns), params={"watch": "true"}, read_timeout=5):
                pass

        took, err = guarded(watch, bound)
        print(f"stalled watch: ended after {took:.1f}s with {type(err).__name__}")
        assert isinstance(err, APIError), err
        worst = max(worst, took)
    finally:
        proxy.mode = "pass"
        kube.close()
    report("network faults (client calls)", calls=6, hung=0, max_call_s=f"{worst:.1f}")


def test_watches_reconnect_after_resets(
    proxy: FaultProxy, proxied_kubeconfig: Path, pkube: Kube, pns: str
) -> None:
    kube = Kube.from_kubeconfig(str(proxied_kubeconfig), timeout=TIMEOUT)
    controller = Controller(kube, ControllerConfig(namespace=pns, workers=2))
    controller.start()
    try:
        assert controller.wait_synced(60)
        pkube.create(path_of("MyApp", pns), myapp(pns, "before"))
        wait_until(lambda: get(pkube, "Deployment", pns, "before"), 60, what="before")
        relists = controller.myapps.relists
        # every connection reset, and new ones refused, for a few seconds
        proxy.mode = "reset"
        proxy.reset_all()
        time.sleep(5)
        proxy.mode = "pass"
        healed = time.monotonic()
        pkube.create(path_of("MyApp", pns), myapp(pns, "after"))
        wait_until(lambda: get(pkube, "Deployment", pns, "after"), 120, what="after the resets")
        took = time.monotonic() - healed
        assert controller.myapps.relists > relists
        print(f"watches back and reconciling {took:.1f}s after the network healed")
    finally:
        stopper = threading.Thread(target=controller.stop, daemon=True)
        stopper.start()
        stopper.join(60)
        assert not stopper.is_alive(), "the controller did not stop"
        kube.close()
    report("network faults (watch reconnect)", runs=1, converged=1, max_converge_s=f"{took:.1f}")


def readyz(daemon: Daemon) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{daemon.port}/readyz", timeout=5) as r:
            return int(r.status)
    except urllib.error.HTTPError as e:
        return e.code
    except OSError:
        return 0


def test_a_silent_watch_is_given_up_within_a_watch_period_and_readyz_tells(
    proxy: FaultProxy, proxied_kubeconfig: Path, pkube: Kube, pns: str, work: Path
) -> None:
    """Half-open: the bytes stop and no connection closes, so nothing but silence tells.
    A quiet watch may hear no bookmark for minutes, but the server ends it at its
    timeoutSeconds, and that end is word too; a watch silent for longer is given up,
    and a cache that stays silent fails /readyz."""
    upstream = Upstream(work / "srv")
    images = {"web": "nginx:1.27", "db": "nginx:1.27"}
    upstream.commit(apps_files(pns, images), "two MyApps")
    daemon = Daemon(proxied_kubeconfig, pns, upstream.file_url, work / "daemon.log")
    try:
        daemon.start()
        wait_converged(pkube, pns, images, 300, "the first sync")
        wait_until(lambda: readyz(daemon) == 200, 60, what="/readyz")
        # quiet for two whole watches and more: their ends (and any bookmark) alone keep
        # the caches from being taken for dead
        loudest = 0.0
        quiet_until = time.monotonic() + 2 * WATCH_SECONDS + 15
        while time.monotonic() < quiet_until:
            heard = daemon.metric("gitsync_cache_silence_seconds", informer="myapps")
            loudest = max(loudest, heard)
            assert readyz(daemon) == 200
            time.sleep(2)
        assert "was silent for" not in daemon.log_text()
        assert 0 < loudest < SILENCE_SECONDS, loudest

        # every connection stops passing bytes, open and new alike; none is closed
        proxy.mode = "stall"
        proxy.stall_all()
        stalled = time.monotonic()
        pkube.merge_patch(
            path_of("Deployment", pns, "web"), {"spec": {"replicas": 3}}, field_manager="kubectl"
        )
        wait_until(
            lambda: "was silent for" in daemon.log_text(), 3 * SILENCE_SECONDS, what="noticed"
        )
        noticed = time.monotonic() - stalled
        wait_until(lambda: readyz(daemon) == 503, 3 * BEHIND_SECONDS, what="/readyz to fail")
        unready = time.monotonic() - stalled

        proxy.mode = "pass"
        healed = time.monotonic()
        wait_until(lambda: readyz(daemon) == 200, 120, what="/readyz after the stall")
        # the drift made while the watch was dead is seen and reverted
        wait_until(
            lambda: (get(pkube, "Deployment", pns, "web") or {})["spec"]["replicas"] == 1,
            120,
            what="the drift made during the stall reverted",
        )
        back = time.monotonic() - healed
    finally:
        proxy.mode = "pass"
        daemon.stop()
    print(
        f"quiet: loudest silence {loudest:.0f}s; stalled: noticed after {noticed:.1f}s, "
        f"/readyz 503 after {unready:.1f}s; healed: ready and drift reverted {back:.1f}s later"
    )
    report(
        "network faults (silent watch)",
        quiet_max_silence_s=f"{loudest:.0f}",
        noticed_s=f"{noticed:.1f}",
        unready_s=f"{unready:.1f}",
        recovered_s=f"{back:.1f}",
    )
