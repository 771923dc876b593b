"""dependsOn in the reconcile, against fake caches and a fake cluster: a change waits
for its dependencies, says so in status and an Event, wakes its waiters through the
ledger, and never holds back a MyApp Git did not change."""

from __future__ import annotations

import copy
import datetime as dt
from typing import Any

from gitsync.kube.client import path_of
from gitsync.model.api import Obj
from gitsync.model.instance import resolve
from gitsync.model.myapp_status import SyncInfo
from gitsync.model.order import Wait
from gitsync.model.window import OVERRIDE_ANNOTATION, Windows, parse_all
from gitsync.reconcile.ledger import Claim, Declared
from gitsync.reconcile.reconciler import Reconciler
from tests.fakes import FakeCache, FakeCluster, FakeRecorder

CLAIM = Claim(resolve("", "https://git.example.com/apps.git", "apps", "main"), adopt=True)


def myapp(name: str, *deps: str, **spec: Any) -> Obj:
    return {
        "apiVersion": "apps.example.com/v1",
        "kind": "MyApp",
        # the fake server keeps what is applied: a generation as the real one gives
        "metadata": {"namespace": "shop", "name": name, "generation": 1},
        "spec": {
            "image": "nginx:1.27",
            "replicas": 2,
            **({"dependsOn": [{"name": d} for d in deps]} if deps else {}),
            **spec,
        },
    }


def declared(body: Obj, revision: str = "main@sha1:r1") -> Declared:
    return Declared(body, SyncInfo(revision, f"{body['metadata']['name']}.yaml", "t"), CLAIM)


class World:
    def __init__(self) -> None:
        self.cluster = FakeCluster()
        self.myapps = FakeCache()
        self.deployments = FakeCache()
        self.events = FakeRecorder()
        self.r = Reconciler(self.myapps, self.deployments, self.cluster, self.cluster, self.events)

    def stored(self, name: str, kind: str = "MyApp") -> Obj | None:
        return self.cluster.store.get(path_of(kind, "shop", name))

    def condition(self, name: str, kind: str) -> Obj | None:
        status = (self.stored(name) or {}).get("status") or {}
        return next((c for c in status.get("conditions", []) if c["type"] == kind), None)

    def rolling(self, name: str) -> None:
        """The deployment controller starts the rollout of a new template."""
        dep = self.stored(name, "Deployment")
        assert dep is not None
        seen = dep["metadata"]["generation"]
        dep["status"] = {**dep.get("status", {}), "observedGeneration": seen, "updatedReplicas": 0}
        self.deployments.observe(copy.deepcopy(dep))
        self.r.reconcile(f"shop/{name}")

    def roll_out(self, name: str) -> None:
        """The deployment controller finishes the rollout; its watch event brings the
        MyApp back (a worker's reconcile, nothing declared)."""
        dep = self.stored(name, "Deployment")
        assert dep is not None
        want = dep["spec"]["replicas"]
        dep["status"] = {
            "observedGeneration": dep["metadata"]["generation"],
            "replicas": want,
            "updatedReplicas": want,
            "availableReplicas": want,
        }
        self.deployments.observe(copy.deepcopy(dep))
        self.r.reconcile(f"shop/{name}")


def test_a_new_myapp_waits_uncreated_then_its_dependency_wakes_it() -> None:
    w = World()
    w.r.reconcile("shop/db", declared(myapp("db")))
    result = w.r.reconcile("shop/web", declared(myapp("web", "db")))
    why = "waiting for MyApp/shop/db (Progressing)"
    assert (result.held, result.hold, result.action) == (why, "dependency", "unchanged")
    assert w.stored("web") is None and w.stored("web", "Deployment") is None
    assert w.r.ledger.waiters("shop/db") == ["shop/web"]
    assert w.r.ledger.waits() == {"shop/web": Wait("DependencyNotReady", why, "shop/db")}
    # a worker's reconcile of the waiting key (no pass) while db still rolls out: waits
    assert w.r.reconcile("shop/web").held == why
    assert w.stored("web") is None
    w.roll_out("db")
    assert (w.stored("db") or {})["status"]["phase"] == "Available"
    woke = w.r.reconcile("shop/web")  # what the db's status event enqueues
    assert woke.action == "created" and not woke.held and woke.hold == ""
    assert w.stored("web", "Deployment") is not None
    assert w.r.ledger.waiters("shop/db") == [] and w.r.ledger.waits() == {}
    # it never waited as an object: no Waiting condition on it
    assert w.condition("web", "Waiting") is None


def test_a_change_waits_in_status_and_an_event_while_the_old_spec_serves() -> None:
    w = World()
    w.r.reconcile("shop/db", declared(myapp("db")))
    w.roll_out("db")
    w.r.reconcile("shop/web", declared(myapp("web", "db")))
    w.roll_out("web")
    # one commit changes both: db rolls out, web waits for it
    w.r.reconcile("shop/db", declared(myapp("db", image="db:2"), "main@sha1:r2"))
    w.rolling("db")
    events = len(w.events.events)
    result = w.r.reconcile("shop/web", declared(myapp("web", "db", replicas=5), "main@sha1:r2"))
    why = "waiting for MyApp/shop/db (Progressing)"
    assert (result.held, result.hold) == (why, "dependency")
    assert (w.stored("web") or {})["spec"]["replicas"] == 2
    assert (w.stored("web", "Deployment") or {})["spec"]["replicas"] == 2
    waiting = w.condition("web", "Waiting")
    assert waiting is not None
    assert (waiting["status"], waiting["reason"], waiting["message"]) == (
        "True",
        "DependencyNotReady",
        why,
    )
    synced = w.condition("web", "Synced")
    assert synced is not None and synced["status"] == "False"
    assert synced["reason"] == "DependencyNotReady" and why in synced["message"]
    # its source stays the revision that last changed it
    assert (w.stored("web") or {})["status"]["source"]["revision"] == "main@sha1:r1"
    assert w.events.events[events:] == [("Normal", "DependencyNotReady", why)]
    # once per reason, not on every reconcile
    w.r.reconcile("shop/web")
    assert w.events.events[events:] == [("Normal", "DependencyNotReady", why)]
    w.roll_out("db")
    done = w.r.reconcile("shop/web")
    assert done.action == "configured" and done.hold == ""
    assert (w.stored("web") or {})["spec"]["replicas"] == 5
    assert (w.stored("web", "Deployment") or {})["spec"]["replicas"] == 5
    waiting = w.condition("web", "Waiting")
    assert waiting is not None and (waiting["status"], waiting["reason"]) == ("False", "Released")
    synced = w.condition("web", "Synced")
    assert synced is not None and synced["status"] == "True"
    assert (w.stored("web") or {})["status"]["source"]["revision"] == "main@sha1:r2"


def test_an_unchanged_myapp_is_never_held_back_and_its_drift_is_corrected() -> None:
    w = World()
    w.r.reconcile("shop/db", declared(myapp("db")))
    w.roll_out("db")
    w.r.reconcile("shop/web", declared(myapp("web", "db")))
    # db breaks (its next spec is stuck); web is not changed by Git
    w.r.reconcile("shop/db", declared(myapp("db", image="db:broken")))
    dep = w.stored("web", "Deployment")
    assert dep is not None
    dep["spec"]["replicas"] = 9  # someone scales web's Deployment by hand
    w.deployments.observe(copy.deepcopy(dep))
    result = w.r.reconcile("shop/web", declared(myapp("web", "db")))
    assert result.held == "" and result.hold == ""
    assert (w.stored("web", "Deployment") or {})["spec"]["replicas"] == 2
    assert w.r.ledger.waits() == {}


def test_a_dependency_declared_by_the_pass_counts_before_it_is_reconciled() -> None:
    w = World()
    w.r.reconcile("shop/db", declared(myapp("db")))
    w.roll_out("db")
    w.r.reconcile("shop/web", declared(myapp("web", "db")))
    # the pass hands every dependency in first; web's reconcile may come before db's
    w.r.ledger.declare({"shop/db": declared(myapp("db", image="db:2"), "main@sha1:r2")})
    result = w.r.reconcile("shop/web", declared(myapp("web", "db", replicas=3), "main@sha1:r2"))
    assert result.held == "waiting for MyApp/shop/db (its change from Git not applied yet)"
    assert (w.stored("web") or {})["spec"]["replicas"] == 2


NOW = dt.datetime(2027, 1, 4, 3, 0, tzinfo=dt.UTC)  # a Monday, 04:00 in Berlin
#: closed from 22:00 to 06:00 Berlin time, every night
NIGHT = "deny 0 22 * * * 8h Europe/Berlin name=night"
UNTIL = "2027-01-04T06:00:00+01:00"


def windowed(*texts: str, **kw: bool) -> World:
    w = World()
    w.r.gate.windows = Windows(parse_all(texts), **kw)
    w.r.gate.now = lambda: NOW
    return w


def test_a_closed_window_holds_a_change_and_says_until_when() -> None:
    w = windowed(NIGHT)
    w.r.reconcile("shop/web", declared(myapp("web")))  # (new: created is a change too)
    assert w.stored("web") is None
    w.r.gate.now = lambda: NOW + dt.timedelta(hours=4)  # 08:00 in Berlin: open
    assert w.r.reconcile("shop/web", declared(myapp("web"))).action == "created"
    w.r.gate.now = lambda: NOW
    result = w.r.reconcile("shop/web", declared(myapp("web", replicas=4)))
    why = f'held by window "night" until {UNTIL}'
    assert (result.held, result.hold) == (why, "window")
    assert (w.stored("web") or {})["spec"]["replicas"] == 2
    waiting = w.condition("web", "Waiting")
    assert waiting is not None and (waiting["reason"], waiting["message"]) == ("SyncWindow", why)
    assert w.events.events[-1] == ("Normal", "SyncWindow", why)
    # the same spec as applied: no change to hold, whatever the window says
    assert w.r.reconcile("shop/web", declared(myapp("web"))).hold == ""
    # a window narrowed to other namespaces holds nothing here
    other = windowed("deny 0 22 * * * 8h Europe/Berlin namespaces=prod")
    other.r.reconcile("shop/web", declared(myapp("web")))
    assert other.stored("web") is not None


def test_drift_is_corrected_in_a_closed_window_unless_corrections_are_blocked() -> None:
    for block, replicas in ((False, 2), (True, 9)):
        w = windowed(NIGHT, block_corrections=block)
        w.r.gate.now = lambda: NOW + dt.timedelta(hours=4)
        w.r.reconcile("shop/web", declared(myapp("web")))
        w.r.gate.now = lambda: NOW
        dep = w.stored("web", "Deployment")
        assert dep is not None
        dep["spec"]["replicas"] = 9  # kubectl scale, at night
        w.deployments.observe(copy.deepcopy(dep))
        w.r.reconcile("shop/web", declared(myapp("web")))
        assert (w.stored("web", "Deployment") or {})["spec"]["replicas"] == replicas, block
        drift = (w.stored("web") or {})["status"]["drift"]
        assert [d["path"] for d in drift] == (["spec.replicas"] if block else []), block


def test_the_one_shot_annotation_lets_one_change_through_and_is_removed() -> None:
    w = windowed(NIGHT)
    w.r.gate.now = lambda: NOW + dt.timedelta(hours=4)
    w.r.reconcile("shop/web", declared(myapp("web")))
    w.r.gate.now = lambda: NOW
    live = w.stored("web")
    assert live is not None
    live["metadata"]["annotations"][OVERRIDE_ANNOTATION] = "INC-42"
    w.myapps.observe(copy.deepcopy(live))
    result = w.r.reconcile("shop/web", declared(myapp("web", replicas=3)))
    assert result.action == "configured" and result.hold == ""
    assert (w.stored("web") or {})["spec"]["replicas"] == 3
    assert OVERRIDE_ANNOTATION not in (w.stored("web") or {})["metadata"]["annotations"]
    assert ("patch", path_of("MyApp", "shop", "web")) in w.cluster.writes
    why = f'held by window "night" until {UNTIL}'
    assert (
        "Normal",
        "SyncWindowOverridden",
        f"applied through a closed window ({why}): {OVERRIDE_ANNOTATION}='INC-42'",
    ) in w.events.events
    # once: the next change waits again
    w.myapps.observe(copy.deepcopy(w.stored("web") or {}))
    assert w.r.reconcile("shop/web", declared(myapp("web", replicas=5))).hold == "window"


def test_ignore_windows_applies_and_records_each_change_it_let_through() -> None:
    w = windowed(NIGHT, ignore=True)
    result = w.r.reconcile("shop/web", declared(myapp("web")))
    assert result.action == "created" and w.stored("web") is not None
    reasons = [(r, m.endswith(": --ignore-windows")) for _, r, m in w.events.events]
    assert ("SyncWindowOverridden", True) in reasons
    # nothing changed, nothing recorded
    events = len(w.events.events)
    w.r.reconcile("shop/web", declared(myapp("web")))
    assert len(w.events.events) == events


def test_a_myapp_left_git_no_longer_waits_nor_is_woken() -> None:
    w = World()
    w.r.reconcile("shop/web", declared(myapp("web", "db", "cache")))
    assert w.r.ledger.waiters("shop/db") == ["shop/web"]
    assert w.r.ledger.waiters("shop/cache") == ["shop/web"]
    w.r.ledger.release(["shop/web"])
    assert w.r.ledger.waiters("shop/db") == [] and w.r.ledger.waits() == {}
    w.r.reconcile("shop/web", declared(myapp("web", "db")))
    w.r.ledger.forget("shop/web")
    assert w.r.ledger.waiters("shop/db") == []


def test_one_event_per_thing_waited_for_not_per_phase_of_it() -> None:
    w = World()
    w.r.reconcile("shop/db", declared(myapp("db")))
    w.r.reconcile("shop/cache", declared(myapp("cache")))
    w.roll_out("cache")
    w.r.reconcile("shop/web", declared(myapp("web")))
    w.r.reconcile("shop/web", declared(myapp("web", "db", "cache")))
    assert w.events.reasons().count("DependencyNotReady") == 1
    # db's phase moves on (Progressing, then Degraded): status follows, no new Event
    dep = w.stored("db", "Deployment")
    assert dep is not None
    dep["status"] = {"conditions": [{"type": "Progressing", "reason": "ProgressDeadlineExceeded"}]}
    w.deployments.observe(copy.deepcopy(dep))
    w.r.reconcile("shop/db")
    result = w.r.reconcile("shop/web")
    assert result.held == "waiting for MyApp/shop/db (Degraded)"
    assert w.events.reasons().count("DependencyNotReady") == 1
    # db done, cache now changing: a wait on something else is news
    w.roll_out("db")
    w.r.reconcile("shop/cache", declared(myapp("cache", image="cache:2")))
    w.rolling("cache")
    assert w.r.reconcile("shop/web").held == "waiting for MyApp/shop/cache (Progressing)"
    messages = [m for _, r, m in w.events.events if r == "DependencyNotReady"]
    assert messages == [
        "waiting for MyApp/shop/db (Progressing)",
        "waiting for MyApp/shop/cache (Progressing)",
    ]
