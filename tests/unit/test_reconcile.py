"""The reconcile steps against fake caches and a fake cluster: what is written, and the
Result the loop acts on (done, requeue after, retry with backoff, permanent)."""

from __future__ import annotations

import pytest

from gitsync.errors import (
    APIConflictError,
    APIInvalidError,
    APIServerError,
    APITimeoutError,
    APITooManyRequestsError,
)
from gitsync.kube.client import path_of
from gitsync.model.api import Obj
from gitsync.model.instance import resolve
from gitsync.model.myapp_status import LOAD_FAILED, SyncInfo
from gitsync.reconcile.ledger import Claim, Declared
from gitsync.reconcile.reconciler import STATUS_WAIT, Reconciler
from gitsync.reconcile.result import Result
from tests.fakes import FakeCache, FakeCluster, FakeRecorder

KEY = "shop/web"
DEPLOYMENT = path_of("Deployment", "shop", "web")


def myapp(**spec: object) -> Obj:
    return {
        "apiVersion": "apps.example.com/v1",
        "kind": "MyApp",
        "metadata": {"namespace": "shop", "name": "web"},
        "spec": {"image": "nginx:1.27", "replicas": 2, **spec},
    }


class World:
    def __init__(self) -> None:
        self.cluster = FakeCluster()
        self.myapps = FakeCache()
        self.deployments = FakeCache()
        self.events = FakeRecorder()
        self.r = Reconciler(self.myapps, self.deployments, self.cluster, self.cluster, self.events)

    def add(self, obj: Obj) -> Obj:
        """A MyApp created (by someone) and seen by the watch."""
        stored = self.cluster.apply(obj)
        self.myapps.observe(stored)
        return stored

    def status(self) -> Obj:
        return dict(self.cluster.store[path_of("MyApp", "shop", "web")].get("status") or {})

    def condition(self, kind: str) -> Obj:
        return next(c for c in self.status()["conditions"] if c["type"] == kind)


@pytest.fixture
def world() -> World:
    return World()


def test_a_new_myapp_gets_its_deployment_and_status_then_nothing_is_written(
    world: World,
) -> None:
    world.add(myapp())
    first = world.r.reconcile(KEY)
    assert first.outcome is not None and first.outcome.action == "created"
    assert not (first.error or first.permanent or first.requeue_after is not None)
    dep = world.cluster.store[DEPLOYMENT]
    assert dep["spec"]["replicas"] == 2
    assert (
        dep["metadata"]["ownerReferences"][0]["uid"] == world.myapps.objects[KEY]["metadata"]["uid"]
    )
    assert [verb for verb, _ in world.cluster.writes] == ["apply", "apply", "status"]
    assert world.events.reasons() == ["Created"]
    # level-based and idempotent: the same inputs write nothing
    before = list(world.cluster.writes)
    again = world.r.reconcile(KEY)
    assert again.outcome is not None and again.outcome.action == "unchanged"
    assert world.cluster.writes == before


def test_a_spec_change_configures_the_deployment(world: World) -> None:
    world.add(myapp())
    world.r.reconcile(KEY)
    world.add(myapp(replicas=5))
    result = world.r.reconcile(KEY)
    assert result.outcome is not None and result.outcome.action == "configured"
    assert world.cluster.store[DEPLOYMENT]["spec"]["replicas"] == 5


def test_a_myapp_that_is_gone_is_done_without_a_write(world: World) -> None:
    assert world.r.reconcile(KEY) == Result()
    assert world.cluster.writes == []


def test_a_myapp_that_went_leaves_no_stamp_behind(world: World) -> None:
    from gitsync.engine import planner

    world.add(myapp())
    world.r.reconcile(KEY)  # creates the Deployment
    world.r.reconcile(KEY)  # compares it with what it renders: the stamp is remembered
    assert "Deployment/shop/web" in planner._STAMPS
    planner.stamp_of("MyApp/shop/web", myapp())  # as a pass from Git remembers it
    planner.stamp_of("Deployment/shop/other", {"kind": "Deployment"})
    mine = {"MyApp/shop/web", "Deployment/shop/web"}
    del world.myapps.objects[KEY]  # the watch saw it deleted
    assert world.r.reconcile(KEY) == Result()
    assert not mine & set(planner._STAMPS)
    assert "Deployment/shop/other" in planner._STAMPS  # another's stays


def test_throttling_requeues_after_the_servers_hint_and_writes_nothing(world: World) -> None:
    world.add(myapp())
    world.cluster.fail["apply"] = APITooManyRequestsError("Deployment/shop/web", "slow", 3.0)
    writes = len(world.cluster.writes)
    result = world.r.reconcile(KEY)
    assert result.requeue_after == 3.0 and not result.permanent and not result.retry
    # no status, no Event: one more request would only be refused too
    assert len(world.cluster.writes) == writes and world.events.events == []


def test_a_temporary_failure_is_retried_with_backoff(world: World) -> None:
    world.add(myapp())
    world.cluster.fail["apply"] = APIServerError("Deployment/shop/web", "etcd timeout", status=500)
    result = world.r.reconcile(KEY)
    assert result.retry and not result.permanent and "etcd timeout" in result.error
    assert world.events.reasons() == ["ApplyFailed"]
    assert world.r.reconcile(KEY).outcome is not None  # the next try goes through


def test_a_permanent_failure_is_recorded_in_status_and_announced_once(
    world: World,
) -> None:
    world.add(myapp())

    def invalid() -> APIInvalidError:
        return APIInvalidError("Deployment/shop/web", "spec.replicas: Invalid value", [])

    world.cluster.fail["apply"] = invalid()
    result = world.r.reconcile(KEY)
    assert result.permanent and not result.retry and result.requeue_after is None
    ready = world.condition("Ready")
    assert ready["status"] == "False" and "Invalid value" in ready["message"]
    world.cluster.fail["apply"] = invalid()
    assert world.r.reconcile(KEY).permanent
    assert world.events.reasons() == ["ApplyFailed"]  # one Event per distinct error


def test_a_deployment_that_is_not_ours_is_never_taken_over(world: World) -> None:
    world.add(myapp())
    world.cluster.store[DEPLOYMENT] = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"namespace": "shop", "name": "web", "uid": "theirs"},
        "spec": {"replicas": 9},
    }
    result = world.r.reconcile(KEY)
    assert result.permanent and "not owned by MyApp/shop/web" in result.error
    assert world.cluster.store[DEPLOYMENT]["spec"]["replicas"] == 9
    assert ("apply", DEPLOYMENT) not in world.cluster.writes


def test_a_conflicting_status_write_is_retried(world: World) -> None:
    world.add(myapp())
    world.cluster.fail["status"] = APIConflictError("MyApp/shop/web", "modified", [])
    result = world.r.reconcile(KEY)
    assert result.retry and not result.permanent
    assert world.r.reconcile(KEY).error == ""
    assert world.condition("Ready")


def declared(body: Obj, revision: str = "main@sha1:abc") -> Declared:
    """A sync pass's input for ``body``."""
    claim = Claim(resolve("", "https://git.example.com/apps.git", "apps", "main"), adopt=True)
    return Declared(body, SyncInfo(revision=revision, path="apps/web.yaml", time="t"), claim)


def test_a_pass_whose_myapp_fails_gets_the_error_and_records_synced_false(
    world: World,
) -> None:
    world.add(myapp())
    world.cluster.fail["apply"] = APIInvalidError("MyApp/shop/web", "spec.image: Required", [])
    result = world.r.reconcile(KEY, declared(myapp(image="")))
    assert result.action == "failed" and "Required" in result.error
    synced = world.condition("Synced")
    assert synced["status"] == "False" and "Required" in synced["message"]


def test_a_pass_whose_deployment_fails_records_it_in_one_status_write(world: World) -> None:
    world.add(myapp())
    writes = len(world.cluster.writes)

    def refuse_the_deployment(obj: Obj, **kw: object) -> Obj:
        if obj["kind"] == "Deployment":
            raise APIInvalidError("Deployment/shop/web", "spec.replicas: Invalid value", [])
        return real(obj, **kw)

    real = world.cluster.apply
    world.cluster.apply = refuse_the_deployment  # type: ignore[method-assign]
    result = world.r.reconcile(KEY, declared(myapp()))
    assert result.permanent and "Invalid value" in result.error
    assert [v for v, _ in world.cluster.writes[writes:]].count("status") == 1
    synced, ready = world.condition("Synced"), world.condition("Ready")
    assert synced["status"] == "False" and "Invalid value" in synced["message"]
    assert ready["status"] == "False" and "Invalid value" in ready["message"]


def test_a_pass_creates_the_myapp_and_its_deployment(world: World) -> None:
    assert world.r.reconcile(KEY, declared(myapp())).action == "created"
    assert DEPLOYMENT in world.cluster.store
    assert world.condition("Synced")["status"] == "True"
    assert world.r.reconcile(KEY, declared(myapp())).action == "unchanged"


def test_what_git_declared_holds_the_myapp_in_later_reconciles(world: World) -> None:
    world.r.reconcile(KEY, declared(myapp()))
    world.add(myapp(image="nginx:edited"))  # kubectl edit
    assert world.r.reconcile(KEY).action == "configured"
    assert world.cluster.store[path_of("MyApp", "shop", "web")]["spec"]["image"] == "nginx:1.27"
    world.r.ledger.release([KEY])  # left Git
    world.add(myapp(image="nginx:edited"))
    assert world.r.reconcile(KEY).action == "unchanged"
    assert world.cluster.store[path_of("MyApp", "shop", "web")]["spec"]["image"] == "nginx:edited"


def test_a_myapp_whose_file_no_longer_loads_is_held_to_what_git_last_declared_and_says_why(
    world: World,
) -> None:
    world.r.reconcile(KEY, declared(myapp()))
    failed = SyncInfo(
        "main@sha1:1", "apps/web.yaml", "t", ok=False, message="broken", reason=LOAD_FAILED
    )
    world.r.load_failed(KEY, failed)
    synced = world.condition("Synced")
    assert (synced["status"], synced["reason"], synced["message"]) == (
        "False",
        LOAD_FAILED,
        "broken",
    )
    world.add(myapp(image="nginx:edited"))  # kubectl edit, corrected back to Git's last
    assert world.r.reconcile(KEY).action == "configured"
    assert world.cluster.store[path_of("MyApp", "shop", "web")]["spec"]["image"] == "nginx:1.27"
    # the correction is no news of Git's: the MyApp is still not synced to it
    assert world.condition("Synced")["reason"] == LOAD_FAILED


def test_a_myapp_the_claim_does_not_cover_is_not_held_to_git(world: World) -> None:
    world.add(myapp(image="nginx:by-hand"))  # made by hand: no source label
    mine = declared(myapp())
    not_adopting = Declared(mine.body, mine.sync, Claim(mine.claim.instance, adopt=False))
    assert world.r.reconcile(KEY, not_adopting).action == "unchanged"
    assert world.r.reconcile(KEY).action == "unchanged"
    assert world.cluster.store[path_of("MyApp", "shop", "web")]["spec"]["image"] == "nginx:by-hand"


def test_a_worker_whose_deployment_fails_for_now_retries_without_a_status_write(
    world: World,
) -> None:
    world.add(myapp())
    world.cluster.fail["apply"] = APITimeoutError("Deployment/shop/web", "timed out")
    writes = len(world.cluster.writes)
    result = world.r.reconcile(KEY)
    assert result.retry and not result.permanent and "timed out" in result.error
    # the old Deployment still serves: a status now would only say "error" until the retry
    assert world.cluster.writes[writes:] == []


MYAPP = path_of("MyApp", "shop", "web")


def test_a_pass_whose_create_failed_for_now_is_the_pass_again_in_the_next_reconcile(
    world: World,
) -> None:
    """A worker's reconcile creates no MyApp (it serves live ones): after a pass's create
    failed with a 5xx, the queue's retry is that create, with Git's revision in status."""
    world.cluster.fail["apply"] = APIServerError("MyApp/shop/web", "etcdserver: timeout")
    failed = world.r.reconcile(KEY, declared(myapp(), revision="main@sha1:r2"))
    assert failed.temporary and failed.retry and MYAPP not in world.cluster.store
    retried = world.r.reconcile(KEY)
    assert retried.action == "created" and not retried.error
    assert world.cluster.store[MYAPP]["spec"]["image"] == "nginx:1.27"
    assert DEPLOYMENT in world.cluster.store
    synced = world.condition("Synced")
    assert synced["status"] == "True", synced
    assert world.status()["source"]["revision"] == "main@sha1:r2"
    # done: the next reconcile is a worker's again, and writes nothing
    record = world.r.ledger.get(KEY)
    assert record is not None and not record.retry
    writes = len(world.cluster.writes)
    assert world.r.reconcile(KEY).action == "unchanged"
    assert len(world.cluster.writes) == writes


def test_git_s_change_that_failed_for_now_is_applied_by_the_retry_under_report(
    world: World,
) -> None:
    """Under ``driftPolicy: report`` a worker only reports how the live MyApp differs
    from Git; the retry of a pass's failed change applies it, as the pass would have."""
    world.r.reconcile(KEY, declared(myapp(driftPolicy="report")))
    world.cluster.fail["apply"] = APITimeoutError("MyApp/shop/web", "timed out")
    failed = world.r.reconcile(KEY, declared(myapp(driftPolicy="report", image="nginx:1.28")))
    assert failed.temporary and world.condition("Synced")["status"] == "False"
    assert world.r.reconcile(KEY).action == "configured"
    assert world.cluster.store[MYAPP]["spec"]["image"] == "nginx:1.28"
    assert world.condition("Synced")["status"] == "True"


def test_a_pass_whose_failure_will_not_pass_is_not_retried_until_git_changes(
    world: World,
) -> None:
    world.cluster.fail["apply"] = APIInvalidError("MyApp/shop/web", "spec.image: Required", [])
    failed = world.r.reconcile(KEY, declared(myapp(image="")))
    assert failed.error and not failed.temporary
    assert world.r.reconcile(KEY) == Result()
    assert world.cluster.writes == []


def test_a_throttled_pass_is_tried_again_after_the_hint_and_one_that_left_git_is_not(
    world: World,
) -> None:
    world.cluster.fail["apply"] = APITooManyRequestsError("MyApp/shop/web", "slow", 2.0)
    failed = world.r.reconcile(KEY, declared(myapp()))
    assert failed.temporary and failed.requeue_after == 2.0 and not failed.retry
    world.r.ledger.release([KEY])  # it left Git before the retry came
    assert world.r.reconcile(KEY) == Result()
    assert world.cluster.writes == []


def test_a_deployment_that_failed_for_now_is_retried_with_git_s_revision(world: World) -> None:
    world.add(myapp())
    real = world.cluster.apply

    def timeout_once(obj: Obj, **kw: object) -> Obj:
        if obj["kind"] == "Deployment" and not refused:
            refused.append(obj)
            raise APITimeoutError("Deployment/shop/web", "timed out")
        return real(obj, **kw)

    refused: list[Obj] = []
    world.cluster.apply = timeout_once  # type: ignore[method-assign]
    failed = world.r.reconcile(KEY, declared(myapp(), revision="main@sha1:r3"))
    assert failed.temporary and not failed.permanent and refused
    assert world.condition("Synced")["status"] == "False"
    assert world.r.reconcile(KEY).outcome is not None
    assert DEPLOYMENT in world.cluster.store
    assert world.condition("Synced")["status"] == "True"
    assert world.status()["source"]["revision"] == "main@sha1:r3"


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def created_by_a_pass(world: World) -> Clock:
    """A sync pass, workers running, creates the MyApp and its Deployment."""
    clock = Clock()
    world.r.defer_status = True
    world.r.clock = clock
    first = world.r.reconcile(KEY, declared(myapp()))
    assert first.action == "created" and first.requeue_after == STATUS_WAIT
    assert not first.error and not first.throttled
    return clock


def status_writes(world: World) -> int:
    return [verb for verb, _ in world.cluster.writes].count("status")


def test_a_new_myapps_status_waits_for_its_deployments_first_status(
    world: World,
) -> None:
    clock = created_by_a_pass(world)
    assert status_writes(world) == 0 and world.r.ledger.awaiting_status()
    # the worker that takes it: the Deployment has no status yet, so nothing is written
    held = world.r.reconcile(KEY)
    assert held.requeue_after == STATUS_WAIT
    assert status_writes(world) == 0 and world.r.ledger.awaiting_status()
    clock.now += 0.5
    assert world.r.reconcile(KEY).requeue_after == STATUS_WAIT - 0.5
    # the deployment controller's first word on it: one write says it all
    dep = world.cluster.store[DEPLOYMENT]
    dep["status"] = {"observedGeneration": 1, "replicas": 2, "updatedReplicas": 2}
    world.deployments.observe(dep)
    done = world.r.reconcile(KEY)
    assert done.requeue_after is None and not done.error
    assert status_writes(world) == 1 and not world.r.ledger.awaiting_status()
    st = world.status()
    assert st["source"]["revision"] == "main@sha1:abc"
    assert (st["phase"], st["replicas"]) == ("Progressing", 2)


def test_a_new_myapps_status_waits_no_longer_than_the_bound(world: World) -> None:
    clock = created_by_a_pass(world)
    assert world.r.reconcile(KEY).requeue_after == STATUS_WAIT
    # the deployment controller is slow: at the bound, status says what is known
    clock.now += STATUS_WAIT
    done = world.r.reconcile(KEY)
    assert done.requeue_after is None and not done.error
    assert status_writes(world) == 1 and not world.r.ledger.awaiting_status()
    st = world.status()
    assert (st["source"]["revision"], st["phase"]) == ("main@sha1:abc", "Progressing")


def test_without_a_loop_the_first_status_is_written_at_once(world: World) -> None:
    """``gitsync sync`` alone: no worker would come back for a status held back."""
    result = world.r.reconcile(KEY, declared(myapp()))
    assert result.action == "created" and result.requeue_after is None
    assert status_writes(world) == 1 and not world.r.ledger.awaiting_status()


def observed(world: World, **status: object) -> None:
    """The deployment controller's word on the Deployment's current generation."""
    dep = world.cluster.store[DEPLOYMENT]
    dep["status"] = {"observedGeneration": dep["metadata"]["generation"], **status}
    world.deployments.observe(dep)


def test_a_changed_templates_status_waits_for_the_deployment_controllers_word_on_it(
    world: World,
) -> None:
    world.add(myapp())
    world.r.reconcile(KEY)  # the operator alone: Deployment and status at once
    observed(world, replicas=2, updatedReplicas=2, availableReplicas=2)
    world.r.reconcile(KEY)
    assert world.status()["phase"] == "Available"
    written, clock = status_writes(world), Clock()
    world.r.defer_status, world.r.clock = True, clock
    result = world.r.reconcile(KEY, declared(myapp(image="nginx:1.28"), "main@sha1:def"))
    assert result.action == "configured" and result.requeue_after == STATUS_WAIT
    dep = world.cluster.store[DEPLOYMENT]
    assert dep["metadata"]["generation"] == 2 and dep["status"]["observedGeneration"] == 1
    # the Deployment is written; its status would describe the old template
    assert status_writes(world) == written and world.r.ledger.awaiting_status()
    clock.now += 0.5
    assert world.r.reconcile(KEY).requeue_after == STATUS_WAIT - 0.5
    observed(world, replicas=3, updatedReplicas=1, availableReplicas=2)
    done = world.r.reconcile(KEY)
    assert done.requeue_after is None and not world.r.ledger.awaiting_status()
    assert status_writes(world) == written + 1  # one write says both
    st = world.status()
    assert st["source"]["revision"] == "main@sha1:def"
    assert (st["phase"], st["replicas"]) == ("Progressing", 3)


def test_a_re_created_deployments_status_waits_too_and_no_longer_than_the_bound(
    world: World,
) -> None:
    world.add(myapp())
    world.r.reconcile(KEY)
    assert status_writes(world) == 1
    world.cluster.store.pop(DEPLOYMENT)  # deleted by hand, re-created by the next pass
    world.deployments.objects.clear()
    world.myapps.observe(world.cluster.store[path_of("MyApp", "shop", "web")])
    clock = Clock()
    world.r.defer_status, world.r.clock = True, clock
    result = world.r.reconcile(KEY, declared(myapp(), "main@sha1:def"))
    assert result.outcome is not None and result.outcome.action == "created"
    assert result.requeue_after == STATUS_WAIT
    assert status_writes(world) == 1
    clock.now += 1.5
    assert world.r.reconcile(KEY).requeue_after == STATUS_WAIT - 1.5
    assert status_writes(world) == 1
    clock.now += 1.0  # the deployment controller is slow: status says what is known
    assert world.r.reconcile(KEY).requeue_after is None
    assert not world.r.ledger.awaiting_status()
    assert status_writes(world) == 2 and world.status()["source"]["revision"] == "main@sha1:def"


def test_a_write_that_leaves_the_generation_or_brings_rollout_news_is_not_held_back(
    world: World,
) -> None:
    from gitsync.model.rollout import Rollback, State
    from gitsync.reconcile.converge import Outcome
    from gitsync.reconcile.ledger import Record

    world.r.defer_status, world.r.clock = True, Clock()
    seen = {"metadata": {"generation": 3}, "status": {"observedGeneration": 3}}
    unseen = {"metadata": {"generation": 4}, "status": {"observedGeneration": 3}}
    rb = Rollback("main@sha1:bad", "main@sha1:good", "why", "t", "sha256:b")

    def wait(live: Obj | None, action: str = "configured", rollout: State | None = None) -> float:
        outcome = Outcome(action, live)  # type: ignore[arg-type]
        return world.r._status_wait(Record(), outcome, rollout)

    assert wait(unseen) == STATUS_WAIT and wait(unseen, "created") == STATUS_WAIT
    assert wait(unseen, rollout=State()) == STATUS_WAIT  # a judgement with no news
    assert wait(seen) == 0  # labels or annotations alone: no new generation
    assert wait(unseen, "unchanged") == 0  # nothing written
    assert wait({"metadata": {"generation": 1}}, "created") == STATUS_WAIT  # no status yet
    assert wait({"metadata": {}, "status": {"observedGeneration": 1}}) == 0
    assert wait(None, "created") == 0  # nothing to hear of
    for news in (State(rollback=rb), State(failed="it failed"), State(released="Git moved")):
        assert wait(unseen, rollout=news) == 0, news
    world.r.defer_status = False  # gitsync sync alone: no worker would come back for it
    assert wait(unseen) == 0


def test_a_deployment_is_remembered_by_the_cached_myapps_inputs_when_they_rendered_it(
    world: World,
) -> None:
    from gitsync.engine import planner
    from gitsync.model.api import APPLIED_ANNOTATION
    from gitsync.model.render import inputs, render

    world.add(myapp())
    world.r.reconcile(KEY)
    world.r.reconcile(KEY)
    began = world.myapps.objects[KEY]
    kept = planner._STAMPS["Deployment/shop/web"][0]
    assert kept == inputs(began) and kept[3] is began["spec"]
    # the cache moves on (a newer spec) while a reconcile renders the version it began
    # with: the memo must not take the newer inputs for what was rendered
    world.add(myapp(replicas=5))
    world.r._converge_deployment(KEY, began, False)
    assert planner._STAMPS["Deployment/shop/web"][0] != inputs(world.myapps.objects[KEY])
    world.r.reconcile(KEY)
    stamp = world.cluster.store[DEPLOYMENT]["metadata"]["annotations"][APPLIED_ANNOTATION]
    assert (
        stamp
        == planner.stamped(render(world.myapps.objects[KEY]))["metadata"]["annotations"][
            APPLIED_ANNOTATION
        ]
    )
    assert world.cluster.store[DEPLOYMENT]["spec"]["replicas"] == 5
