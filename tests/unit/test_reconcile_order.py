"""dependsOn in the reconcile, against fake caches and a fake cluster: a change waits
for its dependencies, says so in status and an Event, wakes its waiters through the
ledger, and never holds back a MyApp Git did not change."""

from __future__ import annotations

import copy
from typing import Any

from gitsync.kube.client import path_of
from gitsync.model.api import Obj
from gitsync.model.instance import resolve
from gitsync.model.myapp_status import SyncInfo
from gitsync.model.order import Wait
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
        dep["status"] = {**dep.get("status", {}), "updatedReplicas": 0}
        self.deployments.observe(copy.deepcopy(dep))
        self.r.reconcile(f"shop/{name}")

    def roll_out(self, name: str) -> None:
        """The deployment controller finishes the rollout; its watch event brings the
        MyApp back (a worker's reconcile, nothing declared)."""
        dep = self.stored(name, "Deployment")
        assert dep is not None
        want = dep["spec"]["replicas"]
        dep["status"] = {
            "observedGeneration": 0,
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


def test_a_window_holds_a_change_before_any_dependency_and_lets_drift_be() -> None:
    w = World()
    w.r.reconcile("shop/web", declared(myapp("web")))
    closed = Wait("SyncWindow", "held by window freeze until 2027-01-04T06:00:00+01:00")
    w.r.window = lambda body: closed if body["metadata"]["name"] == "web" else None
    result = w.r.reconcile("shop/web", declared(myapp("web", replicas=4)))
    assert (result.held, result.hold) == (closed.message, "window")
    assert (w.stored("web") or {})["spec"]["replicas"] == 2
    waiting = w.condition("web", "Waiting")
    assert waiting is not None and waiting["reason"] == "SyncWindow"
    # the same spec as applied: no change to hold, whatever the window says
    assert w.r.reconcile("shop/web", declared(myapp("web"))).hold == ""


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
