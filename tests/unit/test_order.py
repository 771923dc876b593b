"""spec.dependsOn, pure: the references, what cannot be ordered, the order, and why a
dependency is not ready."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from gitsync.model import order
from gitsync.model.api import Obj


def app(ns: str, name: str, *deps: Any, **status: Any) -> Obj:
    obj: Obj = {
        "metadata": {"namespace": ns, "name": name, "generation": 2},
        "spec": {"image": "a", "dependsOn": list(deps)},
    }
    if status:
        obj["status"] = status
    return obj


def test_references_default_to_the_myapps_namespace_and_repeat_once() -> None:
    spec = {
        "dependsOn": [
            {"name": "db"},
            {"name": "cache", "namespace": "infra"},
            {"name": "db", "namespace": "shop"},
            {"name": ""},
            "junk",
        ]
    }
    assert order.refs_of(spec, "shop") == ("shop/db", "infra/cache")
    assert order.refs_of({}, "shop") == ()
    assert order.refs_of(None, "shop") == ()
    assert order.dependencies(app("shop", "web", {"name": "db"})) == ("shop/db",)


def test_a_self_reference_a_missing_one_and_every_member_of_a_cycle_are_named() -> None:
    graph = {
        "s/self": ("s/self",),
        "s/lost": ("s/nowhere", "s/live", "s/other"),
        "s/a": ("s/b",),
        "s/b": ("s/c",),
        "s/c": ("s/a",),
        "s/d": ("s/a",),  # depends on a cycle: waits, is not refused
        "s/ok": ("s/live",),
    }
    found = order.problems(graph, lambda key: key == "s/live")
    assert found == {
        "s/self": "MyApp/s/self depends on itself",
        "s/lost": "MyApp/s/nowhere, MyApp/s/other exist neither in Git nor in the cluster",
        "s/a": "a cycle: MyApp/s/a → MyApp/s/b → MyApp/s/c → MyApp/s/a",
        "s/b": "a cycle: MyApp/s/a → MyApp/s/b → MyApp/s/c → MyApp/s/a",
        "s/c": "a cycle: MyApp/s/a → MyApp/s/b → MyApp/s/c → MyApp/s/a",
    }
    one = order.problems({"s/x": ("s/gone",)}, lambda _k: False)
    assert one == {"s/x": "MyApp/s/gone exists neither in Git nor in the cluster"}


def test_every_member_of_a_cycle_is_refused_the_shortest_path_shown() -> None:
    graph = {
        "n/b": ("n/a",),
        "n/a": ("n/c", "n/b"),
        "n/c": ("n/a",),
        "n/x": ("n/y",),
        "n/y": ("n/x",),
    }
    assert sorted(order.cycles(graph), key=lambda c: c.path) == [
        order.Cycle(("n/a", "n/c"), ("n/b",)),
        order.Cycle(("n/x", "n/y")),
    ]
    found = order.problems(graph, lambda _k: False)
    text = "a cycle: MyApp/n/a → MyApp/n/c → MyApp/n/a (and through MyApp/n/b)"
    assert found["n/a"] == found["n/b"] == found["n/c"] == text
    assert found["n/x"] == "a cycle: MyApp/n/x → MyApp/n/y → MyApp/n/x"
    assert list(order.cycles({"n/a": ("n/b",), "n/b": ()})) == []


def test_a_chain_of_thousands_is_no_recursion() -> None:
    n = 5000
    graph = {f"n/{i:05}": (f"n/{i + 1:05}",) if i + 1 < n else () for i in range(n)}
    assert list(order.cycles(graph)) == []
    assert order.problems(graph, lambda _k: False) == {}
    ring = {**graph, f"n/{n - 1:05}": ("n/00000",)}
    (cycle,) = order.cycles(ring)
    assert len(cycle.path) == n and cycle.path[:2] == ("n/00000", "n/00001")
    assert cycle.others == ()
    assert order.topological(graph)[:2] == [f"n/{n - 1:05}", f"n/{n - 2:05}"]


def test_topological_puts_dependencies_first_and_appends_what_a_cycle_leaves() -> None:
    graph = {"s/app": ("s/db", "s/cache"), "s/db": ("s/net",), "s/cache": (), "s/net": ()}
    got = order.topological(graph)
    assert got.index("s/net") < got.index("s/db") < got.index("s/app")
    assert got.index("s/cache") < got.index("s/app")
    assert sorted(got) == sorted(graph)
    # edges to keys outside the graph (live MyApps) and self-edges are no wait
    assert order.topological({"s/a": ("x/live", "s/a")}) == ["s/a"]
    assert order.topological({"s/a": ("s/b",), "s/b": ("s/a",), "s/c": ()}) == ["s/c", "s/a", "s/b"]


WINDOW_W = order.Wait(order.SYNC_WINDOW, "held by window w", "w")
ON_X = order.waiting_for("s/x", "Pending")


def available() -> Obj:
    return app("s", "db", observedGeneration=2)


@pytest.mark.parametrize(
    ("live", "pending", "waiting", "phase", "why"),
    [
        (None, False, None, "Available", "not created yet"),
        (None, True, WINDOW_W, "Pending", "itself held by window w"),
        (
            {**available(), "metadata": {"deletionTimestamp": "t"}},
            False,
            None,
            "Available",
            "being deleted",
        ),
        # one link down, never the dependency's whole message
        (available(), False, ON_X, "Available", "itself waiting for MyApp/s/x"),
        (available(), True, None, "Available", "its change from Git not applied yet"),
        (
            app("s", "db", observedGeneration=1),
            False,
            None,
            "Available",
            "its current spec not rendered yet",
        ),
        (app("s", "db", phase="x"), False, None, "Available", "its current spec not rendered yet"),
        (available(), False, None, "Degraded", "Degraded"),
        (available(), False, None, "Progressing", "Progressing"),
        (available(), False, None, "Pending", "Pending"),
        # the phase its status recorded is not what counts: the Deployment's now
        (app("s", "db", observedGeneration=2, phase="Progressing"), False, None, "Available", ""),
        (available(), False, None, "Available", ""),
    ],
)
def test_why_a_dependency_is_not_ready(
    live: Obj | None, pending: bool, waiting: order.Wait | None, phase: str, why: str
) -> None:
    assert order.not_ready(live, None, pending, waiting, phase) == why


def test_a_rolled_back_dependency_is_not_ready_while_it_holds_gits_spec() -> None:
    from gitsync.model import rollout

    rb = rollout.Rollback("r2", "r1", "ProgressDeadlineExceeded", "t", rollout.digest({}))
    # what its status reports of a rollback decides nothing: gitsync's record does
    status = {"observedGeneration": 2, "phase": "Available", "rollback": rb.to_status()}
    live = {**app("s", "db"), "status": status}
    assert order.not_ready(live, rb, False, None, "Available").startswith("rolled back from r2")
    assert order.not_ready(live, None, False, None, "Available") == ""


def test_plan_waits_follows_the_order_and_says_why() -> None:
    bodies = {
        "s/net": app("s", "net"),
        "s/db": app("s", "db", {"name": "net"}),
        "s/app": app("s", "app", {"name": "db"}),
        "s/web": app("s", "web", {"name": "live", "namespace": "other"}),
        "s/calm": app("s", "calm", {"name": "db"}),
    }
    live = {
        "s/db": available(),
        "s/calm": app("s", "calm"),
        "other/live": app("other", "live", observedGeneration=2),
    }
    phases = {"s/db": "Available", "other/live": "Progressing"}
    moving = {"s/net", "s/db", "s/app", "s/web"}

    def phase(key: str) -> str:
        return phases.get(key, "Pending")

    waits = order.plan_waits(bodies, live, lambda k: k in moving, phase)
    assert {k: w.message for k, w in waits.items()} == {
        "s/db": "waiting for MyApp/s/net (not created yet)",
        "s/app": "waiting for MyApp/s/db (itself waiting for MyApp/s/net)",
        "s/web": "waiting for MyApp/other/live (Progressing)",
    }
    assert {w.hold for w in waits.values()} == {"dependency"}
    assert {w.reason for w in waits.values()} == {order.DEPENDENCY_NOT_READY}
    # calm is unchanged: never held back by its dependency
    assert "s/calm" not in waits and "s/net" not in waits
    window = order.Wait(order.SYNC_WINDOW, "held by window w")
    closed = order.plan_waits(
        bodies, live, lambda k: k in moving, phase, lambda k: window if k == "s/net" else None
    )
    assert closed["s/net"] == window and closed["s/net"].hold == "window"
    assert closed["s/db"].message == ("waiting for MyApp/s/net (itself held by window w)")


def test_a_namespace_that_is_not_a_name_is_the_myapps_own() -> None:
    spec = {"dependsOn": [{"name": "db", "namespace": 5}, {"name": "cache", "namespace": ""}]}
    assert order.refs_of(spec, "shop") == ("shop/db", "shop/cache")
    assert order.dependencies({"spec": {"dependsOn": [{"name": "db"}]}}) == ("/db",)


def test_a_self_reference_is_said_before_a_missing_dependency() -> None:
    found = order.problems({"s/both": ("s/both", "s/nowhere")}, lambda _k: False)
    assert found == {"s/both": "MyApp/s/both depends on itself"}


def test_a_cycle_next_to_a_myapp_ordered_before_it_is_found() -> None:
    graph = {"n/a": (), "n/x": ("n/a", "n/y"), "n/y": ("n/x",)}
    assert list(order.cycles(graph)) == [order.Cycle(("n/x", "n/y"))]


def test_the_cycle_shown_is_the_shortest_first_found_path() -> None:
    graph = {"n/a": ("n/b", "n/c"), "n/b": ("n/d",), "n/c": ("n/d",), "n/d": ("n/a", "n/z")}
    assert list(order.cycles({**graph, "n/z": ()})) == [
        order.Cycle(("n/a", "n/b", "n/d"), ("n/c",))
    ]


def test_topological_takes_ready_keys_in_key_order() -> None:
    assert order.topological({"s/c": ("s/a",), "s/b": (), "s/a": ()}) == ["s/a", "s/b", "s/c"]


def test_plan_waits_names_the_first_dependency_not_ready_and_skips_what_git_left() -> None:
    bodies = {
        "s/app": app("s", "app", {"name": "x"}, {"name": "y"}),
        "s/still": app("s", "still", {"name": "x"}),
    }
    waits = order.plan_waits(bodies, {}, lambda k: k == "s/app", lambda _k: "Pending")
    assert {k: w.message for k, w in waits.items()} == {
        "s/app": "waiting for MyApp/s/x (not created yet)"
    }


def test_plan_waits_sees_a_dependency_rolled_back() -> None:
    from gitsync.model import rollout

    git_spec = {"image": "db:2", "dependsOn": []}
    status = {
        "observedGeneration": 2,
        "lastHealthy": {"revision": "r1", "digest": "d1", "spec": {"image": "db:1"}},
        "rollback": {
            "from": "r2",
            "to": "r1",
            "reason": "deadline",
            "time": "t",
            "heldDigest": rollout.digest(git_spec),
        },
    }
    db = {"metadata": {"namespace": "s", "name": "db", "generation": 2}, "spec": git_spec}
    bodies = {"s/db": db, "s/app": app("s", "app", {"name": "db"})}
    live = {"s/db": {**db, "status": status}}
    rb = rollout.Rollback("r2", "r1", "deadline", "t", rollout.digest(git_spec))
    waits = order.plan_waits(
        bodies,
        live,
        lambda k: k == "s/app",
        lambda _k: "Available",
        hold=lambda k: rb if k == "s/db" else None,
    )
    assert waits["s/app"].message.startswith("waiting for MyApp/s/db (rolled back from r2")
    # what its status says is not gitsync's record: no wait for it
    waits = order.plan_waits(bodies, live, lambda k: k == "s/app", lambda _k: "Available")
    assert "s/app" not in waits


def test_what_status_says_a_myapp_waits_for() -> None:
    def cond(status: str, **kw: str) -> Obj:
        return {"conditions": [{"type": "Ready", "status": "True", "message": "m"},
                               {"type": "Waiting", "status": status, **kw}]}  # fmt: skip

    assert order.described(cond("True", message="waiting for MyApp/s/db (Progressing)")) == (
        "waiting for MyApp/s/db (Progressing)"
    )
    assert order.described(cond("True", reason="SyncWindow")) == "SyncWindow"
    assert order.described(cond("True")) == "waiting"
    assert order.described(cond("False", message="no longer waiting")) == ""
    assert order.described({"conditions": [{"type": "Ready", "status": "True"}]}) == ""
    assert order.described({"conditions": ["junk"]}) == ""
    assert order.described(None) == "" and order.described({}) == ""
    assert order.held(cond("True", message="w")) == "w"
    assert order.held(None) == ""


def test_a_window_is_said_before_a_dependency() -> None:
    bodies = {"s/app": app("s", "app", {"name": "x"})}
    window = order.Wait(order.SYNC_WINDOW, "held by window w", "w")
    waits = order.plan_waits(bodies, {}, lambda _k: True, lambda _k: "Pending", lambda _k: window)
    assert waits == {"s/app": window}


def chain(links: int) -> dict[str, Obj]:
    """MyApps of 63-character names, each depending on the one before."""
    names = [f"link-{i:04d}-".ljust(63, "x") for i in range(links)]
    bodies = {f"s/{names[0]}": app("s", names[0])}
    for below, name in itertools.pairwise(names):
        bodies[f"s/{name}"] = app("s", name, {"name": below})
    return bodies


def test_a_chains_messages_name_one_link_down_and_change_only_where_the_chain_moved() -> None:
    bodies = chain(400)
    keys = list(bodies)
    # nothing created yet; the first link is the one the pass applies
    live = {keys[0]: app("s", keys[0][2:], observedGeneration=2)}

    def waits(root_phase: str) -> dict[str, str]:
        found = order.plan_waits(
            bodies,
            live,
            lambda k: k != keys[0],
            lambda k: root_phase if k == keys[0] else "Pending",
        )
        return {k: w.message for k, w in found.items()}

    progressing, available_ = waits("Progressing"), waits("Available")
    assert set(progressing) == set(keys[1:])
    # each names its first blocker and what that one waits for, no deeper: the length
    # does not grow with the chain (a whole chain's copy passed the condition's
    # 32,768 characters at about 210 links)
    assert (
        progressing[keys[2]] == f"waiting for MyApp/{keys[1]} (itself waiting for MyApp/{keys[0]})"
    )
    assert max(len(m) for m in progressing.values()) < 200
    # the first link's rollout moving on changes the one message above it alone: its
    # release costs one status write, not one per link of the chain
    assert progressing[keys[1]] == f"waiting for MyApp/{keys[0]} (Progressing)"
    assert keys[1] not in available_
    assert {k for k in keys[2:] if progressing[k] != available_[k]} == {keys[2]}


def test_waves_put_each_myapp_after_the_last_it_depends_on() -> None:
    graph = {
        "s/app": ("s/db", "s/cache"),
        "s/db": ("s/net",),
        "s/net": (),
        "s/cache": ("x/live",),
        "s/web": (),
    }
    assert order.waves(graph) == [["s/net", "s/cache", "s/web"], ["s/db"], ["s/app"]]
    assert order.waves({}) == []
    # no dependsOn: one wave, in Git's order
    assert order.waves({"s/b": (), "s/a": ("x/live",)}) == [["s/b", "s/a"]]
    # a cycle (refused at load before a pass orders anything) still places every key once
    looped = order.waves({"s/a": ("s/b",), "s/b": ("s/a",), "s/c": ("s/a",)})
    assert sorted(k for wave in looped for k in wave) == ["s/a", "s/b", "s/c"]
