"""The last error of a failed pass: counts first, a few messages, the rest counted,
bounded whatever the messages hold."""

from __future__ import annotations

from gitsync.gitops.failures import LIMIT, summary


def test_no_failure_no_summary() -> None:
    assert summary([], [], 6) == ""


def test_counts_come_first_then_the_first_messages_and_how_many_more() -> None:
    failed = [f'MyApp/shop/app{i}: namespace "shop" does not exist' for i in range(6)]
    text = summary([], failed, 6)
    assert text.startswith("6 of 6 objects failed: MyApp/shop/app0: namespace")
    assert "MyApp/shop/app2" in text and "MyApp/shop/app3" not in text
    assert text.endswith("; … and 3 more")


def test_pass_errors_are_counted_and_shown_before_object_errors() -> None:
    text = summary(["apps/x.yaml:3:1: bad"], ["MyApp/a/b: boom"], 4)
    assert text == "1 of 4 objects failed, 1 error: apps/x.yaml:3:1: bad; MyApp/a/b: boom"
    assert summary(["e1", "e2"], [], 0).startswith("2 errors: e1; e2")


def test_long_messages_are_cut_but_the_counts_and_the_tail_survive() -> None:
    failed = ["MyApp/ns/a: " + "x" * 5000] * 10
    text = summary(["fetch failed: " + "y" * 5000], failed, 10)
    assert len(text) <= LIMIT
    assert text.startswith("10 of 10 objects failed, 1 error: fetch failed: yyy")
    assert text.endswith("; … and 8 more")
    assert text.count("MyApp/ns/a") == 2


def test_control_characters_cannot_break_the_line_nor_the_bound() -> None:
    text = summary([], ["MyApp/ns/a: \n" * 3000], 1, limit=200)
    assert "\n" not in text and len(text) <= 200 and text.startswith("1 of 1 objects failed")
