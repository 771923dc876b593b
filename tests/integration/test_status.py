"""MyApp status against the real API server: readiness when another controller owns
the Deployment's replicas, what a failed apply leaves in status, and field ownership of
list items whose keys the server escapes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gitsync.engine import managedfields
from gitsync.kube.client import Kube, path_of, resource_path
from gitsync.model.render import render
from gitsync.reconcile.controller import Controller
from gitsync.reconcile.reconciler import STATUS_WAIT
from tests.gitserver import Upstream
from tests.integration.test_sync import syncer
from tests.support import app_yaml, available, get, myapp, resource_version, wait_until

Doc = dict[str, Any]


def condition(app: Doc, type_: str) -> Doc:
    conds = (app.get("status") or {}).get("conditions") or []
    found: Doc = next((c for c in conds if c["type"] == type_), {})
    return found


def events(kube: Kube, ns: str, name: str, reason: str) -> list[Doc]:
    items = kube.list(resource_path("v1", "events", ns))["items"]
    return [e for e in items if e["reason"] == reason and e["involvedObject"]["name"] == name]


def replicas_owners(dep: Doc) -> list[str]:
    return [
        m["manager"]
        for m in dep["metadata"]["managedFields"]
        if "f:replicas" in m.get("fieldsV1", {}).get("f:spec", {})
    ]


def label_by_hand(kube: Kube, ns: str, name: str) -> None:
    """What ``kubectl label --overwrite`` sends: drift that starts no rollout."""
    kube.request(
        "PATCH",
        path_of("Deployment", ns, name),
        params={"fieldManager": "kubectl-label"},
        body={"metadata": {"labels": {"app.kubernetes.io/name": "by-hand"}}},
        content_type="application/merge-patch+json",
    )


# --- item: readiness from the Deployment's own facts ----------------------------------------


def test_myapp_is_ready_when_another_manager_owns_the_replicas(
    kube: Kube, namespace: str, controller: Controller
) -> None:
    kube.create(path_of("MyApp", namespace), myapp(namespace, "scaled", replicas=1))
    wait_until(lambda: available(kube, namespace, "scaled", 1), timeout=60, what="Available")
    # as an HPA would: another field manager takes spec.replicas with force
    scaler = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "scaled", "namespace": namespace},
        "spec": {"replicas": 3},
    }
    path = path_of("Deployment", namespace, "scaled")
    kube.apply(path, scaler, field_manager="hpa-test", force=True)

    # the MyApp still asks for 1; the Deployment's own status says when 3 are rolled out
    app = wait_until(
        lambda: available(kube, namespace, "scaled", 3), timeout=60, what="Available with 3"
    )
    assert app["spec"]["replicas"] == 1
    assert app["status"]["replicas"] == 3
    ready = condition(app, "Ready")
    assert (ready["status"], ready["reason"], ready["message"]) == (
        "True",
        "Available",
        "3/3 replicas available",
    )
    # the other manager's value stands, and is reported as a conflict
    dep = kube.get(path)
    assert dep["spec"]["replicas"] == 3
    assert replicas_owners(dep) == ["hpa-test"]
    st = dep["status"]
    assert st["observedGeneration"] == dep["metadata"]["generation"]
    assert (st["updatedReplicas"], st["availableReplicas"]) == (3, 3)
    assert [(d["path"], d["manager"], d["conflict"]) for d in app["status"]["drift"]] == [
        ("spec.replicas", "hpa-test", True)
    ]


# --- item: a failed apply is a condition, not an erasure ------------------------------------

#: accepted by the MyApp's schema, refused for the Deployment by the API server
#: (a container's request may not exceed its limit)
BAD_RESOURCES = "{requests: {cpu: '2'}, limits: {cpu: '1'}}"


def test_a_rejected_deployment_keeps_the_last_known_status(
    kube: Kube, namespace: str, controller: Controller
) -> None:
    kube.create(
        path_of("MyApp", namespace), myapp(namespace, "web", replicas=2, driftPolicy="report")
    )
    wait_until(lambda: available(kube, namespace, "web", 2), timeout=60, what="Available")
    label_by_hand(kube, namespace, "web")
    before = wait_until(
        lambda: (get(kube, "MyApp", namespace, "web") or {}).get("status", {}).get("drift"),
        what="the label drift in status",
    )
    assert [d["path"] for d in before] == ["metadata.labels[app.kubernetes.io/name]"]
    dep_rv = resource_version(kube, "Deployment", namespace, "web")

    kube.request(
        "PATCH",
        path_of("MyApp", namespace, "web"),
        body={"spec": {"resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}}},
        content_type="application/merge-patch+json",
    )

    def failed() -> Doc | None:
        app = get(kube, "MyApp", namespace, "web") or {}
        ready = condition(app, "Ready")
        return app if ready.get("reason") == "ReconcileError" else None

    app = wait_until(failed, what="the failure in status")
    assert controller.wait_idle(30)
    app = get(kube, "MyApp", namespace, "web") or {}
    st = app["status"]
    ready = condition(app, "Ready")
    assert ready["status"] == "False"
    assert "must be less than or equal to cpu limit" in ready["message"], ready["message"]
    assert ready["observedGeneration"] == app["metadata"]["generation"]
    # the old Deployment still serves: status says so, and keeps the drift it had
    assert (st["phase"], st["replicas"], st["availableReplicas"]) == ("Available", 2, 2)
    assert st["drift"] == before
    assert condition(app, "Drifted")["status"] == "True"
    assert resource_version(kube, "Deployment", namespace, "web") == dep_rv
    assert controller.events.flush(), "Events still queued"  # written in the background
    assert events(kube, namespace, "web", "ApplyFailed")
    assert events(kube, namespace, "web", "DriftResolved") == []


def test_a_failed_sync_keeps_the_last_known_status(
    kube: Kube, namespace: str, controller: Controller, upstream: Upstream, cache_dir: Path
) -> None:
    good = app_yaml(namespace, "api", replicas=2, driftPolicy="report")
    upstream.commit({"apps/api.yaml": good})
    s = syncer(controller, upstream.file_url, cache_dir, namespace)
    assert s.run().ok
    wait_until(lambda: available(kube, namespace, "api", 2), timeout=60, what="Available")
    label_by_hand(kube, namespace, "api")
    before = wait_until(
        lambda: (get(kube, "MyApp", namespace, "api") or {}).get("status", {}).get("drift"),
        what="the label drift in status",
    )
    assert controller.wait_idle(30)

    bad = app_yaml(namespace, "api", replicas=2, driftPolicy="report", resources=BAD_RESOURCES)
    sha = upstream.commit({"apps/api.yaml": bad})
    result = s.run()
    assert not result.ok
    assert controller.wait_idle(30)

    app = get(kube, "MyApp", namespace, "api") or {}
    st = app["status"]
    synced = condition(app, "Synced")
    assert (synced["status"], synced["reason"]) == ("False", "SyncFailed")
    assert "must be less than or equal to cpu limit" in synced["message"], synced["message"]
    assert condition(app, "Ready")["reason"] == "ReconcileError"
    assert st["source"]["revision"] == f"main@sha1:{sha}"
    assert (st["phase"], st["replicas"], st["availableReplicas"]) == ("Available", 2, 2)
    assert st["drift"] == before
    assert controller.events.flush(), "Events still queued"
    assert events(kube, namespace, "api", "DriftResolved") == []


# --- item: list keys as the API server encodes them -----------------------------------------

#: env names whose JSON the server escapes differently from Python's defaults; a
#: Deployment accepts printable ASCII but "=", a MyApp any string
ASCII_NAMES = ["A&B", "<x>", "Q\"B\\S'", "semi;colon~"]
OTHER_NAMES = [
    "GRÜẞE_€",
    "名前",
    "emoji😀",  # beyond U+FFFF: sent raw, the server refuses its surrogate escapes
    "line\u2028sep\u2029",
    "ctl\b\f\t\x01\x1f",
    "c1\x7f\x80\x85\x9f",  # sent escaped: YAML refuses them raw, or reads NEL as a break
    "\ufeffbom",
]


def owned_by(obj: Doc, manager: str) -> set[managedfields.Path]:
    entry = next(
        m
        for m in obj["metadata"]["managedFields"]
        if m["manager"] == manager and not m.get("subresource")
    )
    return managedfields.leaf_paths(entry["fieldsV1"])


def test_list_keys_are_encoded_as_the_server_records_them(
    kube: Kube, crd: str, namespace: str
) -> None:
    env = [{"name": n, "value": str(i)} for i, n in enumerate(ASCII_NAMES + OTHER_NAMES)]
    body = myapp(namespace, "keys", env=env)
    app = kube.apply(path_of("MyApp", namespace, "keys"), body, field_manager="gitsync")
    assert [e["name"] for e in app["spec"]["env"]] == ASCII_NAMES + OTHER_NAMES
    assert managedfields.fields_of(body) == owned_by(app, "gitsync")

    dep_body = render({**app, "spec": {**app["spec"], "env": env[: len(ASCII_NAMES)]}})
    dep = kube.apply(path_of("Deployment", namespace, "keys"), dep_body, field_manager="gitsync")
    assert managedfields.fields_of(dep_body) == owned_by(dep, "gitsync")


def test_a_field_another_controller_owns_under_an_escaped_key_is_a_conflict(
    kube: Kube, namespace: str, controller: Controller
) -> None:
    name = "A&B<x>"  # a Deployment's env names are ASCII
    env = [{"name": name, "value": "ours"}]
    kube.create(path_of("MyApp", namespace), myapp(namespace, "esc", env=env))
    wait_until(lambda: available(kube, namespace, "esc", 1), timeout=60, what="Available")
    # another controller changes the value with an Update (as controllers do): it
    # then owns that one field, the env item itself stays gitsync's
    path = path_of("Deployment", namespace, "esc")
    kube.request(
        "PATCH",
        path,
        params={"fieldManager": "other-operator"},
        body={
            "spec": {
                "template": {
                    "spec": {
                        "containers": [{"name": "app", "env": [{"name": name, "value": "theirs"}]}]
                    }
                }
            }
        },
        content_type="application/strategic-merge-patch+json",
    )

    def conflict() -> list[Doc]:
        app = get(kube, "MyApp", namespace, "esc") or {}
        return [d for d in app.get("status", {}).get("drift") or [] if d.get("conflict")]

    drift = wait_until(conflict, what="the conflict in status")
    assert [(d["path"], d["manager"], d["live"]) for d in drift] == [
        (
            # the name is not plain, so every message quotes it
            "spec.template.spec.containers[name=app].env[name='A&B<x>'].value",
            "other-operator",
            "theirs",
        )
    ]
    assert controller.wait_idle(30)
    dep = kube.get(path)
    assert dep["spec"]["template"]["spec"]["containers"][0]["env"] == [
        {"name": name, "value": "theirs"}
    ]


def test_a_new_myapps_first_status_comes_soon_after_the_pass_with_revision_and_phase(
    kube: Kube, namespace: str, controller: Controller, upstream: Upstream, cache_dir: Path
) -> None:
    """The first status of a MyApp new in a pass is held back until the Deployment has a
    status of its own, at most STATUS_WAIT: a user still sees the revision and a
    phase within seconds (the bound leaves room for a loaded machine's watch latency)."""
    names = ("one", "two", "three")
    sha = upstream.commit({f"apps/{n}.yaml": app_yaml(namespace, n) for n in names})
    s = syncer(controller, upstream.file_url, cache_dir, namespace)
    assert s.run().ok

    def shown() -> list[Doc] | None:
        apps = [get(kube, "MyApp", namespace, n) or {} for n in names]
        sts = [a.get("status") or {} for a in apps]
        if all((st.get("source") or {}).get("revision") and st.get("phase") for st in sts):
            return sts
        return None

    sts = wait_until(shown, timeout=STATUS_WAIT + 20, what="revision and phase in status")
    assert {st["source"]["revision"] for st in sts} == {f"main@sha1:{sha}"}
    assert {st["phase"] for st in sts} <= {"Progressing", "Available"}
    # idle means no first status still held back
    assert controller.wait_idle(30)
    for n in names:
        assert (get(kube, "MyApp", namespace, n) or {}).get("status"), n
