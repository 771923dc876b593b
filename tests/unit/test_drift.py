"""drift: projection, the fast path, drift items and the status entries made of them.

Who changed a drifted field is in test_drift_attribution.py.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from gitsync.engine.drift import (
    DriftItem,
    canonicalise,
    comparable,
    drift_items,
    drift_signature,
    fast_equal,
    project,
    status_entries,
)
from gitsync.engine.fieldrules import rule_at
from gitsync.model.api import LAST_APPLIED_ANNOTATION, Obj
from gitsync.model.render import desired_myapp, render
from tests.unit.drift_samples import APP, MYAPP, UID, C, container, live_deployment

CONTAINER = ("f:spec", "f:template", "f:spec", "f:containers", APP)


Mutation = Callable[[Obj], None]


def _node(obj: Obj, parents: list[str]) -> Any:
    node: Any = obj
    for part in parents:
        node = node[int(part)] if isinstance(node, list) else node[part]
    return node


def _parts(path: str) -> list[str]:
    # JSON-pointer style: "/" separates, "~1" is a "/" inside a key such as a label
    return [p.replace("~1", "/") for p in path.split("/")]


def _set(path: str, value: Any) -> Mutation:
    def mutate(obj: Obj) -> None:
        *parents, last = _parts(path)
        _node(obj, parents)[last] = value

    return mutate


def _delete(path: str) -> Mutation:
    def mutate(obj: Obj) -> None:
        *parents, last = _parts(path)
        node = _node(obj, parents)
        del node[int(last) if isinstance(node, list) else last]

    return mutate


TPL = "spec/template/spec/containers/0"

NOT_DRIFT: list[Any] = [
    pytest.param(lambda o: None, id="unchanged"),
    pytest.param(_set("metadata/labels/team", "payments"), id="label added by others"),
    pytest.param(_set("spec/template/metadata/labels/pod-template-hash", "abc"), id="pod label"),
    pytest.param(_set("metadata/annotations/note", "x"), id="annotation added by others"),
    pytest.param(_set("spec/strategy", {"type": "Recreate"}), id="strategy"),
    pytest.param(_set("spec/revisionHistoryLimit", 2), id="revisionHistoryLimit"),
    pytest.param(_set(f"{TPL}/terminationMessagePath", "/tmp/log"), id="terminationMessagePath"),
    pytest.param(_set(f"{TPL}/imagePullPolicy", "Always"), id="imagePullPolicy"),
    pytest.param(_set(f"{TPL}/resources/limits/memory", "1Gi"), id="a limit gitsync does not set"),
    pytest.param(
        lambda o: o["spec"]["template"]["spec"]["containers"].append({"name": "sidecar"}),
        id="a container others add",
    ),
    pytest.param(lambda o: container(o)["env"].reverse(), id="env order"),
    pytest.param(_delete("apiVersion"), id="list items carry no apiVersion"),
    pytest.param(_delete("status"), id="status"),
]


@pytest.mark.parametrize("mutate", NOT_DRIFT)
def test_no_drift(mutate: Mutation) -> None:
    desired = render(MYAPP)
    live = live_deployment()
    mutate(live)
    assert fast_equal(desired, live)
    assert drift_items("Deployment/web", desired, live) == []


@pytest.mark.parametrize(
    ("live_value", "desired_value"),
    [
        ("1", "1000m"),
        ("1000m", "1"),
        ("1Gi", "1024Mi"),
        (1, "1"),
        ("0.5", "500m"),
        # what the API server stores for sub-milli values: rounded up to a whole milli
        ("1m", "2n"),
        ("1473m", "1.4727"),
    ],
)
def test_equal_quantities_are_not_drift(live_value: Any, desired_value: Any) -> None:
    desired = render(MYAPP)
    container(desired)["resources"]["limits"]["cpu"] = desired_value
    live = live_deployment()
    container(live)["resources"]["limits"]["cpu"] = live_value
    assert fast_equal(desired, live)
    assert drift_items("Deployment/web", desired, live) == []


def test_int_fields_as_strings_are_not_drift() -> None:
    desired = render(MYAPP)
    desired["spec"]["replicas"] = "3"
    container(desired)["ports"][0]["containerPort"] = "8080"
    assert fast_equal(desired, live_deployment())
    assert drift_items("Deployment/web", desired, live_deployment()) == []


def test_myapp_from_git_against_the_stored_myapp() -> None:
    git: Obj = {
        "apiVersion": "apps.example.com/v1",
        "kind": "MyApp",
        "metadata": {"name": "web", "namespace": "shop", "labels": {"a": "1"}},
        "spec": {
            "image": "nginx:1.27",
            "port": "80",
            "resources": {"limits": {"cpu": "1000m", "memory": "1Gi"}},
        },
    }
    live: Obj = {
        "apiVersion": "apps.example.com/v1",
        "kind": "MyApp",
        "metadata": {
            "name": "web",
            "namespace": "shop",
            "uid": UID,
            "labels": {"a": "1", "added-by": "someone"},
        },
        "spec": {
            "image": "nginx:1.27",
            "port": 80,
            "replicas": 1,  # the CRD default
            "resources": {"limits": {"cpu": 1, "memory": "1024Mi"}},
        },
        "status": {"phase": "Available"},
    }
    assert fast_equal(desired_myapp(git), live)
    live["spec"]["image"] = "nginx:1.28"
    assert not fast_equal(desired_myapp(git), live)
    assert [(i.object, i.path, i.desired, i.live) for i in drift_items("MyApp/web", git, live)] == [
        ("MyApp/web", "spec.image", "nginx:1.27", "nginx:1.28")
    ]


REMOVED_ENV = {"name": "MODE", "value": "prod"}
DRIFT: list[Any] = [
    pytest.param(_set("spec/replicas", 5), [("spec.replicas", 3, 5)], id="scaled"),
    pytest.param(
        _set(f"{TPL}/image", "nginx:1.28"),
        [(f"{C}.image", "nginx:1.27", "nginx:1.28")],
        id="image",
    ),
    pytest.param(
        _set(f"{TPL}/env/0/value", "info"),
        [(f"{C}.env[name=LOG_LEVEL].value", "debug", "info")],
        id="env value",
    ),
    pytest.param(
        _delete(f"{TPL}/env/1"),
        [(f"{C}.env[name=MODE]", REMOVED_ENV, None)],
        id="env item removed",
    ),
    pytest.param(
        _delete(f"{TPL}/ports"),
        [
            (
                f"{C}.ports[containerPort=8080,protocol=TCP]",
                {"containerPort": 8080, "protocol": "TCP"},
                None,
            )
        ],
        id="ports removed",
    ),
    pytest.param(
        _set(f"{TPL}/resources/requests/memory", "256Mi"),
        [(f"{C}.resources.requests.memory", "128Mi", "256Mi")],
        id="quantity",
    ),
    pytest.param(
        _delete(f"{TPL}/resources"),
        [
            (f"{C}.resources.limits.cpu", "1", None),
            (f"{C}.resources.requests.cpu", "250m", None),
            (f"{C}.resources.requests.memory", "128Mi", None),
        ],
        id="resources removed: leaf by leaf",
    ),
    pytest.param(
        _set("metadata/labels/app.kubernetes.io~1managed-by", "helm"),
        [("metadata.labels[app.kubernetes.io/managed-by]", "gitsync", "helm")],
        id="label changed",
    ),
    pytest.param(
        _delete("spec/template/metadata/labels/app.kubernetes.io~1name"),
        [("spec.template.metadata.labels[app.kubernetes.io/name]", "web", None)],
        id="pod label removed",
    ),
    pytest.param(
        _set("metadata/ownerReferences", []),
        [(f"metadata.ownerReferences[uid={UID}]", "<owner>", None)],
        id="owner reference removed",
    ),
    pytest.param(
        _set("metadata/ownerReferences/0/controller", False),
        [(f"metadata.ownerReferences[uid={UID}]", "<owner>", "<changed owner>")],
        id="owner reference changed: atomic",
    ),
    pytest.param(
        _set("spec/template/spec/containers", [{"name": "other", "image": "x"}]),
        [(C, "<container>", None)],
        id="container replaced",
    ),
]


@pytest.mark.parametrize(("mutate", "expected"), DRIFT)
def test_drift(mutate: Mutation, expected: list[tuple[str, Any, Any]]) -> None:
    desired = render(MYAPP)
    live = live_deployment()
    mutate(live)
    placeholders = {
        "<owner>": desired["metadata"]["ownerReferences"][0],
        "<changed owner>": {**desired["metadata"]["ownerReferences"][0], "controller": False},
        "<container>": container(desired),
    }

    def fill(value: Any) -> Any:
        return placeholders.get(value, value) if isinstance(value, str) else value

    want = [(path, fill(d), fill(v)) for path, d, v in expected]
    assert not fast_equal(desired, live)
    items = drift_items("Deployment/web", desired, live)
    assert [(i.path, i.desired, i.live) for i in items] == want
    assert {i.object for i in items} == {"Deployment/web"}


def test_drift_item_carries_the_smd_path() -> None:
    live = live_deployment()
    container(live)["image"] = "nginx:1.28"
    (item,) = drift_items("Deployment/web", render(MYAPP), live)
    assert item.smd_path == (*CONTAINER, "f:image")


# -- projection ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("at", "live", "desired", "projected"),
    [
        ("", {"a": 1, "b": 2}, {"a": 0}, {"a": 1}),
        ("", {"b": 2}, {"a": 0}, {}),
        ("", {"a": {"x": 1, "y": 2}}, {"a": {"x": 0}}, {"a": {"x": 1}}),
        ("", {"a": 5}, {"a": {"x": 0}}, {"a": 5}),  # a different shape is kept, to differ
        ("", {"args": [1, 2, 3]}, {"args": [1]}, {"args": [1, 2, 3]}),  # atomic: whole
        (
            # a container: keyed lists are keyed where they stand, not by name
            "spec.template.spec.containers[]",
            {"env": [{"name": "B", "value": "2"}, {"name": "A", "value": "1", "x": 0}]},
            {"env": [{"name": "A", "value": ""}, {"name": "C"}]},
            {"env": [{"name": "A", "value": "1"}]},
        ),
        (
            "spec.template.spec.containers[]",
            {"ports": [{"containerPort": 80, "protocol": "UDP"}, {"containerPort": 80}]},
            {"ports": [{"containerPort": 80, "protocol": "TCP"}]},
            {"ports": [{"containerPort": 80}]},  # protocol defaults to TCP
        ),
        (
            "metadata",
            {"ownerReferences": [{"uid": "u1", "name": "a", "kind": "K"}]},
            {"ownerReferences": [{"uid": "u1", "name": "a"}]},
            {"ownerReferences": [{"uid": "u1", "name": "a"}]},
        ),
    ],
)
def test_project(at: str, live: Obj, desired: Obj, projected: Obj) -> None:
    original = copy.deepcopy(live)
    assert project(live, desired, rule_at(at)) == projected
    assert live == original


# -- status -------------------------------------------------------------------------------


def test_status_entries_sorted_by_object_and_path_without_unknowns() -> None:
    items = [
        DriftItem(
            "MyApp/web",
            "spec.image",
            ("f:spec", "f:image"),
            "a",
            "b",
            "kubectl-edit",
            "Update",
            "t1",
        ),
        DriftItem(
            "Deployment/web",
            "spec.replicas",
            ("f:spec", "f:replicas"),
            3,
            5,
            "hpa-sim",
            "Apply",
            "t2",
            True,
        ),
        DriftItem("Deployment/web", f"{C}.env[name=A]", (), {"name": "A"}, None),
    ]
    assert status_entries(items) == [
        {
            "object": "Deployment/web",
            "path": "spec.replicas",
            "desired": 3,
            "live": 5,
            "manager": "hpa-sim",
            "operation": "Apply",
            "time": "t2",
            "conflict": True,
        },
        {
            "object": "Deployment/web",
            "path": f"{C}.env[name=A]",
            "desired": {"name": "A"},
            "conflict": False,
        },
        {
            "object": "MyApp/web",
            "path": "spec.image",
            "desired": "a",
            "live": "b",
            "manager": "kubectl-edit",
            "operation": "Update",
            "time": "t1",
            "conflict": False,
        },
    ]


def test_drift_signature_changes_only_with_the_set_of_paths() -> None:
    a = DriftItem("Deployment/web", "spec.replicas", (), 3, 5)
    b = DriftItem("Deployment/web", "spec.replicas", (), 3, 6, "kubectl", "Update", "t")
    c = DriftItem("MyApp/web", "spec.image", (), "x", "y")
    assert drift_signature([a]) == drift_signature([b])
    assert drift_signature([a, c]) == frozenset(
        {("Deployment/web", "spec.replicas"), ("MyApp/web", "spec.image")}
    )
    assert drift_signature([a]) != drift_signature([a, c])
    assert drift_signature([]) == frozenset()


def test_what_can_drift_leaves_out_kubectls_last_applied_annotation() -> None:
    annotations = {LAST_APPLIED_ANNOTATION: "{}", "a": "b"}
    body: Obj = {
        "apiVersion": "apps.example.com/v1",
        "kind": "MyApp",
        "metadata": {"name": "web", "annotations": annotations},
        "spec": {"image": "nginx"},
    }
    assert comparable(body) == {"spec": {"image": "nginx"}, "metadata": {"annotations": {"a": "b"}}}
    del annotations["a"]
    assert comparable(body) == {"spec": {"image": "nginx"}, "metadata": {"annotations": {}}}


def test_a_value_that_is_no_quantity_stays_as_written_beside_canonical_ones() -> None:
    limits = {"cpu": "lots", "memory": "1024Mi"}
    got = canonicalise({"spec": {"resources": {"limits": limits}}})
    assert got["spec"]["resources"]["limits"] == {"cpu": "lots", "memory": "1Gi"}
