"""The mutation tool itself (testenv.mutation, ``make mutation``): the mutants it makes, and
that a run kills the mutants of a tested function and not those of an untested one, on a toy
module in a private directory (never the real tree)."""

from __future__ import annotations

import ast
import json
import textwrap
from pathlib import Path

import pytest

from testenv.mutation.__main__ import ALLOWED, ROOT, TESTS, core, main
from testenv.mutation.mutants import mutants
from testenv.mutation.run import ModuleReport, Result, format_report, load_allowed

SOURCE = textwrap.dedent(
    '''\
    """Doc."""

    from typing import TYPE_CHECKING

    if TYPE_CHECKING:
        import os

    LIMIT = 3


    def f(a: int, b: int = 0) -> bool:
        """Doc."""
        if a < b and not a:
            return max(a, 1) == -1
        total = f"{a}s"
        total += "y"  # pragma: no mutate
        return total != ""
    '''
)


def test_the_mutants_of_a_small_module_are_exactly_these() -> None:
    got = [(m.line, m.scope, m.operator, m.change) for m in mutants(SOURCE, "toy.py")]
    assert got == [
        (8, "<module>", "int", "3 → 4"),
        (8, "<module>", "int", "3 → 2"),
        (11, "f", "int", "0 → 1"),
        (11, "f", "int", "0 → -1"),
        (13, "f", "drop", "if a < b and (not a): ... → pass"),
        (13, "f", "and/or", "a < b and (not a) → a < b or not a"),
        (13, "f", "compare", "a < b → a <= b"),
        (13, "f", "not", "not a → a"),
        (14, "f", "drop", "return max(a, 1) == -1 → pass"),
        (14, "f", "compare", "max(a, 1) == -1 → max(a, 1) != -1"),
        (14, "f", "max/min", "max(a, 1) → min(a, 1)"),
        (14, "f", "int", "max(a, 1) → max(a, 2)"),
        (14, "f", "int", "max(a, 1) → max(a, 0)"),
        (14, "f", "int", "-1 → -2"),
        (14, "f", "int", "-1 → -0"),
        (15, "f", "drop", "total = f'{a}s' → pass"),
        (17, "f", "drop", "return total != '' → pass"),
        (17, "f", "compare", "total != '' → total == ''"),
        (17, "f", "str", "total != '' → total != 'x'"),
    ]


def test_each_mutant_is_one_change_that_compiles() -> None:
    original = ast.dump(ast.parse(SOURCE))
    found = mutants(SOURCE, "toy.py")
    assert len({m.source for m in found}) == len(found)
    for m in found:
        assert ast.dump(ast.parse(m.source)) != original
        compile(m.source, "toy.py", "exec")


def test_augmented_assignment_and_arithmetic_are_swapped() -> None:
    source = "def g(n):\n    n += 1\n    return n - 2\n"
    changes = {m.change for m in mutants(source, "g.py") if m.operator == "+/-"}
    assert changes == {"n += 1 → n -= 1", "n - 2 → n + 2"}


def _toy(root: Path) -> None:
    (root / "toy.py").write_text(
        "def smaller(a, b):\n    return a < b\n\n\ndef untested(x):\n    return not x\n"
    )
    (root / "test_toy.py").write_text(
        "from toy import smaller\n\n\n"
        "def test_smaller():\n    assert smaller(1, 2)\n    assert not smaller(2, 2)\n"
    )


def test_a_tested_function_kills_its_mutants_and_an_untested_one_does_not(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root, results = tmp_path / "tree", tmp_path / "results"
    root.mkdir()
    _toy(root)
    allowed = tmp_path / "equivalent.txt"
    allowed.write_text("# a comment\ntoy.py :: untested :: not x → x :: judged harmless\n")
    before = (root / "toy.py").read_text()

    code = main(
        [
            "toy.py",
            *("--root", str(root), "--tests", "test_toy.py", "--jobs", "2"),
            *("--allowed", str(allowed), "--results", str(results)),
        ]
    )

    assert code == 0
    assert (root / "toy.py").read_text() == before
    (report,) = json.loads((results / "report.json").read_text())
    outcomes = {
        (m["scope"], m["change"]): (m["outcome"], m["equivalent"]) for m in report["mutants"]
    }
    assert outcomes == {
        ("smaller", "return a < b → pass"): ("killed", None),
        ("smaller", "a < b → a <= b"): ("killed", None),
        ("untested", "return not x → pass"): ("survived", None),
        ("untested", "not x → x"): ("survived", "judged harmless"),
    }
    # 2 killed of the 3 not judged equivalent
    assert report["score"] == 66.7
    text = (results / "report.txt").read_text()
    assert "toy.py:6 [drop] in untested: return not x → pass" in text
    assert "judged harmless" in text
    assert text in capsys.readouterr().out


def test_tests_failing_on_the_unmutated_module_are_an_error_not_a_score(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _toy(tmp_path)
    (tmp_path / "test_toy.py").write_text("def test_broken():\n    assert False\n")
    code = main(["toy.py", "--root", str(tmp_path), "--tests", "test_toy.py", "--jobs", "1"])
    assert code == 2
    assert "toy.py: its tests (test_toy.py) fail on the module as it is" in capsys.readouterr().err


def test_bad_input_is_named_with_exit_code_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _toy(tmp_path)
    assert main(["nope.py", "--root", str(tmp_path), "--list"]) == 2
    assert f"nope.py: no such module under {tmp_path}" in capsys.readouterr().err
    assert main(["toy.py", "--root", str(tmp_path), "--list"]) == 2
    assert "toy.py: no tests for it" in capsys.readouterr().err
    allowed = tmp_path / "equivalent.txt"
    allowed.write_text("\ntoy.py :: untested :: no arrow here\n")
    assert main(["toy.py", "--root", str(tmp_path), "--allowed", str(allowed), "--list"]) == 2
    assert f"{allowed}:2: expected" in capsys.readouterr().err


def test_every_core_module_has_tests_in_the_table_and_they_exist() -> None:
    assert set(core(ROOT)) == set(TESTS)
    for tests in TESTS.values():
        for test in tests:
            assert (ROOT / test).is_file(), test


def test_the_report_counts_timeouts_as_caught_and_names_stale_allow_list_entries() -> None:
    found = mutants("def h(a):\n    return a < 1\n", "h.py")
    by_change = {m.change: m for m in found}
    report = ModuleReport(
        "h.py",
        ("test_h.py",),
        [
            Result(by_change["a < 1 → a <= 1"], "timeout"),
            Result(by_change["a < 1 → a < 2"], "killed"),
            Result(by_change["a < 1 → a < 0"], "survived"),
            Result(by_change["return a < 1 → pass"], "survived", equivalent="why"),
        ],
    )
    assert report.score == pytest.approx(200 / 3)
    stale = "h.py :: h :: a < 1 → a > 1"
    text = format_report([report], {stale: "gone", "other.py :: f :: a → b": "not run"})
    assert "h.py:2 [int] in h: a < 1 → a < 0" in text
    assert text.endswith(
        f"Allow-list entries that matched no survivor (killed now, or gone):\n  {stale}\n"
    )


def test_every_allow_list_entry_names_a_mutant_of_its_module_as_it_is() -> None:
    """An entry whose code was edited since no longer matches; it would hide nothing and
    mislead the reader, and a run over other modules would not name it."""
    allowed = load_allowed(ALLOWED)
    modules = {key.split(" :: ", 1)[0] for key in allowed}
    keys = {m.key for module in modules for m in mutants((ROOT / module).read_text(), module)}
    assert sorted(set(allowed) - keys) == []
