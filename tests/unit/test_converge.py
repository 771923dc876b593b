"""converge.execute: what one step leaves in status when the dry-run shows no change."""

from __future__ import annotations

import copy
from typing import Any

from gitsync.engine.drift import DriftItem
from gitsync.engine.planner import Step
from gitsync.model.api import Obj
from gitsync.reconcile.converge import execute

LIVE: Obj = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "web", "namespace": "ns", "resourceVersion": "7"},
    "spec": {"replicas": 6, "template": {"spec": {"containers": [{"name": "app"}]}}},
}


class ServerStoresLive:
    """A server whose dry-run of any body stores exactly what is live."""

    def __init__(self) -> None:
        self.writes: list[tuple[Obj, bool]] = []

    def apply(self, obj: Obj, *, force: bool = False, dry_run: bool = False) -> Obj:
        if not dry_run:
            self.writes.append((obj, force))
        return copy.deepcopy(LIVE)

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"unexpected call {name}")


def item(path: str, manager: str, *, conflict: bool) -> DriftItem:
    return DriftItem(
        "Deployment/web",
        path,
        tuple(f"f:{p}" for p in path.split(".")),
        desired=2,
        live=6,
        manager=manager,
        operation="Update" if manager.startswith("kubectl") else "Apply",
        conflict=conflict,
    )


def test_what_a_step_leaves_stays_when_the_dry_run_shows_nothing_to_write() -> None:
    conflict = item("spec.replicas", "hpa-sim", conflict=True)
    reported = item("spec.minReadySeconds", "kubectl-edit", conflict=False)
    taken_back = item("spec.paused", "kubectl-patch", conflict=False)
    step = Step(
        "Deployment ns/web",
        "configured",
        LIVE,
        LIVE,
        body={"spec": {}},
        force=True,
        corrected=(taken_back,),
        drift=(conflict, reported),
    )
    server = ServerStoresLive()
    outcome = execute(server, step)
    assert server.writes == []
    assert outcome.action == "unchanged"
    # still standing: status keeps them, and no DriftResolved is announced
    assert outcome.drift == [conflict, reported]
    # nothing was taken back: the server holds what it held
    assert outcome.corrected == []


class Recorder:
    """A server that stores whatever is applied: records each apply and dry-run."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def apply(self, obj: Obj, *, force: bool = False, dry_run: bool = False) -> Obj:
        self.calls.append("dry-run" if dry_run else "apply")
        return copy.deepcopy(obj)

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"unexpected call {name}")


def test_a_write_whose_stamp_moves_is_sent_without_a_dry_run() -> None:
    body: Obj = {**LIVE, "spec": {**LIVE["spec"], "replicas": 2}}
    server = Recorder()
    outcome = execute(server, Step("Deployment ns/web", "configured", LIVE, body, body, moved=True))
    assert server.calls == ["apply"]
    assert outcome.action == "configured"


def test_drift_under_the_same_stamp_is_confirmed_by_a_dry_run_first() -> None:
    body: Obj = {**LIVE, "spec": {**LIVE["spec"], "replicas": 2}}
    server = Recorder()
    outcome = execute(server, Step("Deployment ns/web", "configured", LIVE, body, body))
    assert server.calls == ["dry-run", "apply"]
    assert outcome.action == "configured"


def test_a_step_without_a_body_sends_nothing_and_keeps_its_drift() -> None:
    reported = item("spec.minReadySeconds", "kubectl-edit", conflict=False)
    server = Recorder()
    outcome = execute(server, Step("Deployment ns/web", "unchanged", LIVE, LIVE, drift=(reported,)))
    assert server.calls == []
    assert (outcome.action, outcome.live, outcome.drift) == ("unchanged", LIVE, [reported])


def test_an_object_not_live_is_created_by_one_apply_without_a_dry_run() -> None:
    server = Recorder()
    outcome = execute(server, Step("Deployment ns/web", "created", None, LIVE, LIVE))
    assert server.calls == ["apply"]
    assert (outcome.action, outcome.live) == ("created", LIVE)
