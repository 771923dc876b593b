from __future__ import annotations

import pytest

from gitsync.engine.prune import PrunePlan, guarded_plan, too_many

TRACKED = {"shop/a", "shop/b", "shop/c", "blog/d"}


@pytest.mark.parametrize(
    ("desired", "tracked", "kw", "delete", "reason"),
    [
        # nothing gone
        (TRACKED, TRACKED, {}, (), None),
        (set(), set(), {}, (), None),
        ({"shop/a"}, set(), {}, (), None),
        # one of four gone: deleted
        (TRACKED - {"shop/b"}, TRACKED, {}, ("shop/b",), None),
        # two of four is exactly half: refused ("half or more", the documented default)
        ({"shop/a", "blog/d"}, TRACKED, {}, (), "2 of 4 tracked MyApps would be deleted, 50%"),
        # new MyApps in Git do not count; only tracked ones are deleted
        ({"shop/a", "shop/b", "shop/c", "new/x"}, TRACKED, {}, ("blog/d",), None),
        # guards
        (TRACKED - {"shop/b"}, TRACKED, {"enabled": False}, (), "disabled"),
        (TRACKED - {"shop/b"}, TRACKED, {"source_ok": False}, (), "fetch failed"),
        (TRACKED - {"shop/b"}, TRACKED, {"manifests_ok": False}, (), "failed to load"),
        (set(), TRACKED, {}, (), "refusing to delete all 4"),
        ({"shop/a"}, TRACKED, {}, (), "3 of 4 tracked MyApps would be deleted"),
        ({"shop/a"}, TRACKED, {"max_fraction": 0.75}, (), "3 of 4"),
        ({"shop/a"}, TRACKED, {"max_fraction": 0.8}, ("blog/d", "shop/b", "shop/c"), None),
        # allow_empty lifts the empty guard, not the fraction guard
        (set(), TRACKED, {"allow_empty": True}, (), "4 of 4"),
        (set(), TRACKED, {"allow_empty": True, "max_fraction": 1.0}, tuple(sorted(TRACKED)), None),
        # one tracked MyApp removed: 1 of 1 is more than half
        ({"shop/new"}, {"shop/old"}, {}, (), "1 of 1"),
        # a second instance on the same repository sees the first one's MyApps as its
        # own, exactly as many as its own: that half must not go
        ({"stg/a", "stg/b"}, {"stg/a", "stg/b", "prod/a", "prod/b"}, {}, (), "2 of 4"),
        # what the pass applies is counted with what it tracked: one added and one
        # removed of two is 1 of 3, as the next pass counts it
        (
            {"shop/b", "shop/c"},
            {"shop/a", "shop/b"},
            {"applied": {"shop/b", "shop/c"}},
            ("shop/a",),
            None,
        ),
        # a rename of them all stays refused: 2 of 4 is half
        (
            {"shop/c", "shop/d"},
            {"shop/a", "shop/b"},
            {"applied": {"shop/c", "shop/d"}},
            (),
            "2 of 4",
        ),
        # 1 turns the fraction guard off
        ({"shop/a"}, TRACKED, {"max_fraction": 1.0}, ("blog/d", "shop/b", "shop/c"), None),
    ],
)
def test_guarded_plan(
    desired: set[str],
    tracked: set[str],
    kw: dict[str, bool | float],
    delete: tuple[str, ...],
    reason: str | None,
) -> None:
    plan = guarded_plan(desired, tracked, **kw)  # type: ignore[arg-type]
    assert plan.delete == delete
    if reason is None:
        assert plan.skipped is None
    else:
        assert plan.skipped is not None and reason in plan.skipped


def test_guard_order_names_the_first_cause() -> None:
    plan = guarded_plan(set(), TRACKED, enabled=True, source_ok=False, manifests_ok=False)
    assert plan == PrunePlan(delete=(), skipped="the Git fetch failed")


@pytest.mark.parametrize(
    ("gone", "tracked", "fraction", "refused"),
    [
        # the 50 % boundary of the default, and just below and above it
        (50, 100, 0.5, True),
        (49, 100, 0.5, False),
        (51, 100, 0.5, True),
        (1, 2, 0.5, True),
        (1, 3, 0.5, False),
        (2, 3, 0.5, True),
        # exact where floats are not: 0.57 * 100 == 56.99999999999999
        (57, 100, 0.57, True),
        (56, 100, 0.57, False),
        (3, 10, 0.3, True),
        (2, 10, 0.3, False),
        # 0 refuses every deletion; 1 none
        (1, 1000, 0.0, True),
        (1000, 1000, 1.0, False),
    ],
)
def test_fraction_boundary(gone: int, tracked: int, fraction: float, refused: bool) -> None:
    assert too_many(gone, tracked, fraction) is refused
    names = {f"ns/app{i}" for i in range(tracked)}
    desired = set(sorted(names)[gone:]) | {"ns/new"}
    plan = guarded_plan(desired, names, max_fraction=fraction)
    assert (plan.skipped is not None) is refused
    assert len(plan.delete) == (0 if refused else gone)


@pytest.mark.parametrize("max_fraction", [0.51, 0.75, 0.99])
def test_the_one_tracked_myapp_is_all_of_them(max_fraction: float) -> None:
    # 1 of 1 is 100 %: over any fraction below 1, however few MyApps there are
    assert too_many(1, 1, max_fraction)
    plan = guarded_plan([], ["ns/web"], allow_empty=True, max_fraction=max_fraction)
    assert plan.delete == ()
    assert plan.skipped == (
        f"1 of 1 tracked MyApps would be deleted, {max_fraction:.0%} or more (--prune-max-fraction)"
    )
    # with a MyApp applied in its place, half are deleted: under these fractions
    assert guarded_plan(
        ["ns/api"], ["ns/web"], applied=["ns/api"], max_fraction=max_fraction
    ) == PrunePlan(delete=("ns/web",))
