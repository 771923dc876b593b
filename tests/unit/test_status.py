"""MyApp status as a pure function of what was observed."""

from __future__ import annotations

from typing import Any

import pytest

from gitsync.status import SyncInfo, compute, phase_of, same, source_for


def myapp(replicas: int = 2, generation: int = 3, status: Any = None) -> dict[str, Any]:
    return {
        "metadata": {"name": "web", "namespace": "ns", "generation": generation},
        "spec": {"image": "x", "replicas": replicas},
        "status": status or {},
    }


def deployment(**status: Any) -> dict[str, Any]:
    return {"metadata": {"generation": 1}, "status": {"observedGeneration": 1, **status}}


@pytest.mark.parametrize(
    ("dep", "phase"),
    [
        (None, "Pending"),
        (deployment(replicas=2, updatedReplicas=2, availableReplicas=1), "Progressing"),
        (deployment(replicas=2, updatedReplicas=2, availableReplicas=2), "Available"),
        (deployment(replicas=3, updatedReplicas=2, availableReplicas=2), "Progressing"),
        (
            deployment(
                replicas=2,
                conditions=[{"type": "Progressing", "reason": "ProgressDeadlineExceeded"}],
            ),
            "Degraded",
        ),
    ],
)
def test_phase(dep: dict[str, Any] | None, phase: str) -> None:
    assert phase_of(myapp(), dep) == phase


def test_compute_then_same_means_no_write() -> None:
    app = myapp()
    dep = deployment(replicas=2, updatedReplicas=2, availableReplicas=2)
    sync = SyncInfo("main@sha1:" + "a" * 40, "apps/web.yaml", "2026-01-01T00:00:00Z")
    status = compute(app, dep, drift=[], sync=sync)
    assert status["observedGeneration"] == 3
    assert status["phase"] == "Available"
    types = {c["type"]: c["status"] for c in status["conditions"]}
    assert types == {"Ready": "True", "Drifted": "False", "Synced": "True"}
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


def test_an_unchanged_myapp_keeps_the_revision_that_last_changed_it() -> None:
    old = {"revision": "main@sha1:old", "path": "apps/web.yaml", "lastSyncTime": "t0"}
    new = SyncInfo("main@sha1:new", "apps/web.yaml", "t1")
    kept = source_for(False, myapp(status={"source": old}), new)
    assert (kept.revision, kept.time) == ("main@sha1:old", "t0")
    assert source_for(True, myapp(status={"source": old}), new) == new
    moved = SyncInfo("main@sha1:new", "apps/other.yaml", "t1")
    assert source_for(False, myapp(status={"source": old}), moved) == moved
