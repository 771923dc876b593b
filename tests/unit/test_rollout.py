"""gitsync.model.rollout: a rollout judged, and what a rollback keeps in status."""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

import pytest

from gitsync.model import rollout
from gitsync.model.api import Obj

GOOD: Obj = {"image": "nginx:1.27", "replicas": 2}
BAD: Obj = {"image": "nginx:broken", "replicas": 2}
G = "main@sha1:" + "1" * 40
R = "main@sha1:" + "2" * 40
NOW = "2026-12-04T06:00:00Z"


def deployment(
    *, generation: int = 2, observed: int = 2, conditions: list[Obj] | None = None
) -> Obj:
    return {
        "metadata": {"generation": generation},
        "status": {"observedGeneration": observed, "conditions": conditions or []},
    }


def progressing(status: str, reason: str, message: str = "") -> Obj:
    return {"type": "Progressing", "status": status, "reason": reason, "message": message}


FAILED = deployment(
    conditions=[
        {"type": "Available", "status": "False", "reason": "MinimumReplicasUnavailable"},
        progressing("False", "ProgressDeadlineExceeded", 'ReplicaSet "web-1" has timed out'),
    ]
)


def healthy_status(spec: Obj = GOOD, revision: str = G, **more: Any) -> Obj:
    return {
        "lastHealthy": rollout.Healthy(revision, rollout.digest(spec), spec).to_status(),
        **more,
    }


def test_the_digest_is_of_the_content_not_of_the_key_order() -> None:
    a = rollout.digest({"image": "a", "env": [{"name": "X", "value": "1"}], "replicas": 1})
    b = rollout.digest({"replicas": 1, "env": [{"value": "1", "name": "X"}], "image": "a"})
    assert a == b
    assert a.startswith("sha256:") and len(a) == len("sha256:") + 64
    assert rollout.digest({"image": "a"}) != rollout.digest({"image": "b"})
    # a list's order is content: env order is what the container sees
    x, y = {"name": "X"}, {"name": "Y"}
    assert rollout.digest({"env": [x, y]}) != rollout.digest({"env": [y, x]})
    assert rollout.digest(None) == rollout.digest({})
    # not ASCII-escaped: the same text however it is spelled in JSON
    assert rollout.digest({"image": "é"}) != rollout.digest({"image": "\\u00e9"})


@pytest.mark.parametrize(
    ("spec", "default", "policy"),
    [
        ({"rollback": "auto"}, "off", "auto"),
        ({"rollback": "off"}, "auto", "off"),
        ({}, "auto", "auto"),
        ({}, "off", "off"),
        (None, "auto", "auto"),
        # what the schema refuses falls back to the daemon's default
        ({"rollback": False}, "auto", "auto"),
    ],
)
def test_the_policy_is_the_spec_s_else_the_daemon_s(
    spec: Obj | None, default: rollout.RollbackPolicy, policy: str
) -> None:
    assert rollout.policy_of(spec, default) == policy


@pytest.mark.parametrize(
    ("d", "why"),
    [
        (None, None),
        (deployment(), None),
        (FAILED, 'ReplicaSet "web-1" has timed out'),
        # the condition stands for an older spec until the controller has seen this one
        ({**FAILED, "metadata": {"generation": 3}}, None),
        # a status ahead of the cached spec is no older than it
        ({**FAILED, "metadata": {"generation": 1}}, 'ReplicaSet "web-1" has timed out'),
        (deployment(conditions=[progressing("True", "ReplicaSetUpdated")]), None),
        (deployment(conditions=[progressing("False", "SomethingElse")]), None),
        # True with that reason is no failure (not a state the controller writes, but
        # the test is of all three)
        (deployment(conditions=[progressing("True", "ProgressDeadlineExceeded")]), None),
        (
            deployment(
                conditions=[
                    {"type": "Available", "status": "False", "reason": "ProgressDeadlineExceeded"}
                ]
            ),
            None,
        ),
        (
            deployment(conditions=[progressing("False", "ProgressDeadlineExceeded")]),
            "progress deadline exceeded",
        ),
        (
            {"metadata": {}, "status": {"conditions": FAILED["status"]["conditions"]}},
            'ReplicaSet "web-1" has timed out',
        ),
    ],
)
def test_a_rollout_fails_when_the_deployment_controller_says_so_for_this_generation(
    d: Obj | None, why: str | None
) -> None:
    assert rollout.failure(d) == why


def test_what_status_shows_is_the_record_s_shape() -> None:
    h = rollout.Healthy(G, rollout.digest(GOOD), GOOD)
    rb = rollout.Rollback(R, G, "timed out", NOW, rollout.digest(BAD))
    status = {"lastHealthy": h.to_status(), "rollback": rb.to_status()}
    assert status["rollback"] == {
        "from": R,
        "to": G,
        "reason": "timed out",
        "time": NOW,
        "heldDigest": rollout.digest(BAD),
    }
    assert status["lastHealthy"] == {"revision": G, "digest": rollout.digest(GOOD), "spec": GOOD}
    texts = rollout.Record(h, rb).texts("shop/web")
    assert {k: json.loads(v) for k, v in texts.items()} == {
        "healthy.shop.web": status["lastHealthy"],
        "rollback.shop.web": status["rollback"],
    }
    assert rollout.rollback_of(status) == rb
    assert rb.summary() == f"rolled back from {R}"
    assert rollout.Rollback("", G, "", NOW, "d").summary() == (
        "rolled back from an unknown revision"
    )


def record(status: Obj | None) -> rollout.Record:
    """The record that says what ``status`` reports (as gitsync wrote both)."""
    shown = [(status or {}).get(k) for k in ("lastHealthy", "rollback")]
    return rollout.record_of(*(json.dumps(v) if v is not None else None for v in shown))


def test_a_record_reads_back_what_it_was() -> None:
    healthy = rollout.Healthy(G, rollout.digest(GOOD), GOOD)
    rb = rollout.Rollback(R, G, "timed out", NOW, rollout.digest(BAD))
    for kept in (rollout.Record(healthy, rb), rollout.Record(healthy), rollout.Record(None, rb)):
        texts = kept.texts("shop/web")
        assert rollout.record_of(texts["healthy.shop.web"], texts["rollback.shop.web"]) == kept
    assert rollout.Record().texts("shop/web") == {"healthy.shop.web": "", "rollback.shop.web": ""}
    assert rollout.record_keys("shop/web") == ("healthy.shop.web", "rollback.shop.web")
    assert rollout.records_of(
        {
            **rollout.Record(healthy).texts("shop/web"),
            "rollback.shop.db": "not json",
            **rollout.Record(None, rb).texts("shop/api"),
            "pin.shop.web": "{}",
            "revision": "x",
        }
    ) == {"shop/web": rollout.Record(healthy), "shop/api": rollout.Record(None, rb)}


@pytest.mark.parametrize(
    ("healthy", "rollback", "why"),
    [
        ("not json", None, "lastHealthy: not JSON"),
        (None, "not json", "rollback: not JSON"),
        ("[]", None, "lastHealthy must be a map with a spec"),
        ('"x"', None, "lastHealthy must be a map with a spec"),
        ('{"revision": "r"}', None, "lastHealthy must be a map with a spec"),
        # what a MyApp's spec may not be in Git, a record may not hold either
        ('{"spec": {"image": "a", "dependsOn": 5}, "digest": "d"}', None, "spec.dependsOn"),
        ('{"spec": {"replicas": 1}}', None, "lastHealthy.spec.image"),
        # a spec that is not the one its digest names
        (
            json.dumps({"spec": GOOD, "digest": rollout.digest(BAD)}),
            None,
            "lastHealthy.digest is not the digest of its spec",
        ),
        (None, '"x"', "rollback must be a map"),
        (None, '{"heldDigest": ""}', "not a sha256 digest"),
        (None, '{"heldDigest": 5}', "rollback.heldDigest must be a string"),
        (
            None,
            json.dumps({"heldDigest": rollout.digest(BAD), "from": 1}),
            "rollback.from must be a string",
        ),
    ],
)
def test_a_record_gitsync_could_not_have_written_is_refused(
    healthy: str | None, rollback: str | None, why: str
) -> None:
    with pytest.raises(rollout.RecordError, match=re.escape(why)):
        rollout.record_of(healthy, rollback)


@pytest.mark.parametrize(
    "status",
    [
        None,
        {},
        {"rollback": "x"},
        {"rollback": {"from": R, "to": G}},
        {"rollback": {"heldDigest": ""}},
    ],
)
def test_a_status_reports_no_rollback_without_a_held_digest(status: Obj | None) -> None:
    assert rollout.rollback_of(status) is None
    assert rollout.described(status) == ""


def test_git_s_spec_is_held_while_git_declares_what_was_rolled_back() -> None:
    rb = rollout.Rollback(R, G, "timed out", NOW, rollout.digest(BAD))
    held = record(healthy_status(rollback=rb.to_status()))
    assert rollout.holding(held, BAD, "auto") == rb
    assert rollout.hold_of(held, BAD, "auto") == rollout.Held(rb, GOOD)
    # the same spec, written otherwise (key order): still held
    assert rollout.holding(held, {"replicas": 2, "image": "nginx:broken"}, "auto") == rb
    # a commit that changes this MyApp's spec releases it: a fix, or a revert
    for changed in ({**BAD, "replicas": 3}, GOOD, {}):
        assert rollout.holding(held, changed, "auto") is None
        assert rollout.hold_of(held, changed, "auto") is None
    # no healthy spec to hold to: nothing held (the rollback cannot be carried out)
    assert rollout.holding(record({"rollback": rb.to_status()}), BAD, "auto") is None
    assert rollout.hold_of(record({"rollback": rb.to_status()}), BAD, "auto") is None
    assert rollout.holding(record(healthy_status()), BAD, "auto") is None
    assert rollout.holding(None, BAD, "auto") is None


def test_nothing_is_held_unless_the_policy_is_auto() -> None:
    rb = rollout.Rollback(R, G, "timed out", NOW, rollout.digest(BAD))
    held = record(healthy_status(rollback=rb.to_status()))
    # the policy Git gives the MyApp, else the daemon's
    assert rollout.hold_of(held, BAD, "off") is None
    assert rollout.hold_of(held, {**BAD, "rollback": "off"}, "auto") is None
    with_auto = {**BAD, "rollback": "auto"}
    rb_auto = rollout.Rollback(R, G, "timed out", NOW, rollout.digest(with_auto))
    held = record(healthy_status(rollback=rb_auto.to_status()))
    assert rollout.hold_of(held, with_auto, "off") == rollout.Held(rb_auto, GOOD)


def test_a_healthy_spec_is_kept_up_to_its_bound() -> None:
    assert rollout.healthy_now(G, GOOD) == rollout.Healthy(G, rollout.digest(GOOD), GOOD)
    # the bound is on the stored size (a JSON string: its quotes count)
    fits = {"image": "x" * (rollout.MAX_SPEC_BYTES - len('{"image":""}'))}
    assert rollout.healthy_now(G, fits) is not None
    over = {"image": "x" * (rollout.MAX_SPEC_BYTES - len('{"image":""}') + 1)}
    assert rollout.healthy_now(G, over) is None


def test_with_spec_replaces_the_spec_only() -> None:
    body = {"apiVersion": "v", "kind": "MyApp", "metadata": {"name": "a"}, "spec": BAD}
    assert rollout.with_spec(body, GOOD) == {**body, "spec": GOOD}
    assert body["spec"] == BAD  # not changed in place


@pytest.mark.parametrize(
    ("policy", "d", "healthy", "found"),
    [
        ("auto", deployment(), rollout.Healthy(G, rollout.digest(GOOD), GOOD), "none"),
        ("auto", FAILED, rollout.Healthy(G, rollout.digest(GOOD), GOOD), "rollback"),
        ("off", FAILED, rollout.Healthy(G, rollout.digest(GOOD), GOOD), "off"),
        ("auto", FAILED, None, "no-target"),
        # the healthy spec is the one failing now: never rolled back to itself
        ("auto", FAILED, rollout.Healthy(G, rollout.digest(BAD), BAD), "no-target"),
    ],
)
def test_the_verdict_of_a_rollout(
    policy: rollout.RollbackPolicy, d: Obj, healthy: rollout.Healthy | None, found: str
) -> None:
    verdict, why = rollout.verdict(policy, d, BAD, healthy)
    assert verdict == found
    assert why == ("" if found == "none" else 'ReplicaSet "web-1" has timed out')


def judge(**kw: Any) -> rollout.Judgement | None:
    """The judgement with ``status`` (what the record holds, and the phase reported)."""
    status = kw.pop("status", healthy_status(phase="Progressing"))
    args: dict[str, Any] = {
        "policy": "auto",
        "git_spec": BAD,
        "record": record(status),
        "phase": (status or {}).get("phase", ""),
        "pinned": False,
        "deployment": FAILED,
        "available": False,
        "drift_free": True,
        "revision": R,
        "hold": None,
        "now": NOW,
    }
    return rollout.judge(**(args | kw))


def test_a_failed_rollout_under_auto_is_rolled_back_to_the_last_healthy_spec() -> None:
    found = judge()
    assert found is not None
    assert found.roll_back
    healthy = rollout.Healthy(G, rollout.digest(GOOD), GOOD)
    rb = rollout.Rollback(R, G, 'ReplicaSet "web-1" has timed out', NOW, rollout.digest(BAD))
    assert found.state == rollout.State(healthy, rb)
    assert found.events == (
        (
            "Warning",
            "RolledBack",
            f'the rollout of {R} failed (ReplicaSet "web-1" has timed out);'
            f" rolled back to the spec of {G}",
        ),
    )


def test_the_words_when_revisions_are_not_known() -> None:
    found = judge(revision="", status=healthy_status(revision=""))
    assert found is not None and found.roll_back
    assert found.events[0][2] == (
        'the rollout of the revision failed (ReplicaSet "web-1" has timed out);'
        " rolled back to the spec of the last healthy revision"
    )
    off = judge(revision="", policy="off")
    assert off is not None
    assert off.state.failed.startswith("the rollout of this revision failed")


def test_a_failed_rollout_under_off_is_left_degraded_and_says_so_once() -> None:
    found = judge(policy="off")
    assert found is not None and not found.roll_back
    failed = f'the rollout of {R} failed (ReplicaSet "web-1" has timed out); rollback is off'
    # off keeps no healthy spec: it would only cost memory and a larger object
    assert found.state == rollout.State(None, None, failed)
    assert found.events == (("Warning", "RolloutFailed", failed),)
    # status already says Degraded: no second Event on every reconcile
    again = judge(policy="off", status={"phase": "Degraded"})
    assert again is not None and again.events == ()
    assert again.state.failed == failed


def test_a_failed_first_revision_has_nothing_to_go_back_to() -> None:
    found = judge(status={"phase": "Progressing"})
    assert found is not None and not found.roll_back
    failed = (
        f'the rollout of {R} failed (ReplicaSet "web-1" has timed out);'
        " no earlier healthy spec to go back to"
    )
    assert found.state == rollout.State(None, None, failed)
    assert found.events == (("Warning", "RolloutFailed", failed),)


def test_a_held_myapp_is_not_judged_again() -> None:
    rb = rollout.Rollback(R, G, "timed out", NOW, rollout.digest(BAD))
    status = healthy_status(rollback=rb.to_status())
    # the healthy spec failing too (a cluster short of nodes) rolls back nothing more
    found = judge(status=status, hold=rb)
    healthy = rollout.Healthy(G, rollout.digest(GOOD), GOOD)
    assert found == rollout.Judgement(rollout.State(healthy, rb))


def test_a_suspended_myapp_is_not_judged() -> None:
    assert judge(git_spec={**BAD, "suspend": True}) is None
    assert judge(git_spec={**BAD, "suspend": False}) is not None


def test_a_commit_that_changes_a_held_myapp_releases_it() -> None:
    rb = rollout.Rollback(R, G, "timed out", NOW, rollout.digest(BAD))
    fixed = {**BAD, "image": "nginx:1.28"}
    found = judge(
        git_spec=fixed, status=healthy_status(rollback=rb.to_status()), deployment=deployment()
    )
    assert found is not None and not found.roll_back
    released = f"Git changed the spec held back since the rollback from {R}"
    healthy = rollout.Healthy(G, rollout.digest(GOOD), GOOD)
    assert found.state == rollout.State(healthy, None, "", released)
    assert found.events == (("Normal", "RollbackReleased", f"{released}: applied"),)


def test_a_pin_does_not_release_what_a_rollback_holds_back() -> None:
    # gitsync rollback --to GOOD: the pinned spec runs, and the spec held back stays held
    # back (lifting the pin holds it back again, it is not rolled out a second time)
    rb = rollout.Rollback(R, G, "timed out", NOW, rollout.digest(BAD))
    status = healthy_status(rollback=rb.to_status())
    pinned = {**GOOD, "replicas": 3}
    found = judge(git_spec=pinned, status=status, deployment=deployment(), pinned=True)
    healthy = rollout.Healthy(G, rollout.digest(GOOD), GOOD)
    assert found == rollout.Judgement(rollout.State(healthy, rb))
    # the head of Git's ref changing it is a release
    head = judge(git_spec=pinned, status=status, deployment=deployment(), pinned=False)
    assert head is not None and head.state.rollback is None and head.state.released


def test_a_released_spec_that_fails_again_is_rolled_back_again() -> None:
    rb = rollout.Rollback(R, G, "timed out", NOW, rollout.digest(BAD))
    worse = {**BAD, "replicas": 3}
    found = judge(git_spec=worse, status=healthy_status(rollback=rb.to_status()))
    assert found is not None and found.roll_back
    assert found.state.rollback is not None
    assert found.state.rollback.held == rollout.digest(worse)
    assert [e[1] for e in found.events] == ["RollbackReleased", "RolledBack"]


@pytest.mark.parametrize(
    ("kw", "kept"),
    [
        # Available at Git's spec, nothing drifted: this spec is the healthy one now
        ({"available": True}, rollout.Healthy(R, rollout.digest(BAD), BAD)),
        # not yet Available, or Available with drift: the one before stays
        ({"available": False}, rollout.Healthy(G, rollout.digest(GOOD), GOOD)),
        ({"available": True, "drift_free": False}, rollout.Healthy(G, rollout.digest(GOOD), GOOD)),
        # off: nothing kept
        ({"available": True, "policy": "off"}, None),
    ],
)
def test_a_healthy_rollout_is_what_a_later_failure_goes_back_to(
    kw: dict[str, Any], kept: rollout.Healthy | None
) -> None:
    found = judge(deployment=deployment(), **kw)
    assert found == rollout.Judgement(rollout.State(kept))


def test_the_first_healthy_rollout_is_kept() -> None:
    found = judge(deployment=deployment(), available=True, status={})
    assert found == rollout.Judgement(rollout.State(rollout.Healthy(R, rollout.digest(BAD), BAD)))


def test_the_same_healthy_spec_is_not_kept_again_under_a_new_revision() -> None:
    # a commit that touches other files: the revision the healthy spec came from stays
    status = healthy_status(spec=BAD, revision=G)
    found = judge(deployment=deployment(), available=True, status=status, revision=R)
    assert found == rollout.Judgement(rollout.State(rollout.Healthy(G, rollout.digest(BAD), BAD)))


def test_a_healthy_spec_too_large_to_keep_leaves_the_one_before() -> None:
    big = {"image": "x" * rollout.MAX_SPEC_BYTES}
    found = judge(git_spec=big, deployment=deployment(), available=True)
    assert found == rollout.Judgement(rollout.State(rollout.Healthy(G, rollout.digest(GOOD), GOOD)))


def test_the_bound_on_a_kept_spec_is_64_kib_as_stored() -> None:
    # the figure the README and docs/operating give (a status keeps one spec beside its own)
    fits = {"image": "x" * (64 * 1024 - len('{"image":""}'))}
    assert rollout.healthy_now(G, fits) is not None
    over = {"image": "x" * (64 * 1024 - len('{"image":""}') + 1)}
    assert rollout.healthy_now(G, over) is None


def test_the_digest_is_of_the_utf8_canonical_json_and_stays_so_across_versions() -> None:
    # status.rollback.heldDigest outlives the daemon that wrote it: an upgrade must read
    # the same digest for the same spec, non-ASCII text included
    spec = {"replicas": 1, "image": "café:1"}
    text = '{"image":"café:1","replicas":1}'
    assert rollout.digest(spec) == "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def test_a_status_that_names_no_generation_says_nothing_of_the_spec() -> None:
    # a status written before the deployment controller saw generation 1
    d = {"metadata": {"generation": 1}, "status": {"conditions": FAILED["status"]["conditions"]}}
    assert rollout.failure(d) is None


def test_described_says_from_what_to_what_and_why_or_nothing() -> None:
    rb = rollout.Rollback(R, G, "timed out", NOW, rollout.digest(BAD))
    assert rollout.described({"rollback": rb.to_status()}) == (
        f"rolled back from {R} to {G} (timed out)"
    )
    unknown = rollout.Rollback("", "", "why", NOW, "d")
    assert rollout.described({"rollback": unknown.to_status()}) == (
        "rolled back from an unknown revision to the last healthy revision (why)"
    )
    assert rollout.described(healthy_status()) == ""
    assert rollout.described(None) == ""


def test_a_record_s_text_is_canonical_and_its_missing_fields_are_empty() -> None:
    # sorted keys, no spaces, text as written (not ASCII-escaped): one spec, one text
    healthy = rollout.Healthy("r", rollout.digest({"image": "café"}), {"image": "café"})
    (text, _) = rollout.Record(healthy).texts("s/a").values()
    assert text == ('{"digest":"' + healthy.digest + '","revision":"r","spec":{"image":"café"}}')
    held = rollout.digest(BAD)
    found = rollout.record_of(None, json.dumps({"heldDigest": held}))
    assert found.rollback == rollout.Rollback("", "", "", "", held)
    assert rollout.rollback_of({"rollback": {"heldDigest": "d"}}) == rollout.Rollback(
        "", "", "", "", "d"
    )
