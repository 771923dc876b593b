"""A sharded instance's record: each member's pass is a part its member Lease carries;
the leader records the sum of the parts at its revision, and the same parts sum to the
same record (steady state writes nothing)."""

from __future__ import annotations

import pytest

from gitsync.engine.changeset import Change, ChangeSet, summary_of
from gitsync.gitops import failures
from gitsync.gitops.sync_state import Part, SyncState, merged, part_of, state_of
from gitsync.model.shards import unserved_words

REV = "main@sha1:2222"
OLD = "main@sha1:1111"


def pass_of(revision: str, **actions: int) -> ChangeSet:
    changes = [
        Change(f"MyApp/shop/{action}-{i}", action, reason="refused" if action == "failed" else "")  # type: ignore[arg-type]
        for action, n in actions.items()
        for i in range(n)
    ]
    return ChangeSet(changes, revision=revision)


def part(changes: ChangeSet, previous: Part | None = None) -> Part:
    return part_of(changes, state_of(changes, None), previous)


def test_a_part_says_its_pass_and_its_last_change() -> None:
    first = part(pass_of(OLD, created=2, unchanged=3))
    assert (first.revision, first.managed, first.failed) == (OLD, 5, 0)
    assert first.counts == {"created": 2, "unchanged": 3}
    assert (first.changed_at, first.changed) == (OLD, {"created": 2, "unchanged": 3})
    # a later pass that changed nothing keeps the last change: when, and what
    quiet = part(pass_of(REV, unchanged=5), first)
    assert quiet.counts == {"unchanged": 5}
    assert (quiet.changed_at, quiet.changed) == (OLD, first.changed)
    # a prune or a configuration is a change too
    assert part(pass_of(REV, pruned=1), first).changed_at == REV
    assert part(pass_of(REV, configured=1), first).changed_at == REV
    # a member's first pass with no change has none to say
    assert (part(pass_of(REV, unchanged=1)).changed_at, part(pass_of(REV)).changed) == ("", {})


def test_a_failed_part_carries_its_count_and_its_reason() -> None:
    changes = pass_of(REV, failed=1, unchanged=1)
    changes.errors.append("apps/x.yaml: line 2: not YAML")
    p = part(changes)
    assert p.failed == 2 and p.last_error.startswith("1 of 2 objects failed, 1 error: ")


def test_a_part_reads_back_as_written_and_anything_else_as_none() -> None:
    p = part(pass_of(REV, created=1, unchanged=4))
    assert Part.parse(p.text()) == p
    assert "\n" not in p.text()
    for text in (
        "",
        "{",
        "[]",
        '{"revision": 3}',
        '{"last_error": null}',
        '{"changed_at": 1}',
        '{"managed": true}',
        '{"failed": "2"}',
        '{"counts": {"created": "1"}}',
        '{"changed": []}',
        '{"x": 1}',
    ):
        assert Part.parse(text) is None, text
    assert Part.parse("{}") == Part()  # every field has its default


def test_the_record_sums_the_parts_at_the_leaders_revision() -> None:
    mine_pass = pass_of(REV, created=1, unchanged=9, pruned=2)
    own = state_of(mine_pass, None)
    mine = part_of(mine_pass, own, None)
    b = part(pass_of(REV, configured=3, unchanged=7))
    c = part(pass_of(REV, unchanged=10))
    record = merged(own, mine, {"b": b, "c": c}, 3)
    assert (record.result, record.managed, record.failed) == ("Succeeded", 30, 0)
    assert record.last_change == summary_of(
        {"created": 1, "configured": 3, "unchanged": 26, "pruned": 2}
    )
    assert record.replicas == "3 of 3 replicas"
    # the leader's own facts stay its own
    assert record.revision == REV and record.prune_skipped == own.prune_skipped


def test_a_member_behind_is_not_summed_and_the_record_says_how_many_are() -> None:
    own_pass = pass_of(REV, unchanged=10)
    own = state_of(own_pass, SyncState(last_change="earlier"))
    behind = part(pass_of(OLD, failed=4))
    record = merged(own, part_of(own_pass, own, None), {"b": behind}, 2)
    assert (record.result, record.managed, record.failed) == ("Succeeded", 10, 0)
    assert record.replicas == "1 of 2 replicas"
    assert record.last_change == "earlier"  # no part changed anything at REV


def test_one_failed_member_fails_the_instance_and_its_reason_is_read() -> None:
    own_pass = pass_of(REV, unchanged=3)
    own = state_of(own_pass, None)
    broken = part(pass_of(REV, failed=1, unchanged=2))
    record = merged(own, part_of(own_pass, own, None), {"b": broken}, 2)
    assert (record.result, record.failed, record.managed) == ("Failed", 1, 6)
    assert record.last_error == broken.last_error != ""
    # the leader's own error first, then the others' in identity order
    own_bad = pass_of(REV, failed=1)
    own2 = state_of(own_bad, None)
    second = part(pass_of(REV, failed=2))
    record = merged(own2, part_of(own_bad, own2, None), {"z": broken, "c": second}, 3)
    assert record.last_error == " | ".join([own2.last_error, second.last_error, broken.last_error])


def test_a_change_anywhere_at_the_revision_is_the_last_change_of_all() -> None:
    """Only b changed something at REV: the record's last change is the revision's, the
    other parts' objects counted as they stand (unchanged)."""
    own_pass = pass_of(REV, unchanged=5)
    own = state_of(own_pass, SyncState(last_change="old news"))
    b_first = part(pass_of(OLD, created=5))
    b = part(pass_of(REV, configured=1, unchanged=4), b_first)
    record = merged(own, part_of(own_pass, own, None), {"b": b}, 2)
    assert record.last_change == summary_of({"configured": 1, "unchanged": 9})


def test_the_same_parts_sum_to_the_same_record() -> None:
    """Steady state: every member's next pass changes nothing, each part keeps its last
    change, and the record is equal (the writer's equality check skips the write)."""
    own_pass = pass_of(REV, created=2)
    own = state_of(own_pass, None)
    mine = part_of(own_pass, own, None)
    b = part(pass_of(REV, configured=1, unchanged=1))
    first = merged(own, mine, {"b": b}, 2)
    quiet_own_pass = pass_of(REV, unchanged=2)
    quiet_own = state_of(quiet_own_pass, first)
    quiet_mine = part_of(quiet_own_pass, quiet_own, mine)
    quiet_b = part(pass_of(REV, unchanged=2), b)
    assert merged(quiet_own, quiet_mine, {"b": quiet_b}, 2) == first


def test_unsharded_the_record_has_no_replicas_key() -> None:
    assert "replicas" not in SyncState(revision=REV).data()
    assert SyncState(replicas="1 of 1 replicas").data()["replicas"] == "1 of 1 replicas"


@pytest.mark.parametrize("n", [1, 3])
def test_the_members_reasons_join_in_one_bounded_line(n: int) -> None:
    long = ["x" * failures.LIMIT] * n
    text = failures.join(long)
    assert len(text) <= failures.LIMIT
    assert failures.join(["a", "", "b"]) == "a | b"
    assert failures.join([]) == ""


def test_buckets_no_replica_serves_fail_the_record_naming_them_and_since_when() -> None:
    own_pass = pass_of(REV, unchanged=10)
    own = state_of(own_pass, None)
    mine = part_of(own_pass, own, None)
    at = 1_796_000_000.0  # 2026-11-30T00:53:20Z
    words = unserved_words({7: at + 5, 0: at, 1: at, 2: at})
    assert words == (
        "no replica serves buckets 0-2 (since 2026-11-30T00:53:20Z), 7 (since 2026-11-30T00:53:25Z)"
    )
    record = merged(own, mine, {}, 1, words)
    assert (record.result, record.managed, record.unserved) == ("Failed", 10, words)
    assert record.last_error == words and record.data()["unserved"] == words
    # all served: as before, and the ConfigMap has no such key
    served = merged(own, mine, {}, 1, unserved_words({}))
    assert (served.result, served.last_error, served.unserved) == ("Succeeded", "", "")
    assert "unserved" not in served.data() and served == merged(own, mine, {}, 1)
