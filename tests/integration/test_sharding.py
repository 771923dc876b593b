"""``gitsync run --sharding`` processes share one instance's MyApps on the real control
plane: each of three serves the buckets its member Lease holds and corrects its MyApps'
drift; a fourth joins and takes only the buckets the assignment moves, drift made
meanwhile corrected all the same; the leader killed has its MyApps served by the others
within the Lease duration and two retry periods, and a new leader prunes; the API
server's audit log shows each Deployment and each status written by one replica at a
time, and nothing from the killed one afterwards."""

from __future__ import annotations

import datetime as dt
import json
import re
import signal
import socket
import time
import urllib.request
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest

from gitsync.errors import APINotFoundError
from gitsync.kube.client import Kube, path_of, resource_path
from gitsync.kube.members import (
    CLAIMED_ANNOTATION,
    COUNT_ANNOTATION,
    HELD_ANNOTATION,
    MEMBER_OF_LABEL,
    member_lease_name,
    serving_now,
)
from gitsync.model.api import Obj
from gitsync.model.shards import BUCKETS, assign, bucket_of, held_by, parse_buckets
from testenv.cluster import AUDIT_LOG
from tests.integration.test_ha import Replica
from tests.support import app_yaml, get, wait_until

N = 60
LEASE_DURATION = 15.0
RETRY = 2.0


@pytest.fixture
def three(
    kubeconfig: str, crd: str, namespace: str, tmp_path: Path
) -> Iterator[tuple[list[Replica], Path]]:
    repo = tmp_path / "repo"
    (repo / "apps").mkdir(parents=True)
    (repo / "apps" / "all.yaml").write_text(
        "---\n".join(app_yaml(namespace, f"app-{i:03}") for i in range(N))
    )
    flags = ("--sharding", "--repo", str(repo), "--path", "apps", "--interval", "3600")
    replicas = [
        Replica(kubeconfig, namespace, tmp_path / f"replica-{i}.log", flags) for i in range(3)
    ]
    yield replicas, repo
    for r in replicas:
        r.stop(signal.SIGKILL)


def holders(kube: Kube, namespace: str) -> dict[int, int]:
    """Each bucket's holder (by pid), as the live member Leases stored now say."""
    listed = kube.list(
        resource_path("coordination.k8s.io/v1", "leases", namespace),
        params={"labelSelector": MEMBER_OF_LABEL},  # the one instance of the namespace
    )
    held = serving_now(listed["items"], BUCKETS, dt.datetime.now(dt.UTC))
    return {b: int(m.rsplit("_", 1)[1]) for b, m in held.items()}


def served_by(kube: Kube, namespace: str, pid: int) -> list[str]:
    held = holders(kube, namespace)
    return [f"app-{i:03}" for i in range(N) if held.get(bucket_of(namespace, f"app-{i:03}")) == pid]


def drift(kube: Kube, namespace: str, name: str) -> None:
    kube.request(
        "PATCH",
        path_of("Deployment", namespace, name),
        body={"spec": {"replicas": 4}},
        content_type="application/merge-patch+json",
        params={"fieldManager": "kubectl-edit"},
    )


def corrected(kube: Kube, namespace: str, name: str) -> bool:
    return bool((get(kube, "Deployment", namespace, name) or {})["spec"]["replicas"] == 1)


def replica_writes(namespace: str, since: int) -> Iterator[tuple[str, str, str, str, float]]:
    """(resource[/subresource], name, replica, verb, time) of each accepted write a
    replica sent in ``namespace``, after byte ``since`` of the audit log (its User-Agent
    names the replica: this test's own client, or a daemon run in this process, does not)."""
    with AUDIT_LOG.open("rb") as f:
        f.seek(since)
        for line in f:
            e = json.loads(line)
            ref = e.get("objectRef") or {}
            agent = e.get("userAgent", "")
            if ref.get("namespace") != namespace or not agent.startswith("gitsync/"):
                continue
            if not agent.endswith(")"):
                continue
            if not 200 <= (e.get("responseStatus") or {}).get("code", 0) < 300:
                continue
            what = ref["resource"] + (f"/{ref['subresource']}" if ref.get("subresource") else "")
            at = dt.datetime.fromisoformat(e["stageTimestamp"]).timestamp()
            yield what, ref["name"], agent.rsplit("(", 1)[-1].rstrip(")"), e["verb"], at


def audit_writes(namespace: str, since: int) -> list[tuple[str, str, str, float]]:
    """(object, replica, verb, time) of each Deployment or MyApp status write."""
    return [
        (f"{what}/{name}", replica, verb, at)
        for what, name, replica, verb, at in replica_writes(namespace, since)
        if what in ("deployments", "myapps/status")
    ]


def test_replicas_share_the_myapps_and_each_is_written_by_one_at_a_time(
    kube: Kube, kubeconfig: str, namespace: str, three: tuple[list[Replica], Path]
) -> None:
    replicas, repo = three
    tmp = repo.parent
    flags = ("--sharding", "--repo", str(repo), "--path", "apps", "--interval", "3600")
    since = AUDIT_LOG.stat().st_size
    for r in replicas:
        wait_until(r.up, timeout=60, what="the replicas serving /metrics")
    pids = {r.proc.pid for r in replicas}

    def all_served() -> bool:
        held = holders(kube, namespace)
        return len(held) == BUCKETS and set(held.values()) == pids

    wait_until(all_served, timeout=60, what="every bucket held, each replica some")

    def all_applied() -> bool:
        for i in range(N):
            app = get(kube, "MyApp", namespace, f"app-{i:03}")
            if not app or not (app.get("status") or {}).get("observedGeneration"):
                return False
        return True

    wait_until(all_applied, timeout=120, interval=1.0, what="every MyApp applied, with status")
    for i in range(N):
        labels = get(kube, "Deployment", namespace, f"app-{i:03}")["metadata"]["labels"]  # type: ignore[index]
        assert labels["gitsync.apps.example.com/bucket"] == str(bucket_of(namespace, f"app-{i:03}"))
    # each replica serves its part, as its metrics and the Leases agree
    for r in replicas:
        mine = served_by(kube, namespace, r.proc.pid)
        assert mine, "a replica with nothing to serve"
        assert r.metric("gitsync_shard_myapps", replica=_identity(r)) == len(mine)
        assert r.metric("gitsync_shard_buckets", replica=_identity(r)) == sum(
            1 for pid in holders(kube, namespace).values() if pid == r.proc.pid
        )

    # drift in each replica's part is corrected (by that replica: see the audit below)
    for r in replicas:
        name = served_by(kube, namespace, r.proc.pid)[0]
        drift(kube, namespace, name)
        wait_until(partial(corrected, kube, namespace, name), timeout=15, what=f"{name} corrected")

    # 3 -> 4: a replica joins; only the buckets the assignment moves change hands, and
    # drift made while they do is corrected all the same
    names = {r.proc.pid: _identity(r) for r in replicas}
    before = holders(kube, namespace)
    replicas.append(Replica(kubeconfig, namespace, tmp / "replica-3.log", flags))
    joiner = replicas[-1]
    wait_until(joiner.up, timeout=60, what="the 4th replica serving /metrics")
    names[joiner.proc.pid] = _identity(joiner)
    want = assign(names.values(), BUCKETS)
    moving = [b for b in range(BUCKETS) if names[before[b]] != want[b]]
    assert len(moving) <= BUCKETS / 4 + BUCKETS * 0.10, len(moving)
    in_flight = [f"app-{i:03}" for i in range(N) if bucket_of(namespace, f"app-{i:03}") in moving][
        :5
    ]
    for name in in_flight:
        drift(kube, namespace, name)
    wait_until(
        lambda: {b: names[p] for b, p in holders(kube, namespace).items()} == want,
        timeout=30,
        what="four members settled as the assignment says",
    )
    for name in in_flight:
        wait_until(partial(corrected, kube, namespace, name), timeout=15, what=f"{name} corrected")

    # SIGKILL of the leader: its MyApps are served by the others once its Lease expires,
    # and the instance's work (prune) goes on with a new leader
    victim = next(r for r in replicas if r.metric("gitsync_leader") == 1)
    orphans = served_by(kube, namespace, victim.proc.pid)
    victim.stop(signal.SIGKILL)
    killed = time.monotonic()
    killed_at = time.time()
    drift(kube, namespace, orphans[0])
    wait_until(
        lambda: corrected(kube, namespace, orphans[0]),
        timeout=LEASE_DURATION + 20,
        interval=0.1,
        what="the drift of a killed replica's MyApp corrected by another",
    )
    took = time.monotonic() - killed
    print(f"drift of a killed replica's MyApp corrected {took:.1f}s after SIGKILL")
    assert took <= LEASE_DURATION + 2 * RETRY + 2.0, f"{took:.1f}s"
    survivors = [r for r in replicas if r is not victim]
    wait_until(
        lambda: set(holders(kube, namespace).values()) == {r.proc.pid for r in survivors},
        timeout=30,
        what="the victim's buckets held by the others",
    )
    # a commit: one MyApp leaves Git, one arrives; every replica is told (SIGHUP)
    text = repo / "apps" / "all.yaml"
    docs = text.read_text().split("---\n")
    text.write_text("---\n".join([*docs[:-1], app_yaml(namespace, "newcomer")]))
    wait_until(lambda: any(r.metric("gitsync_leader") == 1 for r in survivors), timeout=30)
    for r in survivors:
        r.proc.send_signal(signal.SIGHUP)
    wait_until(
        lambda: get(kube, "MyApp", namespace, f"app-{N - 1:03}") is None,
        timeout=30,
        what="the MyApp that left Git pruned by the new leader",
    )
    wait_until(
        lambda: (get(kube, "MyApp", namespace, "newcomer") or {}).get("status"),
        timeout=30,
        what="the new MyApp applied by its replica",
    )

    # the audit log: each Deployment and status written by one replica at a time. A
    # bucket changed hands at most twice here (the join, the kill): two replicas writing
    # alongside each other would alternate far more often; and nothing from the victim
    # once it was killed
    time.sleep(1.0)  # the log is written as requests complete
    # (only the replicas' writes: a daemon run inside this test process names itself too)
    writes = [w for w in audit_writes(namespace, since) if w[1] in names.values()]
    # the first three wrote (their MyApps were new); the joiner may have found its
    # buckets' MyApps as they should be, and then writes nothing
    assert {replica for _, replica, _, _ in writes} >= set(names.values()) - {
        names[joiner.proc.pid]
    }
    by_object: dict[str, list[tuple[float, str]]] = {}
    for obj, replica, _, at in writes:
        by_object.setdefault(obj, []).append((at, replica))
    for obj, seq in by_object.items():
        writers = [replica for _, replica in sorted(seq)]
        runs = [w for i, w in enumerate(writers) if i == 0 or writers[i - 1] != w]
        assert len(runs) <= 3, (obj, runs)
    late = [(o, at) for o, w, _, at in writes if w == names[victim.proc.pid] and at > killed_at]
    assert late == []


def test_a_push_to_one_member_reaches_all_and_the_leader_records_the_sum(
    kube: Kube, kubeconfig: str, namespace: str, tmp_path: Path
) -> None:
    """A webhook delivered to one member brings every member's pass (its Lease carries
    the request); each member publishes its pass in its Lease, and the leader alone
    records the instance's sum in the status ConfigMap, once, and then nothing more."""
    repo = tmp_path / "repo"
    (repo / "apps").mkdir(parents=True)
    (repo / "apps" / "all.yaml").write_text(
        "---\n".join(app_yaml(namespace, f"app-{i:03}") for i in range(20))
    )
    secret = tmp_path / "secret"
    secret.write_text("s3cret")
    flags = (
        *("--sharding", "--repo", str(repo), "--path", "apps", "--interval", "3600"),
        *("--instance-name", "shared", "--webhook-secret-file", str(secret)),
    )
    pair = [Replica(kubeconfig, namespace, tmp_path / f"member-{i}.log", flags) for i in range(2)]
    status = resource_path("v1", "configmaps", namespace, "gitsync-status-shared")

    def record() -> dict[str, str]:
        try:
            return dict(kube.get(status).get("data") or {})
        except APINotFoundError:
            return {}

    try:
        for r in pair:
            wait_until(r.up, timeout=60, what="both members serving /metrics")
        pids = {r.proc.pid for r in pair}
        wait_until(
            lambda: set(holders(kube, namespace).values()) == pids,
            timeout=60,
            what="both members holding buckets",
        )
        # neither member alone has 20: the record is the sum of both parts
        wait_until(
            lambda: (
                (record().get("managed"), record().get("replicas")) == ("20", "2 of 2 replicas")
            ),
            timeout=60,
            what="the record summing both members' passes",
        )
        assert record()["result"] == "Succeeded"
        # one new MyApp in each member's buckets; the push goes to one member only
        held = holders(kube, namespace)
        receiver, other = pair
        new = {}
        for r in pair:
            new[r.proc.pid] = next(
                f"new-{i}"
                for i in range(1000)
                if held.get(bucket_of(namespace, f"new-{i}")) == r.proc.pid
            )
        with (repo / "apps" / "new.yaml").open("w") as f:
            f.write("---\n".join(app_yaml(namespace, n) for n in new.values()))
        since = AUDIT_LOG.stat().st_size
        req = urllib.request.Request(
            f"http://127.0.0.1:{receiver.port}/hooks/git", data=b"{}", method="POST"
        )
        req.add_header("X-Gitlab-Token", "s3cret")
        with urllib.request.urlopen(req, timeout=10) as resp:
            assert resp.status == 202
        for n in new.values():
            wait_until(partial(status_of, kube, namespace, n), timeout=20, what=f"{n} applied")
        assert other.metric("gitsync_webhook_requests_total", result="accepted") == 0
        wait_until(
            lambda: (
                record().get("managed") == "22" and record().get("replicas") == "2 of 2 replicas"
            ),
            timeout=20,
            what="the record summing the new pass of both",
        )
        assert record()["lastChange"].startswith("2 created, "), record()
        # steady state: three more retry periods, each member renewing with its pass, and
        # the record is not written again; only the leader ever wrote it
        time.sleep(3 * RETRY + 1.0)
        leader = next(r for r in pair if r.metric("gitsync_leader") == 1)
        writes = [
            (agent, at)
            for name, agent, at in audit_configmap_writes(namespace, since)
            if name == "gitsync-status-shared"
        ]
        assert writes and {agent for agent, _ in writes} == {_identity(leader)}, writes
        assert writes[-1][1] < time.time() - 3 * RETRY, writes
    finally:
        for r in pair:
            r.stop(signal.SIGKILL)


def status_of(kube: Kube, namespace: str, name: str) -> Obj | None:
    return (get(kube, "MyApp", namespace, name) or {}).get("status")


def audit_configmap_writes(namespace: str, since: int) -> list[tuple[str, str, float]]:
    """(name, replica, time) of each ConfigMap write."""
    return [
        (name, replica, at)
        for what, name, replica, _, at in replica_writes(namespace, since)
        if what == "configmaps"
    ]


def _identity(r: Replica) -> str:
    """The replica's name in its member Lease and its User-Agent."""
    return f"{socket.gethostname()}_{r.proc.pid}"


def forged_lease(name: str, identity: str, duration: int, held: str) -> Obj:
    """A Lease under the member label of the instance "forged", as one could write by hand."""
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {
            "name": name,
            "labels": {MEMBER_OF_LABEL: FORGED_GROUP},
            "annotations": {
                COUNT_ANNOTATION: str(BUCKETS),
                HELD_ANNOTATION: held,
                CLAIMED_ANNOTATION: "",
            },
        },
        "spec": {
            "holderIdentity": identity,
            "leaseDurationSeconds": duration,
            "renewTime": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        },
    }


FORGED_GROUP = "gitsync-leader-forged"


def test_a_forged_member_lease_is_ignored_and_buckets_nobody_serves_fail_the_record(
    kube: Kube, kubeconfig: str, crd: str, namespace: str, tmp_path: Path
) -> None:
    """A Lease under the member label that no member could have written (not named after
    its holder) is ignored and said: the replica serves every bucket and the record counts
    every MyApp. A Lease well formed as a member's that serves nothing leaves its share
    unserved: once that lasts longer than a handover, the record fails, naming those
    buckets and since when; once its Lease lapses, they are served and the record
    succeeds again."""
    n = 10
    repo = tmp_path / "repo"
    (repo / "apps").mkdir(parents=True)
    (repo / "apps" / "all.yaml").write_text(
        "---\n".join(app_yaml(namespace, f"app-{i:03}") for i in range(n))
    )
    leases = resource_path("coordination.k8s.io/v1", "leases", namespace)
    bogus = "gitsync-leader-forged-member-bogus"
    kube.request("POST", leases, body=forged_lease(bogus, "intruder", 3600, f"0-{BUCKETS - 1}"))
    flags = (
        *("--sharding", "--repo", str(repo), "--path", "apps", "--interval", "3600"),
        *("--instance-name", "forged"),
    )
    status = resource_path("v1", "configmaps", namespace, "gitsync-status-forged")

    def record() -> dict[str, str]:
        try:
            return dict(kube.get(status).get("data") or {})
        except APINotFoundError:
            return {}

    replica = Replica(kubeconfig, namespace, tmp_path / "replica.log", flags)
    try:
        wait_until(replica.up, timeout=60, what="the replica serving /metrics")
        wait_until(
            lambda: (record().get("managed"), record().get("result")) == (str(n), "Succeeded"),
            timeout=60,
            what="every MyApp applied and counted, the forged Lease notwithstanding",
        )
        assert "unserved" not in record()
        for i in range(n):
            assert get(kube, "Deployment", namespace, f"app-{i:03}") is not None
        log = replica.log.read_text()
        assert f"member lease {bogus} ignored: its name is not the one a member" in log

        # well formed, named as the member "0-stuck" names its Lease, serving nothing
        stuck = member_lease_name(FORGED_GROUP, "0-stuck")
        written = time.time()
        kube.request("POST", leases, body=forged_lease(stuck, "0-stuck", 40, ""))
        wait_until(
            lambda: record().get("result") == "Failed",
            timeout=LEASE_DURATION + 30,
            what="the record failing while buckets go unserved",
        )
        words = record()["unserved"]
        assert record()["lastError"].startswith(words)
        m = re.fullmatch(r"no replica serves buckets (\S+) \(since (\S+)\)", words)
        assert m is not None, words
        share = assign([_identity(replica), "0-stuck"], BUCKETS)
        assert parse_buckets(m[1], BUCKETS) == held_by(share, "0-stuck")
        since = dt.datetime.fromisoformat(m[2]).timestamp()
        assert written - 1 <= since <= written + RETRY + 1, (written, m[2])

        # its Lease lapses (40 s unchanged): its share is served again
        wait_until(
            lambda: (record().get("managed"), record().get("result")) == (str(n), "Succeeded"),
            timeout=40 + 30,
            what="the record succeeding again once every bucket is served",
        )
        assert "unserved" not in record()
    finally:
        replica.stop(signal.SIGKILL)
