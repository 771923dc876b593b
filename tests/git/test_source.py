from __future__ import annotations

import base64
import logging
import os
import shlex
import subprocess
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from gitsync.errors import ConfigError, SourceError
from gitsync.source.checkout import GitSource, LocalSource, Revision, open_source
from gitsync.source.gitenv import Credentials
from gitsync.source.giturl import redact_url
from gitsync.source.manifests import load

if TYPE_CHECKING:  # fixtures bring the objects; only their types are imported
    from collections.abc import Callable

    from tests.gitserver import HttpGit, Upstream

    Children = Callable[[], list[str]]

APP = """\
apiVersion: apps.example.com/v1
kind: MyApp
metadata:
  name: {name}
  namespace: shop
spec:
  image: nginx:1.27
  replicas: 1
"""


def app(name: str) -> str:
    return APP.format(name=name)


@pytest.fixture
def token_file(tmp_path: Path, http_git: HttpGit) -> Path:
    p = tmp_path / "secrets" / "token"
    p.parent.mkdir()
    p.write_text(http_git.token + "\n")
    return p


@pytest.fixture(params=["file", "daemon", "http"])
def remote(
    request: pytest.FixtureRequest, upstream: Upstream, tmp_path: Path
) -> tuple[str, dict[str, Any]]:
    """(url, GitSource keyword arguments) for each transport."""
    if request.param == "file":
        return f"file://{upstream.bare}", {}
    if request.param == "daemon":
        return request.getfixturevalue("git_daemon"), {"allow_insecure": True}
    http: HttpGit = request.getfixturevalue("http_git")
    token = tmp_path / "token"
    token.write_text(http.token)
    return http.url, {"allow_insecure": True, "credentials": Credentials(token_file=token)}


def test_clone_new_commit_and_no_fetch_when_unchanged(
    remote: tuple[str, dict[str, Any]], upstream: Upstream, cache_dir: Path
) -> None:
    url, kw = remote
    first = upstream.commit({"apps/a.yaml": app("a")})
    source = GitSource(url, "main", cache_dir, **kw)

    rev = source.fetch()
    assert rev == Revision(ref="main", sha=first, dir=source.dir)
    assert str(rev) == f"main@sha1:{first}"
    assert (rev.dir / "apps" / "a.yaml").read_text() == app("a")
    assert source.fetches == 1

    # nothing moved: one ls-remote, no fetch, same revision
    assert source.remote_sha() == first
    assert source.fetch() == rev
    assert source.fetches == 1

    second = upstream.commit({"apps/b.yaml": app("b"), "apps/a.yaml": None})
    assert source.remote_sha() == second
    rev2 = source.fetch()
    assert (rev2.sha, source.fetches) == (second, 2)
    assert sorted(p.name for p in (rev2.dir / "apps").iterdir()) == ["b.yaml"]
    # a shallow clone: one commit, whatever the history
    assert (rev2.dir / ".git" / "shallow").exists()


def test_a_new_source_on_a_warm_cache_does_not_fetch(upstream: Upstream, cache_dir: Path) -> None:
    sha = upstream.commit({"a.yaml": app("a")})
    url = f"file://{upstream.bare}"
    GitSource(url, "main", cache_dir).fetch()
    (cache_dir / next(p.name for p in cache_dir.iterdir() if p.name != ".home") / "junk").touch()
    again = GitSource(url, "main", cache_dir)  # e.g. after a daemon restart
    rev = again.fetch()
    assert (rev.sha, again.fetches) == (sha, 0)
    assert not (rev.dir / "junk").exists()  # but the tree is made clean


@pytest.mark.parametrize("annotated", [False, True])
def test_tag_pinning(git_daemon: str, upstream: Upstream, cache_dir: Path, annotated: bool) -> None:
    tagged = upstream.commit({"a.yaml": app("v1")})
    tag_object = upstream.tag("v1.0.0", annotated=annotated)
    assert (tag_object != tagged) is annotated
    upstream.commit({"a.yaml": app("later")})

    source = GitSource(git_daemon, "v1.0.0", cache_dir, allow_insecure=True)
    assert source.remote_sha() == tagged  # peeled to the commit
    rev = source.fetch()
    assert rev.sha == tagged and str(rev) == f"v1.0.0@sha1:{tagged}"
    assert (rev.dir / "a.yaml").read_text() == app("v1")
    source.fetch()
    assert source.fetches == 1


def test_branch_wins_over_a_tag_of_the_same_name(upstream: Upstream, cache_dir: Path) -> None:
    old = upstream.commit({"a.yaml": app("old")})
    upstream.tag("main", annotated=False)
    new = upstream.commit({"a.yaml": app("new")})
    assert old != new
    assert GitSource(f"file://{upstream.bare}", "main", cache_dir).fetch().sha == new


def test_commit_pinning(
    http_git: HttpGit, token_file: Path, upstream: Upstream, cache_dir: Path
) -> None:
    pinned = upstream.commit({"a.yaml": app("pinned")})
    upstream.commit({"a.yaml": app("later")})
    creds = Credentials(token_file=token_file)
    source = GitSource(http_git.url, pinned, cache_dir, credentials=creds, allow_insecure=True)
    requests = len(http_git.requests)
    assert source.remote_sha() == pinned
    assert len(http_git.requests) == requests  # a commit needs no ls-remote
    rev = source.fetch()
    assert rev.sha == pinned and (rev.dir / "a.yaml").read_text() == app("pinned")
    assert source.fetch() == rev and source.fetches == 1


def test_force_pushed_branch(
    remote: tuple[str, dict[str, Any]], upstream: Upstream, cache_dir: Path
) -> None:
    url, kw = remote
    upstream.commit({"a.yaml": app("a")})
    source = GitSource(url, "main", cache_dir, **kw)
    rev = source.fetch()
    (rev.dir / "untracked.yaml").write_text(app("stray"))
    rewritten = upstream.rewrite({"b.yaml": app("b")})
    rev2 = source.fetch()
    assert rev2.sha == rewritten
    assert sorted(p.name for p in rev2.dir.iterdir() if p.name != ".git") == ["b.yaml"]


def test_insecure_transports_need_allow_insecure(
    git_daemon: str, http_git: HttpGit, cache_dir: Path
) -> None:
    for url in (git_daemon, http_git.url):
        with pytest.raises(ConfigError, match="--allow-insecure-git"):
            GitSource(url, "main", cache_dir)


def test_wrong_token(
    http_git: HttpGit,
    upstream: Upstream,
    tmp_path: Path,
    cache_dir: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    upstream.commit({"a.yaml": app("a")})
    wrong = "wrong-" + http_git.token[::-1]
    token_file = tmp_path / "wrong-token"
    token_file.write_text(wrong)
    source = GitSource(
        http_git.url,
        "main",
        cache_dir,
        credentials=Credentials(token_file=token_file),
        allow_insecure=True,
    )
    with pytest.raises(SourceError) as info:
        source.fetch()
    message = str(info.value)
    assert http_git.url in message and "Authentication failed" in message
    assert wrong not in message and http_git.token not in message
    assert info.value.__cause__ is None and info.value.__context__ is None
    assert all(wrong not in r.getMessage() for r in caplog.records)


def test_no_token_means_no_prompt(http_git: HttpGit, upstream: Upstream, cache_dir: Path) -> None:
    upstream.commit({"a.yaml": app("a")})
    source = GitSource(http_git.url, "main", cache_dir, allow_insecure=True)
    start = time.monotonic()
    with pytest.raises(SourceError, match=r"terminal prompts disabled|Authentication failed"):
        source.remote_sha()
    assert time.monotonic() - start < 10


def test_token_never_leaks(
    http_git: HttpGit,
    token_file: Path,
    upstream: Upstream,
    cache_dir: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    upstream.commit({"a.yaml": app("a")})
    source = GitSource(
        http_git.url,
        "main",
        cache_dir,
        credentials=Credentials(token_file=token_file),
        allow_insecure=True,
    )
    rev = source.fetch()
    assert rev.sha == upstream.wgit("rev-parse", "HEAD")
    # the token went to the server, in the Authorization header only
    basic = "Basic " + base64.b64encode(f"git:{http_git.token}".encode()).decode()
    assert any(
        " GET /repo.git/info/refs" in line and line.endswith(basic) for line in http_git.requests
    )
    assert all(http_git.token not in line for line in http_git.requests)  # not in a URL
    # nowhere in the cache: .git/config, logs, FETCH_HEAD, anything
    for path in cache_dir.rglob("*"):
        if path.is_file() and not path.is_symlink():
            assert http_git.token.encode() not in path.read_bytes(), path
    assert all(http_git.token not in r.getMessage() for r in caplog.records)
    assert http_git.token not in repr(source.__dict__)


def test_token_is_not_given_to_a_redirect_target(
    http_git: HttpGit, token_file: Path, upstream: Upstream, cache_dir: Path
) -> None:
    upstream.commit({"a.yaml": app("a")})
    moved = http_git.url.replace("/repo.git", "/moved.git")
    creds = Credentials(token_file=token_file)
    source = GitSource(moved, "main", cache_dir, credentials=creds, allow_insecure=True)
    with pytest.raises(SourceError) as info:
        source.fetch()
    assert http_git.token not in str(info.value)
    assert any(line.startswith("localhost:") for line in http_git.requests)
    basic = base64.b64encode(f"git:{http_git.token}".encode()).decode()
    assert all(basic not in line for line in http_git.requests)


def test_askpass_answers_only_for_the_configured_host(
    http_git: HttpGit, token_file: Path, upstream: Upstream, cache_dir: Path
) -> None:
    upstream.commit({"a.yaml": app("a")})
    creds = Credentials(token_file=token_file, username="bot")
    source = GitSource(http_git.url, "main", cache_dir, credentials=creds, allow_insecure=True)
    source.remote_sha()  # writes the helper
    env = {**source._env, "PATH": os.environ["PATH"]}
    askpass = source._env["GIT_ASKPASS"]
    host = http_git.url.split("/")[2]

    def ask(prompt: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([askpass, prompt], env=env, capture_output=True, text=True)

    assert ask(f"Username for 'http://{host}': ").stdout == "bot\n"
    assert ask(f"Password for 'http://bot@{host}': ").stdout.strip() == http_git.token
    for prompt in (
        "Username for 'http://localhost:1': ",
        "Password for 'http://bot@evil.example': ",
        f"Password for 'http://bot@{host}.evil.example': ",
        "Passphrase for key: ",
    ):
        result = ask(prompt)
        assert (result.returncode, result.stdout) == (1, ""), prompt


def test_server_down_fails_fast(dead_url: str, cache_dir: Path) -> None:
    source = GitSource(dead_url, "main", cache_dir, allow_insecure=True, timeout=5)
    start = time.monotonic()
    with pytest.raises(SourceError, match=r"Failed to connect|Connection refused"):
        source.fetch()
    assert time.monotonic() - start < 5


def test_hung_server_times_out(
    silent_server: str, cache_dir: Path, git_processes: Children
) -> None:
    source = GitSource(silent_server, "main", cache_dir, allow_insecure=True, timeout=1.5)
    start = time.monotonic()
    with pytest.raises(SourceError, match=r"timed out after 1.5s"):
        source.remote_sha()
    assert time.monotonic() - start < 6
    assert git_processes() == []  # the timed-out git and its helpers were killed


@pytest.mark.parametrize(
    "url",
    [
        "https://user:hunter2@example.com/repo.git",
        "https://hunter2@example.com/repo.git",
        "http://x:hunter2@127.0.0.1/repo.git",
        # a "/" in the password: urlsplit sees no password (the host would be "user"), git
        # would carry it on its command line
        "https://user:hun/ter2@example.com/repo.git",
        "ssh://git:hun/ter2@example.com/repo.git",
        # a query string or fragment is on the command line of git and git-remote-https
        "https://example.com/repo.git?private_token=hunter2",
        "https://example.com/repo.git?a=1&access_token=hunter2",
        "https://example.com/repo.git#hunter2",
        "ssh://git@example.com/repo.git?hunter2",
    ],
)
def test_urls_with_credentials_are_refused_without_echo(url: str, cache_dir: Path) -> None:
    with pytest.raises(ConfigError) as info:
        GitSource(url, "main", cache_dir, allow_insecure=True)
    assert "hunter2" not in str(info.value)


@pytest.mark.parametrize(
    "url",
    [
        "ext::sh -c touch% /tmp/pwned",
        "fd::3",
        "ftp://example.com/r.git",
        "-uhttps://x",
        "https://",
        "https://ex ample.com/r",
    ],
)
def test_bad_urls_are_refused(url: str, cache_dir: Path) -> None:
    with pytest.raises(ConfigError):
        GitSource(url, "main", cache_dir)


@pytest.mark.parametrize(
    "ref",
    [
        "-b",
        "--upload-pack=x",
        "main..dev",
        "main@{1}",
        "a//b",
        "x.lock",
        "HEAD~1",
        "ref^",
        "",
        "a b",
        "/main",
        "main/",
    ],
)
def test_bad_refs_are_refused(ref: str, cache_dir: Path) -> None:
    with pytest.raises(ConfigError):
        GitSource("https://example.com/r.git", ref, cache_dir)


def test_redact_url() -> None:
    text = "fatal: unable to access 'https://u:p4ss@h.example/r.git/': x; ssh://git@h/r"
    assert (
        redact_url(text)
        == "fatal: unable to access 'https://***@h.example/r.git/': x; ssh://***@h/r"
    )


SECRET = "glpat-s3cr3t"


@pytest.mark.parametrize(
    ("text", "redacted"),
    [
        (f"https://user:{SECRET}@host/r.git", "https://***@host/r.git"),
        (f"https://{SECRET}@host/r.git", "https://***@host/r.git"),
        (f"https:/user:{SECRET}@host/r.git", "https:/***@host/r.git"),
        (f"https:user:{SECRET}@host/r.git", "https:***@host/r.git"),
        (f"HTTPS:///user:{SECRET}@host/r.git", "HTTPS:///***@host/r.git"),
        (f"user:{SECRET}@host/r", "***@host/r"),
        (f"{SECRET}:x-oauth-basic@github.com/o/r", "***@github.com/o/r"),
        (f"https://u:p@{SECRET}@host/r", "https://***@host/r"),  # an "@" in the password
        (f"https://oauth2:{SECRET}/x@host/r", "https://***@host/r"),  # a "/" in the password
        (f"user:{SECRET}/x@host/r", "***@host/r"),
        (f"https://host/r.git?private_token={SECRET}", "https://host/r.git?***"),
        (
            f"https://host/r.git/info/refs?a=1&access_token={SECRET}",
            "https://host/r.git/info/refs?***",
        ),
        (f"https://host/r.git#{SECRET}", "https://host/r.git?***"),
        (
            f"fatal: unable to access 'https:/u:{SECRET}@h/r/': x",
            "fatal: unable to access 'https:/***@h/r/': x",
        ),
        ("ssh://git@h/r and git@h:o/r", "ssh://***@h/r and ***@h:o/r"),
        ("no URL here? none at all.", "no URL here? none at all."),
    ],
)
def test_redact_url_in_every_spelling(text: str, redacted: str) -> None:
    assert redact_url(text) == redacted


@pytest.mark.parametrize(
    "repo",
    [
        f"https:/user:{SECRET}@127.0.0.1/r.git",
        f"https:user:{SECRET}@127.0.0.1/r.git",
        f"user:{SECRET}@127.0.0.1/r",
        f"https://127.0.0.1:1/r.git?private_token={SECRET}",
        f"ssh://-oProxyCommand=x:{SECRET}@h/r",
    ],
)
def test_no_token_of_a_malformed_url_is_printed(
    repo: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from click.testing import CliRunner

    from gitsync.cli import main

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    args = ["validate", "--repo", repo, "--git-timeout", "10"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 1 and result.output.startswith("error: "), result.output
    assert SECRET not in result.output


def test_user_git_config_and_hook_environment_are_ignored(
    upstream: Upstream, tmp_path: Path, cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sha = upstream.commit({"a.yaml": app("a")})
    # a user's ~/.gitconfig that would redirect the URL, and the variables a git hook exports
    home = tmp_path / "home"
    home.mkdir()
    (home / ".gitconfig").write_text(
        f'[url "file:///nonexistent/"]\n\tinsteadOf = file://{upstream.bare}\n'
    )
    victim = tmp_path / "victim"
    upstream.git("init", "--quiet", str(victim))
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GIT_DIR", str(victim / ".git"))
    monkeypatch.setenv("GIT_INDEX_FILE", str(victim / ".git" / "index"))
    redirect = f"'url.file:///nonexistent/.insteadof'='file://{upstream.bare}'"
    monkeypatch.setenv("GIT_CONFIG_PARAMETERS", redirect)
    rev = GitSource(f"file://{upstream.bare}", "main", cache_dir).fetch()
    assert rev.sha == sha
    assert not (victim / ".git" / "index").exists()
    assert not (victim / ".git" / "refs" / "gitsync").exists()


def test_broken_cache_recovers(upstream: Upstream, cache_dir: Path) -> None:
    upstream.commit({"a.yaml": app("a")})
    url = f"file://{upstream.bare}"
    rev = GitSource(url, "main", cache_dir).fetch()
    (rev.dir / ".git" / "HEAD").unlink()
    rev2 = GitSource(url, "main", cache_dir).fetch()
    assert rev2.sha == rev.sha and (rev2.dir / "a.yaml").exists()


def test_no_leftover_git_processes_after_50_cycles(
    upstream: Upstream, cache_dir: Path, git_processes: Children
) -> None:
    upstream.commit({"a.yaml": app("a")})
    source = GitSource(f"file://{upstream.bare}", "main", cache_dir)
    before = len(os.listdir("/proc/self/fd"))
    for i in range(50):
        if i % 2:
            upstream.commit({"a.yaml": app(f"a{i}")})
        source.fetch()
    assert source.fetches == 26
    assert git_processes() == []
    assert len(os.listdir("/proc/self/fd")) <= before + 2  # no pipes left open either


def test_two_hundred_myapps(
    http_git: HttpGit, token_file: Path, upstream: Upstream, cache_dir: Path
) -> None:
    files: dict[str, str | None] = {
        f"apps/team-{i % 5}/app-{i:03}.yaml": app(f"app-{i:03}") for i in range(200)
    }
    sha = upstream.commit(files)
    creds = Credentials(token_file=token_file)
    rev = GitSource(http_git.url, "main", cache_dir, credentials=creds, allow_insecure=True).fetch()
    result = load(rev.dir, "apps")
    assert rev.sha == sha and result.ok and result.files == 200
    assert len(result.apps) == 200


def test_local_source_and_open_source(tmp_path: Path, cache_dir: Path) -> None:
    (tmp_path / "repo").mkdir()
    local = open_source(str(tmp_path / "repo"), "main", cache_dir)
    assert isinstance(local, LocalSource)
    rev = local.fetch()
    assert rev == Revision(ref="local", sha="", dir=(tmp_path / "repo").resolve())
    assert str(rev) == "local" and local.remote_sha() == ""

    for url in (
        "https://example.com/org/repo.git",
        "ssh://git@example.com/org/repo",
        "git@example.com:org/repo.git",
        "file:///srv/repo.git",
    ):
        assert isinstance(open_source(url, "main", cache_dir), GitSource), url
    assert isinstance(
        open_source("git://example.com/r", "main", cache_dir, allow_insecure=True), GitSource
    )
    with pytest.raises(ConfigError):
        open_source(str(tmp_path / "missing"), "main", cache_dir)
    with pytest.raises(SourceError):
        LocalSource(tmp_path / "missing").fetch()


def test_environment_of_every_git_call(tmp_path: Path, cache_dir: Path) -> None:
    key, known = tmp_path / "my keys" / "id_ed25519", tmp_path / "known hosts"
    creds = Credentials(ssh_key_file=key, known_hosts_file=known)
    env = GitSource("git@example.com:org/repo.git", "main", cache_dir, credentials=creds)._env
    assert shlex.split(env["GIT_SSH_COMMAND"]) == [
        "ssh",
        "-o",
        "BatchMode=yes",
        "-o",
        "StrictHostKeyChecking=yes",
        "-o",
        "ConnectTimeout=60",
        "-i",
        str(key),
        "-o",
        "IdentitiesOnly=yes",
        "-o",
        f"UserKnownHostsFile={known}",
    ]
    assert env["GIT_ALLOW_PROTOCOL"] == "https:ssh:file"
    assert env["GIT_TERMINAL_PROMPT"] == "0" and env["GIT_CONFIG_NOSYSTEM"] == "1"
    assert env["GIT_CONFIG_GLOBAL"] == os.devnull
    assert Path(env["HOME"]).parent == cache_dir
    insecure = GitSource("git://example.com/r", "main", cache_dir, allow_insecure=True)._env
    assert insecure["GIT_ALLOW_PROTOCOL"] == "https:ssh:file:http:git"


def disk_bytes(directory: Path) -> int:
    """What ``directory`` holds on disk, every file (the work tree and .git)."""
    return sum(
        (Path(d) / f).lstat().st_blocks * 512 for d, _, files in os.walk(directory) for f in files
    )


@pytest.mark.parametrize("filters", [True, False], ids=["server-filters", "no-filter"])
def test_a_compressible_giant_never_reaches_the_cache(
    remote: tuple[str, dict[str, Any]], upstream: Upstream, cache_dir: Path, filters: bool
) -> None:
    # 2 x 48 MiB of one letter pack to ~100 KB: a checkout wrote them whole, and in a Pod
    # the cache is an emptyDir with a size limit (the kubelet evicts the Pod past it)
    upstream.git("-C", str(upstream.bare), "config", "uploadpack.allowFilter", str(filters).lower())
    giant = "x" * (48 << 20)
    sha = upstream.commit(
        {
            "apps/a.yaml": app("a"),
            "apps/big.yaml": giant,  # in the manifest path: an error of its own
            "apps/.hidden.yaml": giant,  # hidden: the walk skips it, so no error either
            "docs/big.txt": giant,  # outside it: never written
            "docs/small.yaml": app("docs"),
        }
    )
    del giant
    url, kw = remote
    rev = GitSource(url, "main", cache_dir, path="apps", **kw).fetch()
    assert rev.sha == sha
    assert disk_bytes(cache_dir) < 2 << 20  # 2 MiB; was above 144 MiB
    assert sorted(
        p.relative_to(rev.dir).as_posix() for p in rev.dir.rglob("*") if ".git" not in p.parts
    ) == ["apps", "apps/a.yaml"]
    size = None if filters else 48 << 20  # a server that filters never says how large
    assert sorted(rev.omitted) == [("apps/.hidden.yaml", size), ("apps/big.yaml", size)]
    loaded = load(rev.dir, "apps", omitted=rev.omitted)
    assert [a.key for a in loaded.apps] == ["shop/a"]
    more = "more than 1048576 bytes" if filters else f"{48 << 20} bytes, more than 1048576"
    assert [str(e) for e in loaded.errors] == [f"apps/big.yaml: file is {more}"]


def test_the_checkout_is_bounded_in_all(upstream: Upstream, cache_dir: Path) -> None:
    # each under the file limit, three together over the bound: none is written
    upstream.commit({f"apps/f{i}.yaml": "y" * 1_000_000 for i in range(3)})
    source = GitSource(
        upstream.file_url, "main", cache_dir, path="apps", max_checkout_bytes=2 << 20
    )
    message = "the files under 'apps' are 3000000 bytes, more than 2097152; not checked out"
    with pytest.raises(SourceError, match=message):
        source.fetch()
    assert not (source.dir / "apps").exists()


def test_a_large_file_with_pattern_characters_in_its_name_is_left_out(
    upstream: Upstream, cache_dir: Path
) -> None:
    # the sparse-checkout pattern names it escaped; unescaped, "[x]" would not match it
    # and git would fetch the blob the server left out, to write it
    upstream.git("-C", str(upstream.bare), "config", "uploadpack.allowFilter", "true")
    name = "apps/!big #1 [x]*?\\.yaml "
    upstream.commit({"apps/a.yaml": app("a"), name: "z" * (8 << 20)})
    rev = GitSource(upstream.file_url, "main", cache_dir, path="apps").fetch()
    assert rev.omitted == ((name, None),)
    assert sorted(p.name for p in (rev.dir / "apps").iterdir()) == ["a.yaml"]
    assert disk_bytes(cache_dir) < 1 << 20


def test_a_checkout_lists_the_files_it_wrote_with_their_blobs(
    upstream: Upstream, cache_dir: Path
) -> None:
    upstream.commit({"apps/a.yaml": app("a"), "apps/x/b.yml": app("b"), "docs/r.md": "hi\n"})
    source = GitSource(f"file://{upstream.bare}", "main", cache_dir, path="apps")
    rev = source.fetch()
    assert rev.listing is not None and rev.listing.root == "apps"
    blobs = dict(rev.listing.blobs)
    assert sorted(blobs) == ["apps/a.yaml", "apps/x/b.yml"]  # under the path alone
    for path, blob in blobs.items():
        # each one's id is the id of the bytes written (git hash-object of the file)
        written = subprocess.run(
            ["git", "hash-object", str(rev.dir / path)], capture_output=True, text=True
        )
        assert written.stdout.strip() == blob
    assert [a.key for a in load(rev.dir, "apps", listing=rev.listing).apps] == ["shop/a", "shop/b"]
    # a symbolic link in the tree: nothing is listed, the loader walks what was written
    (upstream.work / "apps" / "c.yaml").symlink_to("a.yaml")
    upstream.commit({})
    linked = source.fetch()
    assert linked.listing is None and (linked.dir / "apps" / "c.yaml").is_symlink()
