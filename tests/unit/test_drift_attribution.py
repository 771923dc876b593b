"""drift: who changed a drifted field, and whether gitsync may take it back."""

from __future__ import annotations

from typing import Any

import pytest

from gitsync.engine.drift import DriftItem, attribute, drift_items
from gitsync.model.api import Obj
from gitsync.model.render import render
from tests.unit.drift_samples import APP, MYAPP, C, container, live_deployment


def entry(manager: str, operation: str, fields: Obj, subresource: str = "") -> Obj:
    out: Obj = {
        "apiVersion": "apps/v1",
        "fieldsType": "FieldsV1",
        "fieldsV1": fields,
        "manager": manager,
        "operation": operation,
        "time": f"2025-06-01T1{len(manager) % 10}:00:00Z",
    }
    if subresource:
        out["subresource"] = subresource
    return out


REPLICAS_FIELDS: Obj = {"f:spec": {"f:replicas": {}}}
GITSYNC = entry(
    "gitsync",
    "Apply",
    {
        "f:spec": {
            "f:selector": {},
            "f:template": {"f:spec": {"f:containers": {APP: {".": {}, "f:name": {}}}}},
        }
    },
)
IMAGE_FIELDS: Obj = {"f:spec": {"f:template": {"f:spec": {"f:containers": {APP: {"f:image": {}}}}}}}


def replicas_item() -> DriftItem:
    return DriftItem("Deployment/web", "spec.replicas", ("f:spec", "f:replicas"), 3, 5)


ATTRIBUTION: list[Any] = [
    pytest.param(
        [GITSYNC, entry("kubectl", "Update", REPLICAS_FIELDS, "scale")],
        ("kubectl", "Update", False),
        id="kubectl scale: taken back",
    ),
    pytest.param(
        [GITSYNC, entry("kubectl-edit", "Update", REPLICAS_FIELDS)],
        ("kubectl-edit", "Update", False),
        id="kubectl edit: taken back",
    ),
    pytest.param(
        [GITSYNC, entry("before-first-apply", "Update", REPLICAS_FIELDS)],
        ("before-first-apply", "Update", False),
        id="before-first-apply: taken back",
    ),
    pytest.param(
        [GITSYNC, entry("hpa-sim", "Apply", REPLICAS_FIELDS)],
        ("hpa-sim", "Apply", True),
        id="another applier: conflict",
    ),
    pytest.param(
        [GITSYNC, entry("kube-controller-manager", "Update", REPLICAS_FIELDS, "scale")],
        ("kube-controller-manager", "Update", True),
        id="a real HPA: conflict",
    ),
    pytest.param(
        [
            entry("gitsync", "Apply", REPLICAS_FIELDS),
            entry("hpa-sim", "Apply", REPLICAS_FIELDS),
        ],
        ("hpa-sim", "Apply", True),
        id="shared with another applier: conflict",
    ),
    pytest.param(
        [
            entry("kubectl", "Update", REPLICAS_FIELDS),
            entry("hpa-sim", "Apply", REPLICAS_FIELDS),
        ],
        ("hpa-sim", "Apply", True),
        id="shared by a tool and a controller: the controller is named",
    ),
    pytest.param(
        [entry("gitsync", "Apply", REPLICAS_FIELDS)],
        ("gitsync", "Apply", False),
        id="still gitsync's: not applied yet",
    ),
    pytest.param([GITSYNC], (None, None, False), id="nobody owns it"),
]


@pytest.mark.parametrize(("managed", "expected"), ATTRIBUTION)
def test_attribute(managed: list[Obj], expected: tuple[str | None, str | None, bool]) -> None:
    (item,) = attribute([replicas_item()], managed)
    assert (item.manager, item.operation, item.conflict) == expected
    owner = next((e for e in managed if e["manager"] == item.manager), None)
    assert item.time == (owner["time"] if owner else None)
    assert (item.path, item.desired, item.live) == ("spec.replicas", 3, 5)


@pytest.mark.parametrize(
    ("manager", "force_managers", "conflict"),
    [
        ("kubectl", ("kubectl",), False),
        ("kubectl-set", ("kubectl",), False),
        ("kubectl", ("before-first-apply",), True),  # the list is the policy
        ("hpa-sim", ("kubectl", "hpa-sim"), False),
        ("hpa-sim-2", ("hpa-sim",), False),
        ("hpa-simulator", ("hpa-sim",), True),  # a prefix only up to a dash
    ],
)
def test_force_managers(manager: str, force_managers: tuple[str, ...], conflict: bool) -> None:
    managed = [GITSYNC, entry(manager, "Update", REPLICAS_FIELDS)]
    (item,) = attribute([replicas_item()], managed, force_managers=force_managers)
    assert (item.manager, item.conflict) == (manager, conflict)


def test_attribute_with_another_self_manager() -> None:
    managed = [entry("gitsync-staging", "Apply", REPLICAS_FIELDS)]
    (mine,) = attribute([replicas_item()], managed, self_manager="gitsync-staging")
    (theirs,) = attribute([replicas_item()], managed)
    assert (mine.manager, mine.conflict) == ("gitsync-staging", False)
    assert (theirs.manager, theirs.conflict) == ("gitsync-staging", True)


def test_attribute_a_removed_item_to_the_nearest_owner() -> None:
    live = live_deployment()
    del container(live)["env"][1]
    items = drift_items("Deployment/web", render(MYAPP), live)
    managed = [GITSYNC, entry("kubectl-set", "Update", IMAGE_FIELDS)]
    (item,) = attribute(items, managed)
    assert (item.path, item.manager, item.conflict) == (f"{C}.env[name=MODE]", "gitsync", False)


def test_attribute_end_to_end_after_kubectl_set_image() -> None:
    live = live_deployment()
    container(live)["image"] = "nginx:1.28"
    managed = [GITSYNC, entry("kubectl-set", "Update", IMAGE_FIELDS)]
    items = attribute(drift_items("Deployment/web", render(MYAPP), live), managed)
    assert [(i.path, i.manager, i.operation, i.conflict) for i in items] == [
        (f"{C}.image", "kubectl-set", "Update", False)
    ]
