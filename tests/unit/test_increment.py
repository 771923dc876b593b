"""Which MyApps a pass applies (:mod:`gitsync.gitops.increment`), and the sync pass that
applies only what a commit changed, against fake caches: the same actions and the same
objects as a full pass, for fewer reconciles."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest

from gitsync.gitops import increment
from gitsync.gitops import sync as syncmod
from gitsync.kube.client import path_of
from gitsync.model.api import ADOPT_ANNOTATION, KIND
from gitsync.reconcile.ledger import Declared
from gitsync.reconcile.result import Result
from gitsync.source.manifests import DesiredApp
from tests.support import app_yaml
from tests.unit.test_sync_fakes import World, hand_made, myapp_actions


def app(name: str) -> DesiredApp:
    obj = {"metadata": {"namespace": "shop", "name": name}, "spec": {"image": "x"}}
    return DesiredApp(obj, f"apps/{name}.yaml", 0, 1)


A, B, C = app("a"), app("b"), app("c")
BASE = increment.Base(
    "1" * 40, {"shop/a": A, "shop/b": B}, frozenset({"shop/a", "shop/b"}), 2, 100.0
)
NOW = dict(sha="2" * 40, pinned=False, relists=2, now=150.0, full_every=60.0)


def scope(base: increment.Base | None = BASE, **kw: object) -> frozenset[str] | None:
    facts: dict[str, object] = {**NOW, "apps": {"shop/a": A, "shop/b": B}, **kw}
    return increment.scope(base, **facts)  # type: ignore[arg-type]


def test_a_new_commit_that_changed_nothing_applies_nothing() -> None:
    assert scope() == frozenset()


def test_a_myapp_is_changed_when_the_load_handed_out_another_object() -> None:
    # equal but not the same: its file was parsed again, so it is applied
    again = DesiredApp(dict(B.obj), B.file, 0, 1)
    assert again == B
    assert scope(apps={"shop/a": A, "shop/b": again, "shop/c": C}) == frozenset(
        {"shop/b", "shop/c"}
    )


def test_a_myapp_not_left_in_gits_state_is_applied_again() -> None:
    base = replace(BASE, clean=frozenset({"shop/a"}))
    assert scope(base) == frozenset({"shop/b"})


@pytest.mark.parametrize(
    ("why", "base", "facts"),
    [
        ("no clean pass before", None, {}),
        ("incremental passes are off", BASE, {"full_every": 0.0}),
        ("a directory has no commit", BASE, {"sha": ""}),
        ("the commit did not move: the interval's level pass", BASE, {"sha": "1" * 40}),
        ("a pin is set", BASE, {"pinned": True}),
        ("an informer relisted", BASE, {"relists": 3}),
        ("the last full pass is an interval old", BASE, {"now": 160.0}),
    ],
)
def test_a_pass_is_full(why: str, base: increment.Base | None, facts: dict[str, object]) -> None:
    assert scope(base, **facts) is None, why


def test_a_full_pass_starts_the_interval_and_an_incremental_one_keeps_it() -> None:
    full = increment.after(
        BASE, sha="3" * 40, apps={}, clean=["shop/a"], relists=4, started=170.0, full=True
    )
    assert full == increment.Base("3" * 40, {}, frozenset({"shop/a"}), 4, 170.0)
    part = increment.after(
        full, sha="4" * 40, apps={}, clean=[], relists=4, started=180, full=False
    )
    assert part.full_at == 170.0 and part.sha == "4" * 40
    first = increment.after(None, sha="5" * 40, apps={}, clean=[], relists=0, started=7, full=False)
    assert first.full_at == 7


# --- the pass ----------------------------------------------------------------------------


def test_a_pass_writes_the_held_statuses_of_changed_templates_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A MyApp that has a status is held back as well when its template changes (the
    deployment controller has not seen the new generation): the pass writes those that
    came due, though each already has a status."""
    world = Counted(tmp_path, 0.0)
    world.write("a", "b")
    world.commit()
    world.sync()

    def revisions() -> list[str]:
        return [
            world.cluster.store[path_of(KIND, "shop", n)]["status"]["source"]["revision"]
            for n in ("a", "b")
        ]

    first = revisions()
    clock = [100.0]
    monkeypatch.setattr(syncmod, "time", SimpleNamespace(monotonic=lambda: clock[0]))
    reconciler = world.operator.reconciler
    reconciler.defer_status, reconciler.clock = True, lambda: clock[0]

    def requeue(key: str, after: float) -> None:
        world.operator.requeued.append(key)
        clock[0] += 5.0  # the pass goes on while the wait runs

    world.operator.requeue = requeue  # type: ignore[method-assign]
    world.write("a", "b", image="nginx:1.28")
    world.commit()
    assert world.sync()[1] == dict.fromkeys("ab", "configured")
    assert sorted(world.operator.requeued) == ["shop/a", "shop/b"]
    now = revisions()
    assert now[0] == now[1] != first[0] and not reconciler.ledger.awaiting_status()


class Counted(World):
    """A world whose operator counts the MyApps it is asked to reconcile."""

    def __init__(self, tmp_path: Path, full_every: float) -> None:
        super().__init__(tmp_path)
        self.options = replace(self.options, full_every=full_every)
        self.syncer.options = self.options
        self.reconciled: list[str] = []
        inner = self.operator.reconcile

        def counting(
            key: str, declared: Declared | None = None, *, deployment_absent: bool = False
        ) -> Result:
            self.reconciled.append(key)
            return inner(key, declared, deployment_absent=deployment_absent)

        self.operator.reconcile = counting  # type: ignore[method-assign]

    def write(self, *names: str, image: str = "nginx:1.27") -> None:
        for name in names:
            (self.repo / "apps" / f"{name}.yaml").write_text(app_yaml("shop", name, image))

    def commit(self) -> None:
        self.source.commits += 1

    def sync(self, ok: bool = True) -> tuple[list[str], dict[str, str]]:
        """The MyApps the pass reconciled, and every MyApp's action."""
        self.reconciled.clear()
        result = self.syncer.run()
        assert result.ok == ok and not result.errors, result.errors
        return sorted(k.split("/")[1] for k in self.reconciled), myapp_actions(result)

    def objects(self) -> dict[str, object]:
        """What the cluster holds, but for the times a pass stamps."""
        out: dict[str, object] = {}
        for path, obj in self.cluster.store.items():
            status = {k: v for k, v in (obj.get("status") or {}).items() if k != "source"}
            if "conditions" in status:
                status["conditions"] = [
                    {k: v for k, v in c.items() if k != "lastTransitionTime"}
                    for c in status["conditions"]
                ]
            out[path] = (obj.get("spec"), obj["metadata"].get("labels"), status)
        return out


@pytest.fixture
def twins(tmp_path: Path) -> tuple[Counted, Counted]:
    """One world whose passes may be incremental, one whose passes are all full."""
    return Counted(tmp_path / "incremental", 3600.0), Counted(tmp_path / "full", 0.0)


def test_a_commit_applies_what_it_changed_and_ends_where_a_full_pass_does(
    twins: tuple[Counted, Counted],
) -> None:
    part, full = twins
    steps: list[Callable[[Counted], None]] = [
        lambda w: w.write("a", "b", "c", "d"),
        lambda w: w.write("b", image="nginx:1.28"),
        lambda w: (w.repo / "apps" / "c.yaml").unlink(),
        lambda w: w.write("e", "a", image="nginx:1.29"),
        lambda w: None,  # a commit that changes no MyApp
    ]
    applied: list[tuple[list[str], list[str]]] = []
    for step in steps:
        for world in twins:
            step(world)
            world.commit()
        (mine, actions), (theirs, expected) = part.sync(), full.sync()
        assert actions == expected  # the same actions, every MyApp listed
        assert part.objects() == full.objects()
        assert part.syncer.incremental == (len(applied) > 0)
        applied.append((mine, theirs))
    assert [mine for mine, _ in applied] == [["a", "b", "c", "d"], ["b"], [], ["a", "e"], []]
    assert applied[-1][1] == ["a", "b", "d", "e"]


@pytest.fixture
def world(tmp_path: Path) -> Counted:
    w = Counted(tmp_path, 3600.0)
    w.write("a", "b", "c")
    w.commit()
    assert w.sync()[0] == ["a", "b", "c"]
    return w


def test_the_same_commit_again_is_a_full_pass(world: Counted) -> None:
    assert world.sync()[0] == ["a", "b", "c"] and not world.syncer.incremental


def test_a_relist_makes_the_next_pass_full(world: Counted) -> None:
    world.commit()
    world.myapps.relists += 1
    assert world.sync()[0] == ["a", "b", "c"]
    world.commit()
    assert world.sync()[0] == []  # and the one after it starts from that one


def test_an_interval_after_the_last_full_pass_a_pass_is_full(world: Counted) -> None:
    world.syncer.options = replace(world.options, full_every=1e-9)
    world.commit()
    assert world.sync()[0] == ["a", "b", "c"]


def test_after_a_failed_pass_the_next_is_full(world: Counted) -> None:
    (world.repo / "apps" / "b.yaml").write_text("kind: [")
    world.commit()
    result = world.syncer.run()
    assert not result.ok
    world.write("b")
    world.commit()
    assert world.sync()[0] == ["a", "b", "c"] and not world.syncer.incremental


def test_a_myapp_refused_last_time_is_tried_again_by_an_incremental_pass(world: Counted) -> None:
    hand_made(world, "d")
    world.write("d")
    world.commit()
    # refused before it is reconciled
    expected = {"a": "unchanged", "b": "unchanged", "c": "unchanged", "d": "failed"}
    assert world.sync(ok=False) == ([], expected) and world.syncer.incremental
    # handed over since: the next commit changes another MyApp, and takes this one too
    hand_made(world, "d", **{ADOPT_ANNOTATION: "true"})
    world.write("a", image="nginx:1.28")
    world.commit()
    reconciled, actions = world.sync()
    assert world.syncer.incremental and reconciled == ["a", "d"]
    assert actions == {"a": "configured", "b": "unchanged", "c": "unchanged", "d": "configured"}
    assert world.cluster.store[path_of(KIND, "shop", "d")]["spec"]["image"] == "nginx:1.27"


# --- statuses held back --------------------------------------------------------------------


@pytest.mark.parametrize("elapsed", [0.0, 5.0])
def test_a_pass_writes_the_held_statuses_that_came_due_while_it_ran(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, elapsed: float
) -> None:
    """Created MyApps' statuses are held back for the deployment controller's word
    and queued for the workers; those due before the pass ends are written by the pass
    (no worker runs here), the others stay queued."""
    world = Counted(tmp_path, 0.0)
    clock = [100.0]
    monkeypatch.setattr(syncmod, "time", SimpleNamespace(monotonic=lambda: clock[0]))
    reconciler = world.operator.reconciler
    reconciler.defer_status = True
    reconciler.clock = lambda: clock[0]

    def requeue(key: str, after: float) -> None:
        world.operator.requeued.append(key)
        clock[0] += elapsed  # the pass goes on while the wait runs

    world.operator.requeue = requeue  # type: ignore[method-assign]
    world.write("a", "b", "c")
    world.commit()
    assert world.sync()[1] == dict.fromkeys("abc", "created")
    assert sorted(world.operator.requeued) == ["shop/a", "shop/b", "shop/c"]
    statuses = [
        world.cluster.store[path_of(KIND, "shop", n)].get("status") for n in ("a", "b", "c")
    ]
    if elapsed:
        paths = [(s or {}).get("source", {}).get("path") for s in statuses]
        assert paths == ["apps/a.yaml", "apps/b.yaml", "apps/c.yaml"]
    else:
        assert statuses == [None, None, None]
