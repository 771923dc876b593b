"""render: the Deployment a MyApp owns, and the MyApp apply body from Git."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gitsync.model.api import BUCKET_LABEL, Obj
from gitsync.model.render import desired_myapp, inputs, render, selector_labels
from gitsync.model.shards import bucket_of

UID = "6f1c2a7e-2b7a-4d8e-9c41-0a6c9b1f2d3e"
LABELS = {
    "app.kubernetes.io/name": "web",
    "app.kubernetes.io/instance": "web",
    "app.kubernetes.io/managed-by": "gitsync",
    "gitsync.apps.example.com/bucket": "210",  # bucket_of("shop", "web")
}
SELECTOR = {"app.kubernetes.io/name": "web", "app.kubernetes.io/instance": "web"}
OWNER = {
    "apiVersion": "apps.example.com/v1",
    "kind": "MyApp",
    "name": "web",
    "uid": UID,
    "controller": True,
    "blockOwnerDeletion": True,
}


def myapp(**spec: Any) -> Obj:
    """A live MyApp as the API server returns it (defaulted, with uid and status)."""
    return {
        "apiVersion": "apps.example.com/v1",
        "kind": "MyApp",
        "metadata": {
            "name": "web",
            "namespace": "shop",
            "uid": UID,
            "resourceVersion": "4711",
            "generation": 2,
            "labels": {"team": "payments"},
        },
        "spec": {"image": "nginx:1.27", **spec},
        "status": {"phase": "Available", "replicas": 9},
    }


def deployment(container: Obj, replicas: int = 1) -> Obj:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": "web",
            "namespace": "shop",
            "labels": LABELS,
            "ownerReferences": [OWNER],
        },
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": SELECTOR},
            "template": {
                "metadata": {"labels": SELECTOR},
                "spec": {"containers": [{"name": "app", "image": "nginx:1.27", **container}]},
            },
        },
    }


@pytest.mark.parametrize(
    ("spec", "container", "replicas"),
    [
        pytest.param({}, {}, 1, id="minimal: replicas default to 1"),
        pytest.param({"replicas": 3}, {}, 3, id="replicas"),
        pytest.param({"replicas": 0}, {}, 0, id="scaled to zero"),
        pytest.param({"replicas": "4"}, {}, 4, id="replicas as a string"),
        pytest.param({"replicas": None}, {}, 1, id="replicas null"),
        pytest.param(
            {"port": 8080},
            {"ports": [{"containerPort": 8080, "protocol": "TCP"}]},
            1,
            id="port with the protocol the server defaults",
        ),
        pytest.param(
            {"port": "80"},
            {"ports": [{"containerPort": 80, "protocol": "TCP"}]},
            1,
            id="port as a string",
        ),
        pytest.param(
            {"env": [{"name": "A", "value": "1"}, {"name": "EMPTY", "value": ""}, {"name": "B"}]},
            {"env": [{"name": "A", "value": "1"}, {"name": "EMPTY"}, {"name": "B"}]},
            1,
            id="env: empty values dropped as the server drops them",
        ),
        pytest.param({"env": []}, {}, 1, id="empty env omitted"),
        pytest.param(
            {
                "resources": {
                    "requests": {"cpu": "1000m", "memory": "1024Mi"},
                    "limits": {"cpu": 2, "memory": "1.5Gi", "ephemeral-storage": "1e3"},
                }
            },
            {
                "resources": {
                    "requests": {"cpu": "1", "memory": "1Gi"},
                    "limits": {"cpu": "2", "memory": "1536Mi", "ephemeral-storage": "1e3"},
                }
            },
            1,
            id="quantities canonical",
        ),
        pytest.param(
            {"resources": {"requests": {"cpu": "0.5"}, "limits": {}}},
            {"resources": {"requests": {"cpu": "500m"}}},
            1,
            id="empty limits omitted",
        ),
        pytest.param({"resources": {"requests": {}, "limits": {}}}, {}, 1, id="empty resources"),
        pytest.param(
            {"driftPolicy": "report", "suspend": False},
            {},
            1,
            id="gitsync-only fields not rendered",
        ),
    ],
)
def test_render(spec: Obj, container: Obj, replicas: int) -> None:
    assert render(myapp(**spec)) == deployment(container, replicas)


def test_render_without_uid_has_no_owner_reference() -> None:
    app = myapp()
    del app["metadata"]["uid"]
    assert "ownerReferences" not in render(app)["metadata"]


def test_render_cluster_scoped_input_has_no_namespace() -> None:
    app = myapp()
    del app["metadata"]["namespace"]
    rendered = render(app)
    assert "namespace" not in rendered["metadata"]
    assert rendered["metadata"]["labels"][BUCKET_LABEL] == str(bucket_of("", "web"))
    del app["metadata"]["uid"]
    app["spec"]["replicas"] = "three"
    with pytest.raises(ValueError, match=r"^MyApp/web: spec.replicas"):
        render(app)


def test_selector_never_follows_mutable_fields() -> None:
    before = render(myapp(replicas=1))
    after = render(myapp(replicas=5, image="nginx:1.28", port=81))
    assert after["spec"]["selector"] == before["spec"]["selector"]
    assert after["spec"]["selector"] == {"matchLabels": selector_labels("web")}
    assert after["spec"]["template"]["metadata"]["labels"] == selector_labels("web")


def test_render_reads_its_inputs_and_nothing_else() -> None:
    # the planner knows a Deployment's stamp by its MyApp's inputs: a field render read
    # that inputs left out would leave a changed Deployment with a stale stamp
    app = myapp(replicas=2, port=80)
    assert inputs(app) == ("web", "shop", UID, app["spec"])
    assert inputs(app)[3] is app["spec"]  # the MyApp's own spec, not a copy
    others = copy.deepcopy(app)
    others["metadata"].update(
        labels={"team": "other"},
        annotations={"note": "x"},
        resourceVersion="9",
        generation=7,
        managedFields=[{"manager": "kubectl", "operation": "Update"}],
    )
    others["status"] = {"phase": "Failed"}
    others["kind"] = "Other"
    assert inputs(others) == inputs(app) and render(others) == render(app)
    for part, value in (("name", "api"), ("namespace", "other"), ("uid", "u-2")):
        moved = {**app, "metadata": {**app["metadata"], part: value}}
        assert inputs(moved) != inputs(app) and render(moved) != render(app), part
    respec: Obj = copy.deepcopy(app)
    respec["spec"]["port"] = 81
    assert inputs(respec) != inputs(app) and render(respec) != render(app)


def test_render_does_not_mutate_its_input() -> None:
    app = myapp(env=[{"name": "A", "value": ""}], resources={"requests": {"cpu": "1000m"}})
    original = copy.deepcopy(app)
    render(app)
    assert app == original


@pytest.mark.parametrize(
    ("app", "message"),
    [
        ({"metadata": {"name": "web", "namespace": "shop"}, "spec": {}}, "spec.image is required"),
        ({"metadata": {"namespace": "shop"}, "spec": {"image": "x"}}, "without metadata.name"),
        (
            {"metadata": {"name": "", "namespace": "shop"}, "spec": {"image": "x"}},
            "without metadata.name",
        ),
        (myapp(image=""), "spec.image is required"),
        (myapp(replicas="three"), "spec.replicas must be an integer"),
        (myapp(port=True), "spec.port must be an integer"),
        (
            myapp(resources={"limits": {"cpu": "2 cores"}}),
            "spec.resources.limits: invalid quantity",
        ),
        (myapp(env=[{"value": "x"}]), "spec.env items need a name"),
    ],
)
def test_render_rejects_invalid_myapps(app: Obj, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        render(app)


def test_render_error_names_the_object() -> None:
    with pytest.raises(ValueError, match=r"^MyApp/shop/web: spec.replicas"):
        render(myapp(replicas="three"))


def git_myapp(**spec: Any) -> Obj:
    return {
        "apiVersion": "apps.example.com/v1",
        "kind": "MyApp",
        "metadata": {
            "name": "web",
            "namespace": "shop",
            "labels": {"app.kubernetes.io/managed-by": "gitsync"},
            "annotations": {"gitsync.apps.example.com/source-path": "apps/web.yaml"},
        },
        "spec": {"image": "nginx:1.27", **spec},
    }


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({}, {}),
        ({"replicas": "3", "port": "8080"}, {"replicas": 3, "port": 8080}),
        ({"replicas": 2.0}, {"replicas": 2}),
        ({"replicas": "three"}, {"replicas": "three"}),  # left for validation to refuse
        (
            {"resources": {"requests": {"cpu": "1000m", "memory": 1024}}},
            {"resources": {"requests": {"cpu": "1000m", "memory": 1024}}},
        ),
        ({"env": [{"name": "A", "value": ""}]}, {"env": [{"name": "A", "value": ""}]}),
        ({"driftPolicy": "report", "suspend": True}, {"driftPolicy": "report", "suspend": True}),
        # empty mappings and lists are left out: sent, the server cannot apply them
        # over a map it held (test_plan.py's requests-emptied-in-git)
        (
            {"resources": {"requests": {}, "limits": {"memory": "1Gi"}}},
            {"resources": {"limits": {"memory": "1Gi"}}},
        ),
        ({"resources": {"requests": {}, "limits": {}}}, {}),
        ({"resources": {}, "env": []}, {}),
        ({"env": [], "replicas": 0, "suspend": False}, {"replicas": 0, "suspend": False}),
    ],
)
def test_desired_myapp_spec(spec: Obj, expected: Obj) -> None:
    assert desired_myapp(git_myapp(**spec))["spec"] == {"image": "nginx:1.27", **expected}


def test_desired_myapp_keeps_identity_labels_and_annotations_only() -> None:
    source = git_myapp(replicas=2)
    source["metadata"]["uid"] = UID
    source["metadata"]["resourceVersion"] = "12"
    source["status"] = {"phase": "Available"}
    assert desired_myapp(source) == {
        "apiVersion": "apps.example.com/v1",
        "kind": "MyApp",
        "metadata": {
            "name": "web",
            "namespace": "shop",
            "labels": {"app.kubernetes.io/managed-by": "gitsync"},
            "annotations": {"gitsync.apps.example.com/source-path": "apps/web.yaml"},
        },
        "spec": {"image": "nginx:1.27", "replicas": 2},
    }


def test_desired_myapp_does_not_share_or_mutate_its_input() -> None:
    source = git_myapp(replicas="3", env=[{"name": "A", "value": "1"}])
    original = copy.deepcopy(source)
    body = desired_myapp(source)
    body["spec"]["env"][0]["value"] = "changed"
    body["metadata"]["labels"]["x"] = "y"
    assert source == original


def test_a_progress_deadline_is_rendered_and_none_leaves_the_default() -> None:
    assert render(myapp(progressDeadlineSeconds=30))["spec"]["progressDeadlineSeconds"] == 30
    assert "progressDeadlineSeconds" not in render(myapp())["spec"]
