"""Prometheus metrics in the text exposition format, without a dependency."""

from __future__ import annotations

import threading
from collections import defaultdict

Labels = tuple[tuple[str, str], ...]


class Metrics:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._help: dict[str, tuple[str, str]] = {}
        self._values: dict[str, dict[Labels, float]] = defaultdict(dict)

    def describe(self, name: str, kind: str, help_: str) -> None:
        self._help[name] = (kind, help_)

    def inc(self, name: str, amount: float = 1.0, **labels: str) -> None:
        key = tuple(sorted(labels.items()))
        with self._lock:
            series = self._values[name]
            series[key] = series.get(key, 0.0) + amount

    def set(self, name: str, value: float, **labels: str) -> None:
        with self._lock:
            self._values[name][tuple(sorted(labels.items()))] = value

    def observe(self, name: str, seconds: float) -> None:
        """A summary: _count and _sum (enough for rates and averages)."""
        self.inc(f"{name}_count")
        self.inc(f"{name}_sum", seconds)

    def get(self, name: str, **labels: str) -> float:
        with self._lock:
            return self._values.get(name, {}).get(tuple(sorted(labels.items())), 0.0)

    def render(self) -> str:
        lines: list[str] = []
        with self._lock:
            for name in sorted(self._help):
                kind, help_ = self._help[name]
                lines += [f"# HELP {name} {help_}", f"# TYPE {name} {kind}"]
                for suffix in ("", "_count", "_sum") if kind == "summary" else ("",):
                    for labels, value in sorted(self._values.get(name + suffix, {}).items()):
                        lines.append(f"{name}{suffix}{_labels(labels)} {value:g}")
        return "\n".join(lines) + "\n"


def _labels(labels: Labels) -> str:
    if not labels:
        return ""
    inner = ",".join(f'{k}="{_escape(v)}"' for k, v in labels)
    return "{" + inner + "}"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def standard() -> Metrics:
    m = Metrics()
    m.describe("gitsync_sync_total", "counter", "Sync passes by result (success, failure).")
    m.describe("gitsync_sync_duration_seconds", "summary", "Duration of a sync pass.")
    m.describe(
        "gitsync_last_success_timestamp_seconds", "gauge", "Unix time of the last good sync."
    )
    m.describe("gitsync_git_fetch_duration_seconds", "summary", "Duration of the git fetch step.")
    m.describe("gitsync_objects", "gauge", "MyApps by action in the last sync pass.")
    m.describe("gitsync_prune_skipped_total", "counter", "Prunes skipped by a safety guard.")
    m.describe("gitsync_verification_failures_total", "counter", "Commits refused, by reason.")
    m.describe("gitsync_api_requests_total", "counter", "API requests sent by gitsync, by verb.")
    m.describe("gitsync_leader", "gauge", "1 while this replica holds the leader Lease.")
    m.describe("gitsync_webhook_requests_total", "counter", "Webhook deliveries by result.")
    m.describe(
        "gitsync_http_refused_total", "counter", "HTTP requests refused unread or cut, by reason."
    )
    m.describe(
        "gitsync_notifications_total",
        "counter",
        "Notifications by result (delivered, failed, duplicate).",
    )
    m.describe(
        "gitsync_notifications_dropped_total",
        "counter",
        "Notifications dropped because a receiver's queue was full.",
    )
    return m
