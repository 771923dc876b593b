"""What MyApp status says of rollouts: the healthy spec kept, the rollback in force and its
conditions, a release, and what a reconcile that did not judge the rollout carries over."""

from __future__ import annotations

from typing import Any

from gitsync.model import rollout
from gitsync.model.myapp_status import SyncInfo, compute
from gitsync.model.rollout import Healthy, Rollback, State
from tests.unit.test_status import ROLLED_OUT, deployment, myapp

G, R = "main@sha1:good", "main@sha1:bad"
HEALTHY = Healthy(G, "sha256:g", {"image": "x", "replicas": 2})
RB = Rollback(R, G, "ReplicaSet web-1 has timed out progressing.", "t", "sha256:b")
SYNC = SyncInfo(R, "apps/web.yaml", "2026-12-04T00:00:00Z")


def conditions(status: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in status["conditions"]}


def words(c: dict[str, Any]) -> tuple[str, str, str]:
    return c["status"], c["reason"], c["message"]


def test_a_rollback_in_force_is_recorded_with_its_conditions() -> None:
    st = compute(myapp(), deployment(**ROLLED_OUT), drift=[], sync=SYNC, rollout=State(HEALTHY, RB))
    assert st["lastHealthy"] == HEALTHY.to_status() and st["rollback"] == RB.to_status()
    found = conditions(st)
    assert words(found["RolledBack"]) == (
        "True",
        "RolledBack",
        f"the rollout of {R} failed (ReplicaSet web-1 has timed out progressing.); "
        f"running the spec of {G}, held until Git changes this MyApp",
    )
    assert words(found["Synced"]) == (
        "False",
        "RolledBack",
        f"rolled back from {R}: this revision's spec is held back until Git changes it",
    )
    assert st["source"]["revision"] == R
    assert found["RolledBack"]["observedGeneration"] == 3


def test_a_rollback_whose_revisions_are_not_known_says_so_in_words() -> None:
    unknown = Rollback("", "", "why", "t", "d")
    st = compute(myapp(), deployment(**ROLLED_OUT), drift=[], rollout=State(HEALTHY, unknown))
    assert conditions(st)["RolledBack"]["message"] == (
        "the rollout of the revision failed (why); running the spec of the last healthy "
        "revision, held until Git changes this MyApp"
    )
    assert "Synced" not in conditions(st)  # no pass: nothing said of a revision


def test_the_healthy_spec_alone_is_kept_without_a_rolled_back_condition() -> None:
    st = compute(myapp(), deployment(**ROLLED_OUT), drift=[], sync=SYNC, rollout=State(HEALTHY))
    assert st["lastHealthy"] == HEALTHY.to_status() and "rollback" not in st
    assert "RolledBack" not in conditions(st)
    assert words(conditions(st)["Synced"])[:2] == ("True", "Applied")


def test_a_failed_rollout_left_as_it_is_says_why_in_ready() -> None:
    failed = "the rollout of main@sha1:bad failed (timed out); rollback is off"
    st = compute(myapp(), deployment(), drift=[], rollout=State(failed=failed))
    assert conditions(st)["Ready"]["message"] == failed
    assert "lastHealthy" not in st and "rollback" not in st


def test_a_release_turns_rolled_back_false_with_why() -> None:
    held = compute(myapp(), deployment(**ROLLED_OUT), drift=[], rollout=State(HEALTHY, RB))
    why = f"Git changed the spec held back since the rollback from {R}"
    st = compute(
        myapp(status=held),
        deployment(**ROLLED_OUT),
        drift=[],
        sync=SYNC,
        rollout=State(HEALTHY, released=why),
    )
    assert "rollback" not in st
    assert words(conditions(st)["RolledBack"]) == ("False", "Released", why)
    assert words(conditions(st)["Synced"])[:2] == ("True", "Applied")
    # once released, the condition stays as it was while nothing new is said
    again = compute(myapp(status=st), deployment(**ROLLED_OUT), drift=[], rollout=State(HEALTHY))
    assert conditions(again)["RolledBack"] == conditions(st)["RolledBack"]


def test_a_rollback_gone_without_a_release_message_says_none_is_in_force() -> None:
    held = compute(myapp(), deployment(**ROLLED_OUT), drift=[], rollout=State(HEALTHY, RB))
    st = compute(myapp(status=held), deployment(**ROLLED_OUT), drift=[], rollout=State(HEALTHY))
    assert words(conditions(st)["RolledBack"]) == ("False", "Released", "no rollback in force")


def test_a_reconcile_that_did_not_judge_carries_everything_over() -> None:
    held = compute(
        myapp(), deployment(**ROLLED_OUT), drift=[], sync=SYNC, rollout=State(HEALTHY, RB)
    )
    st = compute(myapp(status=held), deployment(**ROLLED_OUT), drift=[], sync=SYNC)
    assert st["lastHealthy"] == held["lastHealthy"] and st["rollback"] == held["rollback"]
    assert conditions(st)["RolledBack"] == conditions(held)["RolledBack"]
    # the rollback carried over still holds the revision back
    assert words(conditions(st)["Synced"])[:2] == ("False", "RolledBack")
    plain = compute(myapp(), deployment(**ROLLED_OUT), drift=[])
    assert "RolledBack" not in conditions(plain) and "lastHealthy" not in plain
    assert rollout.rollback_of(plain) is None
