"""The Git cache is private and checked before every use: what another user planted there
is refused, never obeyed (a hook or fsmonitor would run as whoever runs gitsync), and no
link planted there is ever written through.

These tests run as root and play "another user" by giving files to another uid.
"""

from __future__ import annotations

import os
import stat
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from click.testing import CliRunner

from gitsync.cli import main
from gitsync.errors import SourceError
from gitsync.source.cache import default_cache_dir
from gitsync.source.checkout import Credentials, GitSource

if TYPE_CHECKING:
    from tests.gitserver import HttpGit, Upstream

OTHER_UID = 4242
APP = "apiVersion: apps.example.com/v1\nkind: MyApp\nmetadata: {name: a}\nspec: {image: x}\n"

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="giving files to another uid")


def chown_tree(path: Path, uid: int) -> None:
    os.lchown(path, uid, -1)
    for p in path.rglob("*"):
        os.lchown(p, uid, -1)


class Planted:
    """A cache repository made by "someone else" at the place gitsync will look: its
    config runs a hook and an fsmonitor that each leave a mark."""

    def __init__(self, upstream: Upstream, tmp_path: Path, repo_dir: Path) -> None:
        self.marks = [tmp_path / "hook-ran", tmp_path / "fsmonitor-ran"]
        hooks = tmp_path / "planted-hooks"
        hooks.mkdir()
        for name in ("post-checkout", "reference-transaction"):
            (hooks / name).write_text(f"#!/bin/sh\ntouch {self.marks[0]}\n")
            (hooks / name).chmod(0o755)
        fsmonitor = tmp_path / "fsmonitor.sh"
        fsmonitor.write_text(f"#!/bin/sh\ntouch {self.marks[1]}\n")
        fsmonitor.chmod(0o755)
        repo_dir.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        upstream.git("clone", "--quiet", str(upstream.bare), str(repo_dir))
        upstream.git("-C", str(repo_dir), "config", "core.hooksPath", str(hooks))
        upstream.git("-C", str(repo_dir), "config", "core.fsmonitor", str(fsmonitor))
        self.dir = repo_dir

    def ran(self) -> list[str]:
        return [p.name for p in self.marks if p.exists()]


@pytest.fixture
def url(upstream: Upstream) -> str:
    upstream.commit({"a.yaml": APP})
    return f"file://{upstream.bare}"


def where(url: str, cache_dir: Path) -> Path:
    return GitSource(url, "main", cache_dir).dir


def test_the_planted_repository_runs_its_hook_when_obeyed(
    upstream: Upstream, url: str, tmp_path: Path, cache_dir: Path
) -> None:
    """The attack is real: a plain git checkout in the planted repository runs the hook.
    (The tests below would prove nothing if it did not.)"""
    planted = Planted(upstream, tmp_path, where(url, cache_dir))
    subprocess.run(
        ["git", "-C", str(planted.dir), "checkout", "--quiet", "--detach", "HEAD"],
        env={**upstream.env},
        check=True,
    )
    assert planted.ran() == ["hook-ran", "fsmonitor-ran"]


@pytest.mark.parametrize(
    ("attack", "problem"),
    [
        # only giving files to another uid needs root: the rest runs everywhere
        pytest.param(
            "repository of another user", f"is owned by uid {OTHER_UID}", marks=needs_root
        ),
        pytest.param(
            "config of another user", f"config is owned by uid {OTHER_UID}", marks=needs_root
        ),
        ("group-writable config", "config is writable by group or others (mode 0664)"),
        ("world-writable .git", ".git is writable by group or others (mode 0777)"),
        ("repository is a link", "is a symbolic link"),
        pytest.param("cache of another user", f"is owned by uid {OTHER_UID}", marks=needs_root),
        ("world-writable cache", "is writable by group or others (mode 0777)"),
        ("cache is a link", "is a symbolic link"),
    ],
)
def test_a_planted_cache_is_refused_and_nothing_of_it_runs(
    upstream: Upstream, url: str, tmp_path: Path, cache_dir: Path, attack: str, problem: str
) -> None:
    repo_dir = where(url, cache_dir)
    if attack == "repository is a link":
        planted = Planted(upstream, tmp_path, tmp_path / "elsewhere" / "repo")
        repo_dir.parent.mkdir(mode=0o700)
        repo_dir.symlink_to(planted.dir)
    elif attack == "cache is a link":
        planted = Planted(upstream, tmp_path, tmp_path / "elsewhere" / repo_dir.name)
        cache_dir.symlink_to(planted.dir.parent)
    else:
        planted = Planted(upstream, tmp_path, repo_dir)
    if attack == "repository of another user":
        chown_tree(repo_dir, OTHER_UID)
    elif attack == "config of another user":
        os.chown(repo_dir / ".git" / "config", OTHER_UID, -1)
    elif attack == "group-writable config":
        (repo_dir / ".git" / "config").chmod(0o664)
    elif attack == "world-writable .git":
        (repo_dir / ".git").chmod(0o777)
    elif attack == "cache of another user":
        chown_tree(cache_dir, OTHER_UID)
    elif attack == "world-writable cache":
        cache_dir.chmod(0o777)
    before = sorted(str(p) for p in tmp_path.rglob("*"))

    source = GitSource(url, "main", cache_dir)
    for step in (source.fetch, source.remote_sha):
        with pytest.raises(SourceError) as info:
            step()
        assert problem in str(info.value) and "refusing to use it" in str(info.value)
        assert str(cache_dir) in str(info.value)
    assert planted.ran() == []
    # refused, not "repaired": another user's files are not gitsync's to delete
    assert sorted(str(p) for p in tmp_path.rglob("*")) == before


def test_a_planted_askpass_link_is_refused_and_its_target_untouched(
    http_git: HttpGit, upstream: Upstream, tmp_path: Path, cache_dir: Path
) -> None:
    upstream.commit({"a.yaml": APP})
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    victim.chmod(0o644)
    token = tmp_path / "token"
    token.write_text(http_git.token)
    (cache_dir / ".home").mkdir(parents=True, mode=0o700)
    (cache_dir / ".home" / "askpass.sh").symlink_to(victim)
    creds = Credentials(token_file=token)
    source = GitSource(http_git.url, "main", cache_dir, credentials=creds, allow_insecure=True)
    with pytest.raises(SourceError, match=r"askpass.sh is a symbolic link: refusing"):
        source.fetch()
    assert victim.read_text() == "precious\n"
    assert stat.S_IMODE(victim.stat().st_mode) == 0o644
    assert http_git.requests == []  # nothing was asked of the server either


def test_the_cache_is_private_and_still_accepted_under_a_group_umask(
    url: str, upstream: Upstream, cache_dir: Path
) -> None:
    """umask 002 (user private groups) must not make gitsync refuse its own cache later."""
    old = os.umask(0o002)
    try:
        first = GitSource(url, "main", cache_dir).fetch()
        upstream.commit({"b.yaml": APP})
        again = GitSource(url, "main", cache_dir)  # a new process, the same cache
        second = again.fetch()
    finally:
        os.umask(old)
    assert second.sha != first.sha and again.fetches == 1
    assert stat.S_IMODE(cache_dir.stat().st_mode) == 0o700
    open_to_others = [
        str(p)
        for p in cache_dir.rglob("*")
        if not p.is_symlink() and p.lstat().st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    ]
    assert open_to_others == []


@pytest.mark.parametrize(
    ("xdg", "expected"),
    [
        ("/srv/xdg-cache", lambda home: Path("/srv/xdg-cache/gitsync")),
        ("", lambda home: home / ".cache" / "gitsync"),
        ("relative/cache", lambda home: home / ".cache" / "gitsync"),  # the XDG rule
    ],
)
def test_default_cache_dir(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, xdg: str, expected: Callable[[Path], Path]
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_CACHE_HOME", xdg)
    assert default_cache_dir() == expected(tmp_path)


def test_the_cli_keeps_its_cache_in_the_users_cache_dir(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.delenv("GITSYNC_CACHE_DIR", raising=False)
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))  # the old default: must stay unused
    (tmp_path / "tmp").mkdir()
    result = CliRunner().invoke(main, ["validate", "--repo", url, "--path", "."])
    assert result.exit_code == 0, result.output
    cache = home / ".cache" / "gitsync"
    assert stat.S_IMODE(cache.stat().st_mode) == 0o700
    assert [p.name for p in cache.iterdir() if p.name != ".home"] == [where(url, cache).name]
    assert list((tmp_path / "tmp").iterdir()) == []


@needs_root
def test_the_cli_refuses_a_planted_cache_with_one_line(
    upstream: Upstream, url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    xdg = tmp_path / "xdg"
    monkeypatch.setenv("XDG_CACHE_HOME", str(xdg))
    monkeypatch.delenv("GITSYNC_CACHE_DIR", raising=False)
    planted = Planted(upstream, tmp_path, where(url, xdg / "gitsync"))
    chown_tree(planted.dir, OTHER_UID)
    result = CliRunner().invoke(main, ["validate", "--repo", url, "--path", "."])
    assert result.exit_code == 1
    assert result.output.startswith(f"error: cache {planted.dir} is owned by uid {OTHER_UID}")
    assert "Traceback" not in result.output and len(result.output.splitlines()) == 1
    assert planted.ran() == []


def test_the_pods_cache_is_a_private_directory_inside_its_volume(url: str, tmp_path: Path) -> None:
    """kubelet makes an emptyDir mode 0777 (with fsGroup: 2777): usable as the parent of
    the cache, refused as the cache itself. The Deployment and the image point below it."""
    import yaml

    root = Path(__file__).resolve().parents[2]
    deployment = yaml.safe_load((root / "deploy" / "deployment.yaml").read_text())
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    cache = next(e["value"] for e in container["env"] if e["name"] == "GITSYNC_CACHE_DIR")
    mounts = [m["mountPath"] for m in container["volumeMounts"]]
    assert cache not in mounts and any(cache.startswith(m + "/") for m in mounts)
    assert f"GITSYNC_CACHE_DIR={cache}\n" in (root / "Dockerfile").read_text()

    volume = tmp_path / "volume"
    volume.mkdir()
    volume.chmod(0o2777)
    with pytest.raises(SourceError, match="is writable by group or others"):
        GitSource(url, "main", volume).fetch()
    below = volume / Path(cache).name
    GitSource(url, "main", below).fetch()
    assert below.stat().st_mode & 0o777 == 0o700  # (setgid, inherited from the volume, stays)


@needs_root
def test_a_cache_inside_another_users_directory_is_refused(
    upstream: Upstream, url: str, tmp_path: Path
) -> None:
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o755)
    os.chown(theirs, OTHER_UID, -1)
    cache = theirs / "cache"
    cache.mkdir(mode=0o700)  # ours, private: but its parent is another user's
    with pytest.raises(SourceError, match=rf"inside {theirs}, owned by uid {OTHER_UID}"):
        GitSource(url, "main", cache).fetch()
