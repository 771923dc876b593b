"""The pure parts of the planner: the applied stamp, the desired-moved/drift split,
and removing fields we leave to others."""

from __future__ import annotations

from typing import Any

from gitsync.api import APPLIED_ANNOTATION
from gitsync.drift import DriftItem
from gitsync.plan import Policy, split, stamped, without

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
