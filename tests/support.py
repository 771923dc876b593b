"""Helpers for tests."""

from __future__ import annotations

import json
import os
import re
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import pytest

from gitsync.errors import APIConflictError, APINotFoundError
from gitsync.kube.client import Kube, path_of, resource_path

T = TypeVar("T")

#: ``GITSYNC_TEST_SHARDING=1`` (``make test-sharded``): every daemon the integration
#: tests start is the one member of a sharded instance (and so elects a leader), in the
#: test's process and in a ``gitsync run`` child alike; with one replica it must behave
#: exactly as without
SHARDED = os.environ.get("GITSYNC_TEST_SHARDING") == "1"


def wait_until(
    fn: Callable[[], T | None], timeout: float = 30.0, interval: float = 0.2, what: str = ""
) -> T:
    """Poll until ``fn()`` returns something truthy; fail the test otherwise."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while time.monotonic() < deadline:
        last = fn()
        if last:
            return last
        time.sleep(interval)
    pytest.fail(f"timed out after {timeout}s waiting for {what or fn}; last value {last!r}")


def myapp(ns: str, name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "apps.example.com/v1",
        "kind": "MyApp",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"image": "nginx:1.27", **spec},
    }


def get(kube: Kube, kind: str, ns: str, name: str) -> dict[str, Any] | None:
    try:
        return kube.get(path_of(kind, ns, name))
    except APINotFoundError:
        return None


def available(kube: Kube, ns: str, name: str, replicas: int) -> dict[str, Any] | None:
    app = get(kube, "MyApp", ns, name)
    st = (app or {}).get("status", {})
    if (
        st.get("phase") == "Available"
        and st.get("availableReplicas") == replicas
        and st.get("observedGeneration") == app["metadata"]["generation"]  # type: ignore[index]
    ):
        return app
    return None


def app_yaml(
    ns: str, name: str, image: str = "nginx:1.27", replicas: int | str = 1, **extra: Any
) -> str:
    lines = [
        "apiVersion: apps.example.com/v1",
        "kind: MyApp",
        "metadata:",
        f"  name: {name}",
        f"  namespace: {ns}",
        "spec:",
        f"  image: {image}",
        f"  replicas: {replicas!r}" if isinstance(replicas, str) else f"  replicas: {replicas}",
    ]
    lines += [f"  {k}: {v}" for k, v in extra.items()]
    return "\n".join(lines) + "\n"


def resource_version(kube: Kube, kind: str, ns: str, name: str) -> str:
    obj = get(kube, kind, ns, name)
    assert obj is not None, f"{kind}/{ns}/{name} does not exist"
    return str(obj["metadata"]["resourceVersion"])


def create_namespace(kube: Kube, base: str) -> str:
    """Create a namespace named after ``base`` (a test's name) and return its name.

    The name is ``base`` cut to a DNS label's budget plus a random suffix; should the
    suffix meet a namespace that still exists (one still terminating counts), another
    is drawn rather than failing a test that has not started yet.
    """
    stem = "".join(c for c in base.lower().replace("_", "-") if c.isalnum() or c == "-")
    stem = stem[:40].strip("-") or "test"
    for _ in range(5):
        name = f"{stem}-{uuid.uuid4().hex[:10]}"
        body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
        try:
            kube.create(resource_path("v1", "namespaces"), body)
        except APIConflictError:
            continue
        return name
    pytest.fail(f"no free namespace name for {stem} in 5 tries")


def write_from_server(table: Callable[[Kube, str], str], base: str) -> None:
    """Print ``table(kube, namespace)`` for the cluster KUBECONFIG names, in a namespace of
    its own deleted after: how a test module writes its recorded table of the API
    server's answers anew (``python -m tests.integration.MODULE > TABLE``)."""
    kube = Kube.from_kubeconfig(os.environ.get("KUBECONFIG"))
    namespace = create_namespace(kube, base)
    try:
        sys.stdout.write(table(kube, namespace))
    finally:
        kube.delete(resource_path("v1", "namespaces", None, namespace))
        kube.close()


def sample(metrics: str, series: str) -> float | None:
    """The value of one sample (``name`` or ``name{labels}``, as rendered) in the
    Prometheus text format; None when it is not there."""
    found = re.search(rf"^{re.escape(series)} (\S+)$", metrics, re.M)
    return float(found.group(1)) if found else None


@contextmanager
def admission_webhook(
    kube: Kube,
    kind: str,
    namespace: str,
    *,
    name: str,
    client_config: dict[str, str],
    resource: tuple[str, str],
    timeout: int,
) -> Iterator[None]:
    """One admission webhook (``kind``: ``MutatingWebhookConfiguration`` or
    ``ValidatingWebhookConfiguration``) on creates and updates of ``resource`` ((group,
    plural)), failing closed, registered while the block runs. It is called for this
    test's namespace only: the control plane is shared."""
    path = resource_path("admissionregistration.k8s.io/v1", kind.lower() + "s")
    configuration = f"{namespace}-{name.split('.', 1)[0]}"
    config = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": kind,
        "metadata": {"name": configuration},
        "webhooks": [
            {
                "name": name,
                "clientConfig": client_config,
                "rules": [
                    {
                        "apiGroups": [resource[0]],
                        "apiVersions": ["v1"],
                        "operations": ["CREATE", "UPDATE"],
                        "resources": [resource[1]],
                    }
                ],
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
                "sideEffects": "None",
                "admissionReviewVersions": ["v1"],
                "failurePolicy": "Fail",
                "timeoutSeconds": timeout,
            }
        ],
    }
    kube.create(path, config)
    try:
        yield
    finally:
        kube.request("DELETE", f"{path}/{configuration}")


def audit_writes(namespace: str, name: str, since: int) -> list[tuple[str, str, str, int]]:
    """(resource, subresource, user, response code) of every write of MyApp or
    Deployment ``name`` in the audit log after byte ``since``."""
    from testenv.cluster import AUDIT_LOG

    found = []
    with AUDIT_LOG.open("rb") as f:
        f.seek(since)
        for line in f:
            e = json.loads(line)
            ref = e.get("objectRef") or {}
            if ref.get("namespace") != namespace or ref.get("name") != name:
                continue
            if ref.get("resource") not in ("myapps", "deployments"):
                continue
            found.append(
                (
                    ref["resource"],
                    ref.get("subresource", ""),
                    (e.get("user") or {}).get("username", ""),
                    (e.get("responseStatus") or {}).get("code", 0),
                )
            )
    return found
