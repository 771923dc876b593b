"""The prune step of a sync pass, against a fake cache and a fake API: what it deletes
when a MyApp changes between the read and the delete."""

from __future__ import annotations

import datetime as dt
import threading
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, cast

from gitsync.engine.changeset import ChangeSet
from gitsync.errors import APIConflictError
from gitsync.gitops.sync import Operator, Syncer, SyncOptions
from gitsync.model.api import SOURCE_LABEL
from gitsync.model.window import Windows
from gitsync.reconcile.ledger import Ledger
from gitsync.source.checkout import Source


@dataclass
class FakeAPI:
    """Deletes with a resourceVersion precondition, as the API server does: a status
    write bumps the version after the cache was read."""

    cache: dict[str, dict[str, Any]]
    server_version: dict[str, str]
    deleted: list[tuple[str, str | None]] = field(default_factory=list)
    leader: bool = True
    #: Event reasons recorded (the notifier hears of a prune through them)
    events: list[str] = field(default_factory=list)

    def emit(self, obj: Any, type_: str, reason: str, message: str, details: Any = None) -> None:
        self.events.append(reason)

    def delete(self, kind: str, ns: str, name: str, uid: str, version: str | None) -> None:
        key = f"{ns}/{name}"
        if version != self.server_version[key]:
            # the watch brings the newer version a moment later
            threading.Timer(0.1, self._catch_up, (key,)).start()
            raise APIConflictError(f"MyApp/{key}", "the object has been modified", [])
        self.deleted.append((key, version))

    def _catch_up(self, key: str) -> None:
        self.cache[key]["metadata"]["resourceVersion"] = self.server_version[key]


def myapp(label: str, version: str) -> dict[str, Any]:
    meta = {"uid": "u1", "resourceVersion": version, "labels": {SOURCE_LABEL: label}}
    return {"metadata": meta}


#: still in Git, so that pruning the one under test stays under the prune guard
KEPT = {"shop/a", "shop/b"}


def tracking(s: Syncer, gone: str) -> dict[str, dict[str, Any]]:
    return {key: myapp(s.source_label, "11") for key in (gone, *KEPT)}


def syncer(api: FakeAPI) -> Syncer:
    controller = SimpleNamespace(
        myapps=api.cache,
        applier=api,
        ledger=Ledger(),
        events=api,
        is_leader=lambda: api.leader,
        gate=SimpleNamespace(windows=Windows(), now=lambda: dt.datetime.now(dt.UTC)),
    )
    options = SyncOptions(repo="https://git.example.com/apps.git", path="apps")
    return Syncer(cast(Operator, controller), cast(Source, SimpleNamespace()), options)


def test_a_status_write_the_cache_has_not_seen_delays_the_prune_but_does_not_stop_it() -> None:
    api = FakeAPI(cache={}, server_version={"shop/web": "12"})
    s = syncer(api)
    api.cache["shop/web"] = myapp(s.source_label, "11")  # the cache is one write behind
    tracked = tracking(s, "shop/web")
    result = ChangeSet()
    s._prune(result, KEPT, tracked, manifests_ok=True)
    assert api.deleted == [("shop/web", "12")]
    assert [(o.subject, o.action) for o in result.changes] == [("MyApp/shop/web", "pruned")]
    assert api.events == ["Pruned"]


def test_a_myapp_relabelled_before_the_retry_is_not_deleted() -> None:
    api = FakeAPI(cache={}, server_version={"shop/web": "12"})
    s = syncer(api)
    api.cache["shop/web"] = myapp(s.source_label, "11")
    tracked = tracking(s, "shop/web")
    # what the newer version holds: another instance took the MyApp over
    original = api._catch_up

    def relabelled(key: str) -> None:
        original(key)
        api.cache[key]["metadata"]["labels"][SOURCE_LABEL] = "other-instance"

    api._catch_up = relabelled  # type: ignore[method-assign]
    result = ChangeSet()
    s._prune(result, KEPT, tracked, manifests_ok=True)
    assert api.deleted == [] and result.changes == [] and api.events == []


def test_no_delete_is_retried_once_leadership_is_lost() -> None:
    api = FakeAPI(cache={}, server_version={"shop/web": "12"})
    s = syncer(api)
    api.cache["shop/web"] = myapp(s.source_label, "11")
    tracked = tracking(s, "shop/web")
    original = api._catch_up

    def deposed(key: str) -> None:
        api.leader = False
        original(key)

    api._catch_up = deposed  # type: ignore[method-assign]
    s._prune(ChangeSet(), KEPT, tracked, manifests_ok=True)
    assert api.deleted == []
