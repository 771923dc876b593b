"""A pass with failed objects keeps its reason where a user looks: the status
ConfigMap, ``gitsync drift``, the MyApp's Synced=False condition, and the metric."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from gitsync.daemon.daemon import Daemon, DaemonOptions
from gitsync.kube.client import Kube, resource_path
from gitsync.reconcile.controller import Controller
from tests.integration.test_cli import gitsync
from tests.integration.test_sync import state_of, syncer
from tests.support import app_yaml, get, wait_until


def synced_condition(kube: Kube, ns: str, name: str) -> dict[str, str] | None:
    app = get(kube, "MyApp", ns, name) or {}
    conditions = (app.get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c["type"] == "Synced"), None)


def test_a_failed_pass_keeps_its_reason_in_configmap_drift_condition_and_metric(
    kube: Kube,
    kubeconfig: str,
    namespace: str,
    controller: Controller,
    tmp_path: Path,
) -> None:
    absent = f"{namespace[:50]}-gone"
    repo = tmp_path / "repo"
    (repo / "apps").mkdir(parents=True)
    for ns, name in ((namespace, "ok"), (namespace, "taken"), (absent, "lost")):
        (repo / "apps" / f"{name}.yaml").write_text(app_yaml(ns, name))
    # a Deployment of that name that is not the MyApp's: gitsync never takes it over
    kube.create(
        resource_path("apps/v1", "deployments", namespace),
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "taken"},
            "spec": {
                "selector": {"matchLabels": {"app": "taken"}},
                "template": {
                    "metadata": {"labels": {"app": "taken"}},
                    "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}]},
                },
            },
        },
    )
    s = syncer(controller, str(repo), tmp_path / "cache", namespace)
    # the helper allows this test's namespace only; the absent one must pass the loader
    s.options = dataclasses.replace(s.options, allowed_namespaces=None)
    daemon = Daemon(controller, s, DaemonOptions(listen="127.0.0.1:0", leader_elect=False))
    try:
        daemon.sync_once()
        metrics = daemon.metrics.render()
    finally:
        daemon.http.server_close()

    # the metric counts the failed objects
    assert 'gitsync_objects{action="failed"} 2' in metrics, metrics
    assert 'gitsync_sync_total{result="failure"} 1' in metrics

    # the ConfigMap: counts first, then why
    state = state_of(s)
    assert state["result"] == "Failed" and state["failed"] == "2", state
    last = state["lastError"]
    assert last.startswith("2 of 3 objects failed: "), last
    assert f'MyApp/{absent}/lost: namespace "{absent}" does not exist' in last
    assert f"Deployment/{namespace}/taken exists and is not owned by" in last

    # gitsync drift shows it
    proc = gitsync(
        kubeconfig,
        *("drift", "-n", namespace, "--status-namespace", namespace),
        *("--instance-name", s.identity.name),
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"result Failed, last error: {last}" in proc.stdout, proc.stdout

    # the MyApp that exists says why it is not synced
    wait_until(
        lambda: (synced_condition(kube, namespace, "taken") or {}).get("status") == "False",
        timeout=20,
        what="Synced=False on the MyApp",
    )
    synced = synced_condition(kube, namespace, "taken")
    assert synced is not None and synced["reason"] == "SyncFailed"
    assert "is not owned by MyApp" in synced["message"], synced
