"""git gets an allow-listed environment: variables git reads, set in gitsync's own
environment (by a CI job, a shell profile, a hook), change nothing of a real fetch."""

from __future__ import annotations

import os
import ssl
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from gitsync.errors import SourceError
from gitsync.source.checkout import Credentials, GitSource
from tests.gitserver import HttpGit, _Backend, _Server

if TYPE_CHECKING:
    from tests.gitserver import Upstream

APP = "apiVersion: apps.example.com/v1\nkind: MyApp\nmetadata: {name: a}\nspec: {image: x}\n"


def marking_script(path: Path, mark: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\ntouch {mark}\nexit 1\n")
    path.chmod(0o755)
    return path


@pytest.fixture
def https_git(upstream: Upstream, tmp_path: Path) -> Iterator[tuple[HttpGit, Path]]:
    """``git http-backend`` over TLS with a self-signed certificate; yields the server and
    the certificate (the CA a client would have to trust)."""
    cert, key = tmp_path / "tls" / "cert.pem", tmp_path / "tls" / "key.pem"
    cert.parent.mkdir()
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256"),
            *("-nodes", "-days", "1"),
            *("-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"),
            *("-keyout", str(key), "-out", str(cert)),
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    server = _Server(("127.0.0.1", 0), _Backend)
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
    server.root, server.home = upstream.base, upstream.home
    server.token, server.seen = "tok-https", []
    thread = threading.Thread(target=server.serve_forever, name="https-git", daemon=True)
    thread.start()
    port = server.server_address[1]
    try:
        yield HttpGit(f"https://127.0.0.1:{port}/repo.git", server.token, server.seen), cert
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def test_git_ssl_no_verify_does_not_turn_verification_off(
    https_git: tuple[HttpGit, Path],
    upstream: Upstream,
    tmp_path: Path,
    cache_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server, _ = https_git
    upstream.commit({"a.yaml": APP})
    token = tmp_path / "token"
    token.write_text(server.token)
    source = GitSource(server.url, "main", cache_dir, credentials=Credentials(token_file=token))
    # the server works, for a git that is told to skip verification
    env = {**upstream.env, "GIT_SSL_NO_VERIFY": "1"}
    listed = subprocess.run(
        ["git", "ls-remote", server.url.replace("https://", "https://git:tok-https@")],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert listed.returncode == 0 and "refs/heads/main" in listed.stdout, listed.stderr
    seen = len(server.requests)

    monkeypatch.setenv("GIT_SSL_NO_VERIFY", "1")
    with pytest.raises(SourceError, match=r"certificate|SSL|TLS"):
        source.fetch()
    assert len(server.requests) == seen  # the handshake failed: not one request was sent


def test_git_proxy_command_is_not_run(
    git_daemon: str,
    upstream: Upstream,
    tmp_path: Path,
    cache_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sha = upstream.commit({"a.yaml": APP})
    mark = tmp_path / "proxy-ran"
    monkeypatch.setenv("GIT_PROXY_COMMAND", str(marking_script(tmp_path / "proxy", mark)))
    rev = GitSource(git_daemon, "main", cache_dir, allow_insecure=True).fetch()
    assert rev.sha == sha and not mark.exists()


def test_git_exec_path_does_not_replace_gits_helpers(
    http_git: HttpGit,
    upstream: Upstream,
    tmp_path: Path,
    cache_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sha = upstream.commit({"a.yaml": APP})
    mark = tmp_path / "helper-ran"
    exec_path = tmp_path / "exec-path"
    for helper in ("git-remote-http", "git-remote-https", "git-upload-pack"):
        marking_script(exec_path / helper, mark)
    monkeypatch.setenv("GIT_EXEC_PATH", str(exec_path))
    token = tmp_path / "token"
    token.write_text(http_git.token)
    creds = Credentials(token_file=token)
    rev = GitSource(http_git.url, "main", cache_dir, credentials=creds, allow_insecure=True).fetch()
    assert rev.sha == sha and not mark.exists()


def test_git_config_does_not_redirect_gitsyncs_own_settings(
    upstream: Upstream, tmp_path: Path, cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sha = upstream.commit({"a.yaml": APP})
    elsewhere = tmp_path / "elsewhere.config"
    monkeypatch.setenv("GIT_CONFIG", str(elsewhere))
    source = GitSource(f"file://{upstream.bare}", "main", cache_dir)
    assert source.fetch().sha == sha
    assert not elsewhere.exists()
    config = subprocess.run(
        ["git", "config", "--file", str(source.dir / ".git" / "config"), "--list"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "transfer.fsckobjects=true" in config and "core.logallrefupdates=false" in config


def test_no_variable_of_gitsyncs_environment_reaches_git_unless_allowed(
    tmp_path: Path, cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    planted = {
        "GIT_SSH_VARIANT": "simple",
        "GIT_SSH": "/tmp/ssh",
        "GIT_ASKPASS_OTHER": "x",
        "GIT_TRACE": "/tmp/trace",
        "GIT_CURL_VERBOSE": "1",
        "GIT_SSL_CAINFO": "/tmp/ca",
        "GIT_CONFIG_COUNT": "1",
        "GIT_CONFIG_KEY_0": "core.sshCommand",
        "GIT_CONFIG_VALUE_0": "/tmp/evil",
        "GIT_REPLACE_REF_BASE": "refs/evil/",
        "LD_PRELOAD": "/tmp/evil.so",
        "CURL_CA_BUNDLE": "/tmp/ca",
        "PAGER": "/tmp/evil",
    }
    for name, value in planted.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("https_proxy", "http://proxy.example:3128")
    env = GitSource("https://example.com/r.git", "main", cache_dir)._env
    leaked = {k: v for k, v in env.items() if planted.get(k) == v}
    assert leaked == {}
    assert env["https_proxy"] == "http://proxy.example:3128"  # curl's proxy variables pass
    assert env["PATH"] == os.environ["PATH"]
    assert env["GIT_CONFIG_KEY_0"] == "core.hooksPath"


def test_a_private_ca_is_trusted_through_the_flag_only(
    https_git: tuple[HttpGit, Path],
    upstream: Upstream,
    tmp_path: Path,
    cache_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server, cert = https_git
    upstream.commit({"a.yaml": APP})
    token = tmp_path / "token"
    token.write_text(server.token)
    # the environment's CA is not git's: only what gitsync is told to trust counts
    monkeypatch.setenv("GIT_SSL_CAINFO", str(cert))
    without = GitSource(server.url, "main", cache_dir, credentials=Credentials(token_file=token))
    with pytest.raises(SourceError, match=r"certificate|SSL|TLS"):
        without.fetch()
    creds = Credentials(token_file=token, ca_file=cert)
    rev = GitSource(server.url, "main", cache_dir, credentials=creds).fetch()
    assert (rev.dir / "a.yaml").read_text() == APP


def test_a_credential_helper_in_the_repository_config_is_never_run(
    http_git: HttpGit, upstream: Upstream, tmp_path: Path, cache_dir: Path
) -> None:
    """Second line of defence behind the cache checks: a helper that got into the
    repository's config (``credential.helper=!cmd``) runs nothing, even when the server
    asks for credentials gitsync does not have."""
    upstream.commit({"a.yaml": APP})
    token = tmp_path / "token"
    token.write_text(http_git.token)
    creds = Credentials(token_file=token)
    GitSource(http_git.url, "main", cache_dir, credentials=creds, allow_insecure=True).fetch()
    mark = tmp_path / "helper-ran"
    helper = marking_script(tmp_path / "helper.sh", mark)
    source = GitSource(http_git.url, "main", cache_dir, allow_insecure=True)  # no token now
    git_dir = source._dir / ".git"
    subprocess.run(
        ["git", "--git-dir", str(git_dir), "config", "credential.helper", f"!{helper}"],
        check=True,
        timeout=30,
    )
    upstream.commit({"b.yaml": APP})
    with pytest.raises(SourceError):
        source.fetch()  # the server wants a password: a helper would be asked for one
    assert not mark.exists()
