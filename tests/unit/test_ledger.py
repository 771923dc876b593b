"""The one record per MyApp: what each way of letting go keeps and drops."""

from __future__ import annotations

from gitsync.model.api import SOURCE_LABEL
from gitsync.model.instance import resolve
from gitsync.model.myapp_status import SyncInfo
from gitsync.model.order import DEPENDENCY_NOT_READY, Wait
from gitsync.reconcile.ledger import Claim, Declared, Ledger

CLAIM = Claim(resolve("", "https://git.example.com/apps.git", "apps", "main"))
SYNC = SyncInfo("main@sha1:" + "a" * 40, "apps/web.yaml", "t")


def declared(name: str) -> Declared:
    return Declared({"metadata": {"namespace": "shop", "name": name}}, SYNC, CLAIM)


def remembered(ledger: Ledger, key: str) -> None:
    rec = ledger.record(key)
    rec.declared = declared(key.split("/")[1])
    rec.sync = SYNC
    rec.announced = frozenset({("Deployment/web", "spec.replicas")})
    rec.last_error = "refused"
    rec.awaiting_since = 1.0


def test_a_record_is_made_once_and_found_again() -> None:
    ledger = Ledger()
    assert ledger.get("shop/web") is None and ledger.git("shop/web") is None
    rec = ledger.record("shop/web")
    assert ledger.record("shop/web") is rec and ledger.get("shop/web") is rec
    assert ledger.git("shop/web") is None and ledger.declared_keys() == set()
    rec.declared = declared("web")
    assert ledger.git("shop/web") == {"metadata": {"namespace": "shop", "name": "web"}}
    assert ledger.declared_keys() == {"shop/web"}


def test_release_lets_go_of_git_and_keeps_the_source() -> None:
    ledger = Ledger()
    remembered(ledger, "shop/web")
    remembered(ledger, "shop/db")
    ledger.release(["shop/web", "shop/never-seen"])
    web = ledger.get("shop/web")
    assert web is not None and web.declared is None and web.sync == SYNC
    assert ledger.declared_keys() == {"shop/db"} and ledger.get("shop/never-seen") is None


def test_a_myapp_gone_from_the_cluster_keeps_what_git_declares_only() -> None:
    ledger = Ledger()
    remembered(ledger, "shop/web")
    assert ledger.awaiting_status()
    ledger.forget_reconcile("shop/web")
    rec = ledger.get("shop/web")
    assert rec is not None and rec.declared is not None and rec.sync == SYNC
    assert (rec.announced, rec.last_error, rec.awaiting_since) == (None, None, None)
    assert not ledger.awaiting_status()


def test_a_record_with_nothing_of_git_left_is_dropped_when_its_myapp_goes() -> None:
    ledger = Ledger()
    ledger.record("shop/web").last_error = "refused"
    ledger.forget_reconcile("shop/web")
    assert ledger.get("shop/web") is None
    ledger.forget_reconcile("shop/nothing")  # nothing to forget: no record made
    assert ledger.get("shop/nothing") is None
    # a source alone is not kept: a MyApp that left Git and was then deleted by hand
    # would otherwise stay remembered for the life of the process
    ledger.record("shop/db").sync = SYNC
    ledger.forget_reconcile("shop/db")
    assert ledger.get("shop/db") is None


def test_a_myapp_that_left_git_and_was_deleted_by_hand_leaves_nothing_behind() -> None:
    ledger = Ledger()
    for i in range(100):
        remembered(ledger, f"shop/app{i}")
    ledger.release([f"shop/app{i}" for i in range(100)])
    for i in range(100):
        ledger.forget_reconcile(f"shop/app{i}")
    assert all(ledger.get(f"shop/app{i}") is None for i in range(100))
    assert ledger.declared_keys() == set() and ledger.waits() == {}


def test_a_pruned_myapp_is_forgotten_whole() -> None:
    ledger = Ledger()
    remembered(ledger, "shop/web")
    ledger.forget("shop/web")
    ledger.forget("shop/web")  # twice is harmless
    assert ledger.get("shop/web") is None and not ledger.awaiting_status()


def test_a_claim_refuses_what_is_not_its_instances_to_hold() -> None:
    mine = {"metadata": {"labels": {SOURCE_LABEL: CLAIM.instance.label}}}
    theirs = {"metadata": {"labels": {SOURCE_LABEL: "other"}}}
    by_hand: dict[str, object] = {"metadata": {}}
    assert CLAIM.refusal(mine) is None and CLAIM.refusal(None) is None
    assert CLAIM.refusal(theirs) == "OwnedByAnotherInstance"
    assert CLAIM.refusal(by_hand) == "NotAdopted"
    assert Claim(CLAIM.instance, adopt=True).refusal(by_hand) is None


WAIT = Wait(DEPENDENCY_NOT_READY, "waiting for MyApp/shop/db (Progressing)", "shop/db")


def test_a_pass_declares_new_keys_too() -> None:
    ledger = Ledger()
    ledger.declare({"shop/new": declared("new")})
    assert ledger.git("shop/new") == {"metadata": {"namespace": "shop", "name": "new"}}


def test_the_wait_index_keeps_no_empty_entry_and_no_key_that_went() -> None:
    ledger = Ledger()
    ledger.record("shop/web")  # not declared: the operator serves it as it is
    ledger.set_wait("shop/web", WAIT, ("shop/db",))
    ledger.set_wait("shop/api", WAIT, ("shop/db",))
    assert ledger.waiters("shop/db") == ["shop/api", "shop/web"]
    ledger.forget_reconcile("shop/web")  # gone from the cluster: nothing of it stays
    assert ledger.waiters("shop/db") == ["shop/api"]
    ledger.set_wait("shop/api", None)
    assert ledger.waiters("shop/db") == [] and ledger._waiters == {}
    # no wait, nothing to index, whatever it names
    ledger.set_wait("shop/api", None, ("shop/db",))
    assert ledger._waiters == {} and ledger._waits_on == {}
