"""Drift against the real API server: who changed what, correct vs report,
conflicts with other controllers, and what is not drift."""

from __future__ import annotations

import os
import subprocess
from typing import Any

import pytest

from gitsync.kube.client import Kube, path_of, resource_path
from gitsync.model import stored
from gitsync.model.myapp_status import MAX_DRIFT_VALUE_BYTES
from gitsync.reconcile.controller import Controller
from tests.support import available, get, myapp, wait_until


def kubectl(kubectl_bin: str, kubeconfig: str, *args: str) -> str:
    proc = subprocess.run(
        [kubectl_bin, *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "KUBECONFIG": kubeconfig},
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def drift_of(kube: Kube, ns: str, name: str) -> list[dict[str, Any]]:
    app = get(kube, "MyApp", ns, name) or {}
    return list((app.get("status") or {}).get("drift") or [])


def owner_of_replicas(dep: dict[str, Any]) -> list[str]:
    return [
        m["manager"]
        for m in dep["metadata"]["managedFields"]
        if "f:replicas" in m.get("fieldsV1", {}).get("f:spec", {})
    ]


def start_app(kube: Kube, ns: str, name: str, **spec: Any) -> None:
    kube.create(path_of("MyApp", ns), myapp(ns, name, **spec))
    replicas = int(spec.get("replicas", 1))
    wait_until(lambda: available(kube, ns, name, replicas), timeout=60, what="Available")


def test_report_policy_records_kubectl_scale_with_its_manager(
    kube: Kube, namespace: str, controller: Controller, kubectl_bin: str, kubeconfig: str
) -> None:
    start_app(kube, namespace, "web", replicas=2, driftPolicy="report")
    kubectl(kubectl_bin, kubeconfig, "-n", namespace, "scale", "deployment/web", "--replicas=5")

    drift = wait_until(lambda: drift_of(kube, namespace, "web"), what="drift in status")
    assert len(drift) == 1
    entry = drift[0]
    assert entry["object"] == "Deployment/web"
    assert entry["path"] == "spec.replicas"
    assert (entry["desired"], entry["live"]) == (2, 5)
    assert entry["manager"] == "kubectl"
    assert entry["operation"] == "Update"
    assert entry["conflict"] is False
    app = get(kube, "MyApp", namespace, "web")
    drifted = next(c for c in app["status"]["conditions"] if c["type"] == "Drifted")  # type: ignore[index]
    assert drifted["status"] == "True"
    # report only: the live value is left as kubectl set it
    assert get(kube, "Deployment", namespace, "web")["spec"]["replicas"] == 5  # type: ignore[index]


def test_correct_policy_takes_replicas_back_from_kubectl(
    kube: Kube, namespace: str, controller: Controller, kubectl_bin: str, kubeconfig: str
) -> None:
    start_app(kube, namespace, "api", replicas=2)
    kubectl(kubectl_bin, kubeconfig, "-n", namespace, "scale", "deployment/api", "--replicas=4")

    def restored() -> dict[str, Any] | None:
        dep = get(kube, "Deployment", namespace, "api")
        if dep and dep["spec"]["replicas"] == 2 and owner_of_replicas(dep) == ["gitsync"]:
            return dep
        return None

    wait_until(restored, what="replicas restored and owned by gitsync again")
    wait_until(lambda: available(kube, namespace, "api", 2), timeout=60, what="Available")
    assert drift_of(kube, namespace, "api") == []

    def corrected() -> bool:
        # the worker emits the Event after the write the server shows (it first works out
        # what the write changed), and the Event is written in the background
        assert controller.events.flush(), "Events still queued"
        events = kube.list(resource_path("v1", "events", namespace))["items"]
        return any(
            e["reason"] == "DriftCorrected"
            and e["involvedObject"]["name"] == "api"
            and "spec.replicas (changed by kubectl)" in e["message"]
            for e in events
        )

    wait_until(corrected, what="a DriftCorrected Event naming kubectl")


def test_set_image_is_corrected(
    kube: Kube, namespace: str, controller: Controller, kubectl_bin: str, kubeconfig: str
) -> None:
    start_app(kube, namespace, "img", replicas=1)
    kubectl(
        kubectl_bin, kubeconfig, "-n", namespace, "set", "image", "deployment/img", "app=evil:1"
    )

    def image() -> str:
        dep = get(kube, "Deployment", namespace, "img") or {}
        return str(dep["spec"]["template"]["spec"]["containers"][0]["image"])

    wait_until(lambda: image() == "nginx:1.27", what="the image to be restored")


def test_field_owned_by_another_controller_is_a_conflict_not_a_fight(
    kube: Kube, namespace: str, controller: Controller
) -> None:
    start_app(kube, namespace, "hpa", replicas=2)
    scaler = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "hpa", "namespace": namespace},
        "spec": {"replicas": 6},
    }
    # another controller claims replicas with SSA (force, as an HPA-like owner would)
    kube.apply(path_of("Deployment", namespace, "hpa"), scaler, field_manager="hpa-sim", force=True)
    drift = wait_until(lambda: drift_of(kube, namespace, "hpa"), what="a conflict in status")
    assert [(d["path"], d["manager"], d["conflict"]) for d in drift] == [
        ("spec.replicas", "hpa-sim", True)
    ]
    assert controller.wait_idle(30)
    dep = get(kube, "Deployment", namespace, "hpa")
    assert dep is not None
    assert dep["spec"]["replicas"] == 6
    assert owner_of_replicas(dep) == ["hpa-sim"]


def test_not_drift_foreign_labels_unset_fields_and_equivalent_values(
    kube: Kube, namespace: str, controller: Controller, kubectl_bin: str, kubeconfig: str
) -> None:
    resources = {
        "requests": {"cpu": "1000m", "memory": "1024Mi"},
        "limits": {"cpu": "2", "memory": "1Gi"},
    }
    start_app(kube, namespace, "calm", replicas=1, port=8080, resources=resources)
    dep = get(kube, "Deployment", namespace, "calm")
    assert dep is not None
    # stored canonical: 1000m is 1, 1024Mi is 1Gi
    assert dep["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"] == {
        "cpu": "1",
        "memory": "1Gi",
    }
    kubectl(kubectl_bin, kubeconfig, "-n", namespace, "label", "deployment/calm", "team=payments")
    other = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "calm", "namespace": namespace, "annotations": {"note": "x"}},
        "spec": {"revisionHistoryLimit": 3},
    }
    kube.apply(path_of("Deployment", namespace, "calm"), other, field_manager="other-operator")

    def settled() -> bool:
        d = get(kube, "Deployment", namespace, "calm") or {}
        gen = d.get("metadata", {}).get("generation")
        return bool(d.get("status", {}).get("observedGeneration") == gen)

    wait_until(settled, what="the deployment controller to observe the change")
    assert controller.wait_idle(30)
    rv = get(kube, "Deployment", namespace, "calm")["metadata"]["resourceVersion"]  # type: ignore[index]
    writes = kube.requests["APPLY"]
    for _ in range(3):
        controller.reconcile(f"{namespace}/calm")
    assert kube.requests["APPLY"] == writes
    assert drift_of(kube, namespace, "calm") == []
    dep = get(kube, "Deployment", namespace, "calm")
    assert dep is not None
    assert dep["metadata"]["resourceVersion"] == rv
    assert dep["metadata"]["labels"]["team"] == "payments"
    assert dep["spec"]["revisionHistoryLimit"] == 3


@pytest.mark.parametrize("policy", ["report", "correct"])
def test_a_field_removed_by_hand_is_drift(
    kube: Kube, namespace: str, controller: Controller, policy: str
) -> None:
    env = [{"name": "MODE", "value": "prod"}]
    start_app(kube, namespace, "rm", replicas=1, env=env, driftPolicy=policy)
    # what `kubectl edit` sends when the env var is deleted
    kube.request(
        "PATCH",
        path_of("Deployment", namespace, "rm"),
        params={"fieldManager": "kubectl-edit"},
        body={"spec": {"template": {"spec": {"containers": [{"name": "app", "env": None}]}}}},
        content_type="application/strategic-merge-patch+json",
    )

    def env_of() -> list[object]:
        dep = get(kube, "Deployment", namespace, "rm") or {}
        return list(dep["spec"]["template"]["spec"]["containers"][0].get("env") or [])

    if policy == "report":
        drift = wait_until(lambda: drift_of(kube, namespace, "rm"), what="the removal in status")
        assert [d["path"] for d in drift] == [
            "spec.template.spec.containers[name=app].env[name=MODE]"
        ]
        assert controller.wait_idle(30)
        assert env_of() == [], "report must leave the removal as it is"
    else:
        wait_until(lambda: env_of() == env, what="the env var to be restored")


def test_drift_in_status_is_bounded_so_the_status_stays_writable(
    kube: Kube, namespace: str, controller: Controller
) -> None:
    # 60 env values of control characters: 9 KB each as the API server stores them
    # (\u0001), 540 KB in all; drift of every one, desired and live, made the status
    # twice that, and every status write failed with "request is too large"
    env = [{"name": f"V{i:02}", "value": "\x01" * 1500} for i in range(60)]
    start_app(kube, namespace, "big", replicas=1, env=env, driftPolicy="report")
    edited = [{"name": e["name"], "value": "\x02" * 1500} for e in env]
    kube.request(
        "PATCH",
        path_of("Deployment", namespace, "big"),
        params={"fieldManager": "kubectl-edit"},
        body={"spec": {"template": {"spec": {"containers": [{"name": "app", "env": edited}]}}}},
        content_type="application/strategic-merge-patch+json",
    )

    def status() -> dict[str, Any]:
        return dict((get(kube, "MyApp", namespace, "big") or {}).get("status") or {})

    st = wait_until(lambda: status() if status().get("drift") else None, what="drift in status")
    drift = st["drift"]
    assert len(drift) == 50, len(drift)
    assert drift[0]["path"] == "spec.template.spec.containers[name=app].env[name=V00].value"
    for entry in drift:
        for name, char in (("desired", "\x01"), ("live", "\x02")):
            value = entry[name]
            kept = len(value) - len(value.lstrip(char))
            assert kept >= 100 and value == char * kept + f"… ({1500 - kept} characters cut)"
            assert stored.size(value) <= MAX_DRIFT_VALUE_BYTES
    drifted = next(c for c in st["conditions"] if c["type"] == "Drifted")
    # what was left out is counted, in words: a CRD older than gitsync has no field for it
    assert drifted["message"].startswith(
        "60 drifted (10 not listed in status.drift, 100 values cut to 1024 bytes): "
    ), drifted
