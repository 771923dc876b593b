"""release/RELEASES: each release's commit, read as the upgrade test reads it."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from gitsync import __version__
from release.versions import Release, previous, releases

ROOT = Path(__file__).resolve().parents[2]


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def test_the_previous_release_is_older_than_this_version_and_in_this_history() -> None:
    last = previous()
    assert _version(last.version) < _version(__version__)
    assert last.tag == f"v{last.version}"
    # the commit is on this branch's history (a full clone has it; the upgrade test needs it)
    ancestor = subprocess.run(
        ["git", "merge-base", "--is-ancestor", last.commit, "HEAD"], cwd=ROOT, check=False
    )
    assert ancestor.returncode == 0, f"{last.commit} is not an ancestor of HEAD"


def test_comments_and_blank_lines_are_skipped_and_a_short_sha_refused() -> None:
    sha = "a" * 40
    assert releases(f"# a comment\n\n0.1.0 {sha}  # the first\n0.2.0 {'b' * 40}\n") == [
        Release("0.1.0", sha),
        Release("0.2.0", "b" * 40),
    ]
    with pytest.raises(ValueError, match="line 1: 'abc1234' is not a full commit sha"):
        releases("0.1.0 abc1234\n")
