"""spec.dependsOn on the real control plane: the order of creation and of change is the
API server's own record (the resourceVersion etcd gave each Deployment's creation and
each MyApp's change), a dependency stuck never Ready (kwok,
testenv/kwok/pod-never-ready.yaml) holds its dependents and says why in their status, a
dependency that becomes Available wakes them by its watch event alone (one sync pass in
each test: no second poll), and a cycle is refused at load while the rest applies."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gitsync.kube.client import Kube
from gitsync.reconcile.controller import Controller
from testenv.cluster import BROKEN_TAG
from tests.gitserver import Upstream
from tests.integration.test_cli import common, gitsync
from tests.integration.test_status import condition, events
from tests.integration.test_sync import syncer
from tests.support import app_yaml, available, get, wait_until

STUCK = f"nginx:{BROKEN_TAG}"


def on(*names: str) -> str:
    return "[" + ", ".join(f"{{name: {n}}}" for n in names) + "]"


def test_a_chain_of_three_is_created_in_order_by_one_pass(
    kube: Kube, namespace: str, controller: Controller, upstream: Upstream, cache_dir: Path
) -> None:
    created: dict[str, int] = {}

    def record(_type: str, obj: dict[str, Any]) -> None:
        name = obj["metadata"]["name"]
        created.setdefault(name, int(obj["metadata"]["resourceVersion"]))

    controller.deployments.add_handler(record)
    upstream.commit(
        {
            "apps/a.yaml": app_yaml(namespace, "a"),
            "apps/b.yaml": app_yaml(namespace, "b", dependsOn=on("a")),
            "apps/c.yaml": app_yaml(namespace, "c", dependsOn=on("b")),
        }
    )
    s = syncer(controller, upstream.file_url, cache_dir, namespace)
    result = s.run()
    assert result.ok, result.errors
    # what each waits for (the words after it depend on how far the pass got with the
    # one before, as the pass applies in parallel)
    held = {c.subject: (c.hold, c.reason.split(" (")[0]) for c in result.held()}
    assert held == {
        f"MyApp/{namespace}/b": ("dependency", f"waiting for MyApp/{namespace}/a"),
        f"MyApp/{namespace}/c": ("dependency", f"waiting for MyApp/{namespace}/b"),
    }
    for name in "abc":
        wait_until(lambda n=name: available(kube, namespace, n, 1), timeout=90, what=name)  # type: ignore[misc]
    # the server's record: the first resourceVersion each Deployment had, as its watch
    # delivered it, and each later one created only after the one before was Available
    assert created["a"] < created["b"] < created["c"], created
    a, b = (get(kube, "MyApp", namespace, n) or {} for n in "ab")
    assert a and b
    assert condition(b, "Waiting") == {} or condition(b, "Waiting")["status"] == "False"


def test_a_stuck_dependency_holds_a_change_and_says_why_then_wakes_it(
    kube: Kube,
    kubeconfig: str,
    namespace: str,
    controller: Controller,
    upstream: Upstream,
    cache_dir: Path,
) -> None:
    upstream.commit(
        {
            "apps/db.yaml": app_yaml(namespace, "db"),
            "apps/cache.yaml": app_yaml(namespace, "cache"),
            "apps/web.yaml": app_yaml(namespace, "web"),
        }
    )
    s = syncer(controller, upstream.file_url, cache_dir, namespace)
    assert s.run().ok
    for name in ("db", "cache", "web"):
        wait_until(lambda n=name: available(kube, namespace, n, 1), timeout=90, what=name)  # type: ignore[misc]
    # one commit: db gets an image whose Pods never become Ready, web (fan-in on db and
    # cache) a new image
    upstream.commit(
        {
            "apps/db.yaml": app_yaml(namespace, "db", image=STUCK),
            "apps/web.yaml": app_yaml(
                namespace, "web", image="nginx:1.28", dependsOn=on("db", "cache")
            ),
        }
    )
    assert s.run().ok
    why = f"waiting for MyApp/{namespace}/db (Progressing)"

    def waiting() -> dict[str, Any] | None:
        found = get(kube, "MyApp", namespace, "web") or {}
        mark = condition(found, "Waiting")
        return found if mark.get("status") == "True" and mark.get("message") == why else None

    web = wait_until(waiting, timeout=30, what="web waiting")
    assert condition(web, "Waiting")["reason"] == "DependencyNotReady"
    synced = condition(web, "Synced")
    assert (synced["status"], synced["reason"]) == ("False", "DependencyNotReady")
    # nothing of the change was applied: the MyApp and its Deployment run the old image
    assert web["spec"]["image"] == "nginx:1.27" and "dependsOn" not in web["spec"]
    dep = get(kube, "Deployment", namespace, "web") or {}
    assert dep["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1.27"
    assert controller.events.flush(), "Events still queued"
    # one Event for the wait on db, whatever phases db went through
    (event,) = events(kube, namespace, "web", "DependencyNotReady")
    assert event["message"].startswith(f"waiting for MyApp/{namespace}/db (")
    # diff, from what the server holds, says the same and exits 0
    proc = gitsync(kubeconfig, "diff", *common_url(upstream, namespace), "--no-color")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"held MyApp/{namespace}/web: {why}: " in proc.stdout
    # the fix: db's next commit rolls out, and web follows on db's events alone
    before = int((get(kube, "MyApp", namespace, "web") or {})["metadata"]["resourceVersion"])
    upstream.commit({"apps/db.yaml": app_yaml(namespace, "db", image="nginx:1.29")})
    assert s.run().ok
    db = wait_until(lambda: available(kube, namespace, "db", 1), timeout=90, what="db fixed")
    web = wait_until(
        lambda: (
            (w := get(kube, "MyApp", namespace, "web")) and w["spec"]["image"] == "nginx:1.28" and w
        ),
        timeout=30,
        what="web applied",
    )
    # web changed after db's last change, by the server's own numbering
    assert int(web["metadata"]["resourceVersion"]) > before
    db_changed = max(
        e["time"]
        for e in db["metadata"]["managedFields"]
        if e["manager"] == "gitsync" and not e.get("subresource")
    )
    web_changed = max(
        e["time"]
        for e in web["metadata"]["managedFields"]
        if e["manager"] == "gitsync" and not e.get("subresource")
    )
    assert web_changed >= db_changed
    wait_until(lambda: available(kube, namespace, "web", 1), timeout=90, what="web Available")
    mark = condition(get(kube, "MyApp", namespace, "web") or {}, "Waiting")
    assert (mark["status"], mark["reason"]) == ("False", "Released")
    assert controller.ledger.waits() == {}


def common_url(upstream: Upstream, namespace: str) -> list[str]:
    return ["--repo", upstream.file_url, "--path", "apps", "--allowed-namespaces", namespace]


def test_a_cycle_is_refused_at_load_and_the_rest_applies(
    kube: Kube,
    kubeconfig: str,
    namespace: str,
    controller: Controller,
    upstream: Upstream,
    cache_dir: Path,
    tmp_path: Path,
) -> None:
    files = {
        "apps/a.yaml": app_yaml(namespace, "a", dependsOn=on("b")),
        "apps/b.yaml": app_yaml(namespace, "b", dependsOn=on("a")),
        "apps/self.yaml": app_yaml(namespace, "self", dependsOn=on("self")),
        "apps/lost.yaml": app_yaml(namespace, "lost", dependsOn=on("nowhere")),
        "apps/ok.yaml": app_yaml(namespace, "ok"),
    }
    upstream.commit(files)
    s = syncer(controller, upstream.file_url, cache_dir, namespace)
    result = s.run()
    cycle = f"a cycle: MyApp/{namespace}/a → MyApp/{namespace}/b → MyApp/{namespace}/a"
    assert sorted(result.errors) == [
        f"apps/a.yaml:9 (document 0): spec.dependsOn: {cycle}",
        f"apps/b.yaml:9 (document 0): spec.dependsOn: {cycle}",
        f"apps/lost.yaml:9 (document 0): spec.dependsOn: MyApp/{namespace}/nowhere exists"
        " neither in Git nor in the cluster",
        f"apps/self.yaml:9 (document 0): spec.dependsOn: MyApp/{namespace}/self depends on itself",
    ]
    assert get(kube, "MyApp", namespace, "ok") is not None
    for name in ("a", "b", "self", "lost"):
        assert get(kube, "MyApp", namespace, name) is None, name
    # validate (offline) refuses the cycle and the self-reference, and says what it
    # cannot judge without the cluster; diff refuses all of them
    repo = tmp_path / "repo"
    (repo / "apps").mkdir(parents=True)
    for rel, text in files.items():
        (repo / rel).write_text(text)
    proc = gitsync(kubeconfig, "validate", "--repo", str(repo), "--path", "apps")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert f"error: apps/a.yaml:9 (document 0): spec.dependsOn: {cycle}" in proc.stderr
    assert f"note: MyApp/{namespace}/nowhere is depended on and not in Git" in proc.stdout
    assert "lost.yaml" not in proc.stderr
    proc = gitsync(kubeconfig, "diff", *common(repo, namespace), "--no-color")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "lost.yaml:9 (document 0): spec.dependsOn" in proc.stderr
    assert f"{cycle}" in proc.stderr
