"""spec.dependsOn on the real control plane: the order of creation and of change is the
API server's own record (the resourceVersion etcd gave each Deployment's creation and
each MyApp's change), a dependency stuck never Ready (kwok,
testenv/kwok/pod-never-ready.yaml) holds its dependents and says why in their status, a
dependency that becomes Available wakes them by its watch event alone (one sync pass in
each test: no second poll), and a cycle is refused at load while the rest applies."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from gitsync.kube.client import Kube
from gitsync.reconcile.controller import Controller
from testenv.cluster import AUDIT_LOG, BROKEN_TAG
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
    # what each waits for (the words after it depend on how far the one before got)
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
    # diff, from what the server holds, says the same, and exits 1: the held change is a
    # difference between Git and the cluster
    proc = gitsync(kubeconfig, "diff", *common_url(upstream, namespace), "--no-color")
    assert proc.returncode == 1, proc.stdout + proc.stderr
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


def status_writes(namespace: str, since: int) -> Counter[str]:
    """The status writes of each MyApp of ``namespace`` the API server accepted, from its
    audit log after byte ``since``."""
    found: Counter[str] = Counter()
    with AUDIT_LOG.open("rb") as f:
        f.seek(since)
        for line in f:
            e = json.loads(line)
            ref = e.get("objectRef") or {}
            if (
                ref.get("resource") == "myapps"
                and ref.get("subresource") == "status"
                and ref.get("namespace") == namespace
                and e.get("verb") in ("patch", "update")
                and (e.get("responseStatus") or {}).get("code") == 200
            ):
                found[ref["name"]] += 1
    return found


#: status writes one link of a chain may take while the chain is released: waiting for
#: the link below (a write per state of that one: not applied, not rendered, Progressing),
#: released, its own rollout; whatever the length of the chain. Measured: 99 in all for
#: 16 links, at most 7 for one; with each message copying every message below it, 257,
#: and 30 for the top link (the count grew with the height: quadratic in all)
PER_LINK = 10


def test_releasing_a_chain_writes_each_status_a_bounded_number_of_times(
    kube: Kube, namespace: str, controller: Controller, upstream: Upstream, cache_dir: Path
) -> None:
    links = [f"link-{i:02d}" for i in range(16)]
    upstream.commit({f"apps/{n}.yaml": app_yaml(namespace, n) for n in links})
    s = syncer(controller, upstream.file_url, cache_dir, namespace)
    assert s.run().ok
    for name in links:
        wait_until(lambda n=name: available(kube, namespace, n, 1), timeout=90, what=name)  # type: ignore[misc]
    since = AUDIT_LOG.stat().st_size
    # one commit: every link a new image, each waiting for the one below it
    upstream.commit(
        {
            f"apps/{n}.yaml": app_yaml(
                namespace, n, image="nginx:1.28", **({"dependsOn": on(links[i - 1])} if i else {})
            )
            for i, n in enumerate(links)
        }
    )
    assert s.run().ok
    top = links[-1]
    # the message names one link down, not the chain below it
    waiting = wait_until(
        lambda: (
            condition(get(kube, "MyApp", namespace, top) or {}, "Waiting").get("status") == "True"
            and get(kube, "MyApp", namespace, top)
        ),
        timeout=30,
        what="the top link waiting",
    )
    assert condition(waiting, "Waiting")["message"] == (
        f"waiting for MyApp/{namespace}/{links[-2]} (itself waiting for"
        f" MyApp/{namespace}/{links[-3]})"
    )

    def released(name: str) -> bool:
        app = available(kube, namespace, name, 1)
        # (the first link waits for nothing)
        done = name == links[0] or condition(app or {}, "Waiting").get("reason") == "Released"
        return bool(app and app["spec"]["image"] == "nginx:1.28" and done)

    # the links roll out one after the other, each woken by the one below it
    wait_until(lambda: all(released(n) for n in links), timeout=300, what="the chain released")
    assert controller.wait_idle(30)
    writes = status_writes(namespace, since)
    print(f"FIGURES releasing a {len(links)}-link chain: {sum(writes.values())} status writes,"
          f" at most {max(writes.values())} for one link")  # fmt: skip
    # linear: a bound per link, whatever its height in the chain
    assert max(writes.values()) <= PER_LINK, sorted(writes.items())
    assert sum(writes.values()) <= PER_LINK * len(links), sorted(writes.items())


def test_a_one_shot_sync_applies_a_chain_in_order_and_counts_what_it_must_hold(
    kube: Kube, kubeconfig: str, crd: str, namespace: str, tmp_path: Path
) -> None:
    repo = tmp_path / "repo"
    (repo / "apps").mkdir(parents=True)
    files = {
        "a": app_yaml(namespace, "a"),
        "b": app_yaml(namespace, "b", dependsOn=on("a")),
        "c": app_yaml(namespace, "c", dependsOn=on("b")),
    }
    for name, text in files.items():
        (repo / "apps" / f"{name}.yaml").write_text(text)
    flags = [*common(repo, namespace), "--status-namespace", namespace]
    proc = gitsync(kubeconfig, "sync", *flags, "-o", "json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = json.loads(proc.stdout)
    # each created by the one pass, none held ("not created yet" after creating it)
    assert doc["counts"] == {"created": 3}, doc
    assert doc["summary"] == "3 created, 0 configured, 0 unchanged, 0 pruned", doc
    # in order: each MyApp created once the one it depends on was Available, by the
    # server's clocks (the deployment controller's word and the create)
    for dep, name in (("a", "b"), ("b", "c")):
        deployment = get(kube, "Deployment", namespace, dep) or {}
        (ready,) = [c for c in deployment["status"]["conditions"] if c["type"] == "Available"]
        created = (get(kube, "MyApp", namespace, name) or {})["metadata"]["creationTimestamp"]
        assert ready["status"] == "True" and ready["lastTransitionTime"] <= created, (dep, name)
    for name in "abc":
        assert condition(get(kube, "MyApp", namespace, name) or {}, "Waiting") == {}, name

    # a dependency whose Pods never become Ready: the pass waits for it (bounded), then
    # holds what depends on it, counts it held, and exits 1
    (repo / "apps" / "a.yaml").write_text(app_yaml(namespace, "a", image=STUCK))
    (repo / "apps" / "d.yaml").write_text(app_yaml(namespace, "d", dependsOn=on("a")))
    proc = gitsync(kubeconfig, "sync", *flags, "--dependency-timeout", "3")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    why = f"waiting for MyApp/{namespace}/a (Progressing)"
    assert f"held MyApp/{namespace}/d: {why}" in proc.stdout.splitlines(), proc.stdout
    assert proc.stdout.splitlines()[-1].endswith(
        ": 0 created, 1 configured, 2 unchanged, 0 pruned; 1 held"
    ), proc.stdout
    assert get(kube, "MyApp", namespace, "d") is None
    # diff counts it the same, and a held change is a difference: 1
    proc = gitsync(kubeconfig, "diff", *common(repo, namespace), "-o", "json")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    doc = json.loads(proc.stdout)
    # (d and the Deployment it would have)
    assert doc["summary"] == "0 created, 0 configured, 6 unchanged, 0 pruned; 2 held", doc
    assert [(h["object"], h["hold"], h["reason"]) for h in doc["held"]] == [
        (f"{kind}/{namespace}/d", "dependency", why) for kind in ("MyApp", "Deployment")
    ], doc["held"]
