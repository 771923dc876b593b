"""The fleet's states and standing drift, read from the MyApps' status for the metrics."""

from __future__ import annotations

from gitsync.model.api import Obj
from gitsync.model.fleet import STATES, drifted_since, states


def app(name: str, *conditions: tuple[str, str, str], drift: list[Obj] | None = None) -> Obj:
    status: Obj = {
        "conditions": [
            {"type": t, "status": s, "lastTransitionTime": at, "reason": "r", "message": ""}
            for t, s, at in conditions
        ]
    }
    if drift is not None:
        status["drift"] = drift
    return {"metadata": {"namespace": "shop", "name": name}, "status": status}


T0 = "2026-12-05T10:00:00Z"
T1 = "2026-12-05T10:05:00Z"
DRIFT = {"object": "Deployment/shop/a", "path": "spec.replicas", "manager": "kubectl-edit"}
CONFLICT = {**DRIFT, "manager": "hpa", "conflict": True}


def test_each_state_is_counted_and_every_state_has_a_series() -> None:
    fleet = [
        app("fine", ("Ready", "True", T0), ("Drifted", "False", T0), ("Synced", "True", T0)),
        app("drifted", ("Ready", "True", T0), ("Drifted", "True", T1), drift=[DRIFT]),
        app("drifted-too", ("Drifted", "True", T1), drift=[DRIFT]),
        # the condition asked for is found by its type, wherever it is in the list
        app("waiting", ("Ready", "True", T0), ("Drifted", "False", T0), ("Synced", "False", T0)),
        app("both", ("Drifted", "True", T1), drift=[DRIFT, CONFLICT]),
        app("conflict", ("Drifted", "True", T1), drift=[CONFLICT]),
        app("failed", ("Synced", "False", T0), ("Ready", "False", T0)),
        {"metadata": {"namespace": "shop", "name": "new"}},  # no status yet
    ]
    assert states(fleet) == {
        "total": 8,
        "drifted": 3,  # "conflict" alone is not drift gitsync may take back
        "conflict": 2,
        "not_synced": 2,
        "not_ready": 1,
    }
    assert set(states([])) == set(STATES) and not any(states([]).values())


def test_drift_reported_but_not_marked_is_not_counted() -> None:
    # a drift list left from before while the condition says none: the condition rules
    stale = app("a", ("Drifted", "False", T0), drift=[DRIFT])
    assert states([stale])["drifted"] == 0


def test_each_drifted_myapp_has_the_time_it_became_drifted() -> None:
    fleet = [
        app("a", ("Drifted", "True", T1), drift=[DRIFT]),
        app("b", ("Drifted", "False", T0)),
        app("c", ("Drifted", "True", "yesterday")),  # unreadable: left out, not guessed
        app("d", ("Drifted", "True", "2026-12-05T10:05:00")),  # no zone: left out
        {"metadata": {"namespace": "shop", "name": "e"}},
    ]
    assert drifted_since(fleet) == {"shop/a": 1796465100.0}
