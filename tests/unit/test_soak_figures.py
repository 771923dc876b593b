"""The soak's arithmetic (bench/soak.py): growth as a least-squares slope per hour, and
the per-replica summary of what was sampled after the warm-up."""

from __future__ import annotations

import os
import tracemalloc
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

from bench import soak
from gitsync.daemon import heaptrace
from gitsync.daemon.heaptrace import HeapTrace


def test_the_slope_is_per_hour_and_ignores_noise_around_a_line() -> None:
    flat = [(t * 60.0, 100.0 + (1 if t % 2 else -1)) for t in range(60)]
    assert abs(soak.slope_per_hour(flat)) < 0.2  # of 100 MiB
    growing = [(t * 60.0, 100.0 + t * 0.5) for t in range(60)]  # 0.5 MiB a minute
    assert soak.slope_per_hour(growing) == pytest.approx(30.0)
    assert soak.slope_per_hour([(0.0, 1.0)]) == 0.0
    assert soak.slope_per_hour([(5.0, 1.0), (5.0, 2.0)]) == 0.0


def _sample(t: float, rss: float, cache: float, live: int | None) -> dict[str, Any]:
    facts = {"rss_mib": rss, "fds": 10, "threads": 16, "cache": {"myapps": cache}, "queue": 2}
    return {"t": t, "live": None if live is None else {"myapps": live}, "replicas": {"a": facts}}


def test_the_summary_counts_after_the_warm_up_and_compares_caches_with_the_server() -> None:
    settings = soak.Settings(minutes=60, apps=10, failover_every=600)
    assert settings.warmup == 900  # the first failover and five minutes more
    samples = [_sample(0, 500.0, 3, 3)]  # in the warm-up: never counted
    samples += [_sample(900 + 60 * i, 100.0 + i, 10, 10) for i in range(10)]
    samples.append(_sample(1560, 110.0, 9, 10))  # a cache one short of the server
    samples.append(_sample(1620, 110.0, 9, None))  # the server away: not compared
    world = SimpleNamespace(
        settings=settings,
        samples=samples,
        replicas=[SimpleNamespace(name="a", trace_dir=None)],
    )
    [(name, got)] = soak.summarize(cast(soak.World, world)).items()
    assert name == "a"
    assert got["rss_after_warmup_mib"] == 100.0 and got["rss_end_mib"] == 110.0
    assert got["rss_slope_mib_per_hour"] > 50  # about one MiB a minute
    assert got["rss_growth_pct_per_hour"] == pytest.approx(got["rss_slope_mib_per_hour"], rel=0.01)
    assert got["cache_mismatches"] == 1 and got["queue_max"] == 2
    assert got["fds_min_max"] == [10, 10] and got["traced"] is False


def test_restarts_are_spread_past_the_warm_up_and_one_more_may_fall_in_it() -> None:
    one = soak.Settings(minutes=60, apps=10, failover_every=600)
    assert one.restart_times() == [900 + 1350]  # the middle of what is counted
    three = soak.Settings(minutes=60, apps=10, failover_every=600, restarts=3)
    assert three.restart_times() == [900 + 675, 900 + 1350, 900 + 2025]
    warm = soak.Settings(minutes=85, apps=10, restarts=1, warmup_minutes=25, warmup_restart=True)
    assert warm.warmup == 1500
    assert warm.restart_times() == [750, 1500 + 1800]


def test_heap_snapshots_are_written_numbered_and_compared_by_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(heaptrace.ENV, raising=False)
    assert HeapTrace.from_env() is None  # off unless asked
    monkeypatch.setenv(heaptrace.ENV, str(tmp_path / "heap"))
    was_tracing = tracemalloc.is_tracing()
    trace = HeapTrace.from_env()
    try:
        assert trace is not None and tracemalloc.is_tracing()
        first = trace.dump()
        held = [bytearray(1024) for _ in range(200)]  # noqa: F841 - held on purpose
        second = trace.dump()
        assert first.name == f"heap-{os.getpid()}-1.snapshot"
        assert second.name == f"heap-{os.getpid()}-2.snapshot"
        grown = soak.growth_by_line(first, second, top=50)
        here = [g for g in grown if g["where"].endswith(f"test_soak_figures.py:{_line()}")]
        assert here and here[0]["grew_kib"] >= 200, grown[:5]
    finally:
        if not was_tracing:
            tracemalloc.stop()


def _line() -> int:
    """The line of the bytearrays above."""
    text = Path(__file__).read_text().splitlines()
    return next(i for i, line in enumerate(text, 1) if "bytearray(1024)" in line)
