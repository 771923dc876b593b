"""gitsync's Prometheus metrics, kept and exposed by ``prometheus_client``.

Each :class:`Metrics` has a registry of its own, not the library's global one: two
daemons in one process (the tests run several) must not count into each other. The
registry also holds the library's process collector, so ``/metrics`` carries
``process_resident_memory_bytes``, ``process_cpu_seconds_total`` and the open file
descriptors next to gitsync's own series. :meth:`Metrics.render` gives the text
format; the daemon serves it from its own HTTP listener (no second server).

Callers name a series by its exposition name (``gitsync_sync_total``) and pass label
values as keywords, as before the library: ``metrics.inc("gitsync_sync_total",
result="success")``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Final, Literal, get_args

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    ProcessCollector,
    Summary,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4
from prometheus_client.registry import Collector

from gitsync.source.verify import Reason

#: the text format ``render`` writes
CONTENT_TYPE: Final = CONTENT_TYPE_PLAIN_0_0_4
Kind = Literal["counter", "gauge", "summary"]

# no ``*_created`` series next to each counter and summary: nothing of ours reads them,
# and they would double what a scrape holds (a process-wide switch of the library)
disable_created_metrics()  # type: ignore[no-untyped-call]


class Metrics:
    """A registry of gitsync's series. Thread-safe (the library's metrics are)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self._series: dict[str, Counter | Gauge | Summary] = {}
        self._elsewhere: dict[str, _Snapshot] = {}
        ProcessCollector(registry=self.registry)

    def describe(self, name: str, kind: Kind, help_: str, labels: tuple[str, ...] = ()) -> None:
        """Declare a series (once), with the names of its labels."""
        make = {"counter": Counter, "gauge": Gauge, "summary": Summary}[kind]
        self._series[name] = make(name, help_, labels, registry=self.registry)

    def zero(self, name: str, label: str, values: Iterable[str]) -> None:
        """Start the series of ``name`` with these values of ``label`` at 0: a counter
        that first appears at 1 has no increase (``increase()`` needs a sample before the
        event), so an alert on it would miss the first one."""
        for value in values:
            self._child(name, {label: value})

    def describe_unset(self, name: str, help_: str) -> None:
        """A gauge with no sample until it is first set (a timestamp: a 0 would read as
        "long ago" to an alert on a replica that never set it)."""
        self._snapshot(_Snapshot(name, "gauge", help_, None))

    def counted_elsewhere(self, name: str, help_: str, label: str | None) -> None:
        """A counter whose values something else keeps (``Kube.requests``): read at each
        scrape from the source :meth:`read_from` names, one series per key, the key as
        ``label``. No sample until then."""
        self._snapshot(_Snapshot(name, "counter", help_, label))

    def gauged_elsewhere(self, name: str, help_: str, label: str | None) -> None:
        """A gauge read at each scrape from the source :meth:`read_from` names, one
        series per key, the key as ``label``."""
        self._snapshot(_Snapshot(name, "gauge", help_, label))

    def _snapshot(self, snapshot: _Snapshot) -> None:
        self._elsewhere[snapshot.name] = snapshot
        self.registry.register(snapshot)

    def read_from(self, name: str, source: Callable[[], Mapping[str, float]]) -> None:
        self._elsewhere[name].source = source

    def _child(self, name: str, labels: Mapping[str, str]) -> Counter | Gauge | Summary:
        series = self._series[name]
        return series.labels(**labels) if labels else series

    def inc(self, name: str, amount: float = 1.0, **labels: str) -> None:
        child = self._child(name, labels)
        assert isinstance(child, (Counter, Gauge)), name
        child.inc(amount)

    def set(self, name: str, value: float, **labels: str) -> None:
        if name in self._elsewhere:
            self._elsewhere[name].source = {"": value}.copy
            return
        child = self._child(name, labels)
        assert isinstance(child, Gauge), name
        child.set(value)

    def observe(self, name: str, seconds: float) -> None:
        """A summary: ``_count`` and ``_sum`` (enough for rates and averages)."""
        child = self._child(name, {})
        assert isinstance(child, Summary), name
        child.observe(seconds)

    def get(self, name: str, **labels: str) -> float:
        """The value of one sample (``gitsync_sync_total``, ``..._count``), 0 if none."""
        return self.registry.get_sample_value(name, labels) or 0.0

    def render(self) -> str:
        """Every series in the Prometheus text format (:data:`CONTENT_TYPE`)."""
        return generate_latest(self.registry).decode()


class _Snapshot(Collector):
    """Samples read at scrape time from ``source``: label value -> value (the label
    value is ignored when the series has no label)."""

    def __init__(self, name: str, kind: Kind, help_: str, label: str | None) -> None:
        self.name, self._kind, self._help, self._label = name, kind, help_, label
        self.source: Callable[[], Mapping[str, float]] = dict

    def collect(self) -> Iterator[Metric]:
        labels = [self._label] if self._label else None
        family: Metric
        if self._kind == "counter":
            family = CounterMetricFamily(self.name, self._help, labels=labels)
        else:
            family = GaugeMetricFamily(self.name, self._help, labels=labels)
        for key, value in sorted(dict(self.source()).items()):
            family.add_metric([key] if self._label else [], value)
        yield family


#: what a webhook delivery ends in (gitsync.daemon.routes answers each)
WEBHOOK_RESULTS: Final = (
    "accepted",
    "forwarded",
    "failed",
    "unauthorized",
    "duplicate",
    "limited",
)


def standard() -> Metrics:
    """gitsync's series (the daemon points ``gitsync_api_requests_total`` at its client)."""
    m = Metrics()
    m.describe(
        "gitsync_sync_total", "counter", "Sync passes by result (success, failure).", ("result",)
    )
    m.zero("gitsync_sync_total", "result", ("success", "failure"))
    m.describe("gitsync_sync_duration_seconds", "summary", "Duration of a sync pass.")
    m.describe(
        "gitsync_sync_incremental_total",
        "counter",
        "Sync passes that applied only the MyApps their commit changed.",
    )
    m.describe_unset("gitsync_last_success_timestamp_seconds", "Unix time of the last good sync.")
    m.describe("gitsync_git_fetch_duration_seconds", "summary", "Duration of the git fetch step.")
    m.describe("gitsync_objects", "gauge", "MyApps by action in the last sync pass.", ("action",))
    m.describe("gitsync_prune_skipped_total", "counter", "Prunes skipped by a safety guard.")
    m.describe(
        "gitsync_pinned",
        "gauge",
        "Pins (gitsync rollback) the last sync pass honoured, by scope (instance, myapp).",
        ("scope",),
    )
    m.describe(
        "gitsync_held",
        "gauge",
        "MyApps whose changes from Git the last sync pass held back, by what holds them.",
        ("reason",),
    )
    m.gauged_elsewhere(
        "gitsync_waiting",
        "MyApps whose change from Git waits now, by what for (dependency, window).",
        "reason",
    )
    m.describe(
        "gitsync_rollouts_failed_total",
        "counter",
        "Rollouts that failed their progress deadline, by what gitsync did (rolled_back, left).",
        ("result",),
    )
    m.zero("gitsync_rollouts_failed_total", "result", ("rolled_back", "left"))
    m.describe(
        "gitsync_verification_failures_total", "counter", "Commits refused, by reason.", ("reason",)
    )
    m.zero("gitsync_verification_failures_total", "reason", get_args(Reason))
    m.counted_elsewhere(
        "gitsync_api_requests_total", "API requests sent by gitsync, by verb.", "verb"
    )
    m.describe("gitsync_leader", "gauge", "1 while this replica holds the leader Lease.")
    m.gauged_elsewhere(
        "gitsync_myapps",
        "MyApps this replica serves, by state (total, drifted, conflict, not_synced, "
        "not_ready), as their status says; a standby serves none.",
        "state",
    )
    m.gauged_elsewhere(
        "gitsync_drift_since_timestamp_seconds",
        "Unix time each drifted MyApp this replica serves became drifted, by namespace/name.",
        "myapp",
    )
    m.gauged_elsewhere(
        "gitsync_cache_silence_seconds",
        "Seconds since the API server last sent anything (a list page, an event, a "
        "bookmark, the end of a watch) to each informer cache; the server ends a live "
        "watch every minute.",
        "informer",
    )
    m.gauged_elsewhere(
        "gitsync_cache_objects",
        "Objects each informer cache holds (equal to the server's count once in step).",
        "informer",
    )
    m.counted_elsewhere(
        "gitsync_thread_crashes_total",
        "Crashes of the process's long-lived threads, by thread; each is started again "
        "after a backoff, until it crashes 5 times in 10 minutes.",
        "thread",
    )
    m.gauged_elsewhere(
        "gitsync_workqueue_depth", "MyApps waiting in the work queue of this replica.", None
    )
    m.gauged_elsewhere(
        "gitsync_malloc_bytes",
        "Bytes the C library's allocator holds (glibc): in use, and freed but kept.",
        "state",
    )
    m.gauged_elsewhere(
        "gitsync_python_blocks",
        "Blocks Python's allocator has handed out and not had back (the objects alive).",
        None,
    )
    m.gauged_elsewhere(
        "gitsync_shared_nodes",
        "Nodes in the table of the caches' shared parts (each held once by the caches).",
        None,
    )
    m.gauged_elsewhere(
        "gitsync_shard_buckets",
        "With --sharding: buckets of MyApps this replica serves now (of 256).",
        "replica",
    )
    m.gauged_elsewhere(
        "gitsync_shard_myapps",
        "With --sharding: MyApps in the buckets this replica serves now.",
        "replica",
    )
    m.counted_elsewhere(
        "gitsync_shard_handovers_total",
        "With --sharding: buckets this replica took over or gave up.",
        "replica",
    )
    m.describe(
        "gitsync_webhook_requests_total", "counter", "Webhook deliveries by result.", ("result",)
    )
    m.zero("gitsync_webhook_requests_total", "result", WEBHOOK_RESULTS)
    m.describe(
        "gitsync_http_refused_total",
        "counter",
        "HTTP requests refused unread or cut, by reason.",
        ("reason",),
    )
    m.describe(
        "gitsync_notifications_total",
        "counter",
        "Notifications by result (delivered, failed, duplicate).",
        ("result",),
    )
    m.zero("gitsync_notifications_total", "result", ("delivered", "failed", "duplicate"))
    m.describe(
        "gitsync_notifications_dropped_total",
        "counter",
        "Notifications dropped because a receiver's queue was full.",
    )
    m.counted_elsewhere(
        "gitsync_events_dropped_total",
        "Kubernetes Events not recorded because the queue of Events to write was full.",
        None,
    )
    return m
