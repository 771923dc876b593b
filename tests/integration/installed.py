"""The proof that an installed gitsync may do its work: run as the installation's
ServiceAccount, it syncs a repository with no 403 (shared by the Helm and bundle tests)."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

from gitsync.errors import APINotFoundError
from gitsync.kube.client import Kube, resource_path
from tests.integration.test_deploy import Daemon, free_port, gitsync_env
from tests.support import app_yaml, get, wait_until

Doc = dict[str, Any]


def assert_account_syncs(
    kube: Kube,
    account_kubeconfig: Path,
    config: dict[str, str],
    status_namespace: str,
    namespace: str,
    tmp: Path,
) -> None:
    """``gitsync run`` with the account's token and the installation's instance name (from
    its ConfigMap ``config``, as the Pod would get it) syncs one MyApp into ``namespace``:
    the MyApp, its Deployment and the status ConfigMap are written, and nothing is refused."""
    instance = config["GITSYNC_INSTANCE_NAME"]
    repo = tmp / "repo"
    (repo / "apps").mkdir(parents=True)
    (repo / "apps" / "web.yaml").write_text(app_yaml(namespace, "web", replicas=2))
    daemon = Daemon(
        [
            *("--status-namespace", status_namespace, "--watch-namespace", namespace),
            *("--leader-elect", "--cache-dir", str(tmp / "cache")),
            *("--repo", str(repo), "--path", "apps", "--interval", "2", "--jitter", "0"),
            *("--allowed-namespaces", namespace),
        ],
        gitsync_env(account_kubeconfig) | {"GITSYNC_INSTANCE_NAME": instance},
        tmp / "daemon.log",
        free_port(),
    )
    try:
        daemon.ready()

        def synced() -> Doc | None:
            app = get(kube, "MyApp", namespace, "web") or {}
            revision = app.get("status", {}).get("source", {}).get("revision")
            return app if revision == "local" else None

        wait_until(synced, timeout=30, what="MyApp web synced by the installation's account")
        deployment = get(kube, "Deployment", namespace, "web")
        assert deployment is not None and deployment["spec"]["replicas"] == 2
        status = resource_path("v1", "configmaps", status_namespace, f"gitsync-status-{instance}")

        def status_written() -> Doc | None:
            with contextlib.suppress(APINotFoundError):
                return kube.get(status)
            return None

        state = wait_until(status_written, timeout=30, what="gitsync-status")
        assert state["data"]["result"] == "Succeeded", state["data"]
    finally:
        rc = daemon.stop()
    output = daemon.output()
    assert rc == 0, output
    # every 403 of the API server says "forbidden"; "403" alone also matches a timestamp
    assert "forbidden" not in output.lower(), output
    for line in output.splitlines():
        json.loads(line)  # logs are JSON lines
