"""``gitsync run``: the operator, the scheduled sync, leader election and HTTP.

One process: informers and workers (the operator) always; the Git sync job
when a repository is configured; both write only while this replica leads.
HTTP on one port: /healthz, /readyz, /metrics, /hooks/git.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import signal
import socket
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import FrameType
from typing import Any

from apscheduler.schedulers.background import BackgroundScheduler

from gitsync import metrics as metricslib
from gitsync import webhook
from gitsync.controller import Controller
from gitsync.errors import ConfigError, GitsyncError
from gitsync.leader import LeaderElector
from gitsync.sync import Syncer

log = logging.getLogger(__name__)
JOB_ID = "sync"


@dataclass(frozen=True)
class DaemonOptions:
    listen: str = "0.0.0.0:8080"
    interval: float = 60.0
    jitter: float = 5.0
    leader_elect: bool = True
    lease_namespace: str = "default"
    lease_name: str = "gitsync-leader"
    webhook_secret: bytes = b""


class Daemon:
    def __init__(
        self,
        controller: Controller,
        syncer: Syncer | None,
        options: DaemonOptions,
        metrics: metricslib.Metrics | None = None,
    ) -> None:
        self.controller = controller
        self.syncer = syncer
        self.options = options
        self.metrics = metrics or metricslib.standard()
        self.metrics.set("gitsync_leader", 0)
        self.stop_event = threading.Event()
        self.first_sync = threading.Event()
        self._sync_lock = threading.Lock()
        # a push that arrives while a sync runs must not be lost (APScheduler skips
        # a run while one is in progress): the running sync goes round once more
        self._again = threading.Event()
        self.leader: LeaderElector | None = None
        if options.leader_elect:
            identity = f"{socket.gethostname()}_{os.getpid()}"
            self.leader = LeaderElector(
                controller.kube, options.lease_namespace, options.lease_name, identity
            )
            controller.is_leader = self.leader.is_leader
            self.leader.on_sync_request = self.trigger
        self.scheduler = BackgroundScheduler(timezone=dt.UTC)
        try:
            self.http = ThreadingHTTPServer(_address(options.listen), _handler_for(self))
        except (OSError, ValueError) as e:
            raise ConfigError(f"cannot listen on {options.listen!r}: {e}") from e
        self.http.daemon_threads = True

    # --- lifecycle ---------------------------------------------------------------

    def run(self) -> int:
        self._signals()
        threading.Thread(target=self.http.serve_forever, name="http", daemon=True).start()
        log.info("listening on %s:%d", *self.http.server_address[:2])
        self.controller.start()
        if self.syncer is not None:
            self.scheduler.add_job(
                self.sync_once,
                "interval",
                seconds=self.options.interval,
                jitter=self.options.jitter,
                id=JOB_ID,
                max_instances=1,
                coalesce=True,
                misfire_grace_time=int(self.options.interval),
                next_run_time=dt.datetime.now(dt.UTC),
            )
        self.scheduler.start()
        if self.leader is not None:
            leader = self.leader
            threading.Thread(
                target=leader.run,
                args=(self.stop_event, self._on_leading, self._on_stopped_leading),
                name="leader",
                daemon=True,
            ).start()
        else:
            self._on_leading()
        # wake up now and then: a signal delivered to another thread only runs its
        # Python handler when the main thread next runs, and a bare wait() never does
        while not self.stop_event.wait(0.5):
            pass
        log.info("shutting down")
        # wait=True: the sync in progress finishes its current object
        self.scheduler.shutdown(wait=True)
        self.controller.stop()
        if self.leader is not None:
            # only now: the last write is done, so a standby cannot write alongside us
            self.leader.release()
        self.http.shutdown()
        return 0

    def stop(self) -> None:
        self.stop_event.set()
        if self.syncer is not None:
            self.syncer.cancel.set()

    def trigger(self) -> None:
        """Run the sync job now (webhook, SIGHUP)."""
        if self.syncer is None:
            return
        self._again.set()
        try:
            self.scheduler.modify_job(JOB_ID, next_run_time=dt.datetime.now(dt.UTC))
        except LookupError:
            log.warning("sync job not scheduled yet")

    def _signals(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return

        def on_term(_sig: int, _frame: FrameType | None) -> None:
            self.stop()

        def on_hup(_sig: int, _frame: FrameType | None) -> None:
            log.info("SIGHUP: syncing now")
            self.trigger()

        signal.signal(signal.SIGTERM, on_term)
        signal.signal(signal.SIGINT, on_term)
        signal.signal(signal.SIGHUP, on_hup)

    def _on_leading(self) -> None:
        self.metrics.set("gitsync_leader", 1)
        self.controller.resync()
        self.trigger()

    def _on_stopped_leading(self) -> None:
        self.metrics.set("gitsync_leader", 0)

    def is_leader(self) -> bool:
        return self.leader is None or self.leader.is_leader()

    # --- the sync job ------------------------------------------------------------

    def sync_once(self) -> None:
        self._again.set()
        while self._again.is_set() and not self.stop_event.is_set():
            self._again.clear()
            self._sync_pass()

    def _sync_pass(self) -> None:
        if self.syncer is None or not self.is_leader():
            return
        if not self.controller.wait_synced(60):
            log.warning("caches not synced yet; sync postponed")
            return
        with self._sync_lock:
            try:
                result = self.syncer.run()
            except GitsyncError as e:
                log.error("sync failed: %s", e)
                self.metrics.inc("gitsync_sync_total", result="failure")
                return
            except Exception:
                # a bug in one pass must not stop the schedule
                log.exception("sync crashed")
                self.metrics.inc("gitsync_sync_total", result="failure")
                return
        m = self.metrics
        m.inc("gitsync_sync_total", result="success" if result.ok else "failure")
        m.observe("gitsync_sync_duration_seconds", result.seconds)
        m.observe("gitsync_git_fetch_duration_seconds", result.fetch_seconds)
        for action in ("created", "configured", "unchanged", "pruned", "failed"):
            m.set("gitsync_objects", result.count(action), action=action)
        if result.prune_skipped:
            m.inc("gitsync_prune_skipped_total")
        if result.ok:
            m.set("gitsync_last_success_timestamp_seconds", dt.datetime.now(dt.UTC).timestamp())
        log.info(
            "sync %s at %s: %s",
            "succeeded" if result.ok else "failed",
            result.revision or "no revision",
            result.summary(),
        )
        self.first_sync.set()

    def ready(self) -> bool:
        if not self.controller.myapps.synced.is_set():
            return False
        return self.syncer is None or self.first_sync.is_set() or not self.is_leader()

    def export_requests(self) -> None:
        for verb, n in dict(self.controller.kube.requests).items():
            self.metrics.set("gitsync_api_requests_total", n, verb=verb)


def _address(listen: str) -> tuple[str, int]:
    host, _, port = listen.rpartition(":")
    return (host or "0.0.0.0", int(port))  # noqa: S104


def _handler_for(daemon: Daemon) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "gitsync"
        timeout = 10  # seconds a client may take: a slow one cannot hold a thread for good

        def log_message(self, format: str, *args: Any) -> None:
            log.debug("http: " + format, *args)

        def _reply(self, code: int, body: str, ctype: str = "text/plain") -> None:
            data = body.encode()
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if self.path == "/healthz":
                self._reply(200, "ok\n")
            elif self.path == "/readyz":
                ok = daemon.ready()
                self._reply(200 if ok else 503, "ok\n" if ok else "not ready\n")
            elif self.path == "/metrics":
                daemon.export_requests()
                self._reply(200, daemon.metrics.render(), "text/plain; version=0.0.4")
            else:
                self._reply(404, "not found\n")

        def do_POST(self) -> None:
            if self.path != "/hooks/git":
                self._reply(404, "not found\n")
                return
            try:
                length = int(self.headers.get("Content-Length") or "")
            except ValueError:
                length = -1
            # before any authentication: a length we cannot trust reads nothing
            if not 0 <= length <= webhook.MAX_BODY or self.headers.get("Transfer-Encoding"):
                daemon.metrics.inc("gitsync_webhook_requests_total", result="refused")
                self._reply(413 if length > webhook.MAX_BODY else 411, "bad body length\n")
                return
            body = self.rfile.read(length)
            headers = {k: v for k, v in self.headers.items()}
            if not webhook.verify(headers, body, daemon.options.webhook_secret):
                daemon.metrics.inc("gitsync_webhook_requests_total", result="unauthorized")
                self._reply(401, "unauthorized\n")
                return
            if daemon.is_leader() or daemon.leader is None:
                daemon.metrics.inc("gitsync_webhook_requests_total", result="accepted")
                daemon.trigger()
                self._reply(202, "sync triggered\n")
            elif daemon.leader.request_sync():
                # a standby got it (the Service spreads deliveries): pass it on
                daemon.metrics.inc("gitsync_webhook_requests_total", result="forwarded")
                self._reply(202, "sync requested from the leader\n")
            else:
                daemon.metrics.inc("gitsync_webhook_requests_total", result="failed")
                self._reply(503, "could not reach the leader\n")

    return Handler
