"""The operator against the real API server: MyApp → owned Deployment → status."""

from __future__ import annotations

from typing import Any

import pytest

from gitsync.errors import APIInvalidError
from gitsync.kube.client import Kube, path_of
from gitsync.reconcile.controller import Controller
from tests.support import available, get, myapp, wait_until


def test_myapp_gets_an_owned_deployment_and_status(
    kube: Kube, namespace: str, controller: Controller
) -> None:
    app = kube.create(path_of("MyApp", namespace), myapp(namespace, "web", replicas=2, port=8080))
    dep = wait_until(lambda: get(kube, "Deployment", namespace, "web"), what="the Deployment")
    ref = dep["metadata"]["ownerReferences"][0]
    assert ref == {
        "apiVersion": "apps.example.com/v1",
        "kind": "MyApp",
        "name": "web",
        "uid": app["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }
    container = dep["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == "nginx:1.27"
    assert container["ports"] == [{"containerPort": 8080, "protocol": "TCP"}]
    assert any(m["manager"] == "gitsync" for m in dep["metadata"]["managedFields"])
    live = wait_until(lambda: available(kube, namespace, "web", 2), timeout=60, what="Available")
    ready = next(c for c in live["status"]["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "True"
    status_mgr = [m for m in live["metadata"]["managedFields"] if m.get("subresource") == "status"]
    assert [m["manager"] for m in status_mgr] == ["gitsync"]


def test_spec_change_rolls_through_and_delete_collects(
    kube: Kube, namespace: str, controller: Controller
) -> None:
    kube.create(path_of("MyApp", namespace), myapp(namespace, "api", replicas=1))
    wait_until(lambda: available(kube, namespace, "api", 1), timeout=60, what="Available")
    patch = {"spec": {"image": "nginx:1.28", "replicas": 3}}
    kube.request(
        "PATCH",
        path_of("MyApp", namespace, "api"),
        body=patch,
        content_type="application/merge-patch+json",
    )

    def followed() -> bool:
        dep = get(kube, "Deployment", namespace, "api") or {}
        spec = dep.get("spec", {})
        image = spec.get("template", {}).get("spec", {}).get("containers", [{}])[0].get("image")
        return bool(spec.get("replicas") == 3 and image == "nginx:1.28")

    wait_until(followed, what="the Deployment to follow the MyApp")
    wait_until(lambda: available(kube, namespace, "api", 3), timeout=60, what="3 available")

    kube.delete(path_of("MyApp", namespace, "api"))
    wait_until(
        lambda: get(kube, "Deployment", namespace, "api") is None,
        timeout=60,
        what="the garbage collector to delete the Deployment",
    )


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"image": None, "replicas": 1}, "spec.image: Required value"),
        ({"replicas": -1}, "spec.replicas: Invalid value: -1"),
        ({"replicas": "three"}, 'spec.replicas: Invalid value: "string"'),
        ({"driftPolicy": "ignore"}, 'spec.driftPolicy: Unsupported value: "ignore"'),
    ],
    ids=["missing-image", "negative-replicas", "string-replicas", "unknown-policy"],
)
def test_invalid_myapps_are_rejected_by_the_schema(
    kube: Kube, crd: str, namespace: str, spec: dict[str, Any], message: str
) -> None:
    body = myapp(namespace, "bad", **spec)
    body["spec"] = {k: v for k, v in body["spec"].items() if v is not None}
    with pytest.raises(APIInvalidError) as err:
        kube.create(path_of("MyApp", namespace), body)
    assert any(message in c for c in err.value.causes), err.value.causes


def test_converged_reconciles_write_nothing(
    kube: Kube, namespace: str, controller: Controller
) -> None:
    for name in ("a", "b", "c"):
        kube.create(path_of("MyApp", namespace), myapp(namespace, name, replicas=1, port=80))
    for name in ("a", "b", "c"):
        wait_until(lambda n=name: available(kube, namespace, n, 1), timeout=60, what=name)  # type: ignore[misc]
    assert controller.wait_idle(30)
    before = {
        (kind, n): get(kube, kind, namespace, n)["metadata"]["resourceVersion"]  # type: ignore[index]
        for kind in ("MyApp", "Deployment")
        for n in ("a", "b", "c")
    }
    writes = {v: kube.requests[v] for v in ("APPLY", "DRYRUN")}
    for _ in range(3):
        for n in ("a", "b", "c"):
            controller.reconcile(f"{namespace}/{n}")
    after = {
        (kind, n): get(kube, kind, namespace, n)["metadata"]["resourceVersion"]  # type: ignore[index]
        for kind in ("MyApp", "Deployment")
        for n in ("a", "b", "c")
    }
    assert after == before
    assert {v: kube.requests[v] for v in ("APPLY", "DRYRUN")} == writes


def test_deployment_deleted_by_hand_is_recreated(
    kube: Kube, namespace: str, controller: Controller
) -> None:
    kube.create(path_of("MyApp", namespace), myapp(namespace, "svc", replicas=2))
    wait_until(lambda: available(kube, namespace, "svc", 2), timeout=60, what="Available")
    old_uid = get(kube, "Deployment", namespace, "svc")["metadata"]["uid"]  # type: ignore[index]
    kube.delete(path_of("Deployment", namespace, "svc"))

    def recreated() -> bool:
        dep = get(kube, "Deployment", namespace, "svc")
        return dep is not None and dep["metadata"]["uid"] != old_uid

    wait_until(recreated, what="the Deployment to be recreated")
    wait_until(lambda: available(kube, namespace, "svc", 2), timeout=60, what="recovery")


def test_rendered_deployment_equals_what_the_server_stores(
    kube: Kube, crd: str, namespace: str
) -> None:
    from gitsync.engine import drift, managedfields
    from gitsync.model.render import render

    spec = {
        "replicas": 2,
        "port": 8080,
        "env": [{"name": "MODE", "value": "prod"}, {"name": "EMPTY", "value": ""}],
        "resources": {
            "requests": {"cpu": "1000m", "memory": "1024Mi"},
            "limits": {"cpu": "1.5", "memory": "1.5Gi"},
        },
    }
    app = kube.create(path_of("MyApp", namespace), myapp(namespace, "exact", **spec))
    desired = render(app)
    live = kube.apply(path_of("Deployment", namespace, "exact"), desired, field_manager="gitsync")
    assert drift.fast_equal(desired, live)
    assert drift.drift_items("Deployment/exact", desired, live) == []
    entry = next(m for m in live["metadata"]["managedFields"] if m["manager"] == "gitsync")
    assert managedfields.fields_of(desired) == managedfields.leaf_paths(entry["fieldsV1"])
    container = live["spec"]["template"]["spec"]["containers"][0]
    assert container["resources"] == {
        "requests": {"cpu": "1", "memory": "1Gi"},
        "limits": {"cpu": "1500m", "memory": "1536Mi"},
    }


def test_a_deployment_that_is_not_ours_is_never_taken_over(
    kube: Kube, namespace: str, controller: Controller
) -> None:
    theirs = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "taken", "namespace": namespace},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "theirs"}},
            "template": {
                "metadata": {"labels": {"app": "theirs"}},
                "spec": {"containers": [{"name": "theirs", "image": "busybox"}]},
            },
        },
    }
    kube.create(path_of("Deployment", namespace), theirs)
    kube.create(path_of("MyApp", namespace), myapp(namespace, "taken"))

    def refused() -> str:
        app = get(kube, "MyApp", namespace, "taken") or {}
        conds = (app.get("status") or {}).get("conditions") or []
        ready: dict[str, object] = next((c for c in conds if c["type"] == "Ready"), {})
        return str(ready.get("message", "")) if ready.get("status") == "False" else ""

    message = wait_until(refused, what="the refusal in status")
    assert "is not owned by MyApp" in message
    dep = get(kube, "Deployment", namespace, "taken")
    assert dep is not None
    assert "ownerReferences" not in dep["metadata"]
    assert dep["spec"]["template"]["spec"]["containers"][0]["name"] == "theirs"
    # (this test's own create shows as an Update by the client's user agent)
    assert not any(m["operation"] == "Apply" for m in dep["metadata"]["managedFields"])
