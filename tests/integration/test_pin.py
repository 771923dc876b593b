"""Pinning a revision by hand (``gitsync rollback --to``, ``gitsync resume``) through the
CLI, against the real control plane: two daemon replicas honour the pin, the standby too
once it leads; what the API server holds is the MyApps as at the pinned commit and the
pin record in the status ConfigMap."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from gitsync.kube.client import Kube, path_of, resource_path
from gitsync.model.api import SOURCE_LABEL
from gitsync.model.pin import data_key, pins_of
from tests.gitserver import Upstream, free_port
from tests.signing import Signer, commit, keys_dir
from tests.support import app_yaml, get, wait_until

GITSYNC = str(Path(sys.executable).parent / "gitsync")
#: the subprocesses run this checkout's gitsync, wherever the venv was installed from
ROOT = Path(__file__).resolve().parents[2]
INSTANCE = "shop"


def env(kubeconfig: str) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("GITSYNC_")}
    return clean | {"KUBECONFIG": kubeconfig, "PYTHONPATH": str(ROOT), "GITSYNC_LOG_FORMAT": "json"}


def source_flags(upstream: Upstream, namespace: str) -> list[str]:
    return [
        "--repo", upstream.file_url, "--path", "apps", "--instance-name", INSTANCE,
        "--status-namespace", namespace, "-n", namespace,
    ]  # fmt: skip


class Replica:
    """``gitsync run`` syncing the upstream, polled every second."""

    def __init__(
        self, kubeconfig: str, namespace: str, upstream: Upstream, base: Path, i: int
    ) -> None:
        self.log = base / f"replica-{i}.log"
        self.port = free_port()
        argv = [
            GITSYNC, "run", *source_flags(upstream, namespace),
            "--cache-dir", str(base / f"cache-{i}"), "--watch-namespace", namespace,
            "--interval", "1", "--jitter", "0", "--listen", f"127.0.0.1:{self.port}",
            "--no-ui",
        ]  # fmt: skip
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                argv, env=env(kubeconfig), stdout=out, stderr=subprocess.STDOUT
            )

    def metrics(self) -> str:
        url = f"http://127.0.0.1:{self.port}/metrics"
        with urllib.request.urlopen(url, timeout=5) as resp:
            return str(resp.read().decode())

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(30)


@pytest.fixture
def replicas(
    kubeconfig: str, crd: str, namespace: str, upstream: Upstream, tmp_path: Path
) -> Iterator[list[Replica]]:
    pair = [Replica(kubeconfig, namespace, upstream, tmp_path, i) for i in range(2)]
    yield pair
    for r in pair:
        r.stop(signal.SIGKILL)


def cli(kubeconfig: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [GITSYNC, *args], capture_output=True, text=True, timeout=120, env=env(kubeconfig)
    )


def image(kube: Kube, ns: str, name: str) -> str | None:
    app = get(kube, "MyApp", ns, name)
    return None if app is None else str(app["spec"]["image"])


def status_data(kube: Kube, ns: str) -> dict[str, str]:
    cm = kube.get(resource_path("v1", "configmaps", ns, f"gitsync-status-{INSTANCE}"))
    return dict(cm.get("data") or {})


def others_of_instance(kube: Kube, ns: str) -> list[str]:
    """The MyApps of this file's instance outside namespace ``ns``."""
    found = kube.list(
        resource_path("apps.example.com/v1", "myapps"),
        params={"labelSelector": f"{SOURCE_LABEL}={INSTANCE}"},
    )
    return [
        f"{m['metadata']['namespace']}/{m['metadata']['name']}"
        for m in found.get("items", [])
        if m["metadata"]["namespace"] != ns
    ]


def leader_pid(kube: Kube, ns: str) -> int:
    path = resource_path("coordination.k8s.io/v1", "leases", ns, f"gitsync-leader-{INSTANCE}")
    try:
        holder = str(kube.get(path).get("spec", {}).get("holderIdentity") or "")
    except Exception:
        return 0
    return int(holder.rsplit("_", 1)[1]) if "_" in holder else 0


def test_pin_and_resume_with_two_replicas(
    kube: Kube, kubeconfig: str, namespace: str, upstream: Upstream, replicas: list[Replica]
) -> None:
    ns = namespace
    good = upstream.commit(
        {"apps/a.yaml": app_yaml(ns, "a"), "apps/b.yaml": app_yaml(ns, "b")}, "good"
    )
    wait_until(lambda: image(kube, ns, "b"), timeout=90, what="the first sync")
    # a bad release: a's image changes, c is added
    upstream.commit({"apps/a.yaml": app_yaml(ns, "a", image="nginx:bad"), "apps/c.yaml":
                     app_yaml(ns, "c")}, "bad")  # fmt: skip
    wait_until(lambda: image(kube, ns, "a") == "nginx:bad" and get(kube, "MyApp", ns, "c"),
               timeout=30, what="the bad release applied")  # fmt: skip

    flags = source_flags(upstream, ns)
    pinned = cli(kubeconfig, "rollback", "--to", good, "--reason", "bad release", "--by",
                 "sre@example.com", *flags)  # fmt: skip
    assert pinned.returncode == 0, pinned.stderr
    assert f"instance {INSTANCE} pinned to {good} by sre@example.com at " in pinned.stdout
    assert pinned.stdout.splitlines()[0].endswith(": bad release")
    # the cluster goes back to the pinned commit: a's spec as there, c pruned
    wait_until(lambda: image(kube, ns, "a") == "nginx:1.27" and not get(kube, "MyApp", ns, "c"),
               timeout=30, what="the pinned commit applied")  # fmt: skip
    record = json.loads(status_data(kube, ns)["pin"])
    assert record["revision"] == good and record["by"] == "sre@example.com"
    assert record["reason"] == "bad release" and record["at"].endswith("Z")
    wait_until(lambda: status_data(kube, ns).get("revision") == f"main@sha1:{good}",
               timeout=30, what="the pass recorded")  # fmt: skip
    data = status_data(kube, ns)
    assert data["pinned"].startswith(f"instance pinned to {good} by sre@example.com at ")
    assert data["appliedCommit"] != good  # the head applied before the pin
    leading = next(r for r in replicas if r.proc.pid == leader_pid(kube, ns))
    assert 'gitsync_pinned{scope="instance"} 1.0' in leading.metrics()

    # the head moves on while pinned: nothing of it is applied
    upstream.commit({"apps/b.yaml": app_yaml(ns, "b", image="nginx:1.29"), "apps/d.yaml":
                     app_yaml(ns, "d")}, "later")  # fmt: skip
    preview = cli(kubeconfig, "diff", *flags)
    # held: nothing to write, and Git's head differs from the cluster
    assert preview.returncode == 1, preview.stdout + preview.stderr
    for name in ("a", "b", "c", "d"):
        assert f"held MyApp/{ns}/{name}: pinned to {good} by sre@example.com" in preview.stdout
    report = cli(kubeconfig, "drift", "--instance-name", INSTANCE, "--status-namespace", ns,
                 "-n", ns)  # fmt: skip
    assert f"instance pinned to {good} by sre@example.com at " in report.stdout, report.stderr

    # the leader dies; the standby takes over and honours the pin: a change by hand is
    # corrected back to the pinned spec, and the head's d is still not created
    first = leader_pid(kube, ns)
    leader = next(r for r in replicas if r.proc.pid == first)
    leader.stop(signal.SIGKILL)
    wait_until(lambda: leader_pid(kube, ns) not in (0, first), timeout=60, what="a takeover")
    kube.apply(
        path_of("MyApp", ns, "a"),
        {"apiVersion": "apps.example.com/v1", "kind": "MyApp",
         "metadata": {"name": "a", "namespace": ns}, "spec": {"image": "nginx:by-hand"}},
        field_manager="kubectl-edit", force=True,
    )  # fmt: skip
    wait_until(lambda: image(kube, ns, "a") == "nginx:1.27", timeout=60, what="the correction")
    assert image(kube, ns, "b") == "nginx:1.27" and not get(kube, "MyApp", ns, "d")

    resumed = cli(kubeconfig, "resume", "--instance-name", INSTANCE, "--status-namespace", ns)
    assert resumed.returncode == 0, resumed.stderr
    assert f"instance {INSTANCE} resumed (it was pinned to {good}" in resumed.stdout
    assert "pin" not in status_data(kube, ns)
    wait_until(lambda: image(kube, ns, "a") == "nginx:bad" and image(kube, ns, "b") ==
               "nginx:1.29" and get(kube, "MyApp", ns, "c") and get(kube, "MyApp", ns, "d"),
               timeout=60, what="the head applied again")  # fmt: skip
    wait_until(lambda: status_data(kube, ns).get("pinned") == "", timeout=30, what="recorded")
    again = cli(kubeconfig, "resume", "--instance-name", INSTANCE, "--status-namespace", ns)
    assert again.returncode == 0 and "is not pinned: nothing to resume" in again.stdout


def test_one_myapp_pinned_by_sync_and_what_cannot_be_pinned(
    kube: Kube, kubeconfig: str, crd: str, namespace: str, upstream: Upstream, tmp_path: Path
) -> None:
    ns = namespace
    # the tests of this file share the instance: what an earlier test's namespace still
    # holds while it is deleted would be tracked here too (and counted by the prune guard)
    wait_until(lambda: not others_of_instance(kube, ns), timeout=120, what="earlier MyApps gone")
    flags = [*source_flags(upstream, ns), "--cache-dir", str(tmp_path / "cache")]
    good = upstream.commit({"apps/a.yaml": app_yaml(ns, "a"), "apps/b.yaml": app_yaml(ns, "b")})
    upstream.commit({"apps/a.yaml": app_yaml(ns, "a", image="nginx:bad"),
                     "apps/b.yaml": app_yaml(ns, "b", image="nginx:1.28"),
                     "apps/c.yaml": app_yaml(ns, "c")})  # fmt: skip
    assert cli(kubeconfig, "sync", *flags).returncode == 0

    # nothing is written when the revision, or the MyApp at it, does not exist
    missing = "0" * 40
    unknown = cli(kubeconfig, "rollback", "--to", missing, *flags)
    assert unknown.returncode == 1
    assert f"error: commit {missing} not found in file://" in unknown.stderr
    absent = cli(kubeconfig, "rollback", f"MyApp/{ns}/c", "--to", good, *flags)
    assert absent.returncode == 1
    assert f"MyApp/{ns}/c is not declared at revision {good}: nothing pinned" in absent.stderr
    assert not pins_of(status_data(kube, ns))
    usage = cli(kubeconfig, "rollback", "Deployment/x", "--to", good, *flags)
    assert usage.returncode == 2 and "MyApp/NAMESPACE/NAME" in usage.stderr

    pinned = cli(kubeconfig, "rollback", f"MyApp/{ns}/a", "--to", good, "--reason", "r", *flags)
    assert pinned.returncode == 0, pinned.stderr
    assert "no daemon leads instance shop: the next sync applies it" in pinned.stdout
    record = json.loads(status_data(kube, ns)[data_key(f"{ns}/a")])
    assert record["revision"] == good
    # no --by: who the API server says the kubeconfig's user is
    review = kube.create(
        resource_path("authentication.k8s.io/v1", "selfsubjectreviews"),
        {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"},
    )
    assert record["by"] == review["status"]["userInfo"]["username"] != ""
    synced = cli(kubeconfig, "sync", *flags)
    assert synced.returncode == 0, synced.stdout + synced.stderr
    assert f"MyApp/{ns}/a pinned to {good} by " in synced.stdout
    # a from the pinned commit, the others from the head
    assert (image(kube, ns, "a"), image(kube, ns, "b")) == ("nginx:1.27", "nginx:1.28")
    assert get(kube, "MyApp", ns, "c")
    app = get(kube, "MyApp", ns, "a")
    assert app is not None and app["status"]["source"]["revision"] == f"main@sha1:{good}"
    preview = cli(kubeconfig, "diff", *flags, "-o", "json")
    assert preview.returncode == 1, preview.stderr  # a held
    held = json.loads(preview.stdout)["held"]
    assert [(h["object"], h["hold"]) for h in held] == [(f"MyApp/{ns}/a", "pin")]
    # a local checkout gives the pinned commit from its own history, not its work tree:
    # the preview is the same as from the URL (a edited in the work tree is not a's pin)
    checkout = tmp_path / "checkout"
    upstream.git("clone", "--quiet", str(upstream.bare), str(checkout))
    (checkout / "apps" / "a.yaml").write_text(app_yaml(ns, "a", image="nginx:uncommitted"))
    local = cli(kubeconfig, "diff", "--repo", str(checkout), *flags[2:], "-o", "json")
    assert local.returncode == 1, local.stdout + local.stderr  # a held, as from the URL
    previewed = json.loads(local.stdout)
    assert previewed["objects"] == [] and previewed["failed"] == []
    assert [(h["object"], h["hold"]) for h in previewed["held"]] == [(f"MyApp/{ns}/a", "pin")]
    # a directory that is no checkout cannot give it: an error saying what to run, not
    # a preview of its files
    plain = tmp_path / "plain"
    shutil.copytree(checkout / "apps", plain / "apps")
    refused = cli(kubeconfig, "diff", "--repo", str(plain), *flags[2:])
    assert refused.returncode == 2, refused.stdout + refused.stderr
    cannot = (
        f"pinned to commit {good}, which the directory '{plain}' cannot give (it is not a Git"
        " checkout): run this command again with --repo set to the repository's Git URL"
    )
    errors = [line for line in refused.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and errors[0].endswith(f"cannot be read: {cannot}"), errors

    resumed = cli(kubeconfig, "resume", f"MyApp/{ns}/a", "--instance-name", INSTANCE,
                  "--status-namespace", ns)  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr
    assert cli(kubeconfig, "sync", *flags).returncode == 0
    assert image(kube, ns, "a") == "nginx:bad"

    # the instance pinned, as in an incident: the preview from the checkout is the one
    # from the URL, and a directory that is no checkout says what to run
    assert cli(kubeconfig, "rollback", "--to", good, *flags).returncode == 0
    remote = cli(kubeconfig, "diff", *flags, "-o", "json")
    local = cli(kubeconfig, "diff", "--repo", str(checkout), *flags[2:], "-o", "json")
    assert remote.returncode == local.returncode == 1, remote.stderr + local.stderr
    objects = json.loads(local.stdout)["objects"]
    assert objects == json.loads(remote.stdout)["objects"]
    assert {(o["object"], o["action"]) for o in objects if o["object"].startswith("MyApp")} == {
        (f"MyApp/{ns}/a", "configured"), (f"MyApp/{ns}/b", "configured"),
        (f"MyApp/{ns}/c", "pruned"),
    }  # fmt: skip
    refused = cli(kubeconfig, "diff", "--repo", str(plain), *flags[2:])
    assert refused.returncode == 2
    assert [line for line in refused.stderr.splitlines() if line.startswith("error:")] == [
        f"error: {cannot}"
    ]


def test_with_verify_commits_a_pin_goes_back_but_resuming_does_not_launder_a_rewind(
    kube: Kube,
    kubeconfig: str,
    crd: str,
    namespace: str,
    upstream: Upstream,
    signers: dict[str, Signer],
    tmp_path: Path,
) -> None:
    ns, alice = namespace, signers["alice"]
    keys = keys_dir(tmp_path, alice)
    flags = [*source_flags(upstream, ns), "--cache-dir", str(tmp_path / "cache"),
             "--verify-commits", "--trusted-keys", str(keys)]  # fmt: skip
    good = commit(upstream, {"apps/a.yaml": app_yaml(ns, "a")}, alice)
    bad = commit(upstream, {"apps/a.yaml": app_yaml(ns, "a", image="nginx:bad")}, alice)
    assert cli(kubeconfig, "sync", *flags).returncode == 0
    unsigned = commit(upstream, {"apps/a.yaml": app_yaml(ns, "a", image="evil:1")}, None)

    refused = cli(kubeconfig, "rollback", "--to", unsigned, *flags)
    assert refused.returncode == 2, refused.stderr
    assert f"commit {unsigned} of main not applied: unsigned" in refused.stderr
    assert not pins_of(status_data(kube, ns))

    # back to an older signed commit, which does not descend from the one applied
    assert cli(kubeconfig, "rollback", "--to", good, *flags).returncode == 0
    synced = cli(kubeconfig, "sync", *flags)
    assert synced.returncode == 0, synced.stdout + synced.stderr
    assert image(kube, ns, "a") == "nginx:1.27"
    assert status_data(kube, ns)["appliedCommit"] == bad  # the head applied before the pin

    # meanwhile the branch is rewound to the old signed commit (a push without a key can
    # do that): lifting the pin must not let that pass as the branch moving on
    upstream.wgit("reset", "--quiet", "--hard", good)
    upstream.wgit("push", "--quiet", "--force", "origin", "HEAD:refs/heads/main")
    assert cli(kubeconfig, "resume", "--instance-name", INSTANCE, "--status-namespace",
               ns).returncode == 0  # fmt: skip
    rewound = cli(kubeconfig, "sync", *flags)
    assert rewound.returncode == 2, rewound.stdout + rewound.stderr
    assert f"not-a-descendant: it does not descend from commit {bad}" in rewound.stderr
    # a signed commit on top of the one applied is applied as usual
    upstream.wgit("reset", "--quiet", "--hard", bad)
    fixed = commit(upstream, {"apps/a.yaml": app_yaml(ns, "a", image="nginx:1.28")}, alice)
    assert cli(kubeconfig, "sync", *flags).returncode == 0
    assert image(kube, ns, "a") == "nginx:1.28"
    assert status_data(kube, ns)["appliedCommit"] == fixed


def test_a_pin_before_any_sync_makes_the_configmap_and_the_daemons_record_keeps_it(
    kube: Kube, kubeconfig: str, crd: str, namespace: str, upstream: Upstream, tmp_path: Path
) -> None:
    ns = namespace
    flags = [*source_flags(upstream, ns), "--cache-dir", str(tmp_path / "cache")]
    good = upstream.commit({"apps/a.yaml": app_yaml(ns, "a")})
    upstream.commit({"apps/a.yaml": app_yaml(ns, "a", image="nginx:bad")})
    pinned = cli(kubeconfig, "rollback", "--to", good, *flags)
    assert pinned.returncode == 0, pinned.stderr
    cm = kube.get(resource_path("v1", "configmaps", ns, f"gitsync-status-{INSTANCE}"))
    assert cm["metadata"]["labels"] == {
        "app.kubernetes.io/managed-by": "gitsync",
        "gitsync.apps.example.com/instance": INSTANCE,
    }
    assert set(cm["data"]) == {"pin"}
    assert cli(kubeconfig, "sync", *flags).returncode == 0
    assert image(kube, ns, "a") == "nginx:1.27"
    cm = kube.get(resource_path("v1", "configmaps", ns, f"gitsync-status-{INSTANCE}"))
    assert json.loads(cm["data"]["pin"])["revision"] == good
    owners = {m["manager"]: m["operation"] for m in cm["metadata"]["managedFields"]}
    # the pin is the pin manager's, the record the daemon's: its apply never removes the pin
    assert owners["gitsync-pin"] in ("Update", "Apply") and owners["gitsync"] == "Apply"
    assert cli(kubeconfig, "resume", *flags).returncode == 0  # rollback's flags do
    assert cli(kubeconfig, "sync", *flags).returncode == 0
    assert image(kube, ns, "a") == "nginx:bad"
    assert not pins_of(status_data(kube, ns)) and status_data(kube, ns)["pinned"] == ""
    # a MyApp whose file is broken at REV: the error says that is why it is not declared
    broken = upstream.commit({"apps/b.yaml": app_yaml(ns, "b", replicas="many")})
    refused = cli(kubeconfig, "rollback", f"MyApp/{ns}/b", "--to", broken, *flags)
    assert refused.returncode == 1, refused.stderr
    assert f"MyApp/{ns}/b is not declared at revision {broken} (invalid manifests there:" in (
        refused.stderr
    )
    assert "apps/b.yaml" in refused.stderr and "Traceback" not in refused.stderr
