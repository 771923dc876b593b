"""Members of an instance in Leases, and the buckets each serves, against a scripted
Lease API and one fake clock: every interleaving of steps, lapses, kills, partitions,
joins and departures leaves each bucket served by one member at most, and a quiet
membership ends with every bucket served by the member the assignment names.

The same protocol runs against the real API server in tests/integration/test_members.py.
"""

from __future__ import annotations

import copy
import datetime as dt
import random
from collections.abc import Callable
from typing import Any

import pytest

from gitsync.errors import APIClientError, APIConflictError, APINotFoundError, APIServerError
from gitsync.kube.members import (
    CLAIM_STEP,
    CLAIMED_ANNOTATION,
    COUNT_ANNOTATION,
    FORGET_AFTER,
    HELD_ANNOTATION,
    MEMBER_OF_LABEL,
    RESULT_ANNOTATION,
    Membership,
    member_lease_name,
    member_of,
    read_member,
    serving_now,
)
from gitsync.model.api import Obj
from gitsync.model.shards import Claims, assign, held_by

BUCKETS = 32


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class LeaseStore:
    """The Leases of one namespace, with resourceVersions and label selectors."""

    def __init__(self) -> None:
        self.leases: dict[str, Obj] = {}
        self.rv = 0
        self.requests: list[str] = []

    def handle(self, method: str, path: str, body: Obj | None, params: Any) -> Obj:
        self.requests.append(method)
        parts = path.rstrip("/").split("/")
        name = parts[-1] if parts[-2] == "leases" else None
        if method == "GET" and name is None:
            want = dict(kv.split("=") for kv in [params["labelSelector"]])
            items = [
                copy.deepcopy(lease)
                for lease in self.leases.values()
                if all(lease["metadata"].get("labels", {}).get(k) == v for k, v in want.items())
            ]
            return {"items": items}
        if method == "GET":
            if name not in self.leases:
                raise APINotFoundError("Lease", "not found")
            return copy.deepcopy(self.leases[name])
        if method == "DELETE":
            assert name is not None
            if name not in self.leases:
                raise APINotFoundError("Lease", "not found")
            want_rv = ((body or {}).get("preconditions") or {}).get("resourceVersion")
            if want_rv and want_rv != self.leases[name]["metadata"]["resourceVersion"]:
                raise APIConflictError("Lease", "precondition failed", [])
            del self.leases[name]
            return {}
        assert body is not None
        name = body["metadata"]["name"]
        if method == "POST" and name in self.leases:
            raise APIConflictError("Lease", "already exists", [])
        if method == "PUT":
            if name not in self.leases:
                raise APINotFoundError("Lease", "not found")
            want = body["metadata"].get("resourceVersion")
            if want is None:  # as the API server answers: a Lease has no unconditional update
                raise APIClientError("Lease", "metadata.resourceVersion: must be specified")
            if want != self.leases[name]["metadata"]["resourceVersion"]:
                raise APIConflictError("Lease", "the object has been modified", [])
        self.rv += 1
        stored = copy.deepcopy(body)
        stored["metadata"]["resourceVersion"] = str(self.rv)
        self.leases[name] = stored
        return copy.deepcopy(stored)


class Client:
    """One member's connection to the store; ``cut`` fails every request (a partition)."""

    def __init__(self, store: LeaseStore) -> None:
        self.store = store
        self.cut = False
        #: run before the next LIST is answered: another member's step between this
        #: member's renewal and its reading of the others
        self.interleave: Callable[[], None] | None = None

    def request(
        self,
        method: str,
        path: str,
        *,
        body: Obj | None = None,
        params: Any = None,
        subject: str = "",
        timeout: float | None = None,
    ) -> Obj:
        if self.cut:
            raise APIServerError(subject, "connection refused")
        if method == "GET" and params and self.interleave is not None:
            run, self.interleave = self.interleave, None
            run()
        return self.store.handle(method, path, body, params)


def member(store: LeaseStore, clock: Clock, identity: str, buckets: int = BUCKETS) -> Membership:
    return Membership(Client(store), "ns", "gitsync-leader", identity, buckets=buckets, clock=clock)


def settle(members: list[Membership], clock: Clock, rounds: int = 8) -> None:
    for _ in range(rounds):
        for m in members:
            m.step()
        clock.now += 2.0


def test_one_member_serves_every_bucket_after_two_steps() -> None:
    store, clock = LeaseStore(), Clock()
    m = member(store, clock, "a")
    seen: list[frozenset[int]] = []
    m.on_change = seen.append
    m.step()  # the Lease created; every bucket claimed, none served yet
    assert m.serving() == frozenset()
    lease = store.leases[member_lease_name("gitsync-leader", "a")]
    assert lease["metadata"]["labels"] == {MEMBER_OF_LABEL: "gitsync-leader"}
    assert lease["spec"]["holderIdentity"] == "a"
    assert lease["metadata"]["annotations"][HELD_ANNOTATION] == ""
    m.step()  # the claims were read back with no rival: held and served
    assert m.serving() == frozenset(range(BUCKETS))
    assert seen == [frozenset(range(BUCKETS))]
    # written out only at the next renewal: until then the claims keep the others off
    notes = store.leases[m.name]["metadata"]["annotations"]
    assert notes[CLAIMED_ANNOTATION] == f"0-{BUCKETS - 1}"
    m.step()
    notes = store.leases[m.name]["metadata"]["annotations"]
    assert (notes[HELD_ANNOTATION], notes[CLAIMED_ANNOTATION]) == (f"0-{BUCKETS - 1}", "")
    assert notes[COUNT_ANNOTATION] == str(BUCKETS)
    assert m.members == ("a",)


def test_steady_state_is_one_put_and_one_list_a_period() -> None:
    store, clock = LeaseStore(), Clock()
    m = member(store, clock, "a")
    settle([m], clock, 3)
    store.requests.clear()
    settle([m], clock, 5)
    assert store.requests == ["PUT", "GET"] * 5


def test_a_member_that_cannot_renew_stops_serving_before_its_lease_expires() -> None:
    store, clock = LeaseStore(), Clock()
    m = member(store, clock, "a")
    settle([m], clock, 2)
    assert len(m.serving()) == BUCKETS
    assert isinstance(m.kube, Client)
    m.kube.cut = True
    clock.now += 9.9 - 2.0  # renewed 9.9 s ago
    assert len(m.serving()) == BUCKETS
    clock.now += 0.1  # the renew deadline: it stops, with 5 s of the Lease left
    assert m.serving() == frozenset()
    with m.working("ns/app") as ok:
        assert not ok
    m.step()  # the renewal fails
    assert m.serving() == frozenset()
    m.kube.cut = False
    m.step()  # renewed after a lapse: it holds nothing and claims afresh
    assert m.serving() == frozenset()
    assert store.leases[m.name]["metadata"]["annotations"][HELD_ANNOTATION] == ""
    m.step()
    assert len(m.serving()) == BUCKETS


def test_a_joining_member_takes_its_share_only_after_the_holder_gives_it_up() -> None:
    store, clock = LeaseStore(), Clock()
    a, b = member(store, clock, "a"), member(store, clock, "b")
    settle([a], clock, 3)
    b.step()  # b's Lease appears; everything is a's
    assert b.serving() == frozenset()
    want = assign(["a", "b"], BUCKETS)
    a.step()  # a sees b: gives b's share up at once (nothing in flight)
    assert a.serving() == held_by(want, "a")
    b.step()  # a's Lease still lists them as held (a writes at its next step): b waits
    assert b.serving() == frozenset()
    a.step()  # written out
    b.step()  # claimed
    assert b.serving() == frozenset()
    b.step()  # uncontested: served
    assert b.serving() == held_by(want, "b")
    assert a.handovers == BUCKETS + len(held_by(want, "b"))


def test_a_bucket_given_up_stays_in_the_lease_while_its_work_is_in_flight() -> None:
    store, clock = LeaseStore(), Clock()
    a, b = member(store, clock, "a"), member(store, clock, "b")
    settle([a], clock, 3)
    b.step()
    theirs = held_by(assign(["a", "b"], BUCKETS), "b")
    key = next(f"ns/app-{i}" for i in range(1000) if a.bucket(f"ns/app-{i}") in theirs)
    with a.working(key) as ok:
        assert ok
        a.step()  # given up: no new work on it ...
        with a.working(key) as again:
            assert not again
        a.step()  # ... but still held in the Lease while the work runs
        held = store.leases[a.name]["metadata"]["annotations"][HELD_ANNOTATION]
        assert a.bucket(key) in read_member(store.leases[a.name], BUCKETS).claims.held  # type: ignore[union-attr]
        settle([b], clock, 3)
        assert a.bucket(key) not in b.serving()
    a.step()
    assert store.leases[a.name]["metadata"]["annotations"][HELD_ANNOTATION] != held
    settle([b], clock, 3)
    assert a.bucket(key) in b.serving()


def test_release_deletes_the_lease_and_the_others_take_over_at_their_next_steps() -> None:
    store, clock = LeaseStore(), Clock()
    a, b = member(store, clock, "a"), member(store, clock, "b")
    settle([a, b], clock)
    assert a.serving() and b.serving()
    a.release()
    assert a.serving() == frozenset() and a.name not in store.leases
    a.step()  # final: no step brings it back
    assert a.name not in store.leases
    b.step()
    b.step()
    assert b.serving() == frozenset(range(BUCKETS))


def test_a_dead_members_buckets_move_after_its_lease_duration_and_its_lease_is_deleted() -> None:
    store, clock = LeaseStore(), Clock()
    a, b = member(store, clock, "a"), member(store, clock, "b")
    settle([a, b], clock)
    mine = b.serving()
    for _ in range(7):  # a is gone (SIGKILL): 14 s, within its 15 s duration
        b.step()
        clock.now += 2.0
        assert b.serving() == mine
    settle([b], clock, 2)
    assert b.serving() == frozenset(range(BUCKETS))
    assert a.name in store.leases
    clock.now += 15.0 * FORGET_AFTER
    b.step()
    assert a.name not in store.leases


def test_a_lease_in_another_bucket_count_is_ignored_and_said() -> None:
    store, clock = LeaseStore(), Clock()
    a, b = member(store, clock, "a"), member(store, clock, "b", buckets=64)
    settle([a], clock, 3)
    settle([b], clock, 3)  # b holds all its 64 buckets: none it could be given here
    a.step()
    assert a.serving() == frozenset(range(BUCKETS)) and a.members == ("a",)
    assert a.ignored == {b.name: f"its bucket count is '64', not {BUCKETS}"}
    b.release()
    settle([a], clock, 2)
    assert a.serving() == frozenset(range(BUCKETS)) and not a.ignored


def forged(name: str, identity: str, duration: int = 15, notes: Obj | None = None) -> Obj:
    """A Lease written by hand under the member label of the group "gitsync-leader"."""
    return {
        "metadata": {
            "name": name,
            "labels": {MEMBER_OF_LABEL: "gitsync-leader"},
            "annotations": {COUNT_ANNOTATION: str(BUCKETS), **(notes or {})},
        },
        "spec": {"holderIdentity": identity, "leaseDurationSeconds": duration},
    }


@pytest.mark.parametrize(
    ("lease", "why"),
    [
        (
            forged("gitsync-leader-member-bogus", "intruder", notes={HELD_ANNOTATION: "0-31"}),
            "its name is not the one a member 'intruder' of 'gitsync-leader' writes",
        ),
        (
            forged(
                member_lease_name("gitsync-leader", "0"), "0", 61, notes={CLAIMED_ANNOTATION: "1"}
            ),
            "its leaseDurationSeconds 61 is not within 1-60",
        ),
        (
            forged(member_lease_name("gitsync-leader", "0"), "0", notes={HELD_ANNOTATION: "0-99"}),
            "its buckets cannot be read: '0-99' is not within the buckets 0-31",
        ),
    ],
)
def test_a_lease_no_member_could_have_written_is_ignored_and_logged_once(
    lease: Obj, why: str, caplog: pytest.LogCaptureFixture
) -> None:
    store, clock = LeaseStore(), Clock()
    a = member(store, clock, "a")
    store.rv += 1
    store.leases[lease["metadata"]["name"]] = {
        **lease,
        "metadata": {**lease["metadata"], "resourceVersion": str(store.rv)},
    }
    settle([a], clock, 4)
    assert a.serving() == frozenset(range(BUCKETS)) and a.members == ("a",)
    assert a.ignored == {lease["metadata"]["name"]: why}
    store.rv += 1  # renewed as it is: not said again
    store.leases[lease["metadata"]["name"]]["metadata"]["resourceVersion"] = str(store.rv)
    settle([a], clock, 2)
    said = [r.getMessage() for r in caplog.records if "ignored" in r.getMessage()]
    assert said == [f"member lease {lease['metadata']['name']} ignored: {why}"]


def test_buckets_a_live_member_leaves_unserved_are_said_after_a_handover_s_time() -> None:
    """A Lease well formed, named as a member's, that serves nothing (a member stuck, or
    a forgery no check can tell from one): its share goes unserved while it lives. The
    buckets are named, with when they were first seen unserved, once that lasts longer
    than a handover; and no longer once they are served."""
    store, clock = LeaseStore(), Clock()
    a = Membership(
        Client(store), "ns", "gitsync-leader", "a", buckets=BUCKETS, clock=clock,
        wall=lambda: clock.now + 1e9,
    )  # fmt: skip
    told: list[dict[int, float]] = []
    a.on_passes = lambda: told.append(a.unserved)
    settle([a], clock, 3)
    assert a.unserved == {} and told == []
    stuck = forged(member_lease_name("gitsync-leader", "0"), "0", 40)
    store.rv += 1
    store.leases[stuck["metadata"]["name"]] = {
        **stuck, "metadata": {**stuck["metadata"], "resourceVersion": str(store.rv)},
    }  # fmt: skip
    first = clock.now + 1e9
    a.step()  # gives its share up at once
    theirs = held_by(assign(["a", "0"], BUCKETS), "0")
    assert a.serving() == frozenset(range(BUCKETS)) - theirs
    told.clear()  # (the members changed)
    for _ in range(9):  # 18 s: within the Lease duration and two retry periods
        clock.now += 2.0
        a.step()
    assert a.unserved == {} and told == []
    clock.now += 2.0
    a.step()
    assert a.unserved == dict.fromkeys(theirs, first) and told == [a.unserved]
    for _ in range(5):  # said once, not at every step
        clock.now += 2.0
        a.step()
    assert len(told) == 1
    settle([a], clock, 8)  # its Lease lapsed (40 s unchanged): a serves everything again
    assert a.serving() == frozenset(range(BUCKETS))
    assert a.unserved == {} and told[-1] == {}


@pytest.mark.parametrize(
    ("notes", "spec"),
    [
        ({COUNT_ANNOTATION: str(BUCKETS), HELD_ANNOTATION: "0-3,x"}, {"holderIdentity": "a"}),
        ({COUNT_ANNOTATION: "64"}, {"holderIdentity": "a"}),
        ({}, {"holderIdentity": "a"}),
        ({COUNT_ANNOTATION: str(BUCKETS)}, {"holderIdentity": ""}),
    ],
)
def test_a_lease_not_readable_as_a_member_is_none(notes: Obj, spec: Obj) -> None:
    assert read_member({"metadata": {"annotations": notes}, "spec": spec}, BUCKETS) is None


def test_a_member_lease_is_read() -> None:
    lease = {
        "metadata": {
            "annotations": {
                COUNT_ANNOTATION: str(BUCKETS),
                HELD_ANNOTATION: "0-2",
                CLAIMED_ANNOTATION: "5",
            }
        },
        "spec": {"holderIdentity": "pod-a"},
    }
    found = read_member(lease, BUCKETS)
    assert found is not None and found.identity == "pod-a"
    assert found.claims == Claims(frozenset({0, 1, 2}), frozenset({5}))


def test_the_member_lease_name_is_a_valid_name_for_any_identity() -> None:
    name = member_lease_name("gitsync-leader", "Host_Name.with/odd chars_42")
    assert (
        name.startswith("gitsync-leader-member-")
        and len(name) == len("gitsync-leader-member-") + 12
    )
    assert name != member_lease_name("gitsync-leader", "Host_Name.with/odd chars_43")


def test_the_renew_deadline_must_be_shorter_than_the_duration() -> None:
    with pytest.raises(ValueError, match="renew deadline"):
        Membership(Client(LeaseStore()), "ns", "g", "a", lease_duration=10, renew_deadline=10)


def serving_twice(members: list[Membership]) -> set[int]:
    seen: set[int] = set()
    twice: set[int] = set()
    for m in members:
        for b in m.serving():
            (twice if b in seen else seen).add(b)
    return twice


@pytest.mark.parametrize("seed", range(40))
def test_no_bucket_is_ever_served_twice_and_a_quiet_membership_serves_each(seed: int) -> None:
    rng = random.Random(seed)  # noqa: S311 (a reproducible schedule, not a secret)
    store, clock = LeaseStore(), Clock()
    everyone: list[Membership] = []  # the dead and the cut-off included: they may still think
    alive: list[Membership] = []
    for i in range(rng.randint(1, 4)):
        m = member(store, clock, f"m{i}")
        everyone.append(m)
        alive.append(m)
    joined = len(everyone)
    for _ in range(400):
        roll = rng.random()
        if roll < 0.70 and alive:
            m = rng.choice(alive)
            if len(alive) > 1 and rng.random() < 0.4:
                assert isinstance(m.kube, Client)
                m.kube.interleave = rng.choice([o for o in alive if o is not m]).step
            m.step()
            assert isinstance(m.kube, Client)
            m.kube.interleave = None  # not used when the renewal failed
        elif roll < 0.85:
            clock.now += rng.uniform(0.0, 4.0)
        elif roll < 0.90 and alive:
            m = rng.choice(alive)
            assert isinstance(m.kube, Client)
            m.kube.cut = not m.kube.cut  # a partition, or its end
        elif roll < 0.94 and len(alive) > 1:
            alive.remove(m := rng.choice(alive))
            if rng.random() < 0.5:
                m.release()  # SIGTERM
            # else SIGKILL: it simply stops
        elif roll < 0.98 and len(alive) < 5:
            m = member(store, clock, f"m{joined}")
            joined += 1
            everyone.append(m)
            alive.append(m)
        assert serving_twice(everyone) == set()
    for m in alive:
        assert isinstance(m.kube, Client)
        m.kube.cut = False
    settle(alive, clock, 20)
    names = [m.identity for m in alive]
    want = assign(names, BUCKETS)
    for m in alive:
        assert m.serving() == held_by(want, m.identity), m.identity
    assert serving_twice(everyone) == set()


def test_the_member_of_label_is_the_group_or_fits_a_label_value() -> None:
    assert member_of("gitsync-leader-shop") == "gitsync-leader-shop"
    long = "gitsync-leader-" + "a" * 60
    short = member_of(long)
    assert len(short) == 63 and short.startswith("gitsync-leader-aaa") and short[-1].isalnum()
    assert member_of(long + "b") != short  # the hash tells long names apart
    assert member_of("x" * 63) == "x" * 63
    dotted = member_of("gitsync-leader-" + "a" * 31 + "." + "b" * 40)
    assert len(dotted) <= 63 and "..-" not in dotted and ".-" not in dotted


def test_the_next_step_comes_sooner_for_a_claim_or_an_expiring_lease() -> None:
    store, clock = LeaseStore(), Clock()
    a, b = member(store, clock, "a"), member(store, clock, "b")
    assert a.next_step() == 2.0  # nothing seen, nothing claimed
    a.step()  # claims everything
    assert a.next_step() == CLAIM_STEP  # read the claims back soon
    a.step()
    assert a.next_step() == 2.0
    b.step()
    a.step()  # sees b's Lease at 1000.0: it expires at 1015.0 unless renewed
    clock.now += 14.0
    assert a.next_step() == pytest.approx(1.0 + CLAIM_STEP / 5)
    clock.now += 1.0
    assert a.next_step() == CLAIM_STEP / 5  # never a busy loop


def test_who_serves_each_bucket_as_a_report_reads_the_leases() -> None:
    now = dt.datetime(2026, 12, 5, 12, 0, 0, tzinfo=dt.UTC)

    def lease(who: str, held: str, renewed_ago: float) -> Obj:
        at = (now - dt.timedelta(seconds=renewed_ago)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        return {
            "metadata": {"annotations": {COUNT_ANNOTATION: "8", HELD_ANNOTATION: held}},
            "spec": {"holderIdentity": who, "renewTime": at, "leaseDurationSeconds": 15},
        }

    leases = [lease("a", "0-3", 2), lease("b", "4-6", 14.9), lease("dead", "7", 15.1)]
    assert serving_now(leases, 8, now) == {0: "a", 1: "a", 2: "a", 3: "a", 4: "b", 5: "b", 6: "b"}
    assert serving_now([{"spec": {"renewTime": "not a time"}}], 8, now) == {}
    # named by the instance: a Lease not named after its holder is no member's
    named = lease("a", "0-3", 2)
    named["metadata"]["name"] = member_lease_name("gitsync-leader", "a")
    forgery = lease("b", "4-6", 2)
    forgery["metadata"]["name"] = "gitsync-leader-member-b"
    assert serving_now([named, forgery], 8, now, "gitsync-leader") == dict.fromkeys(range(4), "a")


def test_each_member_knows_who_holds_each_bucket() -> None:
    store, clock = LeaseStore(), Clock()
    a, b = member(store, clock, "a"), member(store, clock, "b")
    settle([a, b], clock)
    want = assign(["a", "b"], BUCKETS)
    assert a.holders == b.holders == want
    key = next(f"ns/app-{i}" for i in range(100) if want[a.bucket(f"ns/app-{i}")] == "b")
    assert a.replica_of(key) == "b" == b.replica_of(key)
    b.release()
    clock.now += 2.0
    a.step()  # b's buckets: nobody's until a has claimed and read them back
    assert a.replica_of(key) == ""
    a.step()
    assert a.replica_of(key) == "a"


def test_a_lease_changed_behind_the_members_back_is_written_over_from_the_list() -> None:
    store, clock = LeaseStore(), Clock()
    m = member(store, clock, "a")
    settle([m], clock, 2)
    # someone edits the member's Lease (kubectl annotate): the next PUT is stale
    lease = store.leases[m.name]
    store.rv += 1
    lease["metadata"]["resourceVersion"] = str(store.rv)
    store.requests.clear()
    m.step()  # refused (409); the LIST says which version stands
    assert store.requests == ["PUT", "GET"]
    m.step()  # written over that version
    assert store.requests == ["PUT", "GET", "PUT", "GET"]
    assert store.leases[m.name]["metadata"]["resourceVersion"] == str(store.rv)
    assert len(m.serving()) == BUCKETS
    # and a Lease deleted behind its back is created again
    del store.leases[m.name]
    m.step()
    m.step()
    assert m.name in store.leases and len(m.serving()) == BUCKETS


def test_a_member_is_settled_once_a_step_leaves_nothing_claimed() -> None:
    store, clock = LeaseStore(), Clock()
    m = member(store, clock, "a")
    seen: list[bool] = []
    m.on_change = lambda _: seen.append(m.settled.is_set())
    m.step()  # everything claimed, nothing served
    assert not m.settled.is_set()
    m.step()
    assert m.settled.is_set() and seen == [True]  # settled before its buckets are announced


@pytest.mark.parametrize(
    ("gap", "dated_back"),
    [
        (2.0, 2.0),  # read every retry period: the renewal happened after the last read
        (1.0, 1.0),
        (6.0, 2.5),  # a late read: never more than half the 5 s slack
    ],
)
def test_a_renewal_is_dated_back_to_the_last_read_of_the_old_version(
    gap: float, dated_back: float
) -> None:
    store, clock = LeaseStore(), Clock()
    a, b = member(store, clock, "a"), member(store, clock, "b")
    b.step()
    a.step()  # reads b's Lease (first sight: dated now)
    clock.now += 0.5
    b.step()  # b renews half a second after a's read
    clock.now += gap - 0.5
    a.step()  # a reads the new version, ``gap`` after its last read
    renewed_seen = clock.now
    expires = renewed_seen - dated_back + 15.0
    assert a.next_step() <= max(expires - clock.now + CLAIM_STEP / 5, CLAIM_STEP / 5)
    assert b.identity in a.members
    clock.now = expires - 0.01
    a.step()
    assert b.identity in a.members  # live until then ...
    clock.now = expires
    a.step()
    assert b.identity not in a.members  # ... and not a moment longer


def test_a_members_last_pass_reaches_the_others_with_its_renewals_alone() -> None:
    store, clock = LeaseStore(), Clock()
    a, b = member(store, clock, "a"), member(store, clock, "b")
    calls: list[dict[str, str]] = []
    a.on_passes = lambda: calls.append(dict(a.passes))
    settle([a, b], clock)
    assert a.passes == {"b": ""} and calls == [{"b": ""}]
    store.requests.clear()
    b.publish('{"revision":"r1"}')
    assert store.requests == []  # no request of its own: the next renewal carries it
    b.step()
    a.step()
    assert store.leases[b.name]["metadata"]["annotations"][RESULT_ANNOTATION] == (
        '{"revision":"r1"}'
    )
    assert a.passes == {"b": '{"revision":"r1"}'} and len(calls) == 2
    settle([a, b], clock, 3)
    assert len(calls) == 2  # unchanged: not called again
    assert store.requests == ["PUT", "GET"] * 8
    # a member gone is no longer summed
    b.release()
    a.step()
    assert a.passes == {} and len(calls) == 3


def test_the_member_lease_carries_the_members_annotations() -> None:
    store, clock = LeaseStore(), Clock()
    about = {"gitsync.apps.example.com/watch-namespace": "apps"}
    m = Membership(
        Client(store), "ns", "gitsync-leader", "a", buckets=BUCKETS, clock=clock, annotations=about
    )
    m.step()
    m.step()
    notes = store.leases[m.name]["metadata"]["annotations"]
    assert notes["gitsync.apps.example.com/watch-namespace"] == "apps"
    assert m.serving() == frozenset(range(BUCKETS))  # read as a member all the same
