"""The one change set: the prune plan both ``sync`` and ``diff`` carry, its summary, and
what the sync state ConfigMap records of it."""

from __future__ import annotations

from gitsync.engine.changeset import Change, ChangeSet, PruneGuard, plan, plan_prune
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
