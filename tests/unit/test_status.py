"""MyApp status as a pure function of what was observed."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from gitsync.model import stored
from gitsync.model.myapp_status import (
    LOAD_FAILED,
    MAX_DRIFT_ENTRIES,
    MAX_DRIFT_VALUE_BYTES,
    SyncInfo,
    _drift_message,
    _ready_message,
    compute,
    condition,
    keep_recorded_drift,
    phase_of,
    same,
    source_for,
)
from gitsync.model.order import Wait


def myapp(replicas: int = 2, generation: int = 3, status: Any = None) -> dict[str, Any]:
    return {
        "metadata": {"name": "web", "namespace": "ns", "generation": generation},
        "spec": {"image": "x", "replicas": replicas},
        "status": status or {},
    }


def deployment(want: int = 2, generation: int = 1, **status: Any) -> dict[str, Any]:
    """A Deployment whose spec asks for ``want`` replicas, with this status."""
    return {
        "metadata": {"generation": generation},
        "spec": {"replicas": want},
        "status": {"observedGeneration": 1, **status},
    }


ROLLED_OUT = {"replicas": 2, "updatedReplicas": 2, "availableReplicas": 2}


@pytest.mark.parametrize(
    ("dep", "phase"),
    [
        pytest.param(None, "Pending", id="no deployment"),
        pytest.param(
            deployment(replicas=2, updatedReplicas=2, availableReplicas=1),
            "Progressing",
            id="not all available",
        ),
        pytest.param(deployment(**ROLLED_OUT), "Available", id="rolled out"),
        pytest.param(
            deployment(replicas=3, updatedReplicas=2, availableReplicas=2),
            "Progressing",
            id="an old replica is left",
        ),
        pytest.param(
            deployment(2, 2, **ROLLED_OUT), "Progressing", id="a newer generation not yet seen"
        ),
        pytest.param(deployment(3, **ROLLED_OUT), "Progressing", id="scaling up"),
        # the Deployment's own replicas count, whoever set it (an HPA), not the MyApp's
        pytest.param(
            deployment(6, replicas=6, updatedReplicas=6, availableReplicas=6),
            "Available",
            id="scaled by another controller",
        ),
        pytest.param(deployment(0), "Available", id="scaled to zero"),
        pytest.param(
            deployment(
                replicas=2,
                conditions=[{"type": "Progressing", "reason": "ProgressDeadlineExceeded"}],
            ),
            "Degraded",
            id="progress deadline exceeded",
        ),
    ],
)
def test_phase(dep: dict[str, Any] | None, phase: str) -> None:
    assert phase_of(dep) == phase


def test_readiness_follows_the_deployment_not_the_myapp_replicas() -> None:
    # the MyApp asks for 2; an HPA owns the Deployment's replicas and runs 6
    dep = deployment(6, replicas=6, updatedReplicas=6, availableReplicas=6)
    status = compute(myapp(replicas=2), dep, drift=[])
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert (status["phase"], status["replicas"], status["availableReplicas"]) == (
        "Available",
        6,
        6,
    )
    assert (ready["status"], ready["reason"], ready["message"]) == (
        "True",
        "Available",
        "6/6 replicas available",
    )


def test_what_neither_controller_has_said_yet_counts_as_zero() -> None:
    # a MyApp the server has not given a generation (a body not stored yet), and a
    # Deployment just created: its status is empty until the deployment controller looks
    body = {"metadata": {"name": "web", "namespace": "ns"}, "spec": {"image": "x"}}
    new = {"metadata": {"generation": 1}, "spec": {"replicas": 2}, "status": {}}
    status = compute(body, new, drift=[])
    assert (status["observedGeneration"], status["replicas"], status["availableReplicas"]) == (
        0,
        0,
        0,
    )
    assert {c["observedGeneration"] for c in status["conditions"]} == {0}
    assert status["phase"] == "Progressing"


@pytest.mark.parametrize(
    ("dep", "ready"),
    [
        pytest.param(deployment(**ROLLED_OUT), "True", id="what runs is available"),
        pytest.param(deployment(replicas=2, updatedReplicas=1), "False", id="still rolling"),
    ],
)
def test_a_suspended_myapp_says_so_and_is_ready_when_what_runs_is_available(
    dep: dict[str, Any], ready: str
) -> None:
    app = myapp()
    app["spec"]["suspend"] = True
    cond = next(c for c in compute(app, dep, drift=[])["conditions"] if c["type"] == "Ready")
    assert (cond["status"], cond["reason"], cond["message"]) == (
        ready,
        "Suspended",
        "spec.suspend is set",
    )


def test_compute_then_same_means_no_write() -> None:
    app = myapp()
    dep = deployment(**ROLLED_OUT)
    sync = SyncInfo("main@sha1:" + "a" * 40, "apps/web.yaml", "2026-01-01T00:00:00Z")
    status = compute(app, dep, drift=[], sync=sync)
    assert status["observedGeneration"] == 3
    assert status["phase"] == "Available"
    types = {c["type"]: c["status"] for c in status["conditions"]}
    assert types == {"Ready": "True", "Drifted": "False", "Synced": "True"}
    synced = next(c for c in status["conditions"] if c["type"] == "Synced")
    assert (synced["reason"], synced["message"]) == ("Applied", f"applied revision {sync.revision}")
    again = compute(myapp(status=status), dep, drift=[], sync=None)
    assert same(status, again), "the sync's part is carried over; nothing changed"


def test_a_failed_sync_is_synced_false() -> None:
    sync = SyncInfo("main@sha1:" + "b" * 40, "apps/web.yaml", "t", ok=False, message="invalid")
    status = compute(myapp(), None, drift=[], sync=sync)
    synced = next(c for c in status["conditions"] if c["type"] == "Synced")
    assert (synced["status"], synced["reason"], synced["message"]) == (
        "False",
        "SyncFailed",
        "invalid",
    )


def test_a_file_that_no_longer_loads_is_what_synced_says_even_while_a_change_waited() -> None:
    old = {"revision": "main@sha1:old", "path": "apps/web.yaml", "lastSyncTime": "t0"}
    sync = SyncInfo(
        "main@sha1:old", "apps/web.yaml", "t0", ok=False, message="broken", reason=LOAD_FAILED
    )
    wait = Wait("DependencyNotReady", "waiting for MyApp/ns/db (Progressing)", "ns/db")
    for waiting in (None, wait):
        status = compute(myapp(status={"source": old}), None, drift=[], sync=sync, wait=waiting)
        synced = next(c for c in status["conditions"] if c["type"] == "Synced")
        assert (synced["status"], synced["reason"], synced["message"]) == (
            "False",
            LOAD_FAILED,
            "broken",
        )
        assert status["source"] == old


def test_an_unchanged_myapp_keeps_the_revision_that_last_changed_it() -> None:
    old = {"revision": "main@sha1:old", "path": "apps/web.yaml", "lastSyncTime": "t0"}
    new = SyncInfo("main@sha1:new", "apps/web.yaml", "t1")
    kept = source_for(False, myapp(status={"source": old}), new)
    assert (kept.revision, kept.time) == ("main@sha1:old", "t0")
    assert source_for(True, myapp(status={"source": old}), new) == new
    moved = SyncInfo("main@sha1:new", "apps/other.yaml", "t1")
    assert source_for(False, myapp(status={"source": old}), moved) == moved


def test_a_failed_apply_keeps_the_recorded_drift_of_that_object() -> None:
    recorded = [
        {"object": "Deployment/web", "path": "metadata.labels[team]", "desired": "a"},
        {"object": "MyApp/web", "path": "spec.image", "desired": "x"},
    ]
    fresh = [
        {"object": "Deployment/web", "path": "spec.replicas", "desired": 2},
        {"object": "MyApp/web", "path": "spec.port", "desired": 80},
    ]
    kept = keep_recorded_drift(fresh, myapp(status={"drift": recorded}), "Deployment/web")
    # the Deployment's drift as last recorded; the MyApp's as found in this pass
    assert kept == [recorded[0], fresh[1]]
    assert keep_recorded_drift(fresh, myapp(), "Deployment/web") == [fresh[1]]


def test_a_failure_keeps_the_deployment_facts() -> None:
    app = myapp(status={"phase": "Available", "replicas": 2, "availableReplicas": 2})
    status = compute(app, deployment(**ROLLED_OUT), drift=[], error="spec.x: Invalid value")
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert (status["phase"], status["replicas"], status["availableReplicas"]) == (
        "Available",
        2,
        2,
    )
    assert (ready["status"], ready["reason"], ready["message"]) == (
        "False",
        "ReconcileError",
        "spec.x: Invalid value",
    )


def drift_entry(i: int, desired: Any = 2, live: Any = 5) -> dict[str, Any]:
    return {"object": "Deployment/web", "path": f"p{i:03}", "desired": desired, "live": live}


def test_drift_in_status_is_bounded_and_what_was_cut_counted() -> None:
    big = "\x01" * 1500  # 9000 bytes as stored
    entries = [drift_entry(i, desired=big, live={"k": big}) for i in range(60)]
    st = compute(myapp(), deployment(), drift=entries)
    assert len(st["drift"]) == MAX_DRIFT_ENTRIES
    assert [d["path"] for d in st["drift"]] == [f"p{i:03}" for i in range(MAX_DRIFT_ENTRIES)]
    for d in st["drift"]:
        assert stored.size(d["desired"]) <= MAX_DRIFT_VALUE_BYTES
        assert d["desired"].endswith(" characters cut)")
        assert d["live"].startswith('{"k": "\\u0001') and stored.size(d["live"]) <= 1024
    assert stored.size(st) < 120 * 1024  # of the 1.5 MiB etcd stores
    drifted = next(c for c in st["conditions"] if c["type"] == "Drifted")
    assert drifted["message"].startswith(
        "60 drifted (10 not listed in status.drift, 100 values cut to 1024 bytes): "
    )


def test_small_drift_is_written_as_it_is() -> None:
    entries = [drift_entry(i) for i in range(3)]
    st = compute(myapp(), deployment(), drift=entries)
    assert st["drift"] == entries
    drifted = next(c for c in st["conditions"] if c["type"] == "Drifted")
    assert (
        drifted["message"]
        == "3 drifted: Deployment/web p000, Deployment/web p001, Deployment/web p002"
    )


@pytest.mark.parametrize(
    ("value", "size"),
    [("abc", 5), ("\x01", 8), ("<&>", 20), ("é", 4), ({"a": [1, None]}, 14), ("\u2028", 8)],
)
def test_size_is_what_the_api_server_stores(value: Any, size: int) -> None:
    assert stored.size(value) == size


def test_a_value_of_exactly_the_limit_is_kept_and_a_longer_one_cut_to_fill_it() -> None:
    assert stored.shorten("abc", 5) == ("abc", False)  # "abc" is 5 bytes stored
    # 60 bytes: 40 for the quotes and the note, so 18 characters of text are kept
    cut, was_cut = stored.shorten("x" * 100, 60)
    assert was_cut and cut == "x" * 18 + "… (82 characters cut)"
    assert stored.size(cut) <= 60


def test_a_cut_value_keeps_its_text_as_written() -> None:
    # not JSON's \u00e9 escapes: what is kept reads as the value did
    cut, was_cut = stored.shorten({"k": "é" * 100}, 80)
    assert was_cut and cut.startswith('{"k": "éé') and "\\u" not in cut


def _rolled(**status: Any) -> dict[str, Any]:
    """A Deployment of one replica with no generation, spec.replicas or status fields but
    those given: what each of phase_of's defaults stands for."""
    return {"metadata": {}, "spec": {}, "status": status}


@pytest.mark.parametrize(
    ("dep", "phase"),
    [
        # a missing generation is 0, a missing observedGeneration 0: seen
        (_rolled(updatedReplicas=1, availableReplicas=1), "Available"),
        # a generation the controller has not observed yet (no observedGeneration)
        (
            {**_rolled(updatedReplicas=1, availableReplicas=1), "metadata": {"generation": 1}},
            "Progressing",
        ),
        # a missing spec.replicas is the server's default, 1
        (_rolled(), "Progressing"),
        (_rolled(updatedReplicas=1), "Progressing"),  # no availableReplicas: none available
        # only Progressing=False for ProgressDeadlineExceeded is a failed rollout
        (
            _rolled(
                updatedReplicas=1,
                availableReplicas=1,
                conditions=[{"type": "Available", "reason": "ProgressDeadlineExceeded"}],
            ),
            "Available",
        ),
        (
            _rolled(conditions=[{"type": "Progressing", "reason": "NewReplicaSetAvailable"}]),
            "Progressing",
        ),
    ],
)
def test_phase_where_the_deployment_leaves_fields_out(dep: dict[str, Any], phase: str) -> None:
    assert phase_of(dep) == phase


def test_a_condition_keeps_its_transition_time_only_while_its_own_status_holds() -> None:
    previous = [
        {"type": "Synced", "status": "True", "lastTransitionTime": "synced-since"},
        {"type": "Ready", "status": "False", "lastTransitionTime": "ready-since"},
    ]
    kept = condition("Ready", False, "Progressing", "m", 3, previous)
    assert kept["lastTransitionTime"] == "ready-since"
    assert kept == {
        "type": "Ready",
        "status": "False",
        "observedGeneration": 3,
        "lastTransitionTime": "ready-since",
        "reason": "Progressing",
        "message": "m",
    }
    # the status moved: a new time, now's, as metav1.Time writes it; another type's time
    # is never taken
    moved = condition("Ready", True, "Available", "m", 3, previous)["lastTransitionTime"]
    when = dt.datetime.strptime(moved, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.UTC)
    assert abs((dt.datetime.now(dt.UTC) - when).total_seconds()) < 60
    assert condition("Ready", True, "Available", "m", 3, previous)["lastTransitionTime"] not in (
        "ready-since",
        "synced-since",
    )
    assert condition("Drifted", True, "Drifted", "m", 3, previous)["lastTransitionTime"] not in (
        "ready-since",
        "synced-since",
    )


def test_the_ready_message_counts_what_the_deployment_says_with_its_defaults() -> None:
    assert _ready_message(None) == "no Deployment yet"
    assert _ready_message({}) == "0/1 replicas available"
    dep = {"spec": {"replicas": 3}, "status": {"availableReplicas": 2}}
    assert _ready_message(dep) == "2/3 replicas available"


def test_the_drift_message_word_for_word() -> None:
    assert _drift_message([]) == "live state matches the desired state"
    long_path = "spec." + "x" * 300
    one = [{"object": "Deployment/web", "path": long_path}]
    # (no entry left out, no value cut: the defaults add no note)
    assert _drift_message(one) == f"1 drifted: Deployment/web {stored.shorten(long_path, 256)[0]}"


def test_the_drift_message_names_five_and_counts_the_rest() -> None:
    def entries(n: int) -> list[dict[str, Any]]:
        return [{"object": "Deployment/web", "path": f"spec.p{i}"} for i in range(n)]

    five = ", ".join(f"Deployment/web spec.p{i}" for i in range(5))
    assert _drift_message(entries(5)) == f"5 drifted: {five}"
    assert _drift_message(entries(6)) == f"6 drifted: {five} and 1 more"
    assert _drift_message(entries(7)) == f"7 drifted: {five} and 2 more"


def test_same_ignores_transition_times_only() -> None:
    cond = {"type": "Ready", "status": "True", "reason": "Available", "lastTransitionTime": "a"}
    live = {"phase": "Available", "conditions": [cond], "drift": []}
    assert same(live, {**live, "conditions": [{**cond, "lastTransitionTime": "b"}]})
    assert same({"phase": "Available", "conditions": [cond]}, live)  # no drift is []
    assert not same(live, {**live, "conditions": [{**cond, "reason": "Progressing"}]})
    assert not same(live, {**live, "conditions": []})
    assert not same(live, {**live, "drift": [{"object": "Deployment/web", "path": "spec.p"}]})
    assert not same(live, {**live, "phase": "Progressing"})
    assert not same(None, live)
    two = [cond, {**cond, "type": "Drifted"}]
    assert same({**live, "conditions": two}, {**live, "conditions": two[::-1]})


def test_a_new_revision_of_the_same_file_is_applied_now_and_the_same_one_keeps_its_time() -> None:
    myapp = {
        "metadata": {"generation": 2},
        "status": {"source": {"revision": "r1", "path": "a.yaml", "lastSyncTime": "t1"}},
    }

    def source(revision: str, path: str) -> dict[str, Any]:
        st = compute(myapp, None, drift=[], sync=SyncInfo(revision, path, "t2"))
        return dict(st["source"])

    assert source("r1", "a.yaml") == {"revision": "r1", "path": "a.yaml", "lastSyncTime": "t1"}
    assert source("r2", "a.yaml")["lastSyncTime"] == "t2"
    assert source("r1", "b.yaml") == {"revision": "r1", "path": "b.yaml", "lastSyncTime": "t2"}


def test_the_waiting_condition_from_first_wait_to_long_after() -> None:
    def conds(status: dict[str, Any]) -> dict[str, dict[str, Any]]:
        return {c["type"]: c for c in status["conditions"]}

    sync = SyncInfo("main@sha1:" + "a" * 40, "apps/web.yaml", "t")
    never = compute(myapp(), None, drift=[], sync=sync)
    assert "Waiting" not in conds(never)
    wait = Wait("DependencyNotReady", "waiting for MyApp/ns/db (Progressing)", "ns/db")
    waiting = compute(myapp(), None, drift=[], sync=sync, wait=wait)
    w, synced = conds(waiting)["Waiting"], conds(waiting)["Synced"]
    assert (w["status"], w["reason"], w["message"], w["observedGeneration"]) == (
        "True",
        "DependencyNotReady",
        wait.message,
        3,
    )
    assert (synced["status"], synced["reason"]) == ("False", "DependencyNotReady")
    assert synced["message"] == f"this revision's change is not applied yet: {wait.message}"
    # the order of conditions: Ready, Drifted, Waiting, Synced
    assert [c["type"] for c in waiting["conditions"]] == ["Ready", "Drifted", "Waiting", "Synced"]
    released = compute(myapp(status=waiting), None, drift=[], sync=sync)
    w = conds(released)["Waiting"]
    assert (w["status"], w["reason"], w["message"]) == ("False", "Released", "no longer waiting")
    assert conds(released)["Synced"]["status"] == "True"
    # kept False from then on, as it was (its transition time too), for a newer generation
    old = {**w, "lastTransitionTime": "2026-01-01T00:00:00Z"}
    later = compute(
        myapp(generation=4, status={**released, "conditions": [old]}), None, drift=[], sync=sync
    )
    assert conds(later)["Waiting"] == {**old, "observedGeneration": 4}
    # without a sync (a worker's reconcile), the wait is said all the same
    alone = compute(myapp(), None, drift=[], wait=wait)
    assert conds(alone)["Waiting"]["status"] == "True" and "Synced" not in conds(alone)
