"""What ``gitsync diff`` shows of dependsOn and windows: a change that waits is held,
with its reason, and nothing of it is written; what Git did not change never waits."""

from __future__ import annotations

import copy
import datetime as dt
import json
from typing import Any

from gitsync.engine.changeset import PruneGuard, hold_prunes, plan, plan_prune
from gitsync.engine.planner import Settings
from gitsync.model.api import Obj
from gitsync.model.render import render
from gitsync.model.window import OVERRIDE_ANNOTATION, Windows, parse_all
from tests.unit.test_plan import applied


def app(name: str, *deps: str, uid: str = "", tier: str = "", **spec: Any) -> Obj:
    meta: Obj = {"name": name, "namespace": "shop"}
    if tier:
        meta["labels"] = {"tier": tier}
    if uid:
        meta["uid"] = uid
    return {
        "apiVersion": "apps.example.com/v1",
        "kind": "MyApp",
        "metadata": meta,
        "spec": {
            "image": "nginx:1.27",
            "replicas": 1,
            **({"dependsOn": [{"name": d} for d in deps]} if deps else {}),
            **spec,
        },
    }


def running(body: Obj, phase: str = "Available") -> tuple[Obj, Obj]:
    """``body`` as gitsync applied it, its status at ``phase``, and its Deployment."""
    name = body["metadata"]["name"]
    live = applied(body)
    live["metadata"]["uid"] = f"u-{name}"
    live["metadata"]["generation"] = 3
    live["status"] = {"observedGeneration": 3, "phase": phase}
    dep = applied(render(live))
    # what the deployment controller says of it (phase_of reads this, not the MyApp's)
    if phase == "Available":
        dep["status"] = {"replicas": 1, "updatedReplicas": 1, "availableReplicas": 1}
    elif phase == "Degraded":
        dep["status"] = {
            "conditions": [{"type": "Progressing", "reason": "ProgressDeadlineExceeded"}]
        }
    return live, dep


def actions(changes: Any) -> dict[str, tuple[str, str, str]]:
    return {c.subject: (c.action, c.hold, c.reason) for c in changes.changes}


def test_a_change_waits_for_a_dependency_that_changes_in_the_same_commit() -> None:
    db_live, db_dep = running(app("db"))
    web_live, web_dep = running(app("web", "db"))
    desired = {"shop/db": app("db", image="db:2"), "shop/web": app("web", "db", replicas=4)}
    changes = plan(
        desired,
        {"shop/db": db_live, "shop/web": web_live},
        {"shop/db": db_dep, "shop/web": web_dep},
    )
    got = actions(changes)
    assert got["MyApp/shop/db"][0] == "configured"
    why = "waiting for MyApp/shop/db (its change from Git not applied yet)"
    assert got["MyApp/shop/web"][:2] == ("unchanged", "dependency")
    assert got["MyApp/shop/web"][2].startswith(why)
    assert got["Deployment/shop/web"] == ("unchanged", "", "")  # held to the live MyApp
    (held,) = changes.held()
    assert held.subject == "MyApp/shop/web" and "spec.replicas" in held.paths
    assert held.to_json()["hold"] == "dependency"


def test_an_unchanged_myapp_never_waits_and_a_ready_dependency_lets_a_change_through() -> None:
    db_live, db_dep = running(app("db", image="db:broken"), phase="Degraded")
    web_live, web_dep = running(app("web", "db"))
    calm = plan(
        {"shop/db": app("db", image="db:broken"), "shop/web": app("web", "db")},
        {"shop/db": db_live, "shop/web": web_live},
        {"shop/db": db_dep, "shop/web": web_dep},
    )
    assert calm.held() == [] and not calm.writes
    stuck = plan(
        {"shop/db": app("db", image="db:broken"), "shop/web": app("web", "db", replicas=2)},
        {"shop/db": db_live, "shop/web": web_live},
        {"shop/db": db_dep, "shop/web": web_dep},
    )
    assert actions(stuck)["MyApp/shop/web"][2].startswith("waiting for MyApp/shop/db (Degraded)")
    ok_live, ok_dep = running(app("db"))
    through = plan(
        {"shop/db": app("db"), "shop/web": app("web", "db", replicas=2)},
        {"shop/db": ok_live, "shop/web": web_live},
        {"shop/db": ok_dep, "shop/web": web_dep},
    )
    assert actions(through)["MyApp/shop/web"][0] == "configured"
    assert through.held() == []


def test_a_new_myapp_that_waits_is_not_created_nor_its_deployment() -> None:
    changes = plan({"shop/db": app("db"), "shop/web": app("web", "db")}, {}, {})
    got = actions(changes)
    assert got["MyApp/shop/db"][0] == got["Deployment/shop/db"][0] == "created"
    why = "waiting for MyApp/shop/db (not created yet)"
    assert got["MyApp/shop/web"] == ("unchanged", "dependency", why)
    assert got["Deployment/shop/web"] == ("unchanged", "dependency", why)
    assert changes.count("created") == 2


def test_drift_of_a_waiting_myapps_deployment_is_still_corrected() -> None:
    db_live, db_dep = running(app("db"), phase="Progressing")
    web_live, _ = running(app("web", "db"))
    scaled = applied(render(web_live), **{"kubectl-scale": 7})
    changes = plan(
        {"shop/db": app("db"), "shop/web": app("web", "db", image="web:2")},
        {"shop/db": db_live, "shop/web": web_live},
        {"shop/db": db_dep, "shop/web": scaled},
    )
    got = actions(changes)
    assert got["MyApp/shop/web"][1] == "dependency"
    assert got["Deployment/shop/web"][0] == "configured"
    assert "drift corrected" in got["Deployment/shop/web"][2]


NIGHT = "deny 0 22 * * * 8h Europe/Berlin name=freeze selector=tier=data"
AT_NIGHT = dt.datetime(2027, 1, 4, 3, 0, tzinfo=dt.UTC)  # 04:00 in Berlin
UNTIL = "2027-01-04T06:00:00+01:00"


def test_a_window_holds_a_change_and_what_waits_on_it() -> None:
    db_live, db_dep = running(app("db", tier="data"))
    web_live, web_dep = running(app("web", "db"))
    changes = plan(
        {
            "shop/db": app("db", tier="data", image="db:2"),
            "shop/web": app("web", "db", replicas=3),
        },
        {"shop/db": db_live, "shop/web": web_live},
        {"shop/db": db_dep, "shop/web": web_dep},
        windows=Windows(parse_all([NIGHT])),
        now=AT_NIGHT,
    )
    got = actions(changes)
    why = 'held by window "freeze" until 2027-01-04T06:00:00+01:00'
    assert got["MyApp/shop/db"][:2] == ("unchanged", "window")
    assert got["MyApp/shop/db"][2].startswith(why)
    assert got["MyApp/shop/web"][2].startswith(f"waiting for MyApp/shop/db (itself {why})")
    assert not changes.writes
    # in the morning, both go (db first: web still waits for db's rollout)
    morning = plan(
        {
            "shop/db": app("db", tier="data", image="db:2"),
            "shop/web": app("web", "db", replicas=3),
        },
        {"shop/db": db_live, "shop/web": web_live},
        {"shop/db": db_dep, "shop/web": web_dep},
        windows=Windows(parse_all([NIGHT])),
        now=AT_NIGHT + dt.timedelta(hours=4),
    )
    assert actions(morning)["MyApp/shop/db"][0] == "configured"
    # a window over what Git did not change holds nothing
    same = plan(
        {"shop/db": copy.deepcopy(app("db", tier="data"))},
        {"shop/db": db_live},
        {"shop/db": db_dep},
        windows=Windows(parse_all([NIGHT])),
        now=AT_NIGHT,
    )
    assert same.held() == []


def test_diff_predicts_an_override_and_blocked_corrections() -> None:
    db_live, db_dep = running(app("db", tier="data"))
    scaled = applied(render(db_live), **{"kubectl-scale": 7})
    desired = {"shop/db": app("db", tier="data")}
    night = parse_all([NIGHT])
    live = {"shop/db": db_live}
    corrected = plan(desired, live, {"shop/db": scaled}, windows=Windows(night), now=AT_NIGHT)
    assert actions(corrected)["Deployment/shop/db"][0] == "configured"
    frozen = plan(
        desired,
        {"shop/db": db_live},
        {"shop/db": scaled},
        windows=Windows(night, block_corrections=True),
        now=AT_NIGHT,
    )
    assert actions(frozen)["Deployment/shop/db"][0] == "drifted"
    assert not frozen.writes
    annotated = copy.deepcopy(db_live)
    annotated["metadata"]["annotations"][OVERRIDE_ANNOTATION] = "INC-1"
    change = {"shop/db": app("db", tier="data", image="db:2")}
    deps = {"shop/db": db_dep}
    through = plan(change, {"shop/db": annotated}, deps, windows=Windows(night), now=AT_NIGHT)
    assert actions(through)["MyApp/shop/db"][0] == "configured"
    ignored = plan(
        change,
        {"shop/db": db_live},
        {"shop/db": db_dep},
        windows=Windows(night, ignore=True),
        now=AT_NIGHT,
    )
    assert actions(ignored)["MyApp/shop/db"][0] == "configured"


def test_a_closed_window_holds_a_prune_until_it_opens() -> None:
    gone = app("db", tier="data")
    other = app("old")
    tracked = {"shop/db": gone, "shop/old": other}
    prune = plan_prune(set(), tracked, PruneGuard(allow_empty=True, max_fraction=1))
    night = Windows(parse_all([NIGHT]))
    held = hold_prunes(prune, tracked, night, AT_NIGHT)
    why = (
        'removed from Git, not pruned yet: held by window "freeze" until 2027-01-04T06:00:00+01:00'
    )
    assert actions(held) == {
        "MyApp/shop/db": ("unchanged", "window", why),
        "MyApp/shop/old": ("pruned", "", "removed from Git"),
    }
    assert actions(hold_prunes(prune, tracked, night, AT_NIGHT + dt.timedelta(hours=4))) == {
        "MyApp/shop/db": ("pruned", "", "removed from Git"),
        "MyApp/shop/old": ("pruned", "", "removed from Git"),
    }
    # the one-shot override lets the prune through too
    annotated = copy.deepcopy(gone)
    annotated["metadata"]["annotations"] = {OVERRIDE_ANNOTATION: "INC-7"}
    through = hold_prunes(prune, {**tracked, "shop/db": annotated}, night, AT_NIGHT)
    assert actions(through)["MyApp/shop/db"][0] == "pruned"


def test_a_wait_is_said_before_a_rollback_as_the_reconcile_says_it() -> None:
    from gitsync.model import rollout

    git = app("web", "db", image="web:broken")
    healthy = app("web", "db", image="web:1")["spec"]
    web_live, web_dep = running(app("web", "db", image="web:0"))
    web_live["status"] = {
        **web_live["status"],
        "lastHealthy": {"revision": "r1", "digest": rollout.digest(healthy), "spec": healthy},
        "rollback": {
            "from": "r2",
            "to": "r1",
            "reason": "deadline",
            "time": "t",
            "heldDigest": rollout.digest(git["spec"]),
        },
    }
    record = rollout.record_of(
        *(json.dumps(web_live["status"][k]) for k in ("lastHealthy", "rollback"))
    )
    changes = plan(
        {"shop/web": git},
        {"shop/web": web_live},
        {"shop/web": web_dep},
        settings=Settings(rollback="auto"),
        records={"shop/web": record},
    )
    got = actions(changes)
    assert got["MyApp/shop/web"][:2] == ("unchanged", "dependency"), got
    assert got["MyApp/shop/web"][2].startswith("waiting for MyApp/shop/db (not created yet)")
