"""The pure parts of the planner: the applied stamp, the desired-moved/drift split,
and removing fields we leave to others."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gitsync.engine import planner
from gitsync.engine.changeset import PruneGuard, changes_of, plan, plan_prune
from gitsync.engine.differences import unified
from gitsync.engine.drift import DriftItem
from gitsync.engine.managedfields import Path, fields_of
from gitsync.engine.planner import (
    Policy,
    Settings,
    Step,
    after,
    decide,
    pending,
    plan_app,
    policy_for,
    serving,
    split,
    stamp_of,
    stamped,
    without,
)
from gitsync.model import rollout
from gitsync.model.api import APPLIED_ANNOTATION, Obj
from gitsync.model.render import inputs, render

POLICY = Policy(correct=True, suspended=False, force_managers=("kubectl",), field_manager="gitsync")


def item(path: str, manager: str | None, conflict: bool = False) -> DriftItem:
    return DriftItem(
        object="Deployment/web",
        path=path,
        smd_path=("f:spec", "f:replicas"),
        desired=1,
        live=2,
        manager=manager,
        operation="Update" if manager else None,
        conflict=conflict,
    )


def test_stamp_follows_the_desired_state_and_keeps_user_annotations() -> None:
    annotations = {"team": "a"}
    body: dict[str, Any] = {
        "metadata": {"name": "web", "annotations": annotations},
        "spec": {"replicas": 1},
    }
    one, same = stamped(body), stamped({**body})
    other = stamped({**body, "spec": {"replicas": 2}})
    stamp = one["metadata"]["annotations"][APPLIED_ANNOTATION]
    assert stamp.startswith("sha256:") and len(stamp) == len("sha256:") + 16
    assert same["metadata"]["annotations"][APPLIED_ANNOTATION] == stamp
    assert other["metadata"]["annotations"][APPLIED_ANNOTATION] != stamp
    assert one["metadata"]["annotations"]["team"] == "a"
    assert APPLIED_ANNOTATION not in annotations  # not mutated


def test_when_desired_moved_our_fields_are_applied_and_others_are_drift() -> None:
    ours, foreign = split(
        [item("spec.replicas", "gitsync"), item("spec.x", "kubectl")], POLICY, moved=True
    )
    assert [i.path for i in ours] == ["spec.replicas"]
    assert [(i.path, i.manager) for i in foreign] == [("spec.x", "kubectl")]


def test_when_nothing_moved_a_difference_under_our_name_is_drift_by_someone_unknown() -> None:
    ours, foreign = split(
        [item("spec.env", "gitsync"), item("spec.replicas", "hpa", conflict=True)],
        POLICY,
        moved=False,
    )
    assert ours == []
    assert [(i.path, i.manager, i.conflict) for i in foreign] == [
        ("spec.env", None, False),
        ("spec.replicas", "hpa", True),
    ]


def test_without_removes_fields_and_keyed_items_only() -> None:
    body = {
        "spec": {
            "replicas": 3,
            "template": {"spec": {"containers": [{"name": "app", "image": "x", "env": [1]}]}},
        }
    }
    out = without(
        body,
        [
            ("f:spec", "f:replicas"),
            ("f:spec", "f:template", "f:spec", "f:containers", 'k:{"name":"app"}', "f:env"),
            ("f:spec", "f:missing", "f:deeper"),
        ],
    )
    assert out == {"spec": {"template": {"spec": {"containers": [{"name": "app", "image": "x"}]}}}}
    assert body["spec"]["replicas"] == 3  # the input is left alone


# --- decide, and the changes diff shows: one table, as a sync would meet them ---------

APP: Obj = {
    "apiVersion": "apps.example.com/v1",
    "kind": "MyApp",
    "metadata": {"name": "web", "namespace": "shop", "uid": "u-1"},
    "spec": {"image": "nginx:1.27", "replicas": 1},
}
REPLICAS = ("f:spec", "f:replicas")


def fields_v1(paths: set[Path]) -> Obj:
    """The FieldsV1 encoding of a path set: a member with members below it is ``.``."""
    out: Obj = {}
    for path in sorted(paths, key=len, reverse=True):
        node = out
        for element in path:
            node = node.setdefault(element, {})
        if node:
            node["."] = {}
    return out


def applied(desired: Obj, **edits: Any) -> Obj:
    """``desired`` as the server holds it after gitsync applied it, then changed by
    others: ``edits`` maps a manager (``kubectl-scale``, ``hpa`` for an Update of the
    scale subresource) to the replicas it set."""
    live = copy.deepcopy(stamped(desired))
    ours = fields_of(live)
    entries = []
    for manager, replicas in edits.items():
        live["spec"]["replicas"] = replicas
        ours.discard(REPLICAS)  # an Update takes the field from every other manager
        entry = {"manager": manager, "operation": "Update", "fieldsV1": fields_v1({REPLICAS})}
        entries.append({**entry, "subresource": "scale"} if manager == "hpa" else entry)
    live["metadata"]["managedFields"] = [
        {"manager": "gitsync", "operation": "Apply", "fieldsV1": fields_v1(ours)},
        *entries,
    ]
    return live


def dep(**spec: Any) -> Obj:
    return render({**APP, "spec": {**APP["spec"], **spec}})


def policy(correct: bool = True, suspended: bool = False) -> Policy:
    return Policy(correct, suspended, ("kubectl",), "gitsync")


IMAGE = "spec.template.spec.containers[name=app].image"
DECISIONS: list[Any] = [
    pytest.param(dep(), applied(dep()), policy(), "unchanged", [], None, id="nothing moved"),
    pytest.param(dep(), None, policy(), "created", [], None, id="new"),
    pytest.param(dep(), None, policy(suspended=True), "unchanged", [], None, id="suspended: none"),
    pytest.param(
        dep(image="nginx:1.28"),
        applied(dep()),
        policy(),
        "configured",
        [],
        [IMAGE],
        id="image bump in Git",
    ),
    pytest.param(
        dep(),
        applied(dep(), hpa=4),
        policy(),
        "unchanged",
        [("conflict", "spec.replicas")],
        None,
        id="replicas owned by an HPA",
    ),
    pytest.param(
        dep(image="nginx:1.28"),
        applied(dep(), hpa=4),
        policy(),
        "configured",
        [("conflict", "spec.replicas")],
        [IMAGE],
        id="image bump, replicas owned by an HPA",
    ),
    pytest.param(
        dep(),
        applied(dep(), **{"kubectl-scale": 3}),
        policy(correct=False),
        "unchanged",
        [("drifted", "spec.replicas")],
        None,
        id="kubectl scale under report",
    ),
    pytest.param(
        dep(),
        applied(dep(), **{"kubectl-scale": 3}),
        policy(),
        "configured",
        [],
        ["spec.replicas"],
        id="kubectl scale under correct",
    ),
    pytest.param(
        dep(image="nginx:1.28"),
        applied(dep(), **{"kubectl-scale": 3}),
        policy(suspended=True),
        "unchanged",
        [("drifted", "spec.replicas")],
        None,
        id="suspended: Git change held, drift shown",
    ),
]


@pytest.mark.parametrize(("desired", "live", "p", "action", "findings", "written"), DECISIONS)
def test_decide_writes_only_what_sync_may_and_shows_the_rest_as_such(
    desired: Obj,
    live: Obj | None,
    p: Policy,
    action: str,
    findings: list[tuple[str, str]],
    written: list[str] | None,
) -> None:
    step = decide("Deployment/web", desired, live, p)
    assert step.action == action
    assert (step.body is not None) == (action != "unchanged")
    changes = changes_of(step)
    assert changes[0].action == action
    assert [(c.action, p) for c in changes[1:] for p in c.paths] == findings
    if written is not None:
        assert list(changes[0].paths) == written
    if step.body is not None:
        # what is left to others is not in the body: gitsync gives up its claim
        assert ("spec.replicas" in [f[1] for f in findings]) == (
            "replicas" not in step.body["spec"]
        )
        assert step.force == bool(step.corrected)
    # Git moved (the image here) ⇒ the stamp moves: no dry-run need confirm the write;
    # drift taken back under the same stamp is confirmed first
    assert step.moved == (IMAGE in (written or []))


def test_suspend_holds_git_changes_back_as_unchanged_with_the_paths_shown() -> None:
    step = decide("Deployment/web", dep(image="nginx:1.28"), applied(dep()), policy(suspended=True))
    [change] = changes_of(step)
    assert (change.action, change.paths) == ("unchanged", (IMAGE,))
    assert change.diff[0].old == "nginx:1.27" and change.diff[0].new == "nginx:1.28"
    assert change.reason.startswith("suspended") and not change.writes
    assert change.hold == "suspend" and change.to_json()["hold"] == "suspend"


def test_changeset_exit_rule_counts_writes_only() -> None:
    hpa = plan({}, {}, {})
    hpa.changes.extend(changes_of(decide("Deployment/web", dep(), applied(dep(), hpa=4), policy())))
    assert (
        not hpa.writes
        and hpa.summary() == "0 created, 0 configured, 1 unchanged, 0 pruned; 1 conflict"
    )
    live = {"shop/web": applied(APP)}
    gone = plan({}, live, {}, plan_prune({}, live, PruneGuard(allow_empty=True, max_fraction=1)))
    assert gone.writes and [c.to_json() for c in gone.changes] == [
        {
            "object": "MyApp/shop/web",
            "action": "pruned",
            "changes": [],
            "reason": "removed from Git",
        }
    ]
    assert "managedFields" not in (gone.changes[0].live or {})["metadata"]


def test_the_deployment_is_planned_from_the_myapp_as_it_will_be() -> None:
    git = {**APP, "spec": {"image": "nginx:1.28", "replicas": 2}}
    live_app = applied({**APP, "spec": {**APP["spec"], "port": 80}})
    # Git dropped the port gitsync alone had set: the apply removes it, so the
    # Deployment loses its container port too
    app, deployment = plan_app(git, live_app, applied(dep(port=80)), Settings())
    assert app.action == deployment.action == "configured"
    assert after(app)["spec"] == {"image": "nginx:1.28", "replicas": 2}
    assert set(changes_of(deployment)[0].paths) == {
        IMAGE,
        "spec.replicas",
        # its only port gone, the apply removes the ports field itself
        "spec.template.spec.containers[name=app].ports",
    }


def test_a_field_someone_else_set_on_the_myapp_stays_in_the_rendered_deployment() -> None:
    live_app = applied(APP)
    live_app["spec"]["port"] = 80
    live_app["metadata"]["managedFields"].append(
        {"manager": "kubectl-edit", "operation": "Update", "fieldsV1": {"f:spec": {"f:port": {}}}}
    )
    git = {**APP, "spec": {**APP["spec"], "image": "nginx:1.28"}}
    app, _ = plan_app(git, live_app, None, Settings())
    assert after(app)["spec"] == {"image": "nginx:1.28", "replicas": 1, "port": 80}


def envs(*names: str) -> list[Obj]:
    return [{"name": n, "value": n.lower()} for n in names]


# (live order, body order, order after the apply): structured-merge-diff's merge of
# an associative list, held against the real server by tests/integration/test_plan.py
# (test_the_env_order_after_an_apply_is_the_servers)
KEYED_MERGES: list[Any] = [
    pytest.param("BA", "A", "BA", id="another manager's item first stays first"),
    pytest.param("AB", "A", "AB", id="another manager's item last stays last"),
    pytest.param("A", "AC", "AC", id="a new item goes after the shared one"),
    pytest.param("BA", "AC", "BAC", id="new after shared, foreign before stays"),
    pytest.param("AB", "CA", "CAB", id="a new item first goes before the shared one"),
    pytest.param("AB", "BA", "BA", id="our items in our new order"),
    pytest.param("AXB", "BA", "XBA", id="a shared item moves to its turn in the body"),
    pytest.param("XAY", "A", "XAY", id="foreign items on both sides keep their places"),
    pytest.param("", "AB", "AB", id="nothing live"),
    pytest.param("XY", "", "XY", id="nothing sent"),
]


@pytest.mark.parametrize(("live", "body", "merged"), KEYED_MERGES)
def test_a_keyed_list_is_merged_in_the_servers_order(live: str, body: str, merged: str) -> None:
    live_app = {**APP, "spec": {**APP["spec"], "env": envs(*live)}}
    body_app = {**APP, "spec": {**APP["spec"], "env": envs(*body), "driftPolicy": "report"}}
    step = Step("MyApp/shop/web", "configured", live_app, body_app, body=body_app)
    got = after(step)["spec"]
    assert [e["name"] for e in got["env"]] == list(merged)
    assert got["driftPolicy"] == "report"


def pod(containers: list[Obj]) -> Obj:
    # where a Deployment's containers are: lists are keyed by their position, not name
    return {"spec": {"template": {"spec": {"containers": containers}}}}


def test_a_keyed_item_merges_its_fields_and_its_own_keyed_lists() -> None:
    live = pod([{"name": "x"}, {"name": "app", "image": "a", "env": envs("B", "A")}])
    body = pod([{"name": "app", "image": "b", "env": envs("A", "C")}])
    step = Step("Deployment/shop/web", "configured", live, body, body=body)
    containers = after(step)["spec"]["template"]["spec"]["containers"]
    assert [c["name"] for c in containers] == ["x", "app"]
    assert containers[1]["image"] == "b"
    assert [e["name"] for e in containers[1]["env"]] == ["B", "A", "C"]


def test_a_foreign_env_item_first_does_not_make_the_deployment_move() -> None:
    """Another manager put an env item first in the MyApp; Git changes only the
    drift policy: the Deployment rendered from the MyApp after the apply is the live
    one, env order and all, so nothing is written to it."""
    git = {**APP, "spec": {**APP["spec"], "env": envs("A")}}
    live_app = applied(git)
    live_app["spec"]["env"] = envs("B", "A")
    live_app["metadata"]["managedFields"].append(
        {
            "manager": "kubectl-patch",
            "operation": "Update",
            "fieldsV1": {"f:spec": {"f:env": {'k:{"name":"B"}': {".": {}, "f:name": {}}}}},
        }
    )
    live_dep = applied(render(live_app))
    moved = {**git, "spec": {**git["spec"], "driftPolicy": "report"}}
    app, deployment = plan_app(moved, live_app, live_dep, Settings())
    assert app.action == "configured"
    assert [e["name"] for e in after(app)["spec"]["env"]] == ["B", "A"]
    assert deployment.action == "unchanged", changes_of(deployment)


def test_a_new_myapp_plans_its_deployment_unless_suspended() -> None:
    app, deployment = plan_app(APP, None, None, Settings())
    assert (app.action, deployment.action) == ("created", "created")
    held = {**APP, "spec": {**APP["spec"], "suspend": True}}
    app, deployment = plan_app(held, None, None, Settings())
    assert (app.action, deployment.action) == ("created", "unchanged")
    assert deployment.reason == "suspended: not created"


def test_a_field_dropped_from_git_is_removed_though_live_still_holds_every_desired_value() -> None:
    live = applied(dep(port=80))
    step = decide("Deployment/web", dep(), live, policy())
    # the projection of live on desired equals desired: only the stamp says it moved
    assert step.action == "configured" and step.body is not None
    # the only port: the apply removes the ports field with it (as the server does)
    ports = (*("f:spec", "f:template", "f:spec", "f:containers", 'k:{"name":"app"}'), "f:ports")
    assert step.released == (ports,)
    [change] = changes_of(step)
    assert [(c.path, c.old, c.new) for c in change.diff] == [
        (
            "spec.template.spec.containers[name=app].ports",
            [{"containerPort": 80, "protocol": "TCP"}],
            None,
        )
    ]
    text = unified(change.subject, change.live, change.desired, color=False)
    assert [ln for ln in text.splitlines() if "containerPort" in ln] == [
        "-        - containerPort: 80"
    ]
    # and once applied (live carries the new stamp, without the port): nothing to do
    assert decide("Deployment/web", dep(), applied(dep()), policy()).action == "unchanged"


def test_a_myapp_that_cannot_be_rendered_is_failed_not_a_write() -> None:
    broken = {**APP, "spec": {"replicas": 1}}
    changes = plan({"shop/web": broken}, {}, {})
    [change] = changes.changes
    assert (change.subject, change.action) == ("MyApp/shop/web", "failed")
    assert "spec.image is required" in change.reason
    assert changes.failed and not changes.writes and changes.held() == []


def test_the_remembered_stamp_follows_the_body_and_not_a_later_mutation_of_it() -> None:
    body = dep()
    first = stamp_of("Deployment/shop/memo", body)
    assert first == stamped(body)["metadata"]["annotations"][APPLIED_ANNOTATION]
    body["spec"]["replicas"] = 7  # the caller changes its dict after the call
    assert (
        stamp_of("Deployment/shop/memo", body)
        == stamped(body)["metadata"]["annotations"][APPLIED_ANNOTATION]
    )
    assert stamp_of("Deployment/shop/memo", dep()) == first


@pytest.mark.parametrize(
    ("spec", "default", "correct"),
    [
        ({"driftPolicy": "correct"}, "report", True),
        ({"driftPolicy": "report"}, "correct", False),
        ({}, "correct", True),
        ({}, "report", False),
        ({"driftPolicy": None}, "report", False),
    ],
)
def test_policy_for_takes_the_myapps_drift_policy_over_the_default(
    spec: dict[str, object], default: str, correct: bool
) -> None:
    settings = Settings(default_policy=default)  # type: ignore[arg-type]
    p = policy_for({"metadata": {"name": "web"}, "spec": spec}, settings)
    assert p.correct is correct
    assert not p.suspended
    assert (p.force_managers, p.field_manager) == (settings.force_managers, settings.field_manager)


def test_policy_for_suspends_the_deployment_and_never_the_myapps_comparison() -> None:
    app = {"metadata": {"name": "web"}, "spec": {"suspend": True, "driftPolicy": "report"}}
    assert policy_for(app, Settings()).suspended
    assert not policy_for(app, Settings(), suspendable=False).suspended
    assert not policy_for(app, Settings()).correct


# found by tests/integration/test_merge_oracle.py against the real server: when the last
# thing gitsync set in a field goes, the apply removes the field itself, not only the item
def test_the_last_env_item_dropped_from_git_takes_the_env_field_with_it() -> None:
    live = applied({**APP, "spec": {**APP["spec"], "env": envs("A")}})
    step = decide("MyApp/web", APP, live, policy())
    assert step.released == (("f:spec", "f:env"),)
    assert "env" not in after(step)["spec"]  # the server stores no env: [] either


def test_a_container_port_dropped_from_git_takes_the_ports_field_with_it() -> None:
    live = applied(dep(port=80))
    step = decide("Deployment/web", dep(), live, policy())
    app = ("f:spec", "f:template", "f:spec", "f:containers", 'k:{"name":"app"}')
    assert step.released == ((*app, "f:ports"),)
    [container] = after(step)["spec"]["template"]["spec"]["containers"]
    assert "ports" not in container


def test_a_field_another_manager_still_holds_something_in_stays() -> None:
    # gitsync's B goes; kubectl-edit's A keeps the env field (and itself)
    live = applied({**APP, "spec": {**APP["spec"], "env": envs("B")}})
    live["spec"]["env"] = envs("A", "B")
    live["metadata"]["managedFields"].append(
        {
            "manager": "kubectl-edit",
            "operation": "Update",
            "fieldsV1": {"f:spec": {"f:env": {'k:{"name":"A"}': {".": {}, "f:name": {}}}}},
        }
    )
    step = decide("MyApp/web", APP, live, policy())
    assert step.released == (("f:spec", "f:env", 'k:{"name":"B"}'),)
    assert [e["name"] for e in after(step)["spec"]["env"]] == ["A"]


def test_a_resources_map_emptied_by_git_goes_whole() -> None:
    git = {**APP, "spec": {**APP["spec"], "resources": {"requests": {"cpu": "100m"}}}}
    step = decide("MyApp/web", APP, applied(git), policy())
    assert step.released == (("f:spec", "f:resources"),)
    assert "resources" not in after(step)["spec"]


def test_a_containers_resources_emptied_by_git_stays_as_an_empty_struct() -> None:
    """A Deployment container's ``resources`` is a struct in the Go type: the server holds
    ``resources: {}`` after the apply removes the last quantity (seen on the real server,
    tests/integration/test_plan.py), unlike a MyApp's map, which goes whole."""
    live = applied(dep(resources={"requests": {"memory": "512Mi"}}))
    step = decide("Deployment/web", dep(), live, policy())
    container = ("f:spec", "f:template", "f:spec", "f:containers", 'k:{"name":"app"}')
    assert step.released == ((*container, "f:resources", "f:requests"),)
    [held] = after(step)["spec"]["template"]["spec"]["containers"]
    assert held["resources"] == {}


# --- the stamp's text, its memo, and the paths the diff reads and writes -----------------


def test_the_stamp_is_the_same_whatever_the_order_of_the_keys() -> None:
    # a body parsed from YAML, or rebuilt by render, has no fixed key order
    one = {"metadata": {"name": "web"}, "spec": {"replicas": 1, "image": "a"}}
    other = {"spec": {"image": "a", "replicas": 1}, "metadata": {"name": "web"}}
    assert stamped(one) == stamped(other)
    assert stamp_of("Deployment/shop/order-a", one) == stamp_of("Deployment/shop/order-b", other)


def test_the_stamp_memo_is_emptied_when_full(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(planner, "_STAMPS", {})
    monkeypatch.setattr(planner, "_STAMPS_MAX", 2)
    stamp_of("Deployment/shop/a", dep())
    stamp_of("Deployment/shop/b", dep())
    assert set(planner._STAMPS) == {"Deployment/shop/a", "Deployment/shop/b"}
    # full: the next object starts a new memo rather than growing it past its bound
    stamp_of("Deployment/shop/c", dep())
    assert set(planner._STAMPS) == {"Deployment/shop/c"}


def counted_digests(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """An empty memo, and the texts hashed from now on."""
    monkeypatch.setattr(planner, "_STAMPS", {})
    hashed: list[str] = []
    real = planner._digest

    def digest(text: str) -> str:
        hashed.append(text)
        return real(text)

    monkeypatch.setattr(planner, "_digest", digest)
    return hashed


def test_a_stamp_made_from_a_source_is_known_by_it_and_no_copy_is_held(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    who = "Deployment/shop/web"
    app = copy.deepcopy(APP)
    expected = stamped(render(app))["metadata"]["annotations"][APPLIED_ANNOTATION]
    hashed = counted_digests(monkeypatch)
    source = inputs(app)
    assert stamp_of(who, render(app), source) == expected
    assert planner._STAMPS[who][0] is source  # the source itself, not a copy of its rendering
    assert stamp_of(who, render(app), inputs(app)) == expected
    assert len(hashed) == 1  # equal inputs: known by them, not hashed again
    # a later version of the MyApp that shares its spec (as a cached one does): known,
    # and its parts held from now on
    later = {**app, "metadata": {**app["metadata"], "resourceVersion": "2"}}
    assert stamp_of(who, render(later), inputs(later)) == expected
    assert len(hashed) == 1 and planner._STAMPS[who][0] == inputs(later)
    # other inputs: another stamp, hashed
    moved = {**app, "spec": {**app["spec"], "replicas": 3}}
    other = stamp_of(who, render(moved), inputs(moved))
    assert other != expected and len(hashed) == 2
    recreated = {**app, "metadata": {**app["metadata"], "uid": "u-2"}}
    assert stamp_of(who, render(recreated), inputs(recreated)) not in (expected, other)
    assert len(hashed) == 3
    # without a source, desired is known by ==, and the memo holds a copy of it
    body = render(app)
    assert stamp_of(who, body) == expected
    assert len(hashed) == 4
    assert planner._STAMPS[who][0] == body and planner._STAMPS[who][0] is not body
    assert stamp_of(who, render(app)) == expected
    assert len(hashed) == 4 and planner._STAMPS[who][0] == body  # the copy stays
    # then given a source: known, and the copy gives way to it
    source = inputs(app)
    assert stamp_of(who, render(app), source) == expected
    assert len(hashed) == 5  # a dict is not the inputs' tuple
    myapp_body = copy.deepcopy(APP)
    assert stamp_of("MyApp/shop/web", myapp_body) == stamp_of(
        "MyApp/shop/web", myapp_body, myapp_body
    )
    assert len(hashed) == 6 and planner._STAMPS["MyApp/shop/web"][0] is myapp_body


def test_a_planned_myapp_and_its_deployment_are_remembered_by_what_they_are_made_from(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    counted_digests(monkeypatch)
    git = copy.deepcopy(APP)
    live_app = applied(git)
    live_dep = applied(render(live_app))
    assert not pending(git, live_app)  # as the gate asks first: the memo holds a copy
    app, deployment = plan_app(git, live_app, live_dep, Settings())
    assert app.action == deployment.action == "unchanged"
    # Git's body, and what the Deployment is rendered from: parts of the live MyApp
    assert planner._STAMPS["MyApp/shop/web"][0] is git
    kept = planner._STAMPS["Deployment/shop/web"][0]
    assert kept == inputs(live_app) and isinstance(kept, tuple)
    assert kept[3] is live_app["spec"]
    # a change of the MyApp: the Deployment is rendered from the MyApp after the write,
    # made anew by each plan, so the memo keeps a copy of its rendering
    moved = {**git, "spec": {**git["spec"], "replicas": 3}}
    app, deployment = plan_app(moved, live_app, live_dep, Settings())
    assert app.action == deployment.action == "configured"
    assert planner._STAMPS["MyApp/shop/web"][0] is moved
    kept = planner._STAMPS["Deployment/shop/web"][0]
    assert isinstance(kept, dict) and kept["kind"] == "Deployment"
    assert kept["spec"]["replicas"] == 3
    # a spec a rollback holds to is made anew by each plan: the memo keeps a copy of it
    broken = {**git, "spec": {"image": "nginx:broken", "replicas": 1}}
    live_app = rolled_back_from(broken["spec"], APP["spec"])
    record = held_back(broken["spec"], APP["spec"])
    app, _ = plan_app(broken, live_app, live_dep, AUTO, record=record)
    assert app.hold == "rollback"
    kept = planner._STAMPS["MyApp/shop/web"][0]
    assert kept is not broken and isinstance(kept, dict)
    assert kept["spec"] == APP["spec"]


def test_an_object_without_a_namespace_is_named_without_one() -> None:
    desired = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}}
    assert decide("Namespace/shop", desired, None, policy()).subject == "Namespace/shop"
    assert decide("Namespace/shop", desired, stamped(desired), policy()).subject == (
        "Namespace/shop"
    )
    # no name either: the subject says so rather than make one up
    assert decide("Namespace", {"kind": "Namespace"}, None, policy()).subject == "Namespace/"


CONTAINER = ("f:spec", "f:template", "f:spec", "f:containers", 'k:{"name":"app"}')
VALUES_AT: list[Any] = [
    pytest.param(REPLICAS, 1, id="a field"),
    pytest.param((*CONTAINER, "f:image"), "nginx:1.27", id="a field of a keyed item"),
    pytest.param(CONTAINER[:-1], [{"name": "app", "image": "nginx:1.27"}], id="a list"),
    pytest.param((*CONTAINER[:-1], 'k:{"name":"other"}'), None, id="no such item"),
    pytest.param(("f:spec", "f:missing", "f:deeper"), None, id="no such field"),
    pytest.param(("f:spec", "f:replicas", "f:deeper"), None, id="below a scalar"),
    pytest.param((*CONTAINER[:-1], "f:name"), None, id="a field element on a list"),
    pytest.param(("f:spec", 'k:{"name":"app"}'), None, id="an item element on a map"),
]


@pytest.mark.parametrize(("path", "value"), VALUES_AT)
def test_value_at_reads_fields_and_keyed_items(path: Path, value: Any) -> None:
    obj = {
        "spec": {
            "replicas": 1,
            "template": {"spec": {"containers": [{"name": "app", "image": "nginx:1.27"}]}},
        }
    }
    assert planner.value_at(obj, path) == value


PUTS: list[Any] = [
    pytest.param({}, REPLICAS, 2, {"spec": {"replicas": 2}}, id="the maps on the way made"),
    pytest.param({"spec": {"replicas": 1}}, REPLICAS, 2, {"spec": {"replicas": 2}}, id="replaced"),
    pytest.param(
        {},
        (*CONTAINER, "f:image"),
        "a",
        pod([{"name": "app", "image": "a"}]),
        id="a keyed item made with its key",
    ),
    pytest.param(
        pod([{"name": "x"}, {"name": "app", "image": "a"}]),
        (*CONTAINER, "f:image"),
        "b",
        pod([{"name": "x"}, {"name": "app", "image": "b"}]),
        id="the matching item's field set",
    ),
    pytest.param(
        pod([{"name": "x"}, {"name": "app", "image": "a"}]),
        CONTAINER,
        {"name": "app", "image": "c"},
        pod([{"name": "x"}, {"name": "app", "image": "c"}]),
        id="a whole item replaced in its place",
    ),
    pytest.param(
        pod([{"name": "x"}]),
        CONTAINER,
        {"name": "app"},
        pod([{"name": "x"}, {"name": "app"}]),
        id="a whole item added after the others",
    ),
    pytest.param(
        {"spec": {"replicas": 1}},
        ("f:spec", "f:replicas", "f:deeper"),
        2,
        {"spec": {"replicas": 1}},
        id="nothing below a scalar",
    ),
    pytest.param(
        {"spec": {"env": []}},
        ("f:spec", "f:env", "f:name"),
        2,
        {"spec": {"env": []}},
        id="no field element on a list",
    ),
    pytest.param(
        {"spec": {"replicas": 1}},
        ("f:spec", "i:0", "f:replicas"),
        2,
        {"spec": {"replicas": 1}},
        id="an element of another kind stops the walk",
    ),
]


@pytest.mark.parametrize(("obj", "path", "value", "expected"), PUTS)
def test_put_sets_a_value_making_what_is_missing_on_the_way(
    obj: Obj, path: Path, value: Any, expected: Obj
) -> None:
    planner.put(obj, path, value)
    assert obj == expected


@pytest.mark.parametrize(("desired", "live", "p", "action", "findings", "written"), DECISIONS)
def test_only_suspend_gives_a_decision_a_reason(
    desired: Obj,
    live: Obj | None,
    p: Policy,
    action: str,
    findings: list[tuple[str, str]],
    written: list[str] | None,
) -> None:
    step = decide("Deployment/web", desired, live, p)
    assert step.reason.startswith("suspended") == p.suspended
    if not p.suspended:
        assert step.reason == ""


def without_keyless_sidecar() -> tuple[Obj, Obj]:
    # a container without its key (name) in desired: no item of the keyed list, so no
    # difference drift_items can name (the server refuses such a body anyway), though
    # live lacks it and the projection differs
    desired = dep()
    desired["spec"]["template"]["spec"]["containers"].append({"image": "sidecar:1"})
    live = applied(desired)
    del live["spec"]["template"]["spec"]["containers"][1]
    return desired, live


def in_the_servers_form() -> tuple[Obj, Obj]:
    # Git says 0.5, the server stores 500m: the same CPU
    desired = dep(resources={"requests": {"cpu": "0.5"}})
    live = applied(desired)
    live["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "500m"
    return desired, live


NO_CHANGE: list[Any] = [
    pytest.param(*without_keyless_sidecar(), id="an item without its key"),
    pytest.param(*in_the_servers_form(), id="a quantity in the server's form"),
]


@pytest.mark.parametrize(("desired", "live"), NO_CHANGE)
@pytest.mark.parametrize("suspended", [False, True])
def test_what_no_drift_item_names_is_no_change_even_under_suspend(
    desired: Obj, live: Obj, suspended: bool
) -> None:
    # nothing to write or hold, and no "suspended" reason for a step that holds nothing
    step = decide("Deployment/web", desired, live, policy(suspended=suspended))
    assert (step.action, step.body, step.held, step.drift, step.reason) == (
        "unchanged",
        None,
        (),
        (),
        "",
    )


ENV = ("f:spec", "f:env")
WITHOUTS: list[Any] = [
    pytest.param(
        {"spec": {"replicas": 1}}, ("f:spec", "f:replicas", "f:deeper"), None, id="below a scalar"
    ),
    pytest.param(
        {"spec": {"replicas": 1}},
        ("f:spec", "f:replicas", 'k:{"name":"A"}'),
        None,
        id="an item below a scalar",
    ),
    pytest.param(
        {"spec": {"replicas": 1}},
        ("f:spec", "i:0", "f:replicas"),
        None,
        id="an element of another kind stops the walk",
    ),
    pytest.param(
        {"spec": {"env": ["x", {"name": "A"}]}},
        (*ENV, 'k:{"name":"A"}'),
        {"spec": {"env": ["x"]}},
        id="an item that is no map matches no key",
    ),
    pytest.param({"spec": {"env": envs("A")}}, (*ENV, 'k:{"name":"B"}'), None, id="no such item"),
    pytest.param(
        {"spec": {"env": envs("A")}},
        (*ENV, 'k:{"name":"B"}', "f:value"),
        None,
        id="a field of no such item",
    ),
    pytest.param(
        {"spec": {"env": envs("A", "B")}},
        (*ENV, 'k:{"name":"B"}', "f:value"),
        {"spec": {"env": [*envs("A"), {"name": "B"}]}},
        id="a field of the matching item",
    ),
    pytest.param(
        {"spec": {"ports": [{"port": 80, "protocol": "UDP"}, {"port": 80, "protocol": "TCP"}]}},
        ("f:spec", "f:ports", 'k:{"port":80,"protocol":"TCP"}'),
        {"spec": {"ports": [{"port": 80, "protocol": "UDP"}]}},
        id="an item matched by every field of its key",
    ),
]


@pytest.mark.parametrize(("obj", "path", "expected"), WITHOUTS)
def test_without_removes_what_the_path_names_and_nothing_else(
    obj: Obj, path: Path, expected: Obj | None
) -> None:
    before = copy.deepcopy(obj)
    assert without(obj, [path]) == (before if expected is None else expected)
    assert obj == before


def cm(**data: str) -> Obj:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": data}


def entry(manager: str, paths: set[Path], operation: str = "Apply", **extra: str) -> Obj:
    return {"manager": manager, "operation": operation, "fieldsV1": fields_v1(paths), **extra}


DATA_A, DATA_B = ("f:data", "f:a"), ("f:data", "f:b")
STATUS = ("f:status", "f:phase")
# (live and who set what in it, the body applied now, the paths the apply removes)
RELEASES: list[Any] = [
    pytest.param(
        {**cm(a="1", b="2"), "managedFields": [entry("gitsync", {DATA_A, DATA_B})]},
        {**cm(), "data": None},
        [("f:data",)],
        id="a top-level map Git dropped goes whole, not key by key",
    ),
    pytest.param(
        {
            **cm(a="1", b="2"),
            "managedFields": [entry("gitsync", {DATA_A, DATA_B}), entry("helm", {DATA_A})],
        },
        {**cm(), "data": None},
        [DATA_B],
        id="what another manager's Apply holds stays",
    ),
    pytest.param(
        {**cm(a="1"), "managedFields": [entry("gitsync", {DATA_A, DATA_B})]},
        cm(a="1"),
        [],
        id="what is no longer live is not removed again",
    ),
    pytest.param(
        {
            **cm(),
            "spec": {"env": envs("A")},
            "managedFields": [
                entry("gitsync", {(*ENV, 'k:{"name":"A"}'), (*ENV, 'k:{"name":"B"}')})
            ],
        },
        {**cm(), "spec": {"env": envs("A")}},
        [],
        id="an item no longer live is not removed again",
    ),
    pytest.param(
        {
            **cm(),
            "spec": {"v": [{"x": 1}]},
            "managedFields": [entry("gitsync", {("f:spec", "f:v", "f:a")})],
        },
        {**cm(), "spec": {}},
        [("f:spec", "f:v")],
        id="a map of ours made a list by hand goes whole",
    ),
    pytest.param(
        {**cm(a="1"), "managedFields": [entry("gitsync", {DATA_A}, "Update")]},
        {**cm(), "data": None},
        [],
        id="gitsync's Update is no apply to prune by",
    ),
    pytest.param(
        {
            **cm(a="1"),
            "status": {"phase": "Ready"},
            "managedFields": [entry("gitsync", {STATUS}, subresource="status")],
        },
        cm(a="1"),
        [],
        id="the status gitsync writes is no part of the body",
    ),
]


@pytest.mark.parametrize(("live", "body", "gone"), RELEASES)
def test_released_is_what_the_apply_prunes(live: Obj, body: Obj, gone: list[Path]) -> None:
    managed = live.pop("managedFields")
    live["metadata"] = {**live["metadata"], "managedFields": managed}
    body = {k: v for k, v in body.items() if v is not None}
    assert list(planner.released(live, body, "gitsync")) == gone


def test_after_a_create_is_the_body_sent_with_a_uid_still_to_be_assigned() -> None:
    created = decide("MyApp/web", APP, None, policy())
    held = decide("MyApp/web", APP, None, policy(suspended=True))
    unchanged = decide("MyApp/web", APP, applied(APP), policy())
    sent = created.body
    assert sent is not None and APPLIED_ANNOTATION in sent["metadata"]["annotations"]
    uid = {"uid": planner.UID_TO_BE_ASSIGNED}
    assert after(created) == {**sent, "metadata": {**sent["metadata"], **uid}}
    # nothing is sent: what Git says, as it would be created
    assert after(held) == {**APP, "metadata": {**APP["metadata"], **uid}}
    assert after(unchanged) is unchanged.live


# (live, body, after the apply): what the server keeps of live where the body is not a
# keyed list merged item by item
MERGES: list[Any] = [
    pytest.param(
        {"args": ["a", "b"], "x": 1}, {"args": ["c"]}, {"args": ["c"], "x": 1}, id="an atomic list"
    ),
    pytest.param({"v": {"a": 1}}, {"v": "s"}, {"v": "s"}, id="a map replaced by a scalar"),
    pytest.param({"v": "s"}, {"v": {"a": 1}}, {"v": {"a": 1}}, id="a scalar replaced by a map"),
    pytest.param({"v": [1]}, {"v": {"a": 1}}, {"v": {"a": 1}}, id="a list replaced by a map"),
]


@pytest.mark.parametrize(("live", "body", "merged"), MERGES)
def test_after_merges_maps_and_replaces_everything_else(live: Obj, body: Obj, merged: Obj) -> None:
    live_obj, body_obj = {"kind": "X", "spec": live}, {"kind": "X", "spec": body}
    step = Step("X/x", "configured", live_obj, body_obj, body=body_obj)
    assert after(step) == {"kind": "X", "spec": merged}


def rolled_back_from(git_spec: Obj, healthy: Obj) -> Obj:
    """A live MyApp that runs ``healthy`` because a rollback holds ``git_spec`` back, its
    status saying so (:func:`held_back`: gitsync's record of it)."""
    live = applied({**APP, "spec": healthy})
    record = held_back(git_spec, healthy)
    assert record.healthy is not None and record.rollback is not None
    live["status"] = {
        "lastHealthy": record.healthy.to_status(),
        "rollback": record.rollback.to_status(),
    }
    return live


def held_back(git_spec: Obj, healthy: Obj) -> rollout.Record:
    """gitsync's record of a rollback that holds ``git_spec`` back for ``healthy``."""
    return rollout.Record(
        rollout.Healthy("main@sha1:good", rollout.digest(healthy), healthy),
        rollout.Rollback(
            "main@sha1:bad", "main@sha1:good", "timed out", "t", rollout.digest(git_spec)
        ),
    )


AUTO = Settings(rollback="auto")


def test_a_rollback_in_force_shows_gits_spec_as_held_and_plans_the_healthy_one() -> None:
    broken = {"image": "nginx:broken", "replicas": 1}
    live_app = rolled_back_from(broken, APP["spec"])
    record = held_back(broken, APP["spec"])
    git = {**APP, "spec": broken}
    app, deployment = plan_app(git, live_app, applied(dep()), AUTO, record=record)
    assert (app.action, deployment.action) == ("unchanged", "unchanged")
    [change] = changes_of(app)
    assert change.paths == ("spec.image",) and not change.writes
    assert (change.diff[0].old, change.diff[0].new) == ("nginx:1.27", "nginx:broken")
    assert change.reason == "rolled back from main@sha1:bad: 1 change from Git held back"
    assert change.hold == "rollback"
    # what the live status says of a rollback holds nothing back: only gitsync's record
    app, deployment = plan_app(git, live_app, applied(dep()), AUTO)
    assert (app.action, deployment.action, app.hold) == ("configured", "configured", "")
    # nor does the record where the policy is not auto
    app, _ = plan_app(git, live_app, applied(dep()), Settings(), record=record)
    assert (app.action, app.hold) == ("configured", "")


def test_a_myapp_no_rollback_holds_is_held_by_nothing() -> None:
    app, _ = plan_app(APP, applied(APP), applied(dep()), Settings())
    assert (app.action, app.reason, app.hold, app.held) == ("unchanged", "", "", ())
    assert changes_of(app)[0].to_json() == {
        "object": "MyApp/shop/web",
        "action": "unchanged",
        "changes": [],
    }


def test_a_commit_that_changes_the_held_apps_spec_is_planned_as_usual() -> None:
    broken = {"image": "nginx:broken", "replicas": 1}
    live_app = rolled_back_from(broken, APP["spec"])
    fixed = {**APP, "spec": {"image": "nginx:1.28", "replicas": 1}}
    record = held_back(broken, APP["spec"])
    app, deployment = plan_app(fixed, live_app, applied(dep()), AUTO, record=record)
    assert (app.action, deployment.action) == ("configured", "configured")
    assert after(app)["spec"]["image"] == "nginx:1.28" and not app.reason
    assert IMAGE in changes_of(deployment)[0].paths


def test_pending_is_a_change_not_applied_yet_and_never_drift() -> None:
    app = {**APP, "spec": {"image": "nginx:1.28", "replicas": 1}}
    assert pending(app, None)  # not created yet
    assert not pending(app, applied(app))  # live carries the stamp of this very body
    assert not pending(app, applied(app, **{"kubectl-scale": 5}))  # drift is no change
    assert pending(app, applied(APP))  # another desired state's stamp
    unstamped = copy.deepcopy(applied(app))
    del unstamped["metadata"]["annotations"][APPLIED_ANNOTATION]
    assert pending(app, unstamped)  # applied by something else: Git's change is not in


def test_serving_is_git_unless_a_rollback_holds_its_spec_back() -> None:
    broken = {**APP, "spec": {"image": "nginx:broken", "replicas": 1}}
    record = held_back(broken["spec"], APP["spec"])
    assert serving(broken, None, "auto") is broken
    assert serving(broken, rollout.Record(), "auto") is broken
    assert serving(broken, record, "auto") == {**broken, "spec": APP["spec"]}
    assert serving(broken, record, "off") is broken
    # a commit that changes the spec is served as Git has it
    fixed = {**APP, "spec": {"image": "nginx:1.28", "replicas": 1}}
    assert serving(fixed, record, "auto") is fixed


def test_plan_app_corrects_drift_unless_told_the_window_is_frozen() -> None:
    live_dep = applied(dep(), **{"kubectl-scale": 5})
    _, corrected = plan_app(APP, applied(APP), live_dep, Settings())
    assert corrected.action == "configured" and corrected.force
    _, reported = plan_app(APP, applied(APP), live_dep, Settings(), frozen=True)
    assert reported.action == "unchanged" and [d.path for d in reported.drift] == ["spec.replicas"]
