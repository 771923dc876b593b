"""The local control plane is real: SSA, kwok rollouts, the garbage collector,
RBAC and CRD validation behave as on any cluster."""

from __future__ import annotations

import base64
import json
import ssl
import urllib.error
import urllib.request
import uuid
from typing import Any

import pytest

from gitsync.errors import APIInvalidError, APINotFoundError
from gitsync.kube.client import Kube, resource_path
from tests.support import wait_until

DEPLOYMENTS = ("apps/v1", "deployments")


def test_ssa_deployment_rolls_out_through_kwok(kube: Kube, namespace: str) -> None:
    body = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": namespace},
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]},
            },
        },
    }
    path = resource_path(*DEPLOYMENTS, namespace, "web")
    kube.apply(path, body, field_manager="proof-manager")

    def available() -> int:
        return int(kube.get(path).get("status", {}).get("availableReplicas", 0)) == 3

    wait_until(available, timeout=60, what="3 available replicas")
    live = kube.get(path)
    managers = {(m["manager"], m["operation"]) for m in live["metadata"]["managedFields"]}
    assert ("proof-manager", "Apply") in managers
    applied = next(m for m in live["metadata"]["managedFields"] if m["manager"] == "proof-manager")
    assert "f:replicas" in applied["fieldsV1"]["f:spec"]
    pods = kube.list(resource_path("v1", "pods", namespace))["items"]
    assert len(pods) == 3
    # kwok's fake Nodes: the control plane's own, or those `make bench` adds beside them
    nodes = kube.list(resource_path("v1", "nodes"))["items"]
    fake = {
        n["metadata"]["name"]
        for n in nodes
        if (n["metadata"].get("annotations") or {}).get("kwok.x-k8s.io/node") == "fake"
    }
    assert {"kwok-node-0", "kwok-node-1"} <= fake
    assert {p["spec"]["nodeName"] for p in pods} <= fake
    assert all(p["status"]["phase"] == "Running" for p in pods)


def test_garbage_collector_deletes_orphans(kube: Kube, namespace: str) -> None:
    cms = resource_path("v1", "configmaps", namespace)
    owner = kube.create(
        cms, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "owner"}}
    )
    ref = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "name": "owner",
        "uid": owner["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }
    kube.create(
        cms,
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "child", "ownerReferences": [ref]},
        },
    )
    kube.delete(resource_path("v1", "configmaps", namespace, "owner"))

    def child_gone() -> bool:
        try:
            kube.get(resource_path("v1", "configmaps", namespace, "child"))
        except APINotFoundError:
            return True
        return False

    wait_until(child_gone, timeout=60, what="the garbage collector to delete the child")


def _token_for(kube: Kube, namespace: str, sa: str) -> str:
    reply = kube.create(
        resource_path("v1", "serviceaccounts", namespace, sa, "token"),
        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}},
    )
    return str(reply["status"]["token"])


def _get_as(kube: Kube, token: str, path: str) -> int:
    ctx = ssl.create_default_context(cafile=kube.config.ssl_ca_cert)
    req = urllib.request.Request(kube.host + path, headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(req, context=ctx, timeout=10) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as e:
        return int(e.code)


def test_rbac_denies_then_allows(kube: Kube, namespace: str) -> None:
    sa = "reader"
    kube.create(
        resource_path("v1", "serviceaccounts", namespace),
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": sa}},
    )
    token = _token_for(kube, namespace, sa)
    # the token is a real signed JWT for this ServiceAccount
    claims = json.loads(base64.urlsafe_b64decode(token.split(".")[1] + "=="))
    assert claims["sub"] == f"system:serviceaccount:{namespace}:{sa}"
    path = resource_path("v1", "configmaps", namespace)
    assert _get_as(kube, token, path) == 403

    rbac = "rbac.authorization.k8s.io/v1"
    kube.create(
        resource_path(rbac, "roles", namespace),
        {
            "apiVersion": rbac,
            "kind": "Role",
            "metadata": {"name": "read-cm"},
            "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list"]}],
        },
    )
    kube.create(
        resource_path(rbac, "rolebindings", namespace),
        {
            "apiVersion": rbac,
            "kind": "RoleBinding",
            "metadata": {"name": "read-cm"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "read-cm"},
            "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": namespace}],
        },
    )
    wait_until(lambda: _get_as(kube, token, path) == 200, timeout=30, what="RBAC to allow")
    # only the granted verb: reading another resource is still denied
    assert _get_as(kube, token, resource_path("v1", "secrets", namespace)) == 403


def _crd(group: str) -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"widgets.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {
                                "spec": {
                                    "type": "object",
                                    "required": ["size"],
                                    "properties": {"size": {"type": "integer", "minimum": 1}},
                                }
                            },
                        }
                    },
                }
            ],
        },
    }


def test_crd_is_served_and_validates(kube: Kube, namespace: str) -> None:
    group = f"proof{uuid.uuid4().hex[:6]}.example.com"
    crds = resource_path("apiextensions.k8s.io/v1", "customresourcedefinitions")
    kube.create(crds, _crd(group))
    try:

        def established() -> bool:
            crd = kube.get(f"{crds}/widgets.{group}")
            conds = crd.get("status", {}).get("conditions") or []
            return any(c["type"] == "Established" and c["status"] == "True" for c in conds)

        wait_until(established, timeout=30, what="the CRD to be established")
        widgets = resource_path(f"{group}/v1", "widgets", namespace)
        good = {"apiVersion": f"{group}/v1", "kind": "Widget", "metadata": {"name": "ok"}}
        wait_until(
            lambda: _try_create(kube, widgets, {**good, "spec": {"size": 2}}),
            timeout=30,
            what="the CRD to be served",
        )
        assert kube.get(f"{widgets}/ok")["spec"] == {"size": 2}
        bad = {**good, "metadata": {"name": "bad"}, "spec": {"size": 0}}
        with pytest.raises(APIInvalidError) as err:
            kube.create(widgets, bad)
        assert any("spec.size" in c and "greater than or equal to 1" in c for c in err.value.causes)
    finally:
        kube.delete(f"{crds}/widgets.{group}")


def _try_create(kube: Kube, path: str, body: dict[str, Any]) -> bool:
    try:
        kube.create(path, body)
    except APINotFoundError:
        return False
    return True


def test_a_namespace_name_still_terminating_is_drawn_again(
    kube: Kube, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests import support

    # a namespace held in Terminating by a finalizer nobody removes, as a namespace of an
    # earlier test may still be when the next one draws the same suffix
    taken = f"collide-{uuid.uuid4().hex[:10]}"
    path = resource_path("v1", "namespaces", name=taken)
    body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": taken}}
    kube.create(resource_path("v1", "namespaces"), body)
    kube.request(
        "PUT",
        f"{path}/finalize",
        body={**body, "spec": {"finalizers": ["example.com/hold"]}},
    )
    kube.delete(path)
    created: list[str] = []
    try:
        assert kube.get(path)["metadata"].get("deletionTimestamp")
        draws = iter([uuid.UUID(hex=taken.split("-")[1] + "0" * 22), uuid.uuid4()])
        monkeypatch.setattr(uuid, "uuid4", lambda: next(draws))
        created.append(support.create_namespace(kube, "collide"))
        assert created[0] != taken and created[0].startswith("collide-")
        assert kube.get(resource_path("v1", "namespaces", name=created[0]))["status"] == {
            "phase": "Active"
        }
    finally:
        kube.request("PUT", f"{path}/finalize", body={**body, "spec": {"finalizers": []}})
        for name in created:
            kube.delete(resource_path("v1", "namespaces", name=name))
