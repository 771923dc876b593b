"""The launcher's bad situations: a clear one-line cause, the log and its last
lines, in bounded time — never a hang."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from testenv import build, cluster, peers


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(cluster, "STATE", tmp_path)
    (tmp_path / "logs").mkdir()
    return tmp_path


def test_a_component_that_exits_is_reported_with_its_log(state: Path) -> None:
    procs: list[cluster.Proc] = []
    proc = cluster.start(
        "fake", ["sh", "-c", "echo listen tcp: address already in use; exit 1"], procs
    )
    start = time.monotonic()
    with pytest.raises(cluster.ClusterError) as err:
        cluster.wait_for("readiness", proc, lambda: False, timeout=30)
    assert time.monotonic() - start < 10
    message = str(err.value)
    assert message.startswith("fake exited while waiting for readiness")
    assert str(state / "logs" / "fake.log") in message
    assert "address already in use" in message


def test_a_component_that_never_becomes_ready_times_out(state: Path) -> None:
    procs: list[cluster.Proc] = []
    proc = cluster.start("sleeper", ["sh", "-c", "echo starting; sleep 30"], procs)
    try:
        with pytest.raises(cluster.ClusterError) as err:
            cluster.wait_for("readiness", proc, lambda: False, timeout=1)
        assert "timed out after 1s waiting for readiness" in str(err.value)
        assert "starting" in str(err.value)
    finally:
        cluster.stop_all({"procs": [{"pid": proc.pid}]})
    assert not cluster._alive(proc.pid)


def test_a_missing_go_toolchain_is_one_clear_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(build.BuildError) as err:
        build._go()
    assert "the Go toolchain was not found on PATH" in str(err.value)


def test_the_cache_key_follows_the_pins() -> None:
    key = build.cache_key()
    assert len(key) == 16
    assert build.bin_dir().parts[-2] == key
    assert build.cache_root() not in build.HERE.parents


def test_two_ups_at_once_start_one_control_plane(
    state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two test runs starting together: the second waits for the first and finds its
    control plane healthy, instead of starting another on the same etcd directory."""
    started: list[str] = []
    running = threading.Event()

    def start_components(*_args: object) -> None:
        started.append(threading.current_thread().name)
        time.sleep(0.3)  # a start takes a while: the other up() comes meanwhile
        cluster._save_state({"procs": [], "server": "https://127.0.0.1:1"})
        running.set()

    monkeypatch.setattr(cluster, "healthy", lambda _state: running.is_set())
    monkeypatch.setattr(cluster, "stop_all", lambda _state: None)
    monkeypatch.setattr(cluster, "make_pki", lambda _pki: None)
    monkeypatch.setattr(cluster, "_link_bins", lambda _bins: None)
    monkeypatch.setattr(cluster, "_start_components", start_components)
    monkeypatch.setattr(build, "build", lambda: state / "bin")
    monkeypatch.setattr(build, "bin_dir", lambda: state / "bin")
    errors: list[BaseException] = []

    def up() -> None:
        try:
            cluster.up()
        except BaseException as e:  # reported by the assertion below
            errors.append(e)

    threads = [threading.Thread(target=up, name=f"up-{i}") for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert errors == []
    assert len(started) == 1, started


def test_two_builds_of_a_peer_at_once_build_it_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A test fixture and `make peers` asking for one tool together: the second waits and
    takes the first's binary (it used to build too, and fail renaming a partial file the
    first had already moved)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    built: list[str] = []

    def fake_build(name: str, out: Path, verbose: bool) -> Path:
        built.append(name)
        time.sleep(0.3)
        out.write_text("binary")
        return out

    monkeypatch.setattr(peers, "_build", fake_build)
    found: list[Path] = []
    threads = [
        threading.Thread(target=lambda: found.append(peers.build("helm", verbose=False)))
        for _ in range(2)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert built == ["helm"]
    assert found == [peers.binary("helm")] * 2
