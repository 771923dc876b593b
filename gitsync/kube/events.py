"""Kubernetes Events on the objects gitsync acts on (``kubectl describe`` shows them)."""

from __future__ import annotations

import datetime as dt
import logging
import socket
from collections.abc import Callable

from gitsync.errors import APIError
from gitsync.kube.client import Kube, resource_path
from gitsync.kube.interfaces import EventType as EventType
from gitsync.model.api import Obj

log = logging.getLogger(__name__)

MAX_MESSAGE = 1024
#: told of every Event (the notifier): object, type, reason, message, structured details
Listener = Callable[[Obj, EventType, str, str, "Obj | None"], None]


class EventRecorder:
    def __init__(self, kube: Kube, component: str = "gitsync") -> None:
        self.kube = kube
        self.component = component
        self.host = socket.gethostname()
        self.listeners: list[Listener] = []

    def emit(
        self, obj: Obj, type_: EventType, reason: str, message: str, details: Obj | None = None
    ) -> None:
        """Record an Event about ``obj``, and tell the listeners. Never raises: an Event is
        not worth a failed reconcile. ``details`` (structured, for listeners) is not recorded."""
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
        try:
            self.kube.create(resource_path("v1", "events", namespace), body, subject="Event")
        except APIError as e:
            log.warning("could not record event %s: %s", reason, e)
