"""--verify-commits end to end: real keys, real signed and unsigned commits pushed to git
daemon on loopback, the sync, the daemon and the CLI against the real API server. What is
asserted is what the API server holds: the MyApps, the status ConfigMap and the Events."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from gitsync.daemon.daemon import Daemon, DaemonOptions
from gitsync.gitops.sync import Syncer
from gitsync.kube.client import Kube, resource_path
from gitsync.reconcile.controller import Controller, ControllerConfig
from gitsync.source.checkout import GitSource
from gitsync.source.keyring import TrustedKeys, Verifier
from tests.gitserver import Upstream, free_port
from tests.integration.test_daemon import Running, running_daemon
from tests.integration.test_sync import state_of, syncer
from tests.signing import Signer, commit, keys_dir
from tests.support import app_yaml, get, wait_until

GITSYNC = str(Path(sys.executable).parent / "gitsync")


def verifying_syncer(
    controller: Controller, url: str, cache: Path, namespace: str, keys: Path
) -> Syncer:
    # no prune guard by fraction: what a refused commit would remove is the point here
    s = syncer(controller, url, cache, namespace, prune_max_fraction=1.0)
    verifier = Verifier(TrustedKeys(keys, 30), "commit")
    s.source = GitSource(url, "main", cache, timeout=10, allow_insecure=True, verifier=verifier)
    return s


def image(kube: Kube, namespace: str, name: str) -> str | None:
    app = get(kube, "MyApp", namespace, name)
    return None if app is None else str(app["spec"]["image"])


def events(kube: Kube, namespace: str, reason: str) -> list[str]:
    items = kube.list(resource_path("v1", "events", namespace))["items"]
    return [e["message"] for e in items if e["reason"] == reason]


def test_an_untrusted_commit_is_not_applied_nothing_pruned_and_the_reason_is_recorded(
    kube: Kube,
    namespace: str,
    controller: Controller,
    upstream: Upstream,
    cache_dir: Path,
    git_daemon: str,
    signers: dict[str, Signer],
    tmp_path: Path,
) -> None:
    alice, mallory = signers["alice"], signers["mallory"]
    apps = {f"apps/{n}.yaml": app_yaml(namespace, n) for n in ("a", "b", "c")}
    good = commit(upstream, apps, alice)
    s = verifying_syncer(controller, git_daemon, cache_dir, namespace, keys_dir(tmp_path, alice))
    first = s.run()
    assert first.ok, first.errors
    assert state_of(s)["verification"] == (
        f"commit {good} of main is signed by trusted OpenPGP key {alice.key}"
        " (alice <alice@example.com>)"
    )
    uids = {n: get(kube, "MyApp", namespace, n)["metadata"]["uid"] for n in "abc"}  # type: ignore[index]

    # an unsigned commit force-pushed over it, which would change a and remove b and c
    upstream.wgit("checkout", "--quiet", "--orphan", "unsigned")
    upstream.wgit("rm", "-r", "--quiet", "--force", "--ignore-unmatch", ".")
    evil = {"apps/a.yaml": app_yaml(namespace, "a", image="evil:1")}
    bad = commit(upstream, evil, None)
    result = s.run()
    assert result.rejection is not None and result.rejection.reason == "unsigned"
    assert not result.ok and result.changes == []
    # the API server: nothing applied, nothing pruned, the very same objects
    assert image(kube, namespace, "a") == "nginx:1.27"
    assert {n: get(kube, "MyApp", namespace, n)["metadata"]["uid"] for n in "abc"} == uids  # type: ignore[index]
    state = state_of(s)
    reason = f"commit {bad} of main not applied: unsigned: the commit carries no signature"
    assert state["result"] == "Failed"
    assert state["revision"] == f"main@sha1:{good}"  # still what the cluster is at
    assert (state["rejected"], state["verification"]) == (bad, reason)
    assert reason in state["lastError"]
    assert "nothing is pruned" in state["pruneSkipped"]
    assert controller.events.flush(), "Events still queued"  # written in the background
    assert events(kube, namespace, "VerificationFailed") == [reason]

    # signed, but by a key that is not trusted: a new reason, named with the key
    untrusted = commit(upstream, evil, mallory)
    s.run()
    state = state_of(s)
    assert state["rejected"] == untrusted
    assert f"untrusted-key: signed by OpenPGP key {mallory.key}" in state["verification"]
    assert image(kube, namespace, "a") == "nginx:1.27"
    assert len(events(kube, namespace, "VerificationFailed")) == 2
    s.run()  # the same refusal again: no new Event, no write
    assert len(events(kube, namespace, "VerificationFailed")) == 2

    # recovery: a signed commit lands, and is applied as any other
    fixed = commit(upstream, evil, alice)
    result = s.run()
    assert result.ok and result.rejection is None
    assert image(kube, namespace, "a") == "evil:1"
    assert get(kube, "MyApp", namespace, "b") is None  # pruned: it left the signed Git
    state = state_of(s)
    assert (state["result"], state["revision"], state["rejected"]) == (
        "Succeeded",
        f"main@sha1:{fixed}",
        "",
    )


@pytest.fixture
def verifying_daemon(
    kube: Kube,
    crd: str,
    namespace: str,
    upstream: Upstream,
    cache_dir: Path,
    git_daemon: str,
    signers: dict[str, Signer],
    tmp_path: Path,
) -> Iterator[Running]:
    commit(upstream, {"apps/one.yaml": app_yaml(namespace, "one")}, signers["bob"])
    controller = Controller(kube, ControllerConfig(namespace=namespace, workers=2))
    keys = keys_dir(tmp_path, signers["bob"])
    s = verifying_syncer(controller, git_daemon, cache_dir, namespace, keys)
    port = free_port()
    options = DaemonOptions(listen=f"127.0.0.1:{port}", interval=1, jitter=0, leader_elect=False)
    with running_daemon(Daemon(controller, s, options), port) as running:
        yield running


def test_the_daemon_refuses_an_ssh_signed_commit_by_another_key_and_recovers(
    kube: Kube,
    namespace: str,
    upstream: Upstream,
    signers: dict[str, Signer],
    verifying_daemon: Running,
) -> None:
    wait_until(lambda: get(kube, "MyApp", namespace, "one"), timeout=30, what="one")
    eve, bob = signers["eve"], signers["bob"]
    commit(upstream, {"apps/one.yaml": None, "apps/two.yaml": app_yaml(namespace, "two")}, eve)
    metric = 'gitsync_verification_failures_total{reason="untrusted-key"}'
    wait_until(
        lambda: metric in verifying_daemon.http("GET", "/metrics")[1], timeout=30, what=metric
    )
    assert get(kube, "MyApp", namespace, "two") is None
    assert get(kube, "MyApp", namespace, "one") is not None  # not pruned
    messages = events(kube, namespace, "VerificationFailed")
    assert len(messages) == 1 and f"signed by SSH key {eve.ident}" in messages[0]
    # recovery without anyone's help: bob signs a commit, the next poll applies it
    commit(upstream, {"apps/three.yaml": app_yaml(namespace, "three")}, bob)
    wait_until(lambda: get(kube, "MyApp", namespace, "three"), timeout=30, what="recovery")
    # and prunes, as the signed Git says (after the applies of the same pass)
    wait_until(lambda: get(kube, "MyApp", namespace, "one") is None, timeout=30, what="prune")
    assert get(kube, "MyApp", namespace, "two") is not None


def gitsync(kubeconfig: str, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "KUBECONFIG": kubeconfig, "GITSYNC_LOG_FORMAT": "text", **env}
    return subprocess.run([GITSYNC, *args], capture_output=True, text=True, timeout=120, env=full)


def test_diff_and_sync_exit_2_with_the_reason_on_one_line(
    kubeconfig: str,
    kube: Kube,
    crd: str,
    namespace: str,
    upstream: Upstream,
    signers: dict[str, Signer],
    tmp_path: Path,
) -> None:
    old = signers["old"]
    keys = keys_dir(tmp_path, signers["alice"], old)
    bad = commit(upstream, {"apps/web.yaml": app_yaml(namespace, "web")}, old)
    args = ["--repo", upstream.file_url, "--path", "apps", "--allowed-namespaces", namespace]
    args += ["--cache-dir", str(tmp_path / "cache"), "--status-namespace", namespace]
    flags = ["--verify-commits", "--trusted-keys", str(keys)]
    reason = f"commit {bad} of main not applied: expired-key: signed by OpenPGP key {old.key}"
    diff = gitsync(kubeconfig, "diff", *args[:-2], *flags)
    assert diff.returncode == 2, diff.stderr
    # the last line says it all (log lines before it); no traceback, no diff printed
    last = diff.stderr.strip().splitlines()[-1]
    assert last.startswith(f"error: {reason}, which has expired") and "\n" not in last
    assert "Traceback" not in diff.stderr and diff.stdout == ""
    # configured through the environment, as in the Pod
    env = {"GITSYNC_VERIFY_COMMITS": "true", "GITSYNC_TRUSTED_KEYS": str(keys)}
    sync = gitsync(kubeconfig, "sync", *args, **env)
    assert sync.returncode == 2, sync.stderr
    assert f"error: {reason}" in sync.stderr and "Traceback" not in sync.stderr
    assert get(kube, "MyApp", namespace, "web") is None

    good = commit(upstream, {"apps/web.yaml": app_yaml(namespace, "web")}, signers["alice"])
    sync = gitsync(kubeconfig, "sync", *args, *flags)
    assert sync.returncode == 0, sync.stderr
    assert f"revision main@sha1:{good}" in sync.stdout
    assert get(kube, "MyApp", namespace, "web") is not None
    # without its flag, keys alone are refused rather than silently not used
    alone = gitsync(kubeconfig, "diff", *args[:-2], "--trusted-keys", str(keys))
    assert alone.returncode == 2 and "without --verify-commits" in alone.stderr
