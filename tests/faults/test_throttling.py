"""API Priority and Fairness squeezing gitsync's own user: a FlowSchema sends every request
of gitsync's ServiceAccount to a PriorityLevelConfiguration with the smallest concurrency
share that rejects what it cannot serve at once. kube-apiserver answers real 429s; gitsync
honours them, the 200-MyApp sync (30 in the short version) completes, and kube-apiserver's
own metrics show no request storm."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gitsync.kube.client import Kube, resource_path
from tests.faults.harness import (
    Daemon,
    DeletionWatch,
    PrivateControlPlane,
    apps_files,
    report,
    runs,
    wait_converged,
)
from tests.gitserver import Upstream
from tests.integration.test_deploy import sa_kubeconfig

pytestmark = [pytest.mark.faults, pytest.mark.integration]

APF = "flowcontrol.apiserver.k8s.io/v1"
RBAC = "rbac.authorization.k8s.io/v1"
APPS = runs(30, 200)


def squeeze(name: str, ns: str) -> list[tuple[str, dict[str, Any]]]:
    level: dict[str, Any] = {
        "apiVersion": APF,
        "kind": "PriorityLevelConfiguration",
        "metadata": {"name": name},
        "spec": {
            "type": "Limited",
            "limited": {
                # the smallest share (a seat or two of the server's total), none borrowed,
                # and no queue: what does not fit at once is a 429
                "nominalConcurrencyShares": 1,
                "lendablePercent": 0,
                "borrowingLimitPercent": 0,
                "limitResponse": {"type": "Reject"},
            },
        },
    }
    schema: dict[str, Any] = {
        "apiVersion": APF,
        "kind": "FlowSchema",
        "metadata": {"name": name},
        "spec": {
            "priorityLevelConfiguration": {"name": name},
            "matchingPrecedence": 50,  # before every default schema but exempt and probes
            "distinguisherMethod": {"type": "ByUser"},
            "rules": [
                {
                    "subjects": [
                        {
                            "kind": "ServiceAccount",
                            "serviceAccount": {"name": "gitsync", "namespace": ns},
                        }
                    ],
                    "resourceRules": [
                        {
                            "verbs": ["*"],
                            "apiGroups": ["*"],
                            "resources": ["*"],
                            "clusterScope": True,
                            "namespaces": ["*"],
                        }
                    ],
                    "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
                }
            ],
        },
    }
    binding: dict[str, Any] = {
        "apiVersion": RBAC,
        "kind": "ClusterRoleBinding",
        "metadata": {"name": name},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": "cluster-admin",
        },
        "subjects": [{"kind": "ServiceAccount", "name": "gitsync", "namespace": ns}],
    }
    return [
        (resource_path(APF, "prioritylevelconfigurations"), level),
        (resource_path(APF, "flowschemas"), schema),
        (resource_path(RBAC, "clusterrolebindings"), binding),
    ]


def counter(metrics: str, name: str, schema: str) -> float:
    """Sum of a kube-apiserver counter over the series of one flow schema."""
    total = 0.0
    for line in metrics.splitlines():
        if line.startswith(name + "{") and f'flow_schema="{schema}"' in line:
            total += float(line.rsplit(" ", 1)[1])
    return total


@pytest.fixture
def squeezed(private_cp: PrivateControlPlane, pkube: Kube, pns: str) -> Iterator[str]:
    name = f"squeeze-{pns}"[:63]
    sa = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "gitsync"}}
    pkube.create(resource_path("v1", "serviceaccounts", pns), sa)
    objects = squeeze(name, pns)
    for path, body in objects:
        pkube.create(path, body)
    try:
        yield name
    finally:
        for path, body in reversed(objects):
            pkube.delete(f"{path}/{body['metadata']['name']}")


def test_apf_429s_are_honoured(
    private_cp: PrivateControlPlane,
    pkube: Kube,
    pns: str,
    squeezed: str,
    upstream: Upstream,
    work: Path,
) -> None:
    kubeconfig = sa_kubeconfig(pkube, str(private_cp.kubeconfig), pns, work / "sa.kubeconfig")
    images = {f"app-{i:03d}": "nginx:1.27" for i in range(APPS)}
    upstream.commit(apps_files(pns, images), f"{APPS} MyApps")
    daemon = Daemon(
        kubeconfig, pns, upstream.file_url, work / "daemon.log", ("--concurrency", "16")
    )
    with DeletionWatch(pkube, pns) as deletions:
        try:
            daemon.start()
            took, _ = wait_converged(pkube, pns, images, 900, "the throttled sync")
        finally:
            daemon.kill()
    metrics = private_cp.apiserver_metrics()
    rejected = counter(metrics, "apiserver_flowcontrol_rejected_requests_total", squeezed)
    dispatched = counter(metrics, "apiserver_flowcontrol_dispatched_requests_total", squeezed)
    print(f"kube-apiserver: {dispatched:.0f} of gitsync's requests served, {rejected:.0f} rejected")
    report(
        "API Priority and Fairness 429s",
        runs=1,
        converged=1,
        wrong_prunes=len(deletions.deleted),
        served=int(dispatched),
        rejected_429=int(rejected),
        converge_s=f"{took:.1f}",
    )
    assert rejected > 0, "the squeeze produced no 429: the scenario proves nothing"
    assert deletions.deleted == []
    # a client that came straight back after each 429, or wrote an Event and a status
    # for each, would see several rejections per request served (measured before
    # gitsync waited Retry-After out in a pass: 4.4 per request served)
    assert rejected <= dispatched, "a request storm: more requests refused than served"
    assert "Traceback" not in daemon.log_text()
