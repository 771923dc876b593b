"""SIGTERM in the middle of a pass, as the kubelet sends it when a Pod is deleted: a real
``gitsync run`` applying a commit of 400 new MyApps (and the removal of one) gets SIGTERM
once the API server holds some of them.

What must hold, each read from the API server or from what reached the receiver: the
process exits 0 within the Pod's ``terminationGracePeriodSeconds`` (read from deploy/);
it starts no more writes and prunes nothing (the pass is interrupted: the removed MyApp
is still there); it gives its Lease up (no holder: a standby takes over at once); the
pass's notification, queued behind a slow receiver, is delivered after the signal; and
the next daemon finishes the work without re-creating what the first one wrote.
"""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path
from typing import Any

import yaml

from gitsync.gitops.sync import SyncOptions
from gitsync.kube.client import Kube, path_of, resource_path
from tests.gitserver import Upstream
from tests.integration.test_ha import Replica
from tests.support import app_yaml, get, wait_until
from tests.unit.test_notify import Receiver

ROOT = Path(__file__).resolve().parents[2]
APPS = 400
#: MyApps a pass applies at once: what may still be written after the signal
IN_FLIGHT = SyncOptions(repo="").concurrency


def grace_period() -> int:
    """What deploy/ gives the Pod between SIGTERM and SIGKILL."""
    doc = yaml.safe_load((ROOT / "deploy" / "deployment.yaml").read_text())
    return int(doc["spec"]["template"]["spec"]["terminationGracePeriodSeconds"])


def lease_holders(kube: Kube, namespace: str) -> dict[str, str]:
    leases = kube.list(resource_path("coordination.k8s.io/v1", "leases", namespace))["items"]
    return {
        lease["metadata"]["name"]: str(lease["spec"].get("holderIdentity") or "")
        for lease in leases
        # the leader Lease (with --sharding a member Lease too, deleted on SIGTERM)
        if lease["metadata"]["name"].startswith("gitsync-leader")
        and "-member-" not in lease["metadata"]["name"]
    }


def uids(kube: Kube, namespace: str) -> dict[str, str]:
    return {
        a["metadata"]["name"]: a["metadata"]["uid"]
        for a in kube.list(path_of("MyApp", namespace))["items"]
    }


def passes(receiver: Receiver) -> list[tuple[dict[str, Any], float]]:
    out = []
    for _, body, at in receiver.received:
        doc = json.loads(body)
        if doc["event"] in ("sync.done", "sync.failed"):
            out.append((doc, at))
    return out


def test_sigterm_during_a_pass_exits_in_time_releases_the_lease_and_loses_nothing(
    kube: Kube, kubeconfig: str, crd: str, namespace: str, upstream: Upstream, tmp_path: Path
) -> None:
    # each delivery takes 0.3 s: what the pass queues is still queued at the signal
    receiver = Receiver(delay=0.3)
    upstream.commit({"apps/gone.yaml": app_yaml(namespace, "gone")}, "One app")
    flags = (
        *("--repo", upstream.file_url, "--path", "apps", "--interval", "3600"),
        *("--notify-url", receiver.url),
    )
    first = Replica(kubeconfig, namespace, tmp_path / "first.log", flags)
    try:
        wait_until(lambda: get(kube, "Deployment", namespace, "gone"), what="the first pass")
        wait_until(lambda: passes(receiver), timeout=30, what="the first pass told")
        holder = next(iter(lease_holders(kube, namespace).values()))
        assert holder.endswith(f"_{first.proc.pid}")

        files: dict[str, str | None] = {
            f"apps/app-{i:03d}.yaml": app_yaml(namespace, f"app-{i:03d}") for i in range(APPS)
        }
        files["apps/gone.yaml"] = None
        upstream.commit(files, f"{APPS} apps, gone removed")
        first.proc.send_signal(signal.SIGHUP)
        wait_until(lambda: len(uids(kube, namespace)) > 20, timeout=60, what="the pass under way")
        before = len(uids(kube, namespace)) - 1
        signalled = time.monotonic()
        first.proc.send_signal(signal.SIGTERM)
        first.proc.wait(grace_period() + 30)
        took = time.monotonic() - signalled
        print(f"SIGTERM to exit: {took:.1f}s (grace period {grace_period()}s)")
    finally:
        first.stop(signal.SIGKILL)
    log = (tmp_path / "first.log").read_text()
    assert first.proc.returncode == 0, log[-3000:]
    assert took < grace_period(), f"exited {took:.1f}s after SIGTERM"
    assert "Traceback" not in log, log[-3000:]

    held = uids(kube, namespace)
    # the signal came mid-pass: some of the commit's MyApps were never written ...
    assert len(held) - 1 < APPS, "the pass ended before the signal: nothing was tested"
    # ... those in flight were finished, and no more started (the count just before the
    # signal is a LIST's, a little behind: twice the pass's parallelism bounds the rest)
    assert len(held) - 1 - before <= 2 * IN_FLIGHT, (before, len(held) - 1)
    # ... and the interrupted pass pruned nothing
    assert "gone" in held
    assert set(lease_holders(kube, namespace).values()) == {""}, "the Lease was not released"
    told = passes(receiver)
    last, at = told[-1]
    assert len(told) == 2 and last["event"] == "sync.failed", [d["event"] for d, _ in told]
    assert "interrupted" in last["message"]
    assert at > signalled, "the interrupted pass's notification came before the signal"
    print(
        f"{before} of {APPS} MyApps written just before the signal, {len(held) - 1} at the "
        f"exit; the interrupted "
        f"pass's notification delivered {at - signalled:.1f}s after it"
    )

    # the next daemon finishes the commit: every MyApp, gone pruned, none re-created
    second = Replica(kubeconfig, namespace, tmp_path / "second.log", flags)
    try:

        def finished() -> bool:
            now = uids(kube, namespace)
            return "gone" not in now and len(now) == APPS

        wait_until(finished, timeout=180, what="the next daemon to finish the commit")
        wait_until(
            lambda: all(get(kube, "Deployment", namespace, n) for n in uids(kube, namespace)),
            timeout=120,
            what="every Deployment",
        )
    finally:
        second.stop(signal.SIGTERM)
        receiver.close()
    after = uids(kube, namespace)
    kept = {n: u for n, u in held.items() if n != "gone"}
    assert {n: after.get(n) for n in kept} == kept, "a MyApp was re-created"
