from __future__ import annotations

import pytest

from gitsync.prune import PrunePlan, plan_prune, source_label_value

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
        # two of four is exactly half: allowed
        ({"shop/a", "blog/d"}, TRACKED, {}, ("shop/b", "shop/c"), None),
        # new MyApps in Git do not count; only tracked ones are deleted
        ({"shop/a", "shop/b", "shop/c", "new/x"}, TRACKED, {}, ("blog/d",), None),
        # guards
        (TRACKED - {"shop/b"}, TRACKED, {"enabled": False}, (), "disabled"),
        (TRACKED - {"shop/b"}, TRACKED, {"source_ok": False}, (), "fetch failed"),
        (TRACKED - {"shop/b"}, TRACKED, {"manifests_ok": False}, (), "failed to load"),
        (set(), TRACKED, {}, (), "refusing to delete all 4"),
        ({"shop/a"}, TRACKED, {}, (), "3 of 4 tracked MyApps would be deleted"),
        ({"shop/a"}, TRACKED, {"max_fraction": 0.75}, ("blog/d", "shop/b", "shop/c"), None),
        # allow_empty lifts the empty guard, not the fraction guard
        (set(), TRACKED, {"allow_empty": True}, (), "4 of 4"),
        (set(), TRACKED, {"allow_empty": True, "max_fraction": 1.0}, tuple(sorted(TRACKED)), None),
        # one tracked MyApp removed: 1 of 1 is more than half
        ({"shop/new"}, {"shop/old"}, {}, (), "1 of 1"),
    ],
)
def test_plan_prune(
    desired: set[str],
    tracked: set[str],
    kw: dict[str, bool | float],
    delete: tuple[str, ...],
    reason: str | None,
) -> None:
    plan = plan_prune(desired, tracked, **kw)  # type: ignore[arg-type]
    assert plan.delete == delete
    if reason is None:
        assert plan.skipped is None
    else:
        assert plan.skipped is not None and reason in plan.skipped


def test_guard_order_names_the_first_cause() -> None:
    plan = plan_prune(set(), TRACKED, enabled=True, source_ok=False, manifests_ok=False)
    assert plan == PrunePlan(delete=(), skipped="the Git fetch failed")


def test_source_label_value() -> None:
    base = source_label_value("https://github.com/example/apps", "apps")
    assert len(base) == 16 and all(c in "0123456789abcdef" for c in base)
    same = [
        ("https://github.com/example/apps.git", "apps"),
        ("https://GitHub.com/example/apps/", "./apps/"),
        ("https://user:token@github.com/example/apps", "apps"),
        (" https://github.com/example/apps ", "/apps"),
    ]
    for url, path in same:
        assert source_label_value(url, path) == base, (url, path)
    different = [
        ("https://github.com/example/apps", "."),
        ("https://github.com/example/other", "apps"),
        ("https://github.com/Example/apps", "apps"),  # paths are case-sensitive on hosts
        ("ssh://git@github.com/example/apps", "apps"),
    ]
    for url, path in different:
        assert source_label_value(url, path) != base, (url, path)
    assert source_label_value("/srv/repo", "") == source_label_value("/srv/repo/", ".")
