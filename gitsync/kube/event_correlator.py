"""Which Events reach the API server, and as what: pure logic, no I/O.

A cold sync of N MyApps says "Created" N times; written one Event each, that is N
requests to an API server that is already the bottleneck, and N objects nobody reads.
So, as Kubernetes' own recorders do:

- an identical repeat (same object, type, reason and message) bumps the ``count`` of the
  Event already written rather than writing another;
- similar Events (same kind of object and namespace, type and reason; any name, any
  message) are written one by one up to :data:`SIMILAR_MAX` distinct ones within
  :data:`SIMILAR_WINDOW`; beyond that they fold into one aggregate Event per key, its
  message the latest one behind :data:`AGGREGATE_PREFIX`, its ``count`` covering them.

Bumps are not written one by one either: :meth:`Correlator.due` hands out one PATCH per
Event at most every :data:`PATCH_EVERY` seconds (all of them when flushing).
"""

from __future__ import annotations

import copy
import datetime as dt
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from gitsync.model.api import Obj

SIMILAR_MAX = 10
SIMILAR_WINDOW = 600.0
PATCH_EVERY = 5.0
AGGREGATE_PREFIX = "(combined from similar events): "
#: how many written Events (and similarity groups) are remembered; the oldest go first
REMEMBERED = 4096

_T = TypeVar("_T")


@dataclass(frozen=True)
class Create:
    """Write ``body`` as a new Event; report its name to :meth:`Correlator.created`."""

    key: str
    body: Obj


@dataclass(frozen=True)
class Patch:
    """Bring an Event already written up to date."""

    key: str
    namespace: str
    name: str
    count: int
    last_timestamp: str
    message: str


@dataclass
class _Written:
    namespace: str
    name: str
    count: int
    last_timestamp: str
    message: str
    unsent: int = 0  # repeats counted here, not yet on the server
    sent_at: float = 0.0


@dataclass
class _Group:
    last_seen: float
    identities: set[str] = field(default_factory=set)


def _now_text() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def identity_key(body: Obj) -> str:
    """What makes two Events the same (not the object's resourceVersion: a repeat about
    an object that changed since is still the same news)."""
    o = body.get("involvedObject", {})
    parts = (
        body.get("metadata", {}).get("namespace"),
        o.get("apiVersion"),
        o.get("kind"),
        o.get("namespace"),
        o.get("name"),
        o.get("uid"),
        body.get("type"),
        body.get("reason"),
        body.get("message"),
        body.get("reportingComponent"),
    )
    return "\x00".join(str(p) for p in parts)


def similar_key(body: Obj) -> str:
    """What makes two Events similar: the same but for the object's name and the message."""
    o = body.get("involvedObject", {})
    parts = (
        "similar",
        body.get("metadata", {}).get("namespace"),
        o.get("apiVersion"),
        o.get("kind"),
        body.get("type"),
        body.get("reason"),
        body.get("reportingComponent"),
    )
    return "\x00".join(str(p) for p in parts)


class Correlator:
    """Decides, one Event at a time, between writing it and counting it. Not thread-safe:
    one sender owns it."""

    def __init__(
        self,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], str] = _now_text,
    ) -> None:
        self.clock = clock
        self.wall = wall
        self._groups: OrderedDict[str, _Group] = OrderedDict()
        self._written: OrderedDict[str, _Written] = OrderedDict()

    def observe(self, body: Obj) -> Create | None:
        """``body`` as the Event to write, or None when it was counted on one written."""
        now = self.clock()
        ident = identity_key(body)
        similar = similar_key(body)
        group = self._groups.pop(similar, None)
        if group is None or now - group.last_seen > SIMILAR_WINDOW:
            group = _Group(now)
        group.last_seen = now
        self._remember(self._groups, similar, group)
        if ident in group.identities or len(group.identities) < SIMILAR_MAX:
            group.identities.add(ident)
            key, event = ident, body
        else:
            key, event = similar, _aggregate(body)
        written = self._written.get(key)
        if written is None:
            return Create(key, event)
        written.count += 1
        written.unsent += 1
        written.last_timestamp = self.wall()
        written.message = event["message"]
        self._written.move_to_end(key)
        return None

    def created(self, create: Create, name: str) -> None:
        """The Event of ``create`` is on the server, as ``name``."""
        body = create.body
        self._remember(
            self._written,
            create.key,
            _Written(
                namespace=body["metadata"]["namespace"],
                name=name,
                count=int(body.get("count", 1)),
                last_timestamp=str(body.get("lastTimestamp", "")),
                message=str(body.get("message", "")),
                sent_at=self.clock(),
            ),
        )

    def forget(self, key: str) -> None:
        """The Event of ``key`` could not be written or updated (expired, deleted): the
        next one like it is written anew."""
        self._written.pop(key, None)

    def due(self, *, flush: bool = False) -> list[Patch]:
        """The updates to send now: those whose last one is :data:`PATCH_EVERY` old, or
        every pending one when ``flush``."""
        now = self.clock()
        patches = []
        for key, w in self._written.items():
            if w.unsent and (flush or now - w.sent_at >= PATCH_EVERY):
                patches.append(
                    Patch(key, w.namespace, w.name, w.count, w.last_timestamp, w.message)
                )
                w.unsent, w.sent_at = 0, now
        return patches

    def next_due(self) -> float | None:
        """Seconds until an update is due (None: none pending)."""
        pending = [w.sent_at + PATCH_EVERY for w in self._written.values() if w.unsent]
        return max(0.0, min(pending) - self.clock()) if pending else None

    @staticmethod
    def _remember(cache: OrderedDict[str, _T], key: str, value: _T) -> None:
        cache[key] = value
        cache.move_to_end(key)
        while len(cache) > REMEMBERED:
            cache.popitem(last=False)


def _aggregate(body: Obj) -> Obj:
    event = copy.deepcopy(body)
    event["message"] = AGGREGATE_PREFIX + str(body.get("message", ""))
    return event
