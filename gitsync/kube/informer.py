"""List+watch caches of plain JSON objects.

Why not ``kubernetes.informer.SharedInformer`` (kubernetes 37): it lists through a
typed API method and reads ``resp.items`` (typed models decode ~14x slower than
``json.loads`` at 1000 Deployments, and ``CustomObjectsApi`` replies are dicts
that do not fit it); it resumes a watch from the last resourceVersion but asks for
no bookmarks, so on a quiet resource that version ages out and the resume ends in
410 and a full relist; and it passes no client-side read timeout to its watch (a
half-open connection hangs it for good), nor can it be given ``Kube``'s pool. This
one is small: list, then watch from the list's resourceVersion with bookmarks; the
server sends one about every minute, so a watch silent for longer than that (plus
slack) is on a dead connection and is given up; 410 Gone (or any broken stream)
relists. ``behind`` says when the cache has heard nothing from the server for longer
than that bound allows.

``observe`` lets a writer put its reply in the cache ahead of the watch event;
it must never bring back what the watch already deleted (a reply can arrive
after the DELETED event of the same object). Two proofs of "gone", both
bounded in memory: the resourceVersion up to which the cache is known
complete (a reply no newer than it, whose key the cache lacks, is of an
object deleted since), and a tombstone per deleted key (its uid and deletion
resourceVersion) for resourceVersions that do not compare as integers.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from gitsync import threads
from gitsync.errors import APIError
from gitsync.kube.client import Hangup
from gitsync.kube.interfaces import ListWatcher
from gitsync.model.api import Obj, key_of

log = logging.getLogger(__name__)

EventType = Literal["ADDED", "MODIFIED", "DELETED"]
Handler = Callable[[EventType, Obj], None]
#: what the cache keeps of an object as it arrives (controller-runtime's cache
#: transform), given the version it replaces: by default all of it
Transform = Callable[[Obj, Obj | None], Obj]

#: objects per LIST page. A page's items are decoded and kept one at a time (``_list``),
#: but the reply is read whole, and the server holds the page while it writes it
PAGE_SIZE = 100
#: the server ends each watch by then (its ``timeoutSeconds``), and it is opened again
#: from the last resourceVersion seen (no list). Its bookmarks do not bound a live
#: watch's silence: kube-apiserver sends one about every minute only while the kind's
#: resourceVersion moves (measured: a watch of a kind nobody wrote heard none for
#: 120 s), so a quiet fleet's watches may hear nothing at all until this end
WATCH_SECONDS = 60
#: a watch silent for longer (no event, no bookmark, not ended by the server) is on a
#: dead connection, such as a half-open one that never closes: it is given up and the
#: cache listed anew
SILENCE_SECONDS = WATCH_SECONDS + 10.0
#: a cache that has heard nothing from the server for longer is behind: giving up its
#: silent watch did not bring it back (the server is unreachable); /readyz says so
BEHIND_SECONDS = SILENCE_SECONDS + 15.0
#: how long a deleted key's tombstone is kept: far longer than any write reply can
#: take to reach ``observe`` (every request has a timeout well under a minute)
TOMBSTONE_SECONDS = 300.0


@dataclass(frozen=True)
class _Tombstone:
    uid: str
    resource_version: str  # of the deletion
    at: float


class Informer:
    """Keeps ``cache`` (key ``namespace/name`` → object) in line with the API server."""

    def __init__(
        self,
        kube: ListWatcher,
        path: str,
        *,
        label_selector: str | None = None,
        name: str = "",
        page_size: int = PAGE_SIZE,
        clock: Callable[[], float] = time.monotonic,
        transform: Transform | None = None,
    ) -> None:
        self.kube = kube
        self.path = path
        self.label_selector = label_selector
        self.name = name or path
        self.page_size = page_size
        self._transform: Transform = transform or _whole
        self._last: Obj | None = None
        self.cache: dict[str, Obj] = {}
        #: grows with every change to the cache (or event that may be one): a reader that
        #: saw the same version reads the same cache (the drift page's ETag)
        self.version = 0
        #: the cache holds every object as of this resourceVersion (list, event, bookmark)
        self._complete_at = ""
        #: deleted keys, oldest first
        self._tombstones: dict[str, _Tombstone] = {}
        self._clock = clock
        self.synced = threading.Event()
        self._handlers: list[Handler] = []
        self._synced_handlers: list[Callable[[], None]] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.relists = 0
        #: watches given up for their silence
        self.silences = 0
        #: when the server last said anything: a list page, an event or a bookmark
        self._heard_at = clock()
        #: ends the watch open now when the label selector changes
        self._hangup = Hangup()

    def add_handler(self, handler: Handler) -> None:
        self._handlers.append(handler)

    def add_synced_handler(self, handler: Callable[[], None]) -> None:
        """``handler()`` each time a list is in and ``synced`` is set (the first list, and
        each one after a relist or a new selector), after that list's events."""
        self._synced_handlers.append(handler)

    def get(self, key: str) -> Obj | None:
        with self._lock:
            return self.cache.get(key)

    def observe(self, obj: Obj) -> None:
        """Put an object we just wrote into the cache ahead of its watch event,
        so the next step of the same pass sees it (its uid, for ownerReferences).
        A reply about an object the watch has since deleted is dropped."""
        key = key_of(obj)
        obj = self._kept(key, obj)
        with self._lock:
            old = self.cache.get(key)
            fresh = not self._deleted(key, obj) if old is None else _newer(obj, old)
            if fresh:
                self.cache[key] = obj
                self.version += 1

    def _kept(self, key: str, obj: Obj) -> Obj:
        """What the cache keeps of ``obj``: what it holds already when that is the same
        version, else the transform, given the version it replaces or else the last
        object kept (in a fleet, objects of one kind are alike: a compacting transform
        takes each part equal to it from it whole).

        A relist (after any broken watch: an API server restart, a silent connection)
        brings back mostly what the cache holds. Kept anew, each object's few own nodes
        were allocated among its decoded page's garbage and pinned that memory: a
        standby's first relist of 1000 MyApps left 10 of Python's 1 MiB arenas almost
        empty and its RSS 11 MiB higher for good. Kept as held, a relist keeps
        nothing of its pages, and costs no transform."""
        held = self.cache.get(key)
        if held is not None and _same_version(held, obj):
            return held
        kept = self._transform(obj, held or self._last)
        self._last = kept  # from several threads: any recent object of the kind will do
        return kept

    def tombstones(self) -> int:
        """How many deleted keys are remembered (bounded: see ``_bury``)."""
        with self._lock:
            return len(self._tombstones)

    def _deleted(self, key: str, obj: Obj) -> bool:
        """Whether ``obj``, absent from the cache, is known to be deleted since."""
        rv = _rv(obj)
        if _not_after(rv, self._complete_at):
            # the cache was complete at a later version and lacks the key: the
            # object was deleted (or left our label selector) since this reply
            return True
        stone = self._tombstones.get(key)
        if stone is None:
            return False
        # a uid is never reused: once deleted, that object never comes back
        same_object = bool(stone.uid) and stone.uid == _uid(obj)
        return same_object or _not_after(rv, stone.resource_version)

    def _bury(self, key: str, obj: Obj, resource_version: str) -> None:
        """Remember a deleted key; drop tombstones older than any reply in flight.
        Called with ``_lock`` held."""
        now = self._clock()
        self._tombstones.pop(key, None)  # re-inserted last: the dict stays oldest first
        self._tombstones[key] = _Tombstone(_uid(obj), resource_version, now)
        while self._tombstones:
            oldest = next(iter(self._tombstones))
            if now - self._tombstones[oldest].at <= TOMBSTONE_SECONDS:
                break
            del self._tombstones[oldest]

    def __len__(self) -> int:
        return len(self.cache)

    def items(self) -> list[Obj]:
        with self._lock:
            return list(self.cache.values())

    def reselect(self, label_selector: str) -> None:
        """Watch what ``label_selector`` selects from now on: the watch open now is ended
        and the cache listed anew (objects that no longer match leave it as deleted,
        new ones arrive as added). ``synced`` is clear until that list is in."""
        with self._lock:
            if label_selector == self.label_selector:
                return
            self.label_selector = label_selector
            self.synced.clear()
        self._hangup()

    def start(self) -> None:
        self._thread = threads.start(f"informer-{self.name}", self._run)

    def stop(self) -> None:
        """End the thread: the watch open now is shut at once (not at its next event or
        read timeout), so that a stopping process does not wait on it."""
        self._stop.set()
        self._hangup()

    def wait_synced(self, timeout: float) -> bool:
        return self.synced.wait(timeout)

    def silent_for(self) -> float:
        """Seconds since the server last said anything to this cache."""
        return self._clock() - self._heard_at

    def behind(self) -> bool:
        """Synced once, and silent for longer than a live watch ever is: the cache may
        miss changes (its watch was given up and the server cannot be reached)."""
        return self.synced.is_set() and self.silent_for() > BEHIND_SECONDS

    # --- the loop ------------------------------------------------------------

    def _run(self) -> None:
        backoff = 0.5
        while not self._stop.is_set():
            try:
                rv = self._list()
                backoff = 0.5
                self._watch(rv)
            except APIError as e:
                hint = " (is its CustomResourceDefinition installed?)" if e.status == 404 else ""
                log.warning(
                    "informer %s: %s%s; relisting in %.1fs",
                    self.name,
                    e,
                    hint,
                    backoff,
                    extra={"informer": self.name},
                )
                self._stop.wait(backoff * (1 + random.random() / 2))  # noqa: S311 - jitter
                backoff = min(backoff * 2, 30.0)
            except Exception:
                # anything else (a bad event, a bug) must not stop the cache for good
                log.exception("informer %s failed; relisting in %.1fs", self.name, backoff)
                self._stop.wait(backoff)
                backoff = min(backoff * 2, 30.0)

    def _params(self) -> dict[str, str | int | bool]:
        params: dict[str, str | int | bool] = {}
        if self.label_selector:
            params["labelSelector"] = self.label_selector
        return params

    def _list(self) -> str:
        # a selector changed after this point hangs the next watch up before it opens
        self._hangup.reset()
        items: dict[str, Obj] = {}
        # the cache's own key strings, for the keys listed again (see ``_kept``: a key
        # made anew would be kept, allocated among the page's garbage)
        with self._lock:
            keys = {key: key for key in self.cache}
        params = self._params() | {"limit": self.page_size}
        #: items that could not be kept when decoded: their list's kind came after them
        later: list[Obj] = []

        def each(obj: Obj, head: Obj) -> None:
            # each object is kept the moment it is decoded, so that a page's garbage is
            # one object at a time (see :mod:`gitsync.kube.listreply`); one the cache
            # holds at this version is taken as held, its copy dropped (see ``_kept``)
            key = key_of(obj)
            key = keys.get(key, key)
            held = self.cache.get(key)
            if held is not None and _same_version(held, obj):
                items[key] = held
            elif _typed(obj, head):
                items[key] = self._kept(key, obj)
            else:
                later.append(obj)

        while True:
            page = self.kube.list_each(self.path, each, params=params, subject=self.name)
            self._heard_at = self._clock()
            for obj in later:
                _typed(obj, page)
                key = key_of(obj)
                key = keys.get(key, key)
                items[key] = self._kept(key, obj)
            later.clear()
            cont = page.get("metadata", {}).get("continue")
            if not cont:
                break
            params["continue"] = cont
        rv = str(page.get("metadata", {}).get("resourceVersion", ""))
        self.relists += 1
        self._replace(items, rv)
        return rv

    def _replace(self, items: dict[str, Obj], rv: str) -> None:
        gone: list[Obj] = []
        with self._lock:
            old, self.cache = self.cache, items
            self.version += 1
            self._complete_at = rv
            # the list is the whole truth at ``rv``: older tombstones are not needed
            # with integer resourceVersions; only what vanished since is kept
            self._tombstones.clear()
            for key, obj in old.items():
                if key in items:
                    continue
                if _after(_rv(obj), rv):
                    # written (and observed) after the list was taken: not gone; the
                    # watch from ``rv`` brings its next change, its deletion included
                    items[key] = obj
                else:
                    self._bury(key, obj, rv)
                    gone.append(obj)
            # a copy: observe() adds to the live cache while the handlers run
            listed = list(items.items())
        for obj in gone:
            self._notify("DELETED", obj)
        for key, obj in listed:
            prev = old.get(key)
            if prev is None:
                self._notify("ADDED", obj)
            elif _rv(prev) != _rv(obj):
                self._notify("MODIFIED", obj)
        self.synced.set()
        for handler in self._synced_handlers:
            try:
                handler()
            except Exception:
                log.exception("informer %s: synced handler failed", self.name)

    def _watch(self, rv: str) -> None:
        try:
            self._watch_until_hung_up(rv)
        except APIError:
            if self._hangup.hung:
                pass
            elif self.silent_for() >= SILENCE_SECONDS:
                log.warning(
                    "informer %s: the watch was silent for %.0fs (no event, no bookmark): "
                    "its connection is taken for dead; relisting",
                    self.name,
                    self.silent_for(),
                    extra={"informer": self.name},
                )
                self.silences += 1
                return
            else:
                raise
        if self._hangup.hung and not self._stop.is_set():
            log.info("informer %s: new label selector; relisting", self.name)

    def _watch_until_hung_up(self, rv: str) -> None:
        while not self._stop.is_set() and not self._hangup.hung:
            params = self._params() | {
                "watch": True,
                "resourceVersion": rv,
                "allowWatchBookmarks": True,
                "timeoutSeconds": WATCH_SECONDS,
            }
            for event in self.kube.stream(
                self.path,
                params=params,
                subject=self.name,
                read_timeout=SILENCE_SECONDS,
                hangup=self._hangup,
            ):
                self._heard_at = self._clock()
                if self._stop.is_set():
                    return
                kind = event.get("type")
                obj = event.get("object", {})
                if kind == "ERROR":
                    # 410 Gone: our resourceVersion is too old; relist
                    log.info("informer %s: watch expired (%s)", self.name, obj.get("message"))
                    return
                rv = str(obj.get("metadata", {}).get("resourceVersion", rv))
                if kind == "BOOKMARK":
                    with self._lock:
                        self._complete_at = rv
                    continue
                self._apply_event(kind, obj)
            if not self._hangup.hung:
                # ended by the server at its timeoutSeconds: it is alive, even when the
                # watch brought nothing (a quiet kind gets no bookmarks)
                self._heard_at = self._clock()

    def _apply_event(self, kind: object, obj: Obj) -> None:
        key = key_of(obj)
        obj = self._kept(key, obj)
        with self._lock:
            self._complete_at = _rv(obj) or self._complete_at
            self.version += 1
            if kind == "DELETED":
                self.cache.pop(key, None)
                self._bury(key, obj, _rv(obj))  # a DELETED event carries the deletion's RV
            else:
                self._tombstones.pop(key, None)  # present again: the cache entry says enough
                old = self.cache.get(key)
                if old is not None and _newer(old, obj):
                    return  # we already hold a newer copy (one we wrote, see observe)
                self.cache[key] = obj
        if kind in ("ADDED", "MODIFIED", "DELETED"):
            self._notify(kind, obj)

    def _notify(self, kind: EventType, obj: Obj) -> None:
        for handler in self._handlers:
            try:
                handler(kind, obj)
            except Exception:
                log.exception("informer %s: handler failed", self.name)


def _typed(obj: Obj, listed: Obj) -> bool:
    """Gives ``obj`` its apiVersion and kind from its list's when it lacks them (the
    items of a built-in list do; watch events carry them), so that a cached object
    compares equal to a fetched one; whether it has both now."""
    if "apiVersion" not in obj and "apiVersion" in listed:
        obj["apiVersion"] = listed["apiVersion"]
    if "kind" not in obj and "kind" in listed:
        obj["kind"] = str(listed["kind"]).removesuffix("List")
    return "apiVersion" in obj and "kind" in obj


def _whole(obj: Obj, old: Obj | None) -> Obj:
    return obj


def _newer(a: Obj, b: Obj) -> bool:
    """Whether ``a`` is a later version of the same object than ``b``.

    resourceVersions are opaque, but the API server only promises them to be
    comparable for equality; etcd-backed ones are integers, which we rely on
    only to keep an object we just wrote from being replaced by an older event."""
    ra, rb = _rv(a), _rv(b)
    if a.get("metadata", {}).get("uid") != b.get("metadata", {}).get("uid"):
        return False
    if ra.isdigit() and rb.isdigit():
        return int(ra) > int(rb)
    return False


def _same_version(a: Obj, b: Obj) -> bool:
    """The same version of the same object: the API server gives every write a new
    resourceVersion, so two copies that share one are equal."""
    rv = _rv(a)
    return bool(rv) and rv == _rv(b) and _uid(a) == _uid(b)


def _not_after(a: str, b: str) -> bool:
    """``a`` is known to be no later than ``b`` (both etcd's integer resourceVersions)."""
    return a.isdigit() and b.isdigit() and int(a) <= int(b)


def _after(a: str, b: str) -> bool:
    return a.isdigit() and b.isdigit() and int(a) > int(b)


def _rv(obj: Obj) -> str:
    return str(obj.get("metadata", {}).get("resourceVersion", ""))


def _uid(obj: Obj) -> str:
    return str(obj.get("metadata", {}).get("uid", ""))
