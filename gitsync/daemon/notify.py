"""Delivery of drift notifications to ``--notify-url`` receivers.

At least once: a delivery is retried on a network error, a timeout, 429 or 5xx, with
exponential backoff, up to a bounded number of attempts; the receiver de-duplicates by
the ``X-Gitsync-Delivery`` id, which every attempt of one notification shares (and
gitsync itself drops an id it already queued). Never in the way of the sync loop:
:meth:`Notifier.publish` only puts into a bounded queue per receiver, and when that is
full the notification is dropped and counted (``gitsync_notifications_dropped_total``);
one thread per receiver, so a slow one delays no other.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import http.client
import logging
import queue
import random
import socket
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Final
from urllib.parse import SplitResult, urlsplit

from gitsync import threads
from gitsync.daemon import metrics as metricslib
from gitsync.daemon.notification import (
    Format,
    Notification,
    Trigger,
    format_for,
    from_event,
    from_pass,
    payload,
    signature,
)
from gitsync.engine.changeset import ChangeSet
from gitsync.errors import ConfigError
from gitsync.kube.events import EventType
from gitsync.model.api import Obj
from gitsync.model.myapp_status import now
from gitsync.source.checkout import Source

log = logging.getLogger(__name__)

#: ids remembered to drop a notification queued twice (an Event re-emitted after a retry)
SEEN_IDS: Final = 4096
#: seconds a shutdown gives the queued notifications (the Pod's grace period is 60 s)
FLUSH_TIMEOUT: Final = 5.0
#: seconds a shutdown then waits for a delivery cut short
STOP_JOIN: Final = 1.0


@dataclass(frozen=True)
class NotifyOptions:
    secret: bytes = b""
    format: str = "auto"
    queue_size: int = 1000
    attempts: int = 6
    backoff: float = 0.5  # seconds before the first retry; doubled each time
    max_backoff: float = 30.0
    #: seconds for one attempt as a whole: connect, send and read the answer (a receiver
    #: that trickles its answer a byte at a time is cut off at this, not at each read)
    timeout: float = 5.0


def target_of(url: str, configured_format: str = "auto") -> tuple[Format, SplitResult, str]:
    """(payload format, the URL to POST to, how logs name it) of a ``--notify-url``,
    or a :class:`ConfigError` naming the flag, and of the URL only scheme and host: a
    webhook URL's path (Slack's, Teams') is its secret."""
    try:
        fmt, post_url = format_for(url, configured_format)
        parts = urlsplit(post_url)
        scheme, hostname = parts.scheme, parts.hostname
    except ValueError:  # an IPv6 host without its "]"
        raise ConfigError("--notify-url: not a URL (a host in brackets not closed?)") from None
    where = f"--notify-url {scheme or '?'}://{hostname or '?'}/…"
    if scheme not in ("http", "https") or not hostname:
        raise ConfigError(
            f"{where}: only http:// and https:// URLs (optionally slack+ or teams+) are supported"
        )
    try:
        port = parts.port
    except ValueError:  # not a number, or over 65535: urllib's message quotes it
        port = 0
    if port == 0:
        raise ConfigError(f"{where}: the port is not a number from 1 to 65535")
    return fmt, parts, f"{scheme}://{hostname}" + (f":{port}" if port else "")


class _Target:
    def __init__(self, url: str, configured_format: str, size: int) -> None:
        fmt, parts, name = target_of(url, configured_format)
        self.format: Format = fmt
        self.parts = parts
        #: how logs and metrics name it: never the path or query (Slack's token is there)
        self.name = name
        self.queue: queue.Queue[Notification | None] = queue.Queue(size)
        self.thread: threading.Thread | None = None


class Notifier:
    def __init__(
        self,
        urls: Iterable[str],
        options: NotifyOptions = NotifyOptions(),
        metrics: metricslib.Metrics | None = None,
        *,
        sleep: Callable[[float], bool] | None = None,
    ) -> None:
        self.options = options
        self.metrics = metrics or metricslib.standard()
        self.targets = [_Target(u, options.format, options.queue_size) for u in urls]
        self._stop = threading.Event()
        # waits on the stop event: a shutdown cuts a backoff short
        self._sleep = sleep or self._stop.wait
        self._seen: collections.OrderedDict[str, None] = collections.OrderedDict()
        self._lock = threading.Lock()

    @classmethod
    def from_flags(
        cls,
        urls: Iterable[str],
        secret_file: Path | None,
        fmt: str,
        metrics: metricslib.Metrics,
    ) -> Notifier:
        secret = b""
        if secret_file is not None:
            try:
                secret = Path(secret_file).read_bytes().strip()
            except OSError as e:
                raise ConfigError(f"cannot read --notify-secret-file: {e.strerror}") from None
        return cls(urls, NotifyOptions(secret=secret, format=fmt), metrics)

    def start(self) -> None:
        for i, target in enumerate(self.targets):
            target.thread = threads.start(
                f"notify-{i}", functools.partial(self._deliver_all, target)
            )

    def stop(self, timeout: float = FLUSH_TIMEOUT) -> None:
        """Deliver what is queued, within ``timeout`` (a Pod's grace period leaves room
        for it), then stop: a delivery still retrying ends, and what is left in a queue
        is dropped, counted and said in the log."""
        deadline = time.monotonic() + timeout
        for target in self.targets:
            # behind what is queued: the worker delivers all of it, then ends
            with contextlib.suppress(queue.Full):
                target.queue.put(None, timeout=max(0.0, deadline - time.monotonic()))
        for target in self.targets:
            if target.thread is not None:
                target.thread.join(max(0.0, deadline - time.monotonic()))
        self._stop.set()  # out of time: retries and their backoff end now
        for target in self.targets:
            with contextlib.suppress(queue.Full):
                target.queue.put_nowait(None)  # a worker waiting on an empty queue
            if target.thread is not None:
                target.thread.join(STOP_JOIN)
            left = 0
            while True:
                try:
                    left += target.queue.get_nowait() is not None
                except queue.Empty:
                    break
            if left:
                self.metrics.inc("gitsync_notifications_dropped_total", left)
                log.warning("shutdown: %d notifications to %s not delivered", left, target.name)

    # --- the sync loop's side: never blocks -----------------------------------------

    def on_event(
        self, obj: Obj, _type: EventType, reason: str, message: str, details: Obj | None
    ) -> None:
        """An :class:`~gitsync.kube.events.EventRecorder` listener."""
        for n in from_event(obj, reason, message, now(), details):
            self.publish(n)

    def on_pass(self, instance: str, source: Source) -> Callable[[ChangeSet, Trigger], None]:
        """A listener of the daemon's passes (``Daemon.pass_listeners``): each pass that
        wrote or failed is one notification, with its commit's subject and author."""

        def listener(changes: ChangeSet, why: Trigger) -> None:
            sha = changes.revision.partition("@sha1:")[2]
            commit = source.commit_info(sha) if sha else None
            n = from_pass(instance, changes, commit, why, now())
            if n is not None:
                self.publish(n)

        return listener

    def publish(self, n: Notification) -> None:
        with self._lock:
            if n.id in self._seen:
                self.metrics.inc("gitsync_notifications_total", result="duplicate")
                return
            self._seen[n.id] = None
            if len(self._seen) > SEEN_IDS:
                self._seen.popitem(last=False)
        for target in self.targets:
            try:
                target.queue.put_nowait(n)
            except queue.Full:
                self.metrics.inc("gitsync_notifications_dropped_total")
                log.warning("notification queue for %s full: %s dropped", target.name, n.event)

    # --- the workers -------------------------------------------------------------------

    def _deliver_all(self, target: _Target) -> None:
        while not self._stop.is_set():
            n = target.queue.get()
            if n is None:
                return
            try:
                self._deliver(target, n)
            except Exception:
                # a bug loses this notification (counted), never the worker: every later
                # one would pile up undelivered
                self.metrics.inc("gitsync_notifications_total", result="failed")
                log.exception("notification %s to %s failed", n.event, target.name)

    def _deliver(self, target: _Target, n: Notification) -> None:
        body = payload(n, target.format)
        delay = self.options.backoff
        for attempt in range(1, self.options.attempts + 1):
            outcome = self._post(target, n, body)
            if outcome == "ok":
                self.metrics.inc("gitsync_notifications_total", result="delivered")
                return
            if outcome == "refused" or attempt == self.options.attempts:
                break
            # jitter: receivers back from an outage are not hit by every sender at once
            if self._sleep(min(delay, self.options.max_backoff) * random.uniform(0.8, 1.2)):  # noqa: S311
                break  # shutting down
            delay *= 2
        self.metrics.inc("gitsync_notifications_total", result="failed")
        log.warning("notification %s %s to %s not delivered", n.event, n.id, target.name)

    def _post(self, target: _Target, n: Notification, body: bytes) -> str:
        """ "ok", "retry" (worth another attempt) or "refused" (a 4xx: it will not change)."""
        p = target.parts
        conn_type = (
            http.client.HTTPSConnection if p.scheme == "https" else http.client.HTTPConnection
        )
        path = (p.path or "/") + (f"?{p.query}" if p.query else "")
        headers = {
            "Content-Type": "application/json",
            "User-Agent": "gitsync",
            "X-Gitsync-Event": n.event,
            "X-Gitsync-Delivery": n.id,
        }
        if self.options.secret:
            headers["X-Hub-Signature-256"] = signature(self.options.secret, body)
        conn = conn_type(p.hostname or "", p.port, timeout=self.options.timeout)
        deadline = _Deadline(conn, self.options.timeout)
        try:
            with deadline:
                conn.request("POST", path, body=body, headers=headers)
                status = conn.getresponse().status
        except (OSError, http.client.HTTPException) as e:
            late = " (out of time)" if deadline.expired else ""
            log.info("notification to %s: %s%s", target.name, type(e).__name__, late)
            return "retry"
        finally:
            conn.close()
        if 200 <= status < 300:
            return "ok"
        log.info("notification to %s: HTTP %d", target.name, status)
        return "retry" if status in (408, 425, 429) or status >= 500 else "refused"


class _Deadline:
    """Ends one attempt ``seconds`` after it began, however its time is spent.

    The socket's timeout bounds each read alone: a receiver sending a byte a second
    would hold the sender for ever. At the deadline a watchdog thread shuts the socket
    down, which wakes the blocked connect, write or read with an error at once.
    """

    def __init__(self, conn: http.client.HTTPConnection, seconds: float) -> None:
        self._conn = conn
        self._seconds = seconds
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="notify-deadline", daemon=True)
        self.expired = False

    def __enter__(self) -> _Deadline:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        # the attempt owns its watchdog: told to stop, it returns at once, and is joined
        self._done.set()
        self._thread.join()

    def _watch(self) -> None:
        if self._done.wait(self._seconds):
            return
        self.expired = True
        # while connecting there is no socket yet to shut: look again until there is
        while not self._done.is_set():
            sock = self._conn.sock
            if sock is not None:
                # socket.socket's own shutdown: an SSLSocket's would also drop its TLS
                # state under the thread still using it
                with contextlib.suppress(OSError):
                    socket.socket.shutdown(sock, socket.SHUT_RDWR)
                return
            self._done.wait(0.05)
