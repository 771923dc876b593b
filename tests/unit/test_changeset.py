"""The one change set: the prune plan both ``sync`` and ``diff`` carry, its summary, and
what the sync state ConfigMap records of it."""

from __future__ import annotations

from typing import Any

import pytest

from gitsync.engine.changeset import (
    Change,
    ChangeSet,
    PruneGuard,
    changes_of,
    plan,
    plan_prune,
)
from gitsync.engine.drift import DriftItem
from gitsync.engine.planner import Decision, Step
from gitsync.gitops.sync_state import SyncState, state_of
from gitsync.model.api import Obj


def live(name: str) -> Obj:
    meta = {"namespace": "shop", "name": name, "uid": f"uid-{name}", "resourceVersion": "7"}
    return {"apiVersion": "apps.example.com/v1", "kind": "MyApp", "metadata": meta}


TRACKED = {f"shop/{n}": live(n) for n in ("a", "b", "c")}


def test_the_prune_plan_is_one_pruned_change_per_myapp_that_left_git() -> None:
    planned = plan_prune({"shop/a", "shop/b"}, TRACKED)
    assert [(c.subject, c.action) for c in planned.changes] == [("MyApp/shop/c", "pruned")]
    assert planned.prune_skipped is None
    # shown as what is deleted: the live object without what the server adds
    gone = planned.changes[0].live
    assert gone is not None and "resourceVersion" not in gone["metadata"]


def test_a_guard_that_refuses_prunes_nothing_and_says_why() -> None:
    planned = plan_prune({"shop/a"}, TRACKED)  # 2 of 3 would go: over the default half
    assert planned.changes == []
    assert planned.prune_skipped is not None and "2 of 3" in planned.prune_skipped
    broken = plan_prune({"shop/a", "shop/b"}, TRACKED, manifests_ok=False)
    assert broken.changes == [] and broken.prune_skipped is not None


def test_a_guard_that_holds_nothing_back_is_no_news() -> None:
    # --no-prune with nothing that left Git: the guard refused nothing that mattered
    planned = plan_prune(set(TRACKED), TRACKED, PruneGuard(enabled=False))
    assert planned.changes == [] and planned.prune_skipped is None


def test_the_plan_carries_the_prune_plan_and_its_skip() -> None:
    skipped = plan({}, TRACKED, {}, plan_prune({"shop/a"}, TRACKED))
    assert skipped.prune_skipped is not None and not skipped.writes
    pruning = plan({}, TRACKED, {}, plan_prune({"shop/a", "shop/b"}, TRACKED))
    assert pruning.writes and pruning.count("pruned") == 1


def test_the_summary_counts_errors_of_the_pass_as_failures() -> None:
    pass_ = ChangeSet(
        [Change("MyApp/shop/a", "created"), Change("MyApp/shop/b", "failed", reason="x")],
        errors=["apps/bad.yaml: line 3: not YAML"],
    )
    assert not pass_.ok and pass_.failures() == 2
    assert pass_.summary() == "1 created, 0 configured, 0 unchanged, 0 pruned; 2 failed"


def test_a_held_change_is_counted_apart_from_the_unchanged() -> None:
    why = "waiting for MyApp/shop/db (Progressing)"
    pass_ = ChangeSet(
        [
            Change("MyApp/shop/db", "created"),
            Change("MyApp/shop/app", "unchanged", reason=why, hold="dependency"),
            Change("MyApp/shop/web", "unchanged", reason="suspended", hold="suspend"),
            Change("MyApp/shop/api", "unchanged"),
        ]
    )
    assert pass_.counts() == {"created": 1, "held": 2, "unchanged": 1}
    assert pass_.summary() == "1 created, 0 configured, 1 unchanged, 0 pruned; 2 held"
    # what a one-shot sync leaves undone: the wait for a dependency, not a hold on purpose
    assert [c.subject for c in pass_.waiting()] == ["MyApp/shop/app"]
    assert pass_.ok  # (held is no failure: the exit code rules are the commands')


def test_the_sync_state_records_the_change_set() -> None:
    pass_ = ChangeSet(
        [
            Change("Namespace/shop", "created"),
            Change("MyApp/shop/a", "created"),
            Change("MyApp/shop/b", "failed", reason="refused"),
            Change("MyApp/shop/c", "pruned"),
        ],
        revision="main@abc",
        prune_skipped=None,
    )
    state = state_of(pass_, None)
    assert (state.revision, state.result, state.managed, state.failed) == (
        "main@abc",
        "Failed",
        2,  # the MyApps Git declares: not the namespace, not the pruned one
        1,
    )
    assert "MyApp/shop/b: refused" in state.last_error
    assert state.last_change == pass_.summary()


def test_a_pass_that_changed_nothing_keeps_the_last_change() -> None:
    quiet = ChangeSet([Change("MyApp/shop/a", "unchanged")], revision="main@abc")
    before = SyncState(last_change="1 created, 0 configured, 0 unchanged, 0 pruned")
    assert state_of(quiet, before).last_change == before.last_change
    assert state_of(quiet, before).result == "Succeeded"


def _item(path: str, manager: str | None = "kubectl", *, conflict: bool = False) -> DriftItem:
    smd = ("f:spec", f"f:{path.rsplit('.', 1)[-1]}")
    return DriftItem("Deployment/shop/a", path, smd, 3, 2, manager=manager, conflict=conflict)


def _step(action: Decision = "unchanged", **kw: Any) -> Step:
    live = {"spec": {"replicas": 2}}
    desired = {"spec": {"replicas": 3}}
    return Step("Deployment/shop/a", action, kw.pop("live", live), desired, **kw)


def test_a_change_compares_and_shows_without_the_objects() -> None:
    bare = Change("MyApp/shop/a", "created")
    assert bare.reason == "" and bare.to_json() == {
        "object": "MyApp/shop/a",
        "action": "created",
        "changes": [],
    }
    # live and desired are for a unified diff: not what the change is
    assert bare == Change("MyApp/shop/a", "created", live={"a": 1}, desired={"b": 2})
    shown = repr(Change("MyApp/shop/a", "created", live={"secret": 1}, desired={"secret": 2}))
    assert "secret" not in shown


def test_a_pass_starts_empty() -> None:
    empty = ChangeSet()
    assert (empty.revision, empty.verification, empty.applied_commit, empty.accepted_once) == (
        "",
        "",
        "",
        "",
    )
    assert empty.summary() == "0 created, 0 configured, 0 unchanged, 0 pruned"
    assert PruneGuard() == PruneGuard(enabled=True, allow_empty=False, max_fraction=0.5)


def test_objects_and_findings_split_the_changes() -> None:
    made = Change("MyApp/shop/a", "created")
    drifted = Change("Deployment/shop/a", "drifted")
    owned = Change("Deployment/shop/b", "conflict")
    kept = Change("MyApp/shop/b", "unchanged")
    both = ChangeSet(changes=[made, drifted, owned, kept])
    assert both.objects() == [made, kept]
    assert both.findings() == [drifted, owned]


def test_drift_left_says_why_and_by_whom_sorted_by_path() -> None:
    left = (_item("spec.z"), _item("spec.a", manager=None))
    suspended = changes_of(_step(drift=left, reason="suspended"))
    assert suspended[0] == Change("Deployment/shop/a", "unchanged", reason="suspended")
    assert suspended[1].paths == ("spec.a", "spec.z")
    assert suspended[1].reason == "suspended: left as is (changed by kubectl)"
    reported = changes_of(_step(drift=(_item("spec.a", manager=None),)))
    assert reported[1].reason == "driftPolicy report: left as is"


def test_a_conflict_names_the_owner_or_a_question_mark() -> None:
    found = changes_of(_step(drift=(_item("spec.a", manager=None, conflict=True),)))
    assert found[1].reason == "owned by ?, another controller: left to it"


@pytest.mark.parametrize(
    ("held", "reason"),
    [
        ((), "suspended"),
        ((_item("spec.a"),), "suspended: 1 change from Git held back"),
        ((_item("spec.a"), _item("spec.b")), "suspended: 2 changes from Git held back"),
    ],
)
def test_suspend_holds_back_what_git_changed(held: tuple[DriftItem, ...], reason: str) -> None:
    assert changes_of(_step(held=held, reason="suspended"))[0].reason == reason


def test_a_correction_says_whose_change_it_took_back() -> None:
    corrected = changes_of(_step("configured", corrected=(_item("spec.replicas"),)))
    assert corrected[0].reason == "drift corrected (changed by kubectl)"
    by_nobody = changes_of(_step("configured", corrected=(_item("spec.replicas", None),)))
    assert by_nobody[0].reason == "drift corrected"
    plain = changes_of(_step("configured"))
    assert plain[0].reason == "" and plain[0].paths == ("spec.replicas",)


def test_an_object_to_create_removes_nothing() -> None:
    created = changes_of(_step("created", live=None, released=(("f:spec", "f:paused"),)))
    assert created[0].paths == ("spec",)  # the whole spec is new; nothing is removed
