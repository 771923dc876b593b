"""A whole sync pass (load, apply, prune, sync state) against fake caches and a fake
cluster, and the plan ``gitsync diff`` shows for the same state: one planner, so the
preview names the same actions as the pass that follows it."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest

from gitsync.engine.changeset import ChangeSet, PruneGuard, plan, plan_prune
from gitsync.engine.planner import Settings
from gitsync.errors import APIInvalidError, APIServerError, APITimeoutError, GitsyncError
from gitsync.gitops import namespaces as nslib
from gitsync.gitops.sync import Syncer, SyncOptions, myapp_body
from gitsync.gitops.sync_state import Part, StateWriter
from gitsync.kube.client import path_of
from gitsync.kube.interfaces import Cache, Recorder, RecordStore
from gitsync.model.api import ADOPT_ANNOTATION, KIND, SOURCE_LABEL
from gitsync.model.instance import refusal_of
from gitsync.model.myapp_status import SyncInfo
from gitsync.reconcile.gate import Gate
from gitsync.reconcile.ledger import Claim, Declared, Ledger
from gitsync.reconcile.reconciler import ObjectWriter, Reconciler
from gitsync.reconcile.result import Result, crash_message
from gitsync.source import manifests
from gitsync.source.checkout import CommitInfo, Revision
from tests.fakes import FakeCache, FakeCluster, FakeRecorder
from tests.support import app_yaml

NAMES = ("a", "b", "c")


@dataclass
class FakeOperator:
    """The operator as a sync pass sees it (``gitsync.gitops.sync.Operator``), over one
    reconciler; no workers, so nothing is requeued."""

    reconciler: Reconciler
    kube: FakeCluster
    is_leader: Callable[[], bool] = field(default=lambda: True)
    requeued: list[str] = field(default_factory=list)
    #: the keys handed to the workers' backoff after a failure that may pass
    retried: list[str] = field(default_factory=list)
    #: with sharding, the MyApps this replica serves (None: all of them)
    served: Callable[[str], bool] | None = None

    def serves(self, key: str) -> bool:
        return self.served is None or self.served(key)

    @property
    def sharded(self) -> bool:
        return self.served is not None

    def working(self, key: str) -> AbstractContextManager[bool]:
        # with sharding a replica writes its buckets' MyApps, leader or not
        return contextlib.nullcontext(self.is_leader() if self.served is None else self.served(key))

    def reconcile(
        self, key: str, declared: Declared | None = None, *, deployment_absent: bool = False
    ) -> Result:
        return self.reconciler.reconcile(key, declared, deployment_absent=deployment_absent)

    def requeue(self, key: str, after: float) -> None:
        self.requeued.append(key)

    def retry(self, key: str, result: Result) -> None:
        self.retried.append(key)

    def load_failed(self, key: str, sync: SyncInfo) -> Result:
        return self.reconciler.load_failed(key, sync)

    @property
    def myapps(self) -> Cache:
        return self.reconciler.myapps

    @property
    def deployments(self) -> Cache:
        return self.reconciler.deployments

    @property
    def applier(self) -> ObjectWriter:
        return self.reconciler.writer

    @property
    def events(self) -> Recorder:
        return self.reconciler.events

    @property
    def ledger(self) -> Ledger:
        return self.reconciler.ledger

    @property
    def gate(self) -> Gate:
        return self.reconciler.gate

    @property
    def settings(self) -> Settings:
        return self.reconciler.settings

    def keep_records(self, records: RecordStore) -> None:
        self.reconciler.records = records


class DirSource:
    """A checkout that is a directory; ``commits`` counts what was committed to it."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.commits = 0
        #: the commit each fetch was told the revision must descend from
        self.after: list[str] = []

    def fetch(self, after: str = "", accept: str = "") -> Revision:
        self.after.append(after)
        return Revision("main", f"{self.commits:040x}", self.directory)

    def fetch_commit(self, sha: str) -> Revision:
        return Revision("main", sha, self.directory, pinned=True)

    def remote_sha(self) -> str:
        return f"{self.commits:040x}"

    def commit_info(self, sha: str) -> CommitInfo | None:
        return None


class World:
    def __init__(self, tmp_path: Path) -> None:
        self.repo = tmp_path / "repo"
        (self.repo / "apps").mkdir(parents=True)
        self.cluster = FakeCluster()
        self.cluster.store[nslib.path_of("shop")] = {"metadata": {"name": "shop"}}
        self.myapps, self.deployments = FakeCache(), FakeCache()
        self.events = FakeRecorder()
        reconciler = Reconciler(
            self.myapps, self.deployments, self.cluster, self.cluster, self.events
        )
        self.options = SyncOptions(repo="https://git.example.com/apps.git", path="apps")
        self.state = StateWriter(self.cluster, "gitsync", "apps")
        self.source = DirSource(self.repo)
        self.operator = FakeOperator(reconciler, self.cluster)
        self.syncer = Syncer(self.operator, self.source, self.options, self.state)

    def declare(self, *names: str) -> None:
        for f in (self.repo / "apps").glob("*.yaml"):
            f.unlink()
        for name in names:
            (self.repo / "apps" / f"{name}.yaml").write_text(app_yaml("shop", name))
        self.source.commits += 1

    def preview(self) -> ChangeSet:
        """What ``gitsync diff`` plans from the same state (its caches stand in for the
        LISTs diff makes)."""
        loaded = manifests.load(self.repo, "apps", default_namespace="default")
        label = self.syncer.source_label
        desired = {app.key: myapp_body(app, label) for app in loaded.apps}
        myapps = {f"shop/{o['metadata']['name']}": o for o in self.myapps.items()}
        deployments = {f"shop/{o['metadata']['name']}": o for o in self.deployments.items()}
        identity, adopt = self.syncer.identity, self.options.adopt
        applied = {
            k: body
            for k, body in desired.items()
            if refusal_of(identity, k, myapps.get(k), adopt) is None
        }
        tracked = self.syncer.tracked()
        guard = PruneGuard()
        pruning = plan_prune(desired, tracked, guard, manifests_ok=loaded.ok, applied=applied)
        return plan(applied, myapps, deployments, pruning)


def myapp_actions(changes: ChangeSet) -> dict[str, str]:
    return {
        c.subject.rsplit("/", 1)[-1]: c.action
        for c in changes.changes
        if c.subject.startswith(f"{KIND}/")
    }


@pytest.fixture
def world(tmp_path: Path) -> World:
    return World(tmp_path)


def test_a_pass_creates_then_leaves_alone_then_prunes_as_the_preview_said(
    world: World,
) -> None:
    world.declare(*NAMES)
    preview = world.preview()
    first = world.syncer.run()
    assert first.ok, first.errors
    assert myapp_actions(first) == myapp_actions(preview) == dict.fromkeys(NAMES, "created")
    assert first.count("created") == 3 and first.revision.startswith("main@sha1:")
    assert {p.rsplit("/", 1)[-1] for p in world.cluster.store if "/deployments/" in p} == {*NAMES}

    writes = len(world.cluster.writes)
    assert myapp_actions(world.preview()) == dict.fromkeys(NAMES, "unchanged")
    steady = world.syncer.run()
    assert myapp_actions(steady) == dict.fromkeys(NAMES, "unchanged")
    assert len(world.cluster.writes) == writes  # steady state writes nothing

    world.declare("a", "b")
    preview = world.preview()
    assert myapp_actions(preview)["c"] == "pruned" and preview.writes
    pruning = world.syncer.run()
    assert myapp_actions(pruning) == {"a": "unchanged", "b": "unchanged", "c": "pruned"}
    assert not any(p.endswith("/myapps/c") for p in world.cluster.store)
    assert "Pruned" in world.events.reasons()


@pytest.mark.parametrize(
    ("error", "retried"),
    [
        (APIServerError("MyApp/shop/a", "etcdserver: request timed out"), True),
        (APITimeoutError("MyApp/shop/a", "read timed out"), True),
        (APIInvalidError("MyApp/shop/a", "spec.image: Required", []), False),
    ],
)
def test_a_pass_hands_an_apply_that_failed_for_now_to_the_workers(
    world: World, error: GitsyncError, retried: bool
) -> None:
    world.declare("a")
    world.cluster.fail["apply"] = error
    result = world.syncer.run()
    assert myapp_actions(result) == {"a": "failed"} and not result.ok
    assert world.operator.retried == (["shop/a"] if retried else [])
    # the workers' reconcile, when the queue hands the key back: the pass's create
    # again, or (a failure that will not pass by itself) nothing until Git changes
    world.operator.reconcile("shop/a")
    assert (path_of(KIND, "shop", "a") in world.cluster.store) == retried


def test_a_prune_the_guard_refuses_is_skipped_in_the_preview_and_the_pass(world: World) -> None:
    world.declare(*NAMES)
    world.syncer.run()
    world.declare("a")  # 2 of 3 would go: the default guard refuses half or more
    preview = world.preview()
    result = world.syncer.run()
    assert preview.prune_skipped is not None and preview.prune_skipped == result.prune_skipped
    assert "2 of 3" in result.prune_skipped
    assert result.count("pruned") == preview.count("pruned") == 0
    assert all(any(p.endswith(f"/myapps/{n}") for p in world.cluster.store) for n in NAMES)


def test_one_added_and_one_removed_of_two_settles_in_one_pass(world: World) -> None:
    """The guard counts the MyApp the pass creates, as the next pass does: 1 of 3, not
    1 of 2 (refused by this pass and carried out by the next)."""
    world.declare("a", "b")
    world.syncer.run()
    world.declare("b", "c")
    preview = world.preview()
    result = world.syncer.run()
    expected = {"a": "pruned", "b": "unchanged", "c": "created"}
    assert myapp_actions(preview) == myapp_actions(result) == expected
    assert result.prune_skipped is None and preview.prune_skipped is None
    assert not any(p.endswith("/myapps/a") for p in world.cluster.store)
    del world.myapps.objects["shop/a"]  # the watch brings the delete
    settled = world.preview()
    assert not settled.writes and settled.prune_skipped is None, settled.changes


def hand_made(world: World, name: str, **annotations: str) -> None:
    """A MyApp made by hand: no source label, another image than Git's."""
    body = {
        "apiVersion": "apps.example.com/v1",
        "kind": KIND,
        "metadata": {"name": name, "namespace": "shop", "annotations": annotations},
        "spec": {"image": "nginx:1.25"},
    }
    world.myapps.observe(world.cluster.apply(path_of(KIND, "shop", name), body))


def test_a_myapp_made_by_hand_is_refused_in_the_preview_and_the_pass(world: World) -> None:
    hand_made(world, "a")
    world.declare("a", "b")
    preview = world.preview()
    writes = len(world.cluster.writes)
    result = world.syncer.run()
    assert myapp_actions(preview) == {"b": "created"}
    assert myapp_actions(result) == {"a": "failed", "b": "created"}
    [why] = [c.reason for c in result.changes if c.action == "failed"]
    assert "MyApp/shop/a exists without the label" in why and ADOPT_ANNOTATION in why
    assert not any(p.endswith("/a") for _, p in world.cluster.writes[writes:])
    assert world.cluster.store[path_of(KIND, "shop", "a")]["spec"]["image"] == "nginx:1.25"
    assert world.events.reasons().count("NotAdopted") == 1
    # the operator, too, leaves it to its maker, even handed what Git declares
    body = myapp_body(
        manifests.load(world.repo, "apps", default_namespace="default").apps[0],
        world.syncer.source_label,
    )
    sync = SyncInfo(result.revision, "apps/a.yaml", "t")
    world.operator.reconcile("shop/a", Declared(body, sync, Claim(world.syncer.identity)))
    world.operator.reconcile("shop/a")
    assert world.cluster.store[path_of(KIND, "shop", "a")]["spec"]["image"] == "nginx:1.25"
    world.syncer.run()
    assert world.events.reasons().count("NotAdopted") == 1  # once, not on every pass


def test_a_refusal_is_remembered_while_git_declares_its_myapp_only(world: World) -> None:
    hand_made(world, "a")
    world.declare("a", "b")
    world.syncer.run()
    world.syncer.run()
    assert world.events.reasons().count("NotAdopted") == 1
    world.declare("b")  # a leaves Git: its refusal is let go, not kept for good
    world.syncer.run()
    assert world.syncer._refused == {}
    # back in Git, it is refused and announced again
    world.declare("a", "b")
    result = world.syncer.run()
    assert myapp_actions(result)["a"] == "failed"
    assert world.events.reasons().count("NotAdopted") == 2
    assert set(world.syncer._refused) == {"shop/a"}


@pytest.mark.parametrize("how", ["annotation", "--adopt"])
def test_a_myapp_made_by_hand_is_adopted_when_handed_over(world: World, how: str) -> None:
    if how == "annotation":
        hand_made(world, "a", **{ADOPT_ANNOTATION: "true"})
    else:
        hand_made(world, "a")
        world.options = replace(world.options, adopt=True)
        world.syncer.options = world.options
    world.declare("a", "b")
    preview = world.preview()
    result = world.syncer.run()
    assert myapp_actions(preview) == myapp_actions(result) == {"a": "configured", "b": "created"}
    adopted = world.cluster.store[path_of(KIND, "shop", "a")]
    assert adopted["spec"]["image"] == "nginx:1.27"
    assert adopted["metadata"]["labels"][SOURCE_LABEL] == world.syncer.source_label


def test_the_sync_state_records_the_pass(world: World) -> None:
    world.declare(*NAMES)
    result = world.syncer.run()
    data = world.cluster.get(world.state.path)["data"]
    assert data["result"] == "Succeeded" and data["managed"] == "3"
    assert data["revision"] == result.revision and data["lastChange"] == result.summary()


def test_a_broken_manifest_fails_the_pass_and_prunes_nothing(world: World) -> None:
    world.declare(*NAMES)
    world.syncer.run()
    world.declare("a")
    (world.repo / "apps" / "b.yaml").write_text("apiVersion: apps.example.com/v1\nkind: [")
    world.source.commits += 1
    result = world.syncer.run()
    assert not result.ok and result.errors and "b.yaml" in result.errors[0]
    assert result.count("pruned") == 0 and result.prune_skipped is not None
    assert all(any(p.endswith(f"/myapps/{n}") for p in world.cluster.store) for n in NAMES)


def synced(world: World, name: str) -> dict[str, str]:
    """The Synced condition of MyApp ``shop/name`` as the cluster holds it."""
    app = world.cluster.get(path_of(KIND, "shop", name))
    conditions = app.get("status", {}).get("conditions", [])
    return next(c for c in conditions if c["type"] == "Synced")


def test_a_myapp_whose_file_no_longer_loads_says_so_and_stays_as_it_was(world: World) -> None:
    world.declare("a", "b")
    world.syncer.run()
    applied = world.cluster.get(path_of(KIND, "shop", "b"))
    assert synced(world, "b")["status"] == "True"
    broken = app_yaml("shop", "b", image="nginx:1.28").replace("  image:", "  imgae:")
    (world.repo / "apps" / "b.yaml").write_text(broken)
    world.source.commits += 1
    result = world.syncer.run()
    assert not result.ok and result.count("pruned") == 0
    b = synced(world, "b")
    assert b["status"] == "False" and b["reason"] == "LoadFailed", b
    assert b["message"].startswith(f"apps/b.yaml does not load at {result.revision}"), b
    assert "apps/b.yaml:7:3 (document 0): spec.imgae: unknown field" in b["message"], b
    assert "and more errors in this file" in b["message"]  # spec.image is missing too
    now = world.cluster.get(path_of(KIND, "shop", "b"))
    assert now["spec"] == applied["spec"]
    assert now["status"]["source"] == applied["status"]["source"]  # this commit changed nothing
    assert synced(world, "a")["status"] == "True"  # its file loads
    # a worker's reconcile meanwhile keeps saying it
    world.operator.reconcile("shop/b")
    assert synced(world, "b")["reason"] == "LoadFailed"

    world.declare("a", "b")
    fixed = world.syncer.run()
    assert fixed.ok, fixed.errors
    assert synced(world, "b")["status"] == "True" and synced(world, "b")["reason"] == "Applied"


def test_a_deposed_leader_prunes_nothing(world: World) -> None:
    world.declare(*NAMES)
    world.syncer.run()
    world.declare("a", "b")
    leading = [True]
    world.syncer.controller = FakeOperator(
        world.operator.reconciler, world.cluster, lambda: leading[0]
    )
    leading[0] = False
    result = world.syncer.run()
    assert not result.ok and result.count("pruned") == 0
    assert any(p.endswith("/myapps/c") for p in world.cluster.store)


def test_with_sharding_a_pass_serves_its_buckets_and_only_the_leader_prunes_and_records(
    world: World,
) -> None:
    def stored() -> set[str]:
        return {p.rsplit("/", 1)[-1] for p in world.cluster.store if "/myapps/" in p}

    leases: dict[str, str] = {}  # each member's published pass, as its Lease holds it

    class Shares:
        def __init__(self, me: str) -> None:
            self.me = me
            self.members = ("a", "leader")

        @property
        def passes(self) -> dict[str, str]:
            return {m: t for m, t in leases.items() if m != self.me}

        @property
        def unserved(self) -> dict[int, float]:
            return {}

        def publish(self, last_pass: str) -> None:
            leases[self.me] = last_pass

    def member(names: set[str], leads: bool, me: str) -> Syncer:
        operator = FakeOperator(
            world.operator.reconciler,
            world.cluster,
            lambda: leads,
            served=lambda k: k.split("/")[1] in names,
        )
        syncer = Syncer(operator, world.source, world.options, world.state)
        syncer.shares = Shares(me)
        return syncer

    state_path = world.state.path
    world.declare(*NAMES)
    member_a = member({"a"}, leads=False, me="a")
    result = member_a.run()
    assert result.ok, result.errors
    # its own MyApp and Deployment; the others' are not touched nor reported
    assert stored() == {"a"} and myapp_actions(result) == {"a": "created"}
    assert state_path not in world.cluster.store  # the instance's record is the leader's
    assert Part.parse(leases["a"]) == Part(  # published instead, for the leader to sum
        revision=result.revision,
        managed=1,
        counts={"created": 1},
        changed_at=result.revision,
        changed={"created": 1},
    )
    leader = member({"b", "c"}, leads=True, me="leader")
    assert leader.run().ok and stored() == {*NAMES}
    record = world.cluster.store[state_path]["data"]
    assert (record["managed"], record["replicas"]) == ("3", "2 of 2 replicas")
    assert record["lastChange"] == "3 created, 0 configured, 0 unchanged, 0 pruned"
    world.declare("b", "c")
    member_a.run()
    assert "a" in stored()  # left Git, but a replica that does not lead prunes nothing
    result = leader.run()
    assert myapp_actions(result) == {"a": "pruned", "b": "unchanged", "c": "unchanged"}
    assert stored() == {"b", "c"}


def test_a_crash_is_told_in_one_line_without_credentials() -> None:
    e = RuntimeError("GET https://user:s3cret@git.example.com/x?token=abc failed\nnext")
    message = crash_message(e)
    assert message == (
        "internal error: RuntimeError: GET https://***@git.example.com/x?*** failed\\nnext"
    )
    assert crash_message(RecursionError()) == "internal error: RecursionError"
    assert len(crash_message(ValueError("x" * 5000))) < 250


def test_a_crashed_pass_is_a_failed_pass_recorded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    w = World(tmp_path)
    w.declare("a")
    assert w.syncer.run().ok
    w.declare("a", "b")

    def crash(*_args: object, **_kw: object) -> manifests.LoadResult:
        raise KeyError("spec")

    monkeypatch.setattr(manifests, "load", crash)
    result = w.syncer.run()  # not raised: a value, like every failed pass
    assert result.errors == ["internal error: KeyError: 'spec'"]
    assert result.prune_skipped == "the sync failed unexpectedly; nothing is pruned"
    assert w.state.read()["result"] == "Failed"
    assert w.state.read()["lastError"] == "1 error: internal error: KeyError: 'spec'"


def test_a_pass_checks_the_commit_against_the_one_the_status_configmap_records(
    world: World,
) -> None:
    from gitsync.errors import APIError

    # a record written before appliedCommit existed: its revision names the commit
    old = "ab" * 20
    world.cluster.store[world.state.path] = {"data": {"revision": f"main@sha1:{old}"}}
    world.declare("a")
    assert world.syncer.run().ok
    applied = f"{1:040x}"
    assert world.source.after == [old]
    assert world.cluster.store[world.state.path]["data"]["appliedCommit"] == applied
    world.syncer.run()
    assert world.source.after[-1] == applied  # then what this pass applied

    # a record that cannot be read is not overwritten (it would lose the commit)
    fresh = World(world.repo.parent / "again")
    fresh.cluster.store[fresh.state.path] = {"data": {"appliedCommit": old}}
    fresh.cluster.get = lambda *a, **k: (_ for _ in ()).throw(APIError("ConfigMap", "down"))  # type: ignore[method-assign]
    fresh.declare("a")
    result = fresh.syncer.run()
    assert not result.ok and "down" in result.errors[0] and fresh.source.after == []
    assert fresh.cluster.store[fresh.state.path] == {"data": {"appliedCommit": old}}
