"""The launcher's bad situations: a clear one-line cause, the log and its last
lines, in bounded time — never a hang."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from testenv import build, cluster


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
