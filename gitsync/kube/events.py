"""Kubernetes Events on the objects gitsync acts on (``kubectl describe`` shows them).

Off the critical path: :meth:`EventRecorder.emit` tells the listeners (the notifier)
there and then, and only enqueues the Event; one sender thread writes them, through a
:class:`~gitsync.kube.event_correlator.Correlator` (repeats counted, floods folded).
A full queue drops the Event (counted in ``dropped``) rather than slow a reconcile.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import queue
import socket
import threading
from collections.abc import Callable

from gitsync import threads
from gitsync.errors import APIError
from gitsync.kube.client import Kube, resource_path
from gitsync.kube.event_correlator import Correlator, Create, Patch
from gitsync.kube.interfaces import EventType as EventType
from gitsync.model.api import Obj

log = logging.getLogger(__name__)

MAX_MESSAGE = 1024
QUEUE_SIZE = 1000
#: how long stopping waits for the Events still queued
FLUSH_TIMEOUT = 2.0
MERGE_PATCH = "application/merge-patch+json"
#: told of every Event (the notifier): object, type, reason, message, structured details
Listener = Callable[[Obj, EventType, str, str, "Obj | None"], None]


#: what the sender reads: an Event, a flush request (set when done) or None (stop)
_Item = Obj | threading.Event | None
#: the sender woke with nothing queued: only the counts that are due (compared by identity)
_DUE: Obj = {}


class EventRecorder:
    def __init__(
        self,
        kube: Kube,
        component: str = "gitsync",
        *,
        queue_size: int = QUEUE_SIZE,
        correlator: Correlator | None = None,
    ) -> None:
        self.kube = kube
        self.component = component
        self.host = socket.gethostname()
        self.listeners: list[Listener] = []
        #: Events dropped because the queue was full
        self.dropped = 0
        self._queue: queue.Queue[_Item] = queue.Queue(queue_size)
        self._correlator = correlator or Correlator()
        self._sender: threading.Thread | None = None
        self._lock = threading.Lock()

    def emit(
        self, obj: Obj, type_: EventType, reason: str, message: str, details: Obj | None = None
    ) -> None:
        """Tell the listeners, and queue an Event about ``obj``. Never raises nor waits:
        an Event is not worth a failed or slower reconcile. ``details`` (structured, for
        listeners) is not recorded."""
        for listener in self.listeners:
            try:
                listener(obj, type_, reason, message, details)
            except Exception:  # a listener's bug must not fail the reconcile that emits
                log.exception("event listener failed on %s", reason)
        meta = obj.get("metadata", {})
        namespace = meta.get("namespace") or "default"
        now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        body: Obj = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": f"{meta.get('name', 'gitsync')}.", "namespace": namespace},
            "involvedObject": {
                "apiVersion": obj.get("apiVersion"),
                "kind": obj.get("kind"),
                "name": meta.get("name"),
                "namespace": meta.get("namespace"),
                "uid": meta.get("uid"),
                "resourceVersion": meta.get("resourceVersion"),
            },
            "type": type_,
            "reason": reason,
            "message": message[:MAX_MESSAGE],
            "source": {"component": self.component, "host": self.host},
            "reportingComponent": self.component,
            "reportingInstance": self.host,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        self._start()
        try:
            self._queue.put_nowait(body)
        except queue.Full:
            with self._lock:
                self.dropped += 1
            log.debug("event queue full: dropped %s on %s", reason, meta.get("name"))

    def flush(self, timeout: float = FLUSH_TIMEOUT) -> bool:
        """Wait (at most ``timeout``) until every Event queued so far, and every count
        still pending, is written. False if that did not happen in time."""
        if self._sender is None:
            return True
        done = threading.Event()
        try:
            self._queue.put(done, timeout=timeout)
        except queue.Full:
            return False
        return done.wait(timeout)

    def close(self, timeout: float = FLUSH_TIMEOUT) -> bool:
        """Flush, then stop the sender (on stopping the daemon, at the end of a command)."""
        flushed = self.flush(timeout)
        if self._sender is not None:
            # full: a daemon thread, it ends with the process
            with contextlib.suppress(queue.Full):
                self._queue.put_nowait(None)
        if not flushed:
            log.warning("stopping with Events not yet recorded")
        return flushed

    def _start(self) -> None:
        with self._lock:
            if self._sender is None:
                self._sender = threads.start("events", self._send)

    def _send(self) -> None:
        while True:
            wait = self._correlator.next_due()
            try:
                item = self._queue.get(timeout=wait)
            except queue.Empty:  # nothing came: only the counts that are due
                item = _DUE
            try:
                if not self._handle(item):
                    return
            except Exception:
                # a bug, or an error no request should raise: that Event is lost (and
                # counted), never the sender, or every Event after it would be too
                with self._lock:
                    self.dropped += 1
                log.exception("recording an Event failed")
                if isinstance(item, threading.Event):
                    item.set()  # a flush waits on it

    def _handle(self, item: _Item) -> bool:
        """Send what ``item`` asks; False when the sender is to stop."""
        if item is None:
            self._flush_counts()
            return False
        if item is _DUE:
            self._send_due()
        elif isinstance(item, threading.Event):
            self._flush_counts()
            item.set()
        else:
            create = self._correlator.observe(item)
            if create is not None:
                self._create(create)
            self._send_due()
        return True

    def _send_due(self) -> None:
        for patch in self._correlator.due():
            self._patch(patch)

    def _flush_counts(self) -> None:
        for patch in self._correlator.due(flush=True):
            self._patch(patch)

    def _create(self, create: Create) -> None:
        ns = create.body["metadata"]["namespace"]
        try:
            made = self.kube.create(resource_path("v1", "events", ns), create.body, subject="Event")
        except APIError as e:
            log.warning("could not record event %s: %s", create.body.get("reason"), e)
            return
        self._correlator.created(create, str(made.get("metadata", {}).get("name", "")))

    def _patch(self, patch: Patch) -> None:
        body: Obj = {
            "count": patch.count,
            "lastTimestamp": patch.last_timestamp,
            "message": patch.message,
        }
        try:
            self.kube.request(
                "PATCH",
                resource_path("v1", "events", patch.namespace, patch.name),
                body=body,
                content_type=MERGE_PATCH,
                subject="Event",
            )
        except APIError as e:
            # gone (Events expire) or refused: the next one like it is written anew
            level = logging.DEBUG if e.status == 404 else logging.WARNING
            log.log(level, "could not update event %s: %s", patch.name, e)
            self._correlator.forget(patch.key)
