"""kubectl's conventions in gitsync's command line: ``--version``, ``-A``, ``NO_COLOR``."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from gitsync import __version__
from gitsync.cli import main
from gitsync.cli.diff import use_color


def test_version_is_a_flag_too() -> None:
    done = CliRunner().invoke(main, ["--version"])
    assert (done.exit_code, done.output) == (0, f"gitsync {__version__}\n")
    assert CliRunner().invoke(main, ["version"]).output == done.output


def test_all_namespaces_and_a_namespace_given_together_are_a_usage_error() -> None:
    done = CliRunner().invoke(main, ["drift", "-A", "-n", "shop"])
    assert done.exit_code == 2
    assert "-A/--all-namespaces and -n/--namespace exclude each other" in done.output


def test_all_namespaces_overrides_the_namespace_of_the_environment(tmp_path: object) -> None:
    """GITSYNC_NAMESPACE is a default, as kubectl's context namespace is: -A wins over it
    (the command goes on, and fails later only for want of a cluster)."""
    done = CliRunner().invoke(
        main,
        ["drift", "-A", "--kubeconfig", "/nonexistent/kubeconfig"],
        env={"GITSYNC_NAMESPACE": "shop"},
    )
    assert "exclude each other" not in done.output
    assert done.exit_code == 2 and "kubeconfig" in done.output


@pytest.mark.parametrize(
    ("flag", "no_color", "tty", "want"),
    [
        (None, None, True, True),
        (None, None, False, False),
        (None, "1", True, False),  # NO_COLOR set: no colour on a terminal either
        (None, "", True, True),  # set but empty: as if not set (no-color.org)
        (True, "1", False, True),  # --color wins over both
        (False, None, True, False),
    ],
)
def test_colour_follows_the_flag_then_no_color_then_the_terminal(
    monkeypatch: pytest.MonkeyPatch, flag: bool | None, no_color: str | None, tty: bool, want: bool
) -> None:
    if no_color is None:
        monkeypatch.delenv("NO_COLOR", raising=False)
    else:
        monkeypatch.setenv("NO_COLOR", no_color)
    monkeypatch.setattr("sys.stdout.isatty", lambda: tty)
    assert use_color(flag) is want
