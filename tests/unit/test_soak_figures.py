"""The soak's arithmetic (bench/soak.py): growth as a least-squares slope per hour, and
the per-replica summary of what was sampled after the warm-up."""

from __future__ import annotations

import os
import random
import tracemalloc
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

from bench import soak
from bench.common import rss_mib
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
    kinds = {"heap": rss / 2, "anon": rss / 2 - 10, "file": 10.0}
    facts = {
        "rss_mib": rss,
        "rss_by_kind": kinds,
        "fds": 10,
        "threads": 16,
        "cache": {"myapps": cache},
        "queue": 2,
        "inside": {
            "malloc_in_use_mib": rss / 4,
            "malloc_free_mib": 1.0,
            "python_blocks": 1000 * rss,
            "shared_nodes": 500.0,
        },
    }
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
    kinds = got["rss_slope_by_kind_mib_per_hour"]
    assert kinds["file"] == 0.0
    assert kinds["heap"] == kinds["anon"] == pytest.approx(got["rss_slope_mib_per_hour"] / 2)
    inside = got["inside"]
    assert inside["malloc_in_use_mib"] == [25.0, 27.5]  # after the warm-up, at the end
    assert inside["python_blocks"] == [100_000.0, 110_000.0]
    assert inside["shared_nodes"] == [500.0, 500.0] and inside["malloc_free_mib"] == [1.0, 1.0]


SMAPS = """\
55d0c0a00000-55d0c0a2b000 r--p 00000000 08:01 1234                       /usr/bin/python3.11
Size:                172 kB
Rss:                 172 kB
Pss:                 172 kB
55d0c1c4e000-55d0c2e1f000 rw-p 00000000 00:00 0                          [heap]
Size:              18244 kB
Rss:               18000 kB
7f1c2c000000-7f1c2c100000 rw-p 00000000 00:00 0
Size:               1024 kB
Rss:                1024 kB
7f1c30000000-7f1c30021000 rw-p 00000000 00:00 0
Rss:                 100 kB
7ffd1c9e0000-7ffd1ca01000 rw-p 00000000 00:00 0                          [stack]
Rss:                  24 kB
7f1c3a000000-7f1c3a200000 r-xp 00000000 08:01 99                         /usr/lib/libc.so.6
Rss:                1024 kB
VmFlags: rd ex mr mw me sd
"""


def test_rss_is_split_by_mapping_as_smaps_names_it() -> None:
    got = soak.rss_by_kind(SMAPS)
    assert got == {"heap": round(18000 / 1024, 2), "anon": round(1148 / 1024, 2), "file": 1.17}
    own = soak.rss_by_kind(Path("/proc/self/smaps").read_text())
    total = rss_mib(os.getpid())
    assert own["heap"] > 0 and own["file"] > 0
    assert sum(own.values()) == pytest.approx(total, rel=0.05)


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


def test_the_warm_up_touches_every_myapp_once_then_only_random_ones() -> None:
    settings = soak.Settings(minutes=60, apps=1000, failover_every=600)
    assert settings.warmup_share(30.0) == 34  # 30 commits in 15 minutes: 30 x 34 >= 1000
    assert settings.warmup_share(10.0) == 12  # 90 scales
    untouched = soak.Settings(minutes=60, apps=1000, touch_all=False)
    assert untouched.warmup_share(30.0) == 0
    now = [0.0]
    commits: list[dict[str, str | None]] = []
    world = soak.World(
        settings,
        cast(Any, None),
        "ns",
        cast(Any, SimpleNamespace(commit=lambda files, message: commits.append(files))),
        [],
        random.Random(1),  # noqa: S311 (the soak's own reproducible choices)
    )
    world.t = lambda: now[0]  # type: ignore[method-assign]
    for _ in range(settings.apps):
        soak._new_app(world)
    first = dict(world.images)
    while now[0] < settings.warmup:
        soak.commit(world)
        now[0] += settings.commit_every
    kept = [n for n in first if n in world.images]
    assert all(world.images[n] != "nginx:1.27" for n in kept)  # each got a new image
    after = len(commits[-1])
    soak.commit(world)  # past the warm-up: five, and one added and one removed every fourth
    assert len(commits[-1]) <= 7 < after
