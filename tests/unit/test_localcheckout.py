"""What a local checkout says of its repository, read by the real git."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from gitsync.cli import common
from gitsync.cli.flags import parse
from gitsync.errors import ConfigError
from gitsync.model.api import SOURCE_LABEL
from gitsync.model.instance import resolve
from gitsync.source.checkout import LocalSource
from gitsync.source.localcheckout import describe, has_ref
from tests.gitserver import AUTHOR


def git(cwd: Path, *args: str) -> str:
    env = {**os.environ, **AUTHOR, "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull}
    out = subprocess.run(
        ["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True, timeout=30
    )
    return out.stdout.strip()


def repository(path: Path, branch: str = "main") -> Path:
    (path / "apps").mkdir(parents=True)
    (path / "apps" / "a.yaml").write_text("kind: MyApp\n")
    git(path, "init", "--quiet", f"--initial-branch={branch}")
    git(path, "add", "--all")
    git(path, "commit", "--quiet", "-m", "first")
    return path


def test_a_directory_outside_any_checkout_is_none(tmp_path: Path) -> None:
    (tmp_path / "apps").mkdir()
    assert describe(tmp_path / "apps") is None


def test_a_checkout_without_a_remote_is_its_branch_alone(tmp_path: Path) -> None:
    repo = repository(tmp_path / "apps-repo", branch="trunk")
    found = describe(repo)
    assert found is not None
    assert (found.top, found.prefix, found.remote, found.url) == (repo, ".", "", "")
    assert found.branch == "trunk"


def test_a_clone_follows_the_remote_and_branch_it_tracks(tmp_path: Path) -> None:
    upstream = repository(tmp_path / "upstream")
    git(upstream, "branch", "staging")
    git(tmp_path, "clone", "--quiet", "--branch", "staging", str(upstream), "clone")
    clone = tmp_path / "clone"
    git(clone, "checkout", "--quiet", "-b", "feature", "--track", "origin/main")
    found = describe(clone / "apps")
    assert found is not None
    # a clone of a local path is its file:// URL; the branch is the one it tracks
    assert (found.remote, found.url, found.branch) == ("origin", f"file://{upstream}", "main")
    assert found.prefix == "apps" and found.top == clone


def test_without_an_upstream_origin_and_the_branch_checked_out(tmp_path: Path) -> None:
    repo = repository(tmp_path / "repo")
    git(repo, "remote", "add", "mirror", "https://mirror.example.com/apps.git")
    git(repo, "remote", "add", "origin", "git@git.example.com:platform/apps.git")
    git(repo, "checkout", "--quiet", "-b", "release")
    found = describe(repo)
    assert found is not None
    assert (found.remote, found.url) == ("origin", "git@git.example.com:platform/apps.git")
    assert found.branch == "release"


def test_a_detached_head_has_no_branch(tmp_path: Path) -> None:
    repo = repository(tmp_path / "repo")
    git(repo, "checkout", "--quiet", "--detach")
    found = describe(repo)
    assert found is not None and found.branch == ""


def _identity(repo: Path, path: str = "apps", **kw: str) -> str:
    flags = {"repo": str(repo), "path": path, "ref": "main", "instance_name": "", **kw}
    return common.identity(parse(flags)).name


def test_a_checkout_names_the_instance_of_the_repository_it_is_a_checkout_of(
    tmp_path: Path,
) -> None:
    upstream = repository(tmp_path / "apps-repo")
    git(tmp_path, "clone", "--quiet", f"file://{upstream}", "clone")
    daemon = resolve("", f"file://{upstream}", "apps", "main").name
    # the repository itself (no remote: its file:// URL), a clone (its remote), and the
    # clone from the manifests' directory
    assert _identity(upstream) == daemon
    assert _identity(tmp_path / "clone") == daemon
    assert _identity(tmp_path / "clone" / "apps", ".") == daemon
    # what names another instance still does (a ref the checkout has)
    git(upstream, "branch", "staging")
    assert _identity(upstream, ref="staging") != daemon  # no click context: given
    assert (
        _identity(upstream, instance_repo="https://h/x")
        == resolve("", "https://h/x", "apps", "main").name
    )


def test_a_checkout_of_an_https_repository_names_the_daemon_of_that_url(tmp_path: Path) -> None:
    repo = repository(tmp_path / "work", branch="release")
    git(repo, "remote", "add", "origin", "git@git.example.com:platform/apps.git")
    git(repo, "config", "branch.release.remote", "origin")
    git(repo, "config", "branch.release.merge", "refs/heads/main")
    daemon = resolve("", "https://git.example.com/platform/apps.git", "apps", "main")
    found = common.identity(parse({"repo": str(repo), "path": "apps", "ref": "main"}))
    assert found.name == daemon.name
    # what this command line named before is adopted, not refused
    before = resolve("", str(repo), "apps", "main").name
    assert found.owner_of({"metadata": {"labels": {SOURCE_LABEL: before}}}) is None


def test_a_plain_directory_is_its_file_url(tmp_path: Path) -> None:
    (tmp_path / "apps").mkdir()
    assert _identity(tmp_path) == resolve("", f"file://{tmp_path}", "apps", "main").name


def test_the_refs_a_checkout_has_its_own_and_its_remote_s(tmp_path: Path) -> None:
    upstream = repository(tmp_path / "upstream", branch="trunk")
    git(upstream, "branch", "staging")
    git(upstream, "tag", "v1")
    git(tmp_path, "clone", "--quiet", str(upstream), "clone")
    found = describe(tmp_path / "clone")
    assert found is not None
    sha = git(upstream, "rev-parse", "HEAD")
    # staging is only its remote's branch (origin/staging) in the clone
    for ref in ("trunk", "staging", "refs/heads/staging", "v1", "refs/tags/v1", sha, "HEAD"):
        assert has_ref(found, ref), ref
    for ref in ("master", "refs/heads/master", "-h", "--all", "0" * 40, ""):
        assert not has_ref(found, ref), ref


def test_a_ref_the_checkout_lacks_is_one_error_not_another_instance(tmp_path: Path) -> None:
    upstream = repository(tmp_path / "apps-repo", branch="trunk")
    with pytest.raises(ConfigError) as e:
        _identity(upstream, ref="master")  # no click context: given
    assert str(e.value) == (
        f"--ref 'master': the checkout {upstream} has no such branch, tag or commit "
        "(it is on trunk); leave --ref out to take its branch, or name the instance with "
        "--instance-repo or --instance-name"
    )
    # a name given, or the repository it stands for, is not the checkout's: no check
    assert _identity(upstream, ref="master", instance_name="apps") == "apps"
    assert _identity(upstream, ref="master", instance_repo="https://h/x") == (
        resolve("", "https://h/x", "apps", "master").name
    )


def test_a_pinned_commit_is_read_from_the_checkouts_history_not_its_work_tree(
    tmp_path: Path,
) -> None:
    repo = repository(tmp_path / "repo")
    (repo / "apps" / "big.yaml").write_text("x" * 100)
    (repo / "apps" / "sub").mkdir()
    (repo / "apps" / "sub" / "b.yaml").write_text("kind: B\n")
    (repo / "other.yaml").write_text("kind: Other\n")
    git(repo, "add", "--all")
    git(repo, "commit", "--quiet", "-m", "second")
    pinned = git(repo, "rev-parse", "HEAD")
    (repo / "apps" / "a.yaml").write_text("kind: Later\n")
    git(repo, "commit", "--quiet", "-am", "third")
    (repo / "apps" / "a.yaml").write_text("kind: Uncommitted\n")
    (repo / "apps" / "new.yaml").write_text("kind: New\n")

    source = LocalSource(repo, path="apps", max_file_bytes=50)
    rev = source.fetch_commit(pinned.upper())
    assert (rev.sha, rev.pinned, str(rev)) == (pinned, True, f"local@sha1:{pinned}")
    assert (rev.dir / "apps" / "a.yaml").read_text() == "kind: MyApp\n"
    assert (rev.dir / "apps" / "sub" / "b.yaml").read_text() == "kind: B\n"
    assert not (rev.dir / "apps" / "new.yaml").exists()
    assert not (rev.dir / "other.yaml").exists()  # outside --path: not written
    # larger than a manifest may be: left out and named, as a fetch leaves it out
    assert rev.omitted == (("apps/big.yaml", 100),) and not (rev.dir / "apps" / "big.yaml").exists()
    assert source.fetch_commit(pinned) is rev  # read once
    assert (repo / "apps" / "a.yaml").read_text() == "kind: Uncommitted\n"  # untouched
    assert git(repo, "status", "--porcelain") == "M apps/a.yaml\n?? apps/new.yaml".strip()

    # --repo a directory inside the checkout: the files stand where it does
    inner = LocalSource(repo / "apps", path="sub").fetch_commit(pinned)
    assert (inner.dir / "sub" / "b.yaml").read_text() == "kind: B\n"
    assert not (inner.dir / "a.yaml").exists()


def test_a_directory_that_cannot_give_the_commit_says_what_to_run(tmp_path: Path) -> None:
    sha = "ab" * 20
    plain = tmp_path / "plain"
    (plain / "apps").mkdir(parents=True)
    with pytest.raises(ConfigError) as not_a_checkout:
        LocalSource(plain, path="apps").fetch_commit(sha)
    assert str(not_a_checkout.value) == (
        f"pinned to commit {sha}, which the directory '{plain}' cannot give (it is not a Git"
        " checkout): run this command again with --repo set to the repository's Git URL"
    )

    upstream = repository(tmp_path / "upstream")
    git(tmp_path, "clone", "--quiet", str(upstream), "clone")
    clone = tmp_path / "clone"
    (upstream / "apps" / "a.yaml").write_text("kind: Later\n")
    git(upstream, "commit", "--quiet", "-am", "later")
    later = git(upstream, "rev-parse", "HEAD")
    with pytest.raises(ConfigError) as not_held:
        LocalSource(clone, path="apps").fetch_commit(later)
    assert str(not_held.value) == (
        f"pinned to commit {later}, which the checkout '{clone}' does not hold:"
        f" run git -C {clone} fetch origin {later}, then this command again"
    )
    # what it says to run is what gives it
    git(clone, "fetch", "--quiet", "origin", later)
    rev = LocalSource(clone, path="apps").fetch_commit(later)
    assert (rev.dir / "apps" / "a.yaml").read_text() == "kind: Later\n"
