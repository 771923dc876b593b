"""The daemon's series: every counter an alert reads starts at 0 with each label value
it can take (an alert's ``increase()`` would miss the first event of a series that first
appears at 1), and the fleet's gauges are read at each scrape."""

from __future__ import annotations

from typing import get_args

from gitsync.daemon import metrics as metricslib
from gitsync.daemon.routes import SyncRequest
from gitsync.source.verify import Reason


def samples(text: str) -> set[str]:
    return {line.rsplit(" ", 1)[0] for line in text.splitlines() if not line.startswith("#")}


def test_every_counter_an_alert_reads_starts_at_zero_with_each_value() -> None:
    text = metricslib.standard().render()
    have = samples(text)
    for result in ("success", "failure"):
        assert f'gitsync_sync_total{{result="{result}"}}' in have
    for reason in get_args(Reason):
        assert f'gitsync_verification_failures_total{{reason="{reason}"}}' in have
    for result in ("rolled_back", "left"):
        assert f'gitsync_rollouts_failed_total{{result="{result}"}}' in have
    for result in metricslib.WEBHOOK_RESULTS:
        assert f'gitsync_webhook_requests_total{{result="{result}"}}' in have
    for result in ("delivered", "failed", "duplicate"):
        assert f'gitsync_notifications_total{{result="{result}"}}' in have
    assert "gitsync_prune_skipped_total" in have
    for line in text.splitlines():
        if line.startswith(("gitsync_sync_total", "gitsync_webhook_requests_total")):
            assert line.endswith(" 0.0"), line


def test_the_webhook_results_are_every_answer_the_route_gives() -> None:
    answered = {*get_args(SyncRequest), "unauthorized", "duplicate", "limited"}
    assert set(metricslib.WEBHOOK_RESULTS) == answered


def test_the_fleet_gauges_are_read_at_each_scrape() -> None:
    m = metricslib.standard()
    states = {"total": 2.0, "drifted": 1.0}
    m.read_from("gitsync_myapps", lambda: states)
    m.read_from("gitsync_drift_since_timestamp_seconds", lambda: {"shop/a": 1.5e9})
    m.read_from("gitsync_workqueue_depth", lambda: {"": 3.0})
    have = samples(m.render())
    assert {'gitsync_myapps{state="total"}', 'gitsync_myapps{state="drifted"}'} <= have
    assert 'gitsync_drift_since_timestamp_seconds{myapp="shop/a"}' in have
    assert "gitsync_workqueue_depth" in have
    states["drifted"] = 0.0
    assert 'gitsync_myapps{state="drifted"} 0.0' in m.render()


def test_what_the_process_holds_is_read_at_each_scrape() -> None:
    m = metricslib.standard()
    held = {"in_use": 3.0, "free": 1.0}
    m.read_from("gitsync_malloc_bytes", lambda: held)
    m.read_from("gitsync_python_blocks", lambda: {"": 7.0})
    m.read_from("gitsync_shared_nodes", lambda: {"": 5.0})
    text = m.render()
    assert 'gitsync_malloc_bytes{state="in_use"} 3.0' in text
    assert 'gitsync_malloc_bytes{state="free"} 1.0' in text
    assert "gitsync_python_blocks 7.0" in text and "gitsync_shared_nodes 5.0" in text
    held["free"] = 2.0
    assert 'gitsync_malloc_bytes{state="free"} 2.0' in m.render()
