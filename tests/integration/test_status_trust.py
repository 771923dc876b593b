"""A MyApp's status decides no write: whoever may patch ``myapps/status`` (and nothing
more) cannot choose what gitsync deploys, nor stop a pass, on the real control plane.

The attacker is a ServiceAccount with exactly get on ``myapps`` and get/patch on
``myapps/status``, its token from a TokenRequest. What gitsync then sends is read from
the API server's audit log, and what it holds from the API server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gitsync.errors import APIForbiddenError
from gitsync.kube.client import Kube, path_of, resource_path
from gitsync.model import rollout
from gitsync.reconcile.controller import Controller
from testenv.cluster import AUDIT_LOG
from tests.gitserver import Upstream
from tests.integration.test_rollback import app, healthy, image_of
from tests.integration.test_sync import syncer
from tests.support import audit_writes as writes
from tests.support import available, get, wait_until

EVIL: dict[str, Any] = {"image": "evil.example/miner:6.6.6", "replicas": 3}
RBAC = "rbac.authorization.k8s.io/v1"


def status_writer(kube: Kube, kubeconfig: str, namespace: str) -> Kube:
    """A client as a ServiceAccount that may get MyApps and get and patch their status,
    and nothing else."""
    kube.create(
        resource_path("v1", "serviceaccounts", namespace),
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "status-writer"}},
    )
    rules = [
        {"apiGroups": ["apps.example.com"], "resources": ["myapps"], "verbs": ["get"]},
        {
            "apiGroups": ["apps.example.com"],
            "resources": ["myapps/status"],
            "verbs": ["get", "patch"],
        },
    ]
    role = {"apiVersion": RBAC, "kind": "Role", "metadata": {"name": "status-writer"}}
    kube.create(resource_path(RBAC, "roles", namespace), {**role, "rules": rules})
    binding = {
        "apiVersion": RBAC,
        "kind": "RoleBinding",
        "metadata": {"name": "status-writer"},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "Role",
            "name": "status-writer",
        },
        "subjects": [{"kind": "ServiceAccount", "name": "status-writer", "namespace": namespace}],
    }
    kube.create(resource_path(RBAC, "rolebindings", namespace), binding)
    token = kube.create(
        resource_path("v1", "serviceaccounts", namespace, "status-writer", "token"),
        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}},
    )["status"]["token"]
    admin = json.loads(json.dumps(_yaml(kubeconfig)))
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "testenv", "cluster": admin["clusters"][0]["cluster"]}],
        "users": [{"name": "status-writer", "user": {"token": token}}],
        "contexts": [{"name": "sw", "context": {"cluster": "testenv", "user": "status-writer"}}],
        "current-context": "sw",
    }
    path = Path(kubeconfig).parent / f"status-writer-{namespace}.json"
    path.write_text(json.dumps(config))
    path.chmod(0o600)
    return Kube.from_kubeconfig(str(path))


def _yaml(path: str) -> Any:
    import yaml

    return yaml.safe_load(Path(path).read_text())


def forge(attacker: Kube, namespace: str, name: str, status: dict[str, Any]) -> None:
    """Patch MyApp ``name``'s status as the attacker, and check the API server took it."""
    path = path_of("MyApp", namespace, name) + "/status"
    attacker.merge_patch(path, {"status": status}, field_manager="attacker")


@pytest.mark.parametrize("policy", ["off", "auto"])
def test_a_status_writer_cannot_choose_what_gitsync_deploys(
    kube: Kube,
    kubeconfig: str,
    namespace: str,
    controller: Controller,
    upstream: Upstream,
    cache_dir: Path,
    policy: str,
) -> None:
    extra = {"rollback": "auto"} if policy == "auto" else {}
    upstream.commit({"apps/web.yaml": app(namespace, "web", "web:1", **extra)})
    s = syncer(controller, upstream.file_url, cache_dir, namespace)
    assert s.run().ok
    if policy == "auto":
        wait_until(lambda: healthy(kube, namespace, "web", "web:1"), timeout=60, what="kept")
    else:
        wait_until(lambda: available(kube, namespace, "web", 1), timeout=60, what="Available")
    assert controller.wait_idle(30)
    attacker = status_writer(kube, kubeconfig, namespace)
    # exactly that ServiceAccount: it may not write the MyApp itself
    live = get(kube, "MyApp", namespace, "web") or {}
    with pytest.raises(APIForbiddenError):
        attacker.merge_patch(
            path_of("MyApp", namespace, "web"), {"spec": EVIL}, field_manager="attacker"
        )
    since = AUDIT_LOG.stat().st_size
    forge(
        attacker,
        namespace,
        "web",
        {
            "lastHealthy": {"revision": "x", "digest": rollout.digest(EVIL), "spec": EVIL},
            "rollback": {
                "from": "x",
                "to": "y",
                "reason": "forged",
                "time": "2026-01-01T00:00:00Z",
                "heldDigest": rollout.digest(live["spec"]),
            },
        },
    )
    # a worker sees the status change at once; a pass follows
    result = s.run()
    assert result.ok, result.errors
    assert controller.wait_idle(30)
    assert image_of(kube, "MyApp", namespace, "web") == "web:1"
    assert image_of(kube, "Deployment", namespace, "web") == "web:1"
    sent = writes(namespace, "web", since)
    # the forged status was taken by the API server ...
    assert any(w[1] == "status" and w[2].endswith(":status-writer") for w in sent), sent
    # ... and gitsync wrote neither the MyApp nor its Deployment: only the status, which
    # shows gitsync's own record again
    assert [w for w in sent if w[1] != "status"] == [], sent

    def restored() -> dict[str, Any] | None:
        st = (get(kube, "MyApp", namespace, "web") or {}).get("status") or {}
        kept = (st.get("lastHealthy") or {}).get("spec") or {}
        ok = "rollback" not in st and (kept.get("image") == "web:1" or policy == "off")
        return st if ok and (policy == "auto" or "lastHealthy" not in st) else None

    wait_until(restored, timeout=30, what="status showing gitsync's record again")


def test_a_forged_status_stops_no_pass_and_no_prune(
    kube: Kube,
    kubeconfig: str,
    namespace: str,
    controller: Controller,
    upstream: Upstream,
    cache_dir: Path,
) -> None:
    upstream.commit(
        {
            "apps/web.yaml": app(namespace, "web", "web:1", rollback="auto"),
            "apps/db.yaml": app(namespace, "db", "db:1", dependsOn=[{"name": "web"}]),
            "apps/old.yaml": app(namespace, "old", "old:1"),
        }
    )
    s = syncer(controller, upstream.file_url, cache_dir, namespace)
    assert s.run().ok
    wait_until(lambda: healthy(kube, namespace, "web", "web:1"), timeout=60, what="kept")
    attacker = status_writer(kube, kubeconfig, namespace)
    bad = {"image": "x:1", "dependsOn": 5}
    live = get(kube, "MyApp", namespace, "web") or {}
    forge(
        attacker,
        namespace,
        "web",
        {
            "lastHealthy": {"revision": "x", "digest": rollout.digest(bad), "spec": bad},
            "rollback": {"heldDigest": rollout.digest(live["spec"])},
        },
    )
    upstream.commit({"apps/old.yaml": None, "apps/db.yaml": app(namespace, "db", "db:2")})
    result = s.run()
    assert result.ok, result.errors
    assert result.prune_skipped is None
    assert controller.wait_idle(30)
    wait_until(lambda: get(kube, "MyApp", namespace, "old") is None, timeout=30, what="pruned")
    assert image_of(kube, "MyApp", namespace, "db") == "db:2"
