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
from tests.signing import Signer, commit, keys_dir, tag
from tests.support import app_yaml, get, sample, wait_until

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
    assert controller.events.flush(), "Events still queued"
    assert len(events(kube, namespace, "VerificationFailed")) == 2
    s.run()  # the same refusal again: no new Event, no write
    assert controller.events.flush(), "Events still queued"
    assert len(events(kube, namespace, "VerificationFailed")) == 2

    # recovery: a signed commit on top of the one applied lands, and is applied as any other
    upstream.wgit("checkout", "--quiet", "--force", "-B", "recovery", good)
    fixed = commit(upstream, {**evil, "apps/b.yaml": None, "apps/c.yaml": None}, alice)
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
        lambda: (sample(verifying_daemon.http("GET", "/metrics")[1], metric) or 0) >= 1,
        timeout=30,
        what=metric,
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


def test_the_daemon_refuses_a_signed_rollback_and_keeps_what_it_applied(
    kube: Kube,
    namespace: str,
    upstream: Upstream,
    signers: dict[str, Signer],
    verifying_daemon: Running,
) -> None:
    wait_until(lambda: get(kube, "MyApp", namespace, "one"), timeout=30, what="one")
    first = upstream.wgit("rev-parse", "HEAD")
    bob = signers["bob"]
    commit(upstream, {"apps/one.yaml": app_yaml(namespace, "one", image="app:fixed"),
                      "apps/two.yaml": app_yaml(namespace, "two")}, bob)  # fmt: skip
    wait_until(lambda: get(kube, "MyApp", namespace, "two"), timeout=30, what="two")
    # the same pass applies both, in parallel: one may be written after two
    wait_until(lambda: image(kube, namespace, "one") == "app:fixed", timeout=30, what="fixed")
    # main force-pushed back to the first signed commit, by someone with no key
    upstream.wgit("push", "--quiet", "--force", "origin", f"{first}:refs/heads/main")
    metric = 'gitsync_verification_failures_total{reason="not-a-descendant"}'
    wait_until(
        lambda: (sample(verifying_daemon.http("GET", "/metrics")[1], metric) or 0) >= 1,
        timeout=30,
        what=metric,
    )
    # the API server: nothing of the old commit applied, nothing pruned
    assert image(kube, namespace, "one") == "app:fixed"
    assert get(kube, "MyApp", namespace, "two") is not None
    assert verifying_daemon.daemon.controller.events.flush(), "Events still queued"
    (message,) = events(kube, namespace, "VerificationFailed")
    assert message.startswith(f"commit {first} of main not applied: not-a-descendant: ")


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


def test_a_signed_commit_of_a_branch_never_merged_at_the_ref_needs_a_tip_key(
    kubeconfig: str,
    kube: Kube,
    crd: str,
    namespace: str,
    upstream: Upstream,
    signers: dict[str, Signer],
    tmp_path: Path,
) -> None:
    """alice signs her branches' commits, bob's key signs what lands on main. A commit
    alice signed on a branch never merged, whose parent is the applied commit, pushed as
    main by someone with no key: it descends, so only --tip-keys refuses it."""
    alice, bob = signers["alice"], signers["bob"]
    trusted = keys_dir(tmp_path / "history", alice, bob)
    tip = keys_dir(tmp_path / "tip", bob)
    good = commit(upstream, {"apps/web.yaml": app_yaml(namespace, "web", image="good:1")}, bob)
    args = ["--repo", upstream.file_url, "--path", "apps", "--allowed-namespaces", namespace]
    args += ["--cache-dir", str(tmp_path / "cache"), "--status-namespace", namespace]
    flags = ["--verify-commits", "--trusted-keys", str(trusted)]
    first = gitsync(kubeconfig, "sync", *args, *flags, "--tip-keys", str(tip))
    assert first.returncode == 0, first.stderr
    assert image(kube, namespace, "web") == "good:1"

    upstream.wgit("checkout", "--quiet", "-b", "experiment", good)
    x = commit(upstream, {"apps/web.yaml": app_yaml(namespace, "web", image="x:1")}, alice)
    refused = gitsync(kubeconfig, "sync", *args, *flags, GITSYNC_TIP_KEYS=str(tip))
    assert refused.returncode == 2, refused.stderr
    assert (
        f"error: commit {x} of main not applied: untrusted-key: signed by OpenPGP key"
        f" {alice.key}, which is not a key that may sign the tip of 'main' (--tip-keys)"
    ) in refused.stderr
    assert image(kube, namespace, "web") == "good:1"
    assert status_configmap(kube, namespace)["data"]["rejected"] == x  # type: ignore[index]

    # without --tip-keys, as the docs say: any trusted key may sign the tip, and the
    # commit descends from the applied one
    applied = gitsync(kubeconfig, "sync", *args, *flags)
    assert applied.returncode == 0, applied.stderr
    assert image(kube, namespace, "web") == "x:1"


def status_configmap(kube: Kube, namespace: str) -> dict[str, object]:
    items = kube.list(resource_path("v1", "configmaps", namespace))["items"]
    (cm,) = [c for c in items if c["metadata"]["name"].startswith("gitsync-status-")]
    return dict(cm)


def test_a_signed_rollback_or_sideways_commit_is_refused_unless_accepted(
    kubeconfig: str,
    kube: Kube,
    crd: str,
    namespace: str,
    upstream: Upstream,
    signers: dict[str, Signer],
    tmp_path: Path,
) -> None:
    alice = signers["alice"]
    keys = keys_dir(tmp_path, alice)
    args = ["sync", "--repo", upstream.file_url, "--path", "apps"]
    args += ["--allowed-namespaces", namespace, "--status-namespace", namespace]
    args += [
        "--cache-dir",
        str(tmp_path / "cache"),
        "--verify-commits",
        "--trusted-keys",
        str(keys),
    ]
    web = "apps/web.yaml"
    others = {f"apps/{n}.yaml": app_yaml(namespace, n) for n in ("x", "z")}
    vulnerable = app_yaml(namespace, "web", image="app:1.0-vulnerable")
    old = commit(upstream, {web: vulnerable, **others}, alice)
    assert gitsync(kubeconfig, *args).returncode == 0
    fixed = app_yaml(namespace, "web", image="app:1.1-fixed")
    # db is added: a rollback would prune it (1 of 4, within the prune guard)
    new = commit(upstream, {"apps/db.yaml": app_yaml(namespace, "db"), web: fixed}, alice)
    assert gitsync(kubeconfig, *args).returncode == 0
    assert image(kube, namespace, "web") == "app:1.1-fixed"
    db = get(kube, "MyApp", namespace, "db")
    assert db is not None

    def refused(sha: str) -> None:
        # diff judges it as sync does: refused, exit 2, nothing previewed
        diff = gitsync(kubeconfig, "diff", *args[1:])
        assert diff.returncode == 2 and diff.stdout == "", diff.stderr
        assert f"commit {sha} of main not applied: not-a-descendant" in diff.stderr
        sync = gitsync(kubeconfig, *args)
        assert sync.returncode == 2, sync.stderr
        assert (
            f"error: commit {sha} of main not applied: not-a-descendant: it does not" in sync.stderr
        )
        assert "Traceback" not in sync.stderr
        # the API server: nothing applied, nothing pruned (db left Git in both)
        assert image(kube, namespace, "web") == "app:1.1-fixed"
        assert get(kube, "MyApp", namespace, "db")["metadata"]["uid"] == db["metadata"]["uid"]  # type: ignore[index]
        data = status_configmap(kube, namespace)["data"]
        assert (data["rejected"], data["appliedCommit"]) == (sha, new)  # type: ignore[index]
        assert data["revision"] == f"main@sha1:{new}"  # type: ignore[index]

    # a rollback to the old signed commit, pushed by someone with no key
    upstream.wgit("push", "--quiet", "--force", "origin", f"{old}:refs/heads/main")
    refused(old)
    # a signed commit of an unmerged branch forked before the fix
    upstream.wgit("checkout", "--quiet", "-b", "feature", old)
    side = commit(upstream, {web: app_yaml(namespace, "web", image="app:attacker")}, alice)
    refused(side)

    # accepted once by the annotation that names it (by whoever may edit the ConfigMap)
    cm = str(status_configmap(kube, namespace)["metadata"]["name"])  # type: ignore[index]
    annotate = subprocess.run(
        ["kubectl", "--kubeconfig", kubeconfig, "-n", namespace, "annotate", "configmap", cm,
         f"gitsync.apps.example.com/accept-non-fast-forward={side}"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert annotate.returncode == 0, annotate.stderr
    assert gitsync(kubeconfig, "diff", *args[1:]).returncode == 1  # a sync would write
    sync = gitsync(kubeconfig, *args)
    assert sync.returncode == 0, sync.stderr
    assert f"commit {side} is applied although it does not descend from {new}" in sync.stderr
    assert image(kube, namespace, "web") == "app:attacker"
    data = status_configmap(kube, namespace)["data"]
    assert (data["appliedCommit"], data["acceptedOnce"]) == (side, side)  # type: ignore[index]
    assert "accepted once (annotation)" in data["verification"]  # type: ignore[index]
    # once only: after a commit on top of it, the annotation does not take main back there
    ahead = commit(upstream, {web: app_yaml(namespace, "web", image="app:1.2")}, alice)
    assert gitsync(kubeconfig, *args).returncode == 0
    upstream.wgit("push", "--quiet", "--force", "origin", f"{side}:refs/heads/main")
    sync = gitsync(kubeconfig, *args)
    assert sync.returncode == 2 and "not-a-descendant" in sync.stderr
    assert image(kube, namespace, "web") == "app:1.2"

    # --allow-non-fast-forward: the rollback is applied, and said so
    upstream.wgit("push", "--quiet", "--force", "origin", f"{old}:refs/heads/main")
    sync = gitsync(kubeconfig, *args, "--allow-non-fast-forward")
    assert sync.returncode == 0, sync.stderr
    assert f"commit {old} of main; not checked to descend from {ahead}" in sync.stderr
    assert "accepted by --allow-non-fast-forward" in sync.stderr
    assert image(kube, namespace, "web") == "app:1.0-vulnerable"
    assert get(kube, "MyApp", namespace, "db") is None  # pruned: it left that Git


def test_a_signed_tag_pushed_as_the_ref_under_another_name_is_refused(
    kubeconfig: str,
    kube: Kube,
    crd: str,
    namespace: str,
    upstream: Upstream,
    signers: dict[str, Signer],
    tmp_path: Path,
) -> None:
    alice = signers["alice"]
    args = ["sync", "--repo", upstream.file_url, "--path", "apps", "--ref", "prod"]
    args += ["--allowed-namespaces", namespace, "--status-namespace", namespace]
    args += ["--cache-dir", str(tmp_path / "cache"), "--verify", "tag"]
    args += ["--trusted-keys", str(keys_dir(tmp_path, alice))]
    commit(upstream, {"apps/web.yaml": app_yaml(namespace, "web", image="app:0.9")}, None)
    v09 = tag(upstream, "v0.9", alice)
    commit(upstream, {"apps/web.yaml": app_yaml(namespace, "web", image="app:1.0")}, None)
    tag(upstream, "prod", alice)
    assert gitsync(kubeconfig, *args).returncode == 0
    assert image(kube, namespace, "web") == "app:1.0"
    # someone with no key points refs/tags/prod at the signed tag object of v0.9
    upstream.wgit("push", "--quiet", "--force", "origin", f"{v09}:refs/tags/prod")
    sync = gitsync(kubeconfig, *args)
    assert sync.returncode == 2, sync.stderr
    assert (
        f"error: tag {v09} of prod not applied: tag-mismatch: the signed tag is named 'v0.9',"
        " not 'prod'"
    ) in sync.stderr
    assert image(kube, namespace, "web") == "app:1.0"
