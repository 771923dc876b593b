"""Which gitsync daemons are alive, as their Leases show over time (for uninstall)."""

from __future__ import annotations

import datetime as dt

import pytest

from gitsync.kube.holders import WATCH_ANNOTATION, Holder, Watch, holder_of, is_gitsync_lease
from gitsync.kube.members import MEMBER_OF_LABEL
from gitsync.model.api import Obj

WALL = dt.datetime(2026, 3, 1, 12, 0, 0, tzinfo=dt.UTC)


def lease(
    name: str = "gitsync-leader-apps",
    holder: str = "host_42",
    renewed: dt.datetime = WALL,
    namespace: str = "ops",
    labels: dict[str, str] | None = None,
    watching: str | None = None,
    duration: int = 15,
) -> Obj:
    annotations = {} if watching is None else {WATCH_ANNOTATION: watching}
    return {
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": labels or {},
            "annotations": annotations,
        },
        "spec": {
            "holderIdentity": holder,
            "leaseDurationSeconds": duration,
            "renewTime": renewed.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        },
    }


@pytest.mark.parametrize(
    ("name", "labels", "ours"),
    [
        ("gitsync-leader-apps-main-3f9a0c12be", None, True),
        ("gitsync-leader-operator", None, True),
        ("gitsync-leader", None, True),
        ("anything", {MEMBER_OF_LABEL: "gitsync-leader-apps"}, True),
        ("kube-controller-manager", None, False),
        ("gitsync-leaderboard", None, False),
    ],
)
def test_gitsync_leases_are_the_leader_leases_and_the_member_leases(
    name: str, labels: dict[str, str] | None, ours: bool
) -> None:
    assert is_gitsync_lease(lease(name, labels=labels)) is ours


def test_a_lease_given_up_or_not_gitsyncs_has_no_holder() -> None:
    assert holder_of(lease(holder="")) is None
    assert holder_of(lease("kube-scheduler")) is None
    assert holder_of(lease(watching="apps")) == Holder(
        "Lease/ops/gitsync-leader-apps", "host_42", "apps"
    )


@pytest.mark.parametrize(
    ("watching", "scope", "watches"),
    [
        (None, "apps", True),  # said nothing: it may watch any namespace
        ("", "apps", True),  # watches all
        ("apps", "apps", True),
        ("other", "apps", False),
        ("other", None, True),  # uninstall releases every namespace
    ],
)
def test_a_daemon_counts_when_it_may_write_in_the_scope(
    watching: str | None, scope: str | None, watches: bool
) -> None:
    assert Holder("Lease/ops/x", "h_1", watching).watches(scope) is watches


def test_a_holder_is_said_with_its_lease_and_where_its_process_is() -> None:
    said = str(Holder("Lease/ops/x", "gitsync-7d9f-abcde_1", None))
    assert said == "Lease/ops/x by 'gitsync-7d9f-abcde_1' (process 1 on host 'gitsync-7d9f-abcde')"
    assert str(Holder("Lease/ops/x", "odd", None)) == "Lease/ops/x by 'odd'"


def test_a_lease_renewed_while_watched_is_a_live_daemon() -> None:
    watch = Watch(None)
    watch.observe([lease()], 0.0, WALL)
    assert watch.alive() == [] and set(watch.pending) == {"Lease/ops/gitsync-leader-apps"}
    later = WALL + dt.timedelta(seconds=2)
    watch.observe([lease(renewed=later)], 2.0, later)
    assert watch.alive() == [Holder("Lease/ops/gitsync-leader-apps", "host_42", None)]
    # the daemon stays counted alive: its renewal was seen, whatever comes after
    watch.observe([lease(holder="")], 3.0, later)
    assert [h.identity for h in watch.alive()] == ["host_42"]


def test_a_lease_given_up_while_watched_is_no_daemon() -> None:
    watch = Watch(None)
    watch.observe([lease()], 0.0, WALL)
    watch.observe([lease(holder="", renewed=WALL + dt.timedelta(seconds=1))], 1.0, WALL)
    assert watch.alive() == [] and watch.pending == {}
    watch.observe([], 2.0, WALL)  # a member Lease deleted
    assert watch.alive() == [] and watch.pending == {}


def test_a_standby_taking_a_released_lease_is_seen_at_its_first_renewal() -> None:
    watch = Watch(None)
    watch.observe([lease(holder="")], 0.0, WALL)
    watch.observe([lease(holder="standby_7")], 1.0, WALL)
    assert watch.alive() == []  # a holder seen once: not yet known to renew
    watch.observe([lease(holder="standby_7", renewed=WALL + dt.timedelta(seconds=2))], 3.0, WALL)
    assert [h.identity for h in watch.alive()] == ["standby_7"]


def test_an_unrenewed_lease_is_waited_out_by_our_clock_whatever_its_renew_time() -> None:
    # this host's clock a minute ahead of the daemon's: by renewTime the Lease looks
    # expired, but only standing unchanged for its duration says its daemon is gone
    ahead = WALL + dt.timedelta(minutes=1)
    watch = Watch(None)
    watch.observe([lease()], 100.0, ahead)
    assert watch.pending == {"Lease/ops/gitsync-leader-apps": 115.0}
    watch.observe([lease()], 114.9, ahead)
    assert set(watch.pending) == {"Lease/ops/gitsync-leader-apps"}
    watch.observe([lease()], 115.0, ahead)
    assert watch.pending == {} and watch.alive() == []


def test_a_lease_dead_for_longer_than_any_clock_skew_is_not_waited_for() -> None:
    watch = Watch(None)
    watch.observe([lease()], 0.0, WALL + dt.timedelta(minutes=10))
    assert watch.pending == {} and watch.alive() == []


def test_a_daemon_watching_another_namespace_is_left_out_of_a_scoped_uninstall() -> None:
    watch = Watch("apps")
    other = lease("gitsync-leader-b", watching="other")
    mine = lease("gitsync-leader-a", watching="apps")
    watch.observe([other, mine], 0.0, WALL)
    later = WALL + dt.timedelta(seconds=2)
    renewed = [lease("gitsync-leader-b", watching="other", renewed=later)]
    renewed.append(lease("gitsync-leader-a", watching="apps", renewed=later))
    watch.observe(renewed, 2.0, later)
    assert [h.lease for h in watch.alive()] == ["Lease/ops/gitsync-leader-a"]
