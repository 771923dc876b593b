"""``changes`` and ``unified`` at their edges: a value removed from a plain list, plain
lists (matched by index), and the colours of a unified diff."""

from __future__ import annotations

from typing import Any

from gitsync.engine.differences import Change, changes, unified

_RESET = "\x1b[0m"


def _myapp(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "apps.example.com/v1",
        "kind": "MyApp",
        "metadata": {"name": "web"},
        "spec": {"image": "nginx", **spec},
    }


def test_an_item_git_no_longer_has_in_a_plain_list_is_a_removal() -> None:
    live = _myapp(command=["serve", "--port", "80"])
    assert changes(live, _myapp(command=["serve", "--port"])) == [
        Change("spec.command[2]", "80", None)
    ]


def test_a_plain_list_is_compared_item_by_index() -> None:
    live = _myapp(command=["serve", "--fast", "--port"])
    assert changes(live, _myapp(command=["serve", "--slow", "--port"])) == [
        Change("spec.command[1]", "--fast", "--slow")
    ]


def test_a_coloured_diff_paints_headers_hunks_and_changes_and_leaves_context() -> None:
    text = unified("MyApp/web", {"a": 1, "b": 2, "c": 3}, {"a": 1, "b": 3, "c": 3}, True)
    assert text.splitlines() == [
        f"\x1b[1m--- live/MyApp/web{_RESET}",
        f"\x1b[1m+++ git/MyApp/web{_RESET}",
        f"\x1b[36m@@ -1,3 +1,3 @@{_RESET}",
        " a: 1",
        f"\x1b[31m-b: 2{_RESET}",
        f"\x1b[32m+b: 3{_RESET}",
        " c: 3",
    ]


def test_a_long_value_stays_on_one_line_of_the_diff() -> None:
    value = "word " * 2000
    text = unified("MyApp/web", {"v": "short"}, {"v": value.strip()}, False)
    assert f"+v: {value.strip()}" in text.splitlines()
