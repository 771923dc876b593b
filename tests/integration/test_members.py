"""Members of an instance in real Leases: the buckets are served once each, as the
assignment says; a member joining or leaving moves only the buckets it should; a member
killed has its buckets taken over once its Lease expires, one released at once; and the
Leases the API server holds never list a bucket as held by two members at once."""

from __future__ import annotations

import datetime as dt
import threading
import time
from collections.abc import Iterable, Iterator

import pytest

from gitsync.kube.client import Kube, resource_path
from gitsync.kube.holders import WATCH_ANNOTATION
from gitsync.kube.members import MEMBER_OF_LABEL, Membership, live_members
from gitsync.model.shards import BUCKETS, assign, held_by, moved
from tests.support import wait_until

GROUP = "gitsync-leader"
DURATION, DEADLINE, PERIOD = 4.0, 3.0, 0.25


class Running:
    """A member stepping in a thread, as ``gitsync run`` does."""

    def __init__(self, kube: Kube, namespace: str, identity: str) -> None:
        self.member = Membership(
            kube,
            namespace,
            GROUP,
            identity,
            lease_duration=DURATION,
            renew_deadline=DEADLINE,
            retry_period=PERIOD,
            annotations={WATCH_ANNOTATION: namespace},  # as gitsync run's, watching it
        )
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self.member.run, args=(self._stop,), daemon=True)
        self._thread.start()

    def kill(self) -> None:
        """Stop stepping and release nothing: the process is gone (SIGKILL)."""
        self._stop.set()
        self._thread.join(DEADLINE + 5)

    def stop(self) -> None:
        """SIGTERM: stop stepping, then release."""
        self.kill()
        self.member.release()


@pytest.fixture
def running() -> Iterator[list[Running]]:
    members: list[Running] = []
    yield members
    for r in members:
        r.kill()


def stored_holdings(kube: Kube, namespace: str) -> dict[str, frozenset[int]]:
    """Each live member's held buckets, as the API server holds its Lease (one not
    renewed within its duration is a dead member's, and counts for nothing)."""
    listed = kube.list(
        resource_path("coordination.k8s.io/v1", "leases", namespace),
        params={"labelSelector": f"{MEMBER_OF_LABEL}={GROUP}"},
    )
    live = live_members(listed["items"], BUCKETS, dt.datetime.now(dt.UTC))
    return {m.identity: m.claims.held for m in live}


class Watch:
    """Polls the stored Leases and the members' own view in a thread; records any bucket
    listed as held by two Leases, or served by two members, at once."""

    def __init__(self, kube: Kube, namespace: str, members: list[Running]) -> None:
        self.kube, self.namespace, self.members = kube, namespace, members
        self.twice_stored: set[int] = set()
        self.twice_served: set[int] = set()
        self.polls = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.twice_stored |= _twice(stored_holdings(self.kube, self.namespace).values())
            self.twice_served |= _twice(r.member.serving() for r in list(self.members))
            self.polls += 1
            time.sleep(0.02)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)


def _twice(sets: Iterable[frozenset[int]]) -> set[int]:
    seen: set[int] = set()
    out: set[int] = set()
    for s in sets:
        for b in s:
            (out if b in seen else seen).add(b)
    return out


def settled(members: list[Running]) -> bool:
    names = [r.member.identity for r in members]
    want = assign(names, BUCKETS)
    return all(r.member.serving() == held_by(want, r.member.identity) for r in members)


def test_members_share_the_buckets_and_hand_them_over_without_overlap(
    kube: Kube, namespace: str, running: list[Running]
) -> None:
    running += [Running(kube, namespace, f"replica-{i}") for i in range(3)]
    # the killed and the released stay watched: a member that still thinks it serves is
    # what a double write would come from
    everyone = list(running)
    watch = Watch(kube, namespace, everyone)
    try:
        wait_until(lambda: settled(running), timeout=20, what="three members to settle")
        three = assign([r.member.identity for r in running], BUCKETS)
        wait_until(
            lambda: (
                stored_holdings(kube, namespace)
                == {n: held_by(three, n) for n in set(three.values())}
            ),
            timeout=10,
            what="the Leases to say so",
        )

        # 3 -> 4: only the buckets the assignment moves change hands
        before = {r.member.identity: r.member.handovers for r in running}
        running.append(Running(kube, namespace, "replica-3"))
        everyone.append(running[-1])
        wait_until(lambda: settled(running), timeout=20, what="four members to settle")
        four = assign([r.member.identity for r in running], BUCKETS)
        moves = moved(three, four)
        assert len(moves) <= BUCKETS / 4 + BUCKETS * 0.10, len(moves)
        given = sum(r.member.handovers - before.get(r.member.identity, 0) for r in running[:3])
        assert given == len(moves)  # the old members gave up exactly those, nothing more
        assert running[3].member.serving() == held_by(four, "replica-3")

        # 4 -> 3 by SIGKILL: the others wait out its Lease, then take its buckets
        victim = running.pop(1)
        orphans = victim.member.serving()
        victim.kill()
        killed = time.monotonic()
        wait_until(lambda: settled(running), timeout=20, what="three members after the kill")
        took = time.monotonic() - killed
        # not before the Lease expired: the victim renewed at most a period before the
        # kill, and a renewal is dated back at most half the slack (duration - deadline)
        slack = (DURATION - DEADLINE) / 2
        assert took + PERIOD + slack >= DURATION, f"taken over after {took:.2f}s, too early"
        assert took <= DURATION + 2.0, f"taken over after {took:.2f}s"
        after = assign([r.member.identity for r in running], BUCKETS)
        assert moved(four, after) >= orphans
        assert len(moved(four, after)) <= BUCKETS / 3 + BUCKETS * 0.10

        # SIGTERM: released, so taken over within a few retry periods, not a duration
        leaver = running.pop(0)
        leaver.stop()
        left = time.monotonic()
        wait_until(lambda: settled(running), timeout=20, what="two members after a release")
        assert time.monotonic() - left < DURATION
        assert leaver.member.name not in {
            lease["metadata"]["name"]
            for lease in kube.list(resource_path("coordination.k8s.io/v1", "leases", namespace))[
                "items"
            ]
        }
    finally:
        watch.stop()
    assert watch.polls > 50
    assert watch.twice_stored == set()
    assert watch.twice_served == set()
