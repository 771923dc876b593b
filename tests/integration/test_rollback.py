"""Automatic rollback of a failed rollout on the real control plane.

A commit gives a MyApp an image tagged ``broken``, whose Pods kwok runs and never makes
Ready (testenv/kwok/pod-never-ready.yaml): the deployment controller itself reports
``ProgressDeadlineExceeded``, and gitsync answers by policy. Every assertion reads what
the API server holds."""

from __future__ import annotations

import json
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gitsync.daemon.notification import Notification, from_event
from gitsync.gitops import pins as pinstore
from gitsync.gitops.sync import Syncer
from gitsync.kube.client import Kube, path_of, resource_path
from gitsync.model import pin as pinlib
from gitsync.model import rollout
from gitsync.reconcile.controller import Controller, ControllerConfig
from testenv.cluster import AUDIT_LOG
from tests.gitserver import Upstream
from tests.integration.test_cli import gitsync
from tests.integration.test_drift import kubectl
from tests.integration.test_ha import Replica
from tests.integration.test_status import condition, events
from tests.integration.test_sync import state_of, syncer
from tests.support import app_yaml, available, get, resource_version, wait_until
from tests.support import audit_writes as writes

Doc = dict[str, Any]
#: short enough for a test, long enough for a healthy rollout on a loaded machine
DEADLINE = 8


def app(ns: str, name: str, image: str, **extra: Any) -> str:
    return app_yaml(ns, name, image, progressDeadlineSeconds=DEADLINE, **extra)


def image_of(kube: Kube, kind: str, ns: str, name: str) -> str:
    obj = get(kube, kind, ns, name) or {}
    if kind == "MyApp":
        return str(obj["spec"]["image"])
    return str(obj["spec"]["template"]["spec"]["containers"][0]["image"])


def healthy(kube: Kube, ns: str, name: str, image: str) -> Doc | None:
    """The MyApp once Available with ``image`` recorded as its last healthy spec."""
    found = available(kube, ns, name, 1)
    kept = ((found or {}).get("status") or {}).get("lastHealthy") or {}
    return found if (kept.get("spec") or {}).get("image") == image else None


def rolled_back(kube: Kube, ns: str, name: str, image: str) -> Doc | None:
    """The MyApp once its rollback is recorded and carried out, to its Deployment (the
    record comes first: a daemon stopped in between finds it and completes it)."""
    found = get(kube, "MyApp", ns, name) or {}
    done = (found.get("status") or {}).get("rollback") and found["spec"]["image"] == image
    return found if done and image_of(kube, "Deployment", ns, name) == image else None


@dataclass
class Broken:
    """A MyApp ``web`` rolled back on the real control plane: the syncer, the healthy and
    the broken commits, and the MyApp as the rollback left it."""

    syncer: Syncer
    good: str
    bad: str
    myapp: Doc


def break_and_roll_back(
    kube: Kube, namespace: str, controller: Controller, upstream: Upstream, cache_dir: Path
) -> Broken:
    """web:1 kept as healthy, then a commit gives it web:broken, and it is rolled back."""
    good = upstream.commit({"apps/web.yaml": app(namespace, "web", "web:1", rollback="auto")})
    s = syncer(controller, upstream.file_url, cache_dir, namespace)
    assert s.run().ok
    wait_until(lambda: healthy(kube, namespace, "web", "web:1"), timeout=60, what="web:1 kept")
    bad = upstream.commit({"apps/web.yaml": app(namespace, "web", "web:broken", rollback="auto")})
    assert s.run().ok
    # the deadline passes, the deployment controller says so, gitsync rolls back
    found = wait_until(
        lambda: rolled_back(kube, namespace, "web", "web:1"), timeout=90, what="rollback"
    )
    return Broken(s, good, bad, found)


def test_a_broken_commit_is_rolled_back_and_held_until_git_changes_the_app(
    kube: Kube,
    kubeconfig: str,
    namespace: str,
    controller: Controller,
    upstream: Upstream,
    cache_dir: Path,
) -> None:
    sent: list[Notification] = []  # what --notify-url receivers would get
    controller.events.listeners.append(
        lambda obj, _t, reason, message, details: sent.extend(
            from_event(obj, reason, message, "now", details)
        )
    )
    broken = break_and_roll_back(kube, namespace, controller, upstream, cache_dir)
    s, good, bad, found = broken.syncer, broken.good, broken.bad, broken.myapp
    rb = found["status"]["rollback"]
    assert (rb["from"], rb["to"]) == (f"main@sha1:{bad}", f"main@sha1:{good}")
    # status shows gitsync's record, which is kept where only gitsync writes: the
    # instance's status ConfigMap, one key per MyApp
    record = rollout.record_of(*(state_of(s)[k] for k in rollout.record_keys(f"{namespace}/web")))
    assert record.rollback is not None and record.rollback.to_status() == rb
    assert record.healthy is not None and record.healthy.spec["image"] == "web:1"
    assert "timed out progressing" in rb["reason"], rb
    assert rb["heldDigest"] == rollout.digest({**found["spec"], "image": "web:broken"})
    assert found["spec"]["image"] == "web:1"
    assert image_of(kube, "Deployment", namespace, "web") == "web:1"
    mark = condition(found, "RolledBack")
    assert (mark["status"], mark["reason"]) == ("True", "RolledBack")
    synced = condition(found, "Synced")
    assert (synced["status"], synced["reason"]) == ("False", "RolledBack")
    # and the app is Available again, on the old spec
    wait_until(lambda: available(kube, namespace, "web", 1), timeout=60, what="Available again")
    assert controller.events.flush(), "Events still queued"
    (event,) = events(kube, namespace, "web", "RolledBack")
    assert event["type"] == "Warning" and f"main@sha1:{good}" in event["message"]
    (note,) = [n for n in sent if n.event == "rollout.rolledback"]
    assert note.subject == f"MyApp/{namespace}/web" and note.message == event["message"]
    assert "timed out progressing" in note.message

    # held: a pass with the same Git writes nothing to the MyApp
    assert controller.wait_idle(30)
    before = resource_version(kube, "MyApp", namespace, "web")
    assert s.run().ok
    assert controller.wait_idle(30)
    assert resource_version(kube, "MyApp", namespace, "web") == before
    # a commit that touches another app does not release it
    upstream.commit({"apps/other.yaml": app(namespace, "other", "web:1")})
    assert s.run().ok
    assert controller.wait_idle(30)
    assert image_of(kube, "MyApp", namespace, "web") == "web:1"
    assert (get(kube, "MyApp", namespace, "web") or {})["status"]["rollback"] == rb

    # diff and drift say so; a hold is no write, but Git and the cluster differ: diff exits
    # 1 (diff reads the hold from the instance's record, as it reads the pins: in its status
    # namespace)
    source = ("--repo", upstream.file_url, "--path", "apps", "--allowed-namespaces", namespace)
    cli_cache = ("--cache-dir", str(cache_dir / "cli"), "--status-namespace", namespace)
    diff = gitsync(kubeconfig, "diff", *source, *cli_cache)
    assert diff.returncode == 1, diff.stdout + diff.stderr
    assert (
        f"held MyApp/{namespace}/web: rolled back from main@sha1:{bad}: 1 change from Git held back"
    ) in diff.stdout.splitlines()
    assert f'held MyApp/{namespace}/web spec.image: live "web:1", git "web:broken"' in diff.stdout
    drift = gitsync(kubeconfig, "drift", "-n", namespace, "--status-namespace", namespace)
    assert drift.returncode == 0, drift.stdout + drift.stderr
    assert f"held {namespace}/web: rolled back from main@sha1:{bad} to main@sha1:{good}" in (
        drift.stdout
    )

    # a commit that changes this app's spec releases the hold and is applied
    upstream.commit({"apps/web.yaml": app(namespace, "web", "web:2", rollback="auto")})
    assert s.run().ok
    fixed = wait_until(lambda: healthy(kube, namespace, "web", "web:2"), timeout=60, what="web:2")
    assert "rollback" not in fixed["status"]
    assert image_of(kube, "Deployment", namespace, "web") == "web:2"
    mark = condition(fixed, "RolledBack")
    assert (mark["status"], mark["reason"]) == ("False", "Released")


def test_with_rollback_off_a_broken_commit_stays_degraded_and_says_why(
    kube: Kube, namespace: str, controller: Controller, upstream: Upstream, cache_dir: Path
) -> None:
    upstream.commit({"apps/web.yaml": app(namespace, "web", "web:1")})
    s = syncer(controller, upstream.file_url, cache_dir, namespace)
    assert s.run().ok
    wait_until(lambda: available(kube, namespace, "web", 1), timeout=60, what="Available")
    upstream.commit({"apps/web.yaml": app(namespace, "web", "web:broken")})
    assert s.run().ok

    def degraded() -> Doc | None:
        found = get(kube, "MyApp", namespace, "web") or {}
        ready = condition(found, "Ready")
        return found if "rollback is off" in ready.get("message", "") else None

    found = wait_until(degraded, timeout=90, what="the failed rollout in status")
    assert found["status"]["phase"] == "Degraded"
    assert "timed out progressing" in condition(found, "Ready")["message"]
    assert "rollback" not in found["status"] and "lastHealthy" not in found["status"]
    assert image_of(kube, "Deployment", namespace, "web") == "web:broken"
    assert controller.events.flush(), "Events still queued"
    (event,) = events(kube, namespace, "web", "RolloutFailed")
    assert "rollback is off" in event["message"]


def test_a_rollback_recorded_by_a_daemon_killed_before_its_apply_is_completed_after_restart(
    kube: Kube, namespace: str, controller: Controller, upstream: Upstream, cache_dir: Path
) -> None:
    good = upstream.commit({"apps/web.yaml": app(namespace, "web", "web:1", rollback="auto")})
    s = syncer(controller, upstream.file_url, cache_dir, namespace)
    assert s.run().ok
    kept = wait_until(lambda: healthy(kube, namespace, "web", "web:1"), timeout=60, what="kept")
    bad = upstream.commit({"apps/web.yaml": app(namespace, "web", "web:broken", rollback="auto")})
    assert s.run().ok
    controller.stop()  # the daemon dies ...
    broken = get(kube, "MyApp", namespace, "web") or {}
    assert broken["spec"]["image"] == "web:broken"
    # ... right after it recorded the rollback (the first step of one), before the apply
    record = {
        "from": f"main@sha1:{bad}",
        "to": f"main@sha1:{good}",
        "reason": "recorded before the crash",
        "time": "2026-01-01T00:00:00Z",
        "heldDigest": rollout.digest(broken["spec"]),
    }
    # (gitsync's record, in the instance's status ConfigMap: status only shows it)
    healthy_key, rollback_key = rollout.record_keys(f"{namespace}/web")
    texts = {
        healthy_key: json.dumps(kept["status"]["lastHealthy"]),
        rollback_key: json.dumps(record),
    }
    assert s.records is not None and s.records.put(texts)
    assert "rollback" not in (get(kube, "MyApp", namespace, "web") or {})["status"]

    restarted = Controller(kube, ControllerConfig(namespace=namespace, workers=2))
    restarted.start()
    try:
        assert restarted.wait_synced(30)
        again = syncer(restarted, upstream.file_url, cache_dir, namespace)
        assert again.run().ok
        wait_until(
            lambda: rolled_back(kube, namespace, "web", "web:1"), timeout=60, what="completed"
        )
        wait_until(lambda: available(kube, namespace, "web", 1), timeout=60, what="Available")
        assert restarted.wait_idle(30)
        found = get(kube, "MyApp", namespace, "web") or {}
        # the recorded rollback was completed, not a new one made
        assert found["status"]["rollback"] == record
        assert found["status"]["lastHealthy"] == kept["status"]["lastHealthy"]
        assert image_of(kube, "Deployment", namespace, "web") == "web:1"
    finally:
        restarted.stop()


def test_a_rolled_back_myapp_that_leaves_git_is_pruned(
    kube: Kube, namespace: str, controller: Controller, upstream: Upstream, cache_dir: Path
) -> None:
    files = {f"apps/{n}.yaml": app(namespace, n, "web:1", rollback="auto") for n in "abc"}
    upstream.commit(files)
    s = syncer(controller, upstream.file_url, cache_dir, namespace)
    assert s.run().ok
    wait_until(lambda: healthy(kube, namespace, "a", "web:1"), timeout=60, what="a kept")
    upstream.commit({"apps/a.yaml": app(namespace, "a", "web:broken", rollback="auto")})
    assert s.run().ok
    wait_until(lambda: rolled_back(kube, namespace, "a", "web:1"), timeout=90, what="rollback")

    upstream.commit({"apps/a.yaml": None})
    result = s.run()
    assert result.ok and [c.subject for c in result.changes if c.action == "pruned"] == [
        f"MyApp/{namespace}/a"
    ]
    wait_until(lambda: get(kube, "MyApp", namespace, "a") is None, what="a gone")
    wait_until(lambda: get(kube, "Deployment", namespace, "a") is None, what="its Deployment gone")
    assert get(kube, "Deployment", namespace, "b") is not None
    # and gitsync's record of it went with it (b's stays): the records of pruned MyApps do
    # not pile up in the ConfigMap
    a_keys, b_keys = (rollout.record_keys(f"{namespace}/{n}") for n in "ab")
    wait_until(lambda: not set(a_keys) & set(state_of(s)), timeout=30, what="a's record removed")
    assert b_keys[0] in state_of(s)


def lease_holder(kube: Kube, namespace: str) -> str:
    leases = kube.list(resource_path("coordination.k8s.io/v1", "leases", namespace))["items"]
    return str(leases[0]["spec"].get("holderIdentity") or "") if leases else ""


def test_a_daemon_sigkilled_during_a_rollback_and_its_successor_keep_the_hold(
    kube: Kube, kubeconfig: str, crd: str, namespace: str, upstream: Upstream, tmp_path: Path
) -> None:
    """Two `gitsync run` replicas with --rollback auto; the leader is SIGKILLed the moment
    the rollback is recorded. The standby takes the Lease, completes the rollback and,
    Git unchanged, keeps the broken spec held back through its own passes."""
    good = upstream.commit({"apps/web.yaml": app(namespace, "web", "web:1")})
    flags = (
        *("--repo", upstream.file_url, "--path", "apps", "--allowed-namespaces", namespace),
        *("--rollback", "auto", "--interval", "1", "--jitter", "0"),
    )
    pair = [
        Replica(
            kubeconfig,
            namespace,
            tmp_path / f"replica-{i}.log",
            (*flags, "--cache-dir", str(tmp_path / f"cache-{i}")),
        )
        for i in range(2)
    ]
    try:
        for r in pair:
            wait_until(r.up, timeout=60, what="both replicas serving /metrics")
        wait_until(lambda: healthy(kube, namespace, "web", "web:1"), timeout=90, what="kept")
        bad = upstream.commit({"apps/web.yaml": app(namespace, "web", "web:broken")})
        wait_until(
            lambda: rolled_back_recorded(kube, namespace, "web"),
            timeout=90,
            interval=0.02,
            what="the rollback recorded",
        )
        leader = next(r for r in pair if lease_holder(kube, namespace).endswith(f"_{r.proc.pid}"))
        leader.stop(signal.SIGKILL)
        standby = next(r for r in pair if r is not leader)
        wait_until(
            lambda: lease_holder(kube, namespace).endswith(f"_{standby.proc.pid}"),
            timeout=40,
            what="the standby to take the Lease",
        )
        found = wait_until(
            lambda: rolled_back(kube, namespace, "web", "web:1"), timeout=60, what="completed"
        )
        rb = found["status"]["rollback"]
        assert (rb["from"], rb["to"]) == (f"main@sha1:{bad}", f"main@sha1:{good}")
        wait_until(lambda: available(kube, namespace, "web", 1), timeout=60, what="Available")
        # the new leader's passes (every second) hold the broken spec back
        passes = standby.metric("gitsync_sync_total", result="success")
        wait_until(
            lambda: standby.metric("gitsync_sync_total", result="success") >= passes + 3,
            timeout=30,
            what="three more passes",
        )
        assert standby.metric("gitsync_held", reason="rollback") == 1
        after = get(kube, "MyApp", namespace, "web") or {}
        assert after["spec"]["image"] == "web:1"
        assert after["status"]["rollback"] == rb
        assert image_of(kube, "Deployment", namespace, "web") == "web:1"
    finally:
        for r in pair:
            r.stop(signal.SIGKILL)


def rolled_back_recorded(kube: Kube, ns: str, name: str) -> bool:
    return bool(((get(kube, "MyApp", ns, name) or {}).get("status") or {}).get("rollback"))


def test_removing_the_rollback_record_by_hand_tries_gits_spec_again(
    kube: Kube,
    kubectl_bin: str,
    kubeconfig: str,
    namespace: str,
    controller: Controller,
    upstream: Upstream,
    cache_dir: Path,
) -> None:
    """As docs/operating.md says: the record removed from the instance's status
    ConfigMap, the next pass applies Git's spec, and a rollout that fails again is rolled
    back again. Removing what status shows changes nothing: status is a report."""
    broken = break_and_roll_back(kube, namespace, controller, upstream, cache_dir)
    first = broken.myapp["status"]["rollback"]
    wait_until(lambda: available(kube, namespace, "web", 1), timeout=60, what="Available")

    remove = '[{"op":"remove","path":"/status/rollback"}]'
    kubectl(
        kubectl_bin,
        kubeconfig,
        *("-n", namespace, "patch", "myapp", "web", "--subresource=status"),
        *("--type=json", "-p", remove),
    )
    assert broken.syncer.run().ok
    assert controller.wait_idle(30)
    shown = wait_until(
        lambda: (get(kube, "MyApp", namespace, "web") or {}).get("status", {}).get("rollback"),
        timeout=30,
        what="status showing the rollback again",
    )
    assert shown == first
    assert image_of(kube, "Deployment", namespace, "web") == "web:1"

    assert broken.syncer.state is not None
    _, key = rollout.record_keys(f"{namespace}/web")
    kubectl(
        kubectl_bin,
        kubeconfig,
        *("-n", namespace, "patch", "configmap", broken.syncer.state.name),
        *("--type=json", "-p", f'[{{"op":"remove","path":"/data/{key}"}}]'),
    )
    assert broken.syncer.run().ok
    wait_until(
        lambda: image_of(kube, "Deployment", namespace, "web") == "web:broken",
        timeout=30,
        what="Git's spec tried again",
    )

    def again() -> Doc | None:
        found = rolled_back(kube, namespace, "web", "web:1")
        return found if found and found["status"]["rollback"] != first else None

    second = wait_until(again, timeout=90, what="rolled back again")["status"]["rollback"]
    assert (second["from"], second["to"], second["heldDigest"]) == (
        first["from"],
        first["to"],
        first["heldDigest"],
    )


def test_an_app_whose_replicas_another_controller_owns_keeps_its_healthy_spec(
    kube: Kube, namespace: str, controller: Controller, upstream: Upstream, cache_dir: Path
) -> None:
    """A conflict (an HPA's replicas) is left to the other controller for good: the spec
    is still kept as healthy, or such an app could never be rolled back."""
    upstream.commit({"apps/web.yaml": app(namespace, "web", "web:1", rollback="auto")})
    s = syncer(controller, upstream.file_url, cache_dir, namespace)
    assert s.run().ok
    wait_until(lambda: available(kube, namespace, "web", 1), timeout=60, what="Available")
    scaler = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": namespace},
        "spec": {"replicas": 2},
    }
    kube.apply(path_of("Deployment", namespace, "web"), scaler, field_manager="hpa", force=True)
    upstream.commit({"apps/web.yaml": app(namespace, "web", "web:2", rollback="auto")})
    assert s.run().ok

    def kept() -> Doc | None:
        found = get(kube, "MyApp", namespace, "web") or {}
        spec = ((found.get("status") or {}).get("lastHealthy") or {}).get("spec") or {}
        return found if spec.get("image") == "web:2" else None

    found = wait_until(kept, timeout=60, what="web:2 kept though hpa owns the replicas")
    assert [d["path"] for d in found["status"]["drift"] if d["conflict"]] == ["spec.replicas"]


def test_a_pin_and_its_lifting_release_no_rollback(
    kube: Kube, namespace: str, controller: Controller, upstream: Upstream, cache_dir: Path
) -> None:
    """A pin is a person's choice, not Git's: pinned to the healthy commit, the spec held
    back stays held back (no RollbackReleased), and lifting the pin holds it back again
    rather than rolling the broken spec out a second time."""
    broken = break_and_roll_back(kube, namespace, controller, upstream, cache_dir)
    s, first = broken.syncer, broken.myapp["status"]["rollback"]
    assert s.state is not None
    wait_until(lambda: available(kube, namespace, "web", 1), timeout=60, what="Available")
    pin = pinlib.Pin(broken.good, "sre@example.com", "2026-12-08T00:00:00Z", "incident")
    pinstore.write(kube, s.state, pin)
    assert s.run().ok
    assert controller.wait_idle(30)
    assert image_of(kube, "MyApp", namespace, "web") == "web:1"
    assert (get(kube, "MyApp", namespace, "web") or {})["status"]["rollback"] == first
    assert pinstore.remove(kube, s.state, "") == pin
    since = AUDIT_LOG.stat().st_size
    assert s.run().ok
    assert controller.wait_idle(30)
    found = get(kube, "MyApp", namespace, "web") or {}
    assert found["spec"]["image"] == "web:1" and found["status"]["rollback"] == first
    assert image_of(kube, "Deployment", namespace, "web") == "web:1"
    # nothing of the broken spec was sent again: no write of the MyApp or its Deployment
    assert [w for w in writes(namespace, "web", since) if w[1] != "status"] == []
    assert controller.events.flush(), "Events still queued"
    assert not events(kube, namespace, "web", "RollbackReleased")


def test_rollback_auto_committed_with_the_breaking_change_has_nothing_to_go_back_to(
    kube: Kube, namespace: str, controller: Controller, upstream: Upstream, cache_dir: Path
) -> None:
    """As the README says: only a spec that reached Available under auto is known as
    healthy, so auto set in the very commit that breaks the app cannot roll it back."""
    upstream.commit({"apps/web.yaml": app(namespace, "web", "web:1")})
    s = syncer(controller, upstream.file_url, cache_dir, namespace)
    assert s.run().ok
    wait_until(lambda: available(kube, namespace, "web", 1), timeout=60, what="Available")
    assert controller.wait_idle(30)
    upstream.commit({"apps/web.yaml": app(namespace, "web", "web:broken", rollback="auto")})
    assert s.run().ok

    def left() -> Doc | None:
        found = get(kube, "MyApp", namespace, "web") or {}
        ready = condition(found, "Ready")
        return found if "no earlier healthy spec" in ready.get("message", "") else None

    found = wait_until(left, timeout=90, what="the failed rollout in status")
    assert found["status"]["phase"] == "Degraded"
    assert "rollback" not in found["status"] and "lastHealthy" not in found["status"]
    assert image_of(kube, "Deployment", namespace, "web") == "web:broken"
    assert not any(k.startswith(rollout.RECORD_PREFIXES) for k in state_of(s))
