"""The Git source: ``ls-remote``, then a shallow fetch and checkout of exactly one commit.

All git runs through GitPython's command wrapper, each call with a timeout and an
environment built here, so that neither the user's git configuration nor anything in the
repository can add options, helpers or protocols. GitPython exceptions stop at this module:
callers see :class:`SourceError` (temporary: retried) or :class:`ConfigError`.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import shlex
import shutil
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit

import git

from gitsync.errors import MAX_BODY, ConfigError, SourceError

log = logging.getLogger(__name__)

_SECURE_SCHEMES = ("https", "ssh", "file")
_INSECURE_SCHEMES = ("http", "git")  # no authentication of the server, no encryption
_SCP_URL = re.compile(r"[A-Za-z0-9._-]+@[A-Za-z0-9][A-Za-z0-9.-]*:(?!//)\S+")
_COMMIT = re.compile(r"[0-9a-fA-F]{40}")
# a conservative subset of git-check-ref-format: never an option, never a revision expression
_REF = re.compile(r"(?!-)(?!/)(?!.*\.\.)(?!.*//)(?!.*@\{)[A-Za-z0-9._/+-]+(?<![./])(?<!\.lock)")
_URL_USERINFO = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://)[^/@\s]+@")
_FETCHED = "refs/gitsync/fetched"
_TIDY_EVERY = 25  # fetches between two `git gc`: old shallow commits pile up otherwise

# git reads these from the repository's own config; ours is written here and nowhere else
_REPO_CONFIG = (
    ("core.logAllRefUpdates", "false"),  # no reflog: replaced commits become garbage
    ("gc.autoDetach", "false"),  # a detached gc would outlive the call (a leaked process)
    ("maintenance.autoDetach", "false"),
    ("transfer.fsckObjects", "true"),  # refuse corrupt or malicious objects on fetch
    ("protocol.version", "2"),  # v2 lets us ask for exactly the refs we want
)

_ASKPASS = """#!/bin/sh
# git asks "Username for 'https://host': " then "Password for 'https://user@host': ". The
# token is read from its file on every call, so it is never in an argument, a URL or git's
# config; and it is given to the configured host only, never to the target of a redirect.
case "$1" in
  "Username for '"*"://$GITSYNC_GIT_HOST': ") printf '%s\\n' "$GITSYNC_GIT_USERNAME" ;;
  "Password for '"*"@$GITSYNC_GIT_HOST': ") cat -- "$GITSYNC_GIT_TOKEN_FILE" ;;
  *) exit 1 ;;
esac
"""


@dataclass(frozen=True)
class Revision:
    """A checked-out tree: ``dir`` holds exactly commit ``sha`` of ``ref``."""

    ref: str
    sha: str
    dir: Path

    def __str__(self) -> str:
        return f"{self.ref}@sha1:{self.sha}" if self.sha else self.ref


@dataclass(frozen=True)
class Credentials:
    token_file: Path | None = None
    username: str = "git"
    ssh_key_file: Path | None = None
    known_hosts_file: Path | None = None


class Source(Protocol):
    def fetch(self) -> Revision: ...

    def remote_sha(self) -> str: ...


class LocalSource:
    """A plain directory (uncommitted files too), for ``gitsync diff`` and ``validate``."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def fetch(self) -> Revision:
        if not self.directory.is_dir():
            raise SourceError(f"{self.directory} is not a directory")
        return Revision(ref="local", sha="", dir=self.directory.resolve())

    def remote_sha(self) -> str:
        return ""


def open_source(repo: str, ref: str, cache_dir: Path, **kw: Any) -> GitSource | LocalSource:
    """An existing local directory, or else a Git URL."""
    local = Path(repo).expanduser()
    if local.is_dir():
        return LocalSource(local)
    if "://" not in repo and not _SCP_URL.fullmatch(repo):
        raise ConfigError(f"repository {redact_url(repo)!r} is neither a directory nor a URL")
    return GitSource(repo, ref, cache_dir, **kw)


def redact_url(text: str) -> str:
    """Hide ``user:password@`` in every URL of ``text``."""
    return _URL_USERINFO.sub(r"\1***@", text)


class GitSource:
    """One remote repository and ref, fetched into ``cache_dir/<hash of url>``.

    Thread-safe; ``fetches`` counts network fetches (an unchanged ref costs one
    ``ls-remote`` and nothing else).
    """

    def __init__(
        self,
        url: str,
        ref: str,
        cache_dir: Path,
        *,
        credentials: Credentials = Credentials(),
        timeout: float = 60.0,
        allow_insecure: bool = False,
    ) -> None:
        _check_url(url, allow_insecure)
        if not _REF.fullmatch(ref):
            raise ConfigError(f"ref {ref!r} is not a valid branch, tag or commit name")
        self.url = url
        self.ref = ref
        self.timeout = timeout
        self.fetches = 0
        self._credentials = credentials
        self._cache_dir = cache_dir
        self._dir = cache_dir / hashlib.sha256(url.encode()).hexdigest()[:16]
        self._home = cache_dir / ".home"
        self._env = self._environment(allow_insecure)
        self._lock = threading.Lock()
        self._current: Revision | None = None

    @property
    def dir(self) -> Path:
        return self._dir

    def remote_sha(self) -> str:
        """The commit the ref names on the remote now (a commit ref costs no network)."""
        if _COMMIT.fullmatch(self.ref):
            return self.ref.lower()
        self._check_token_file()
        with self._lock:
            return self._ls_remote()[0]

    def fetch(self) -> Revision:
        """Make ``dir`` hold the ref's current commit; fetch only when it moved."""
        self._check_token_file()
        with self._lock:
            if _COMMIT.fullmatch(self.ref):
                sha, remote_ref = self.ref.lower(), self.ref.lower()
            else:
                sha, remote_ref = self._ls_remote()
            if self._current is not None and self._current.sha == sha:
                return self._current
            with self._repo() as repo:
                if self._head(repo) != sha:
                    sha = self._fetch(repo, remote_ref)
                self._run(repo.git, "checkout", "--quiet", "--force", "--detach", sha)
                self._run(repo.git, "clean", "-ffdx", "--quiet")
            self._current = Revision(ref=self.ref, sha=sha, dir=self._dir)
            log.info("checked out %s from %s", self._current, self.url)
            return self._current

    # --- git calls -----------------------------------------------------------------------

    def _ls_remote(self) -> tuple[str, str]:
        """(commit sha, remote ref name); a branch wins over a tag, like ``clone --branch``."""
        if self.ref.startswith("refs/") or self.ref == "HEAD":
            names = [self.ref]
        else:
            names = [f"refs/heads/{self.ref}", f"refs/tags/{self.ref}"]
        patterns = [p for name in names for p in (name, f"{name}^{{}}")]
        self._ensure_repo()
        with self._repo() as repo:
            out = self._run(repo.git, "ls-remote", "--", self.url, *patterns)
        found: dict[str, str] = {}
        for line in out.splitlines():
            sha, _, name = line.partition("\t")
            found[name] = sha
        for name in names:
            # an annotated tag: the peeled ^{} entry names the commit, the plain one the tag
            peeled = found.get(f"{name}^{{}}") or found.get(name)
            if peeled:
                return peeled, name
        raise SourceError(f"ref {self.ref!r} not found in {redact_url(self.url)}")

    def _fetch(self, repo: git.Repo, remote_ref: str) -> str:
        self.fetches += 1
        # --depth=1: one commit, whatever the history; "+": a force-pushed ref still moves
        self._run(
            repo.git,
            "fetch",
            "--quiet",
            "--depth=1",
            "--no-tags",
            "--no-recurse-submodules",
            "--no-auto-gc",
            "--",
            self.url,
            f"+{remote_ref}:{_FETCHED}",
        )
        sha = self._run(repo.git, "rev-parse", "--verify", f"{_FETCHED}^{{commit}}").strip()
        if self.fetches % _TIDY_EVERY == 0:
            try:
                self._run(repo.git, "gc", "--quiet", "--prune=now")
            except SourceError as e:  # housekeeping only: the checkout is still good
                log.warning("git gc in %s failed: %s", self._dir, e)
        return sha

    def _check_token_file(self) -> None:
        # say so plainly, rather than through git's "unable to read askpass response"
        token_file = self._credentials.token_file
        if token_file is not None and not os.access(token_file, os.R_OK):
            raise SourceError(f"token file {token_file} cannot be read")

    def _head(self, repo: git.Repo) -> str:
        try:
            return self._run(repo.git, "rev-parse", "--verify", "--quiet", "HEAD^{commit}")
        except SourceError:
            return ""  # a fresh repository has no HEAD yet

    def _run(self, g: git.Git, command: str, *args: str) -> str:
        """One git call with our environment and timeout; failures become SourceError."""
        try:
            out = getattr(g, command.replace("-", "_"))(
                *args, env=self._env, kill_after_timeout=self.timeout
            )
            return str(out).strip()
        except git.GitCommandError as e:
            error = SourceError(self._describe(command, e))
        except (git.GitError, OSError) as e:
            error = SourceError(f"git {command} {self._where()}: {type(e).__name__}")
        # raised outside the handler: no GitPython exception rides along as __context__
        raise error

    def _describe(self, command: str, e: git.GitCommandError) -> str:
        if "did not complete in" in str(e.stderr):  # GitPython's words after a kill
            return f"git {command} {self._where()}: timed out after {self.timeout:g}s"
        # GitPython formats it as "\n  stderr: '<text>'"
        stderr = str(e.stderr).strip().removeprefix("stderr: '").removesuffix("'")
        stderr = "; ".join(line.strip() for line in stderr.splitlines() if line.strip())
        return f"git {command} {self._where()}: {self._redact(stderr)[-MAX_BODY:]}"

    def _where(self) -> str:
        return redact_url(self.url)

    def _redact(self, text: str) -> str:
        text = redact_url(text)
        token_file = self._credentials.token_file
        if token_file is not None:
            try:
                token = token_file.read_text().strip()
            except OSError:
                token = ""
            if token:
                text = text.replace(token, "***")
        return text

    # --- the cache repository ------------------------------------------------------------

    @contextmanager
    def _repo(self) -> Iterator[git.Repo]:
        """The cache repository for one cycle; closing it stops GitPython's helper
        processes (``git cat-file --batch``), which a daemon would otherwise pile up."""
        try:
            repo = git.Repo(self._dir)
        except (git.InvalidGitRepositoryError, git.NoSuchPathError):
            self._reset_cache()
            repo = git.Repo(self._dir)
        try:
            yield repo
        finally:
            repo.close()  # this is Git.clear_cache(), which kills the cat-file helpers

    def _ensure_repo(self) -> None:
        if (self._dir / ".git" / "HEAD").is_file():
            return
        self._reset_cache()

    def _reset_cache(self) -> None:
        """Start over with an empty repository (first use, or a cache found broken)."""
        try:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir.mkdir(parents=True, mode=0o700)
            self._home.mkdir(parents=True, mode=0o700, exist_ok=True)
            askpass = self._home / "askpass.sh"
            askpass.write_text(_ASKPASS)
            askpass.chmod(0o700)
        except OSError as e:
            raise SourceError(f"cache {self._dir}: {e.strerror}") from None
        g = git.Git(self._dir)
        # --template=: no sample hooks or info files copied from the host's git install
        self._run(g, "init", "--quiet", "--template=")
        for key, value in _REPO_CONFIG:
            self._run(g, "config", key, value)
        self._current = None

    def _environment(self, allow_insecure: bool) -> dict[str, str]:
        git_dir = str(self._dir / ".git")
        protocols = [*_SECURE_SCHEMES, *(_INSECURE_SCHEMES if allow_insecure else ())]
        creds = self._credentials
        env = {
            "GIT_TERMINAL_PROMPT": "0",  # never wait for a human
            "GIT_ALLOW_PROTOCOL": ":".join(protocols),  # no ext::, fd::, or insecure ones
            # the user's and the system's git config must not add helpers, insteadOf
            # rewrites or an sshCommand: HOME is ours and empty, and no global file is read
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_CONFIG_COUNT": "0",
            "GIT_CONFIG_PARAMETERS": "",
            "HOME": str(self._home),
            "XDG_CONFIG_HOME": str(self._home / ".config"),
            # GitPython starts from os.environ; git hooks export these (a gitsync run from a
            # pre-push hook would otherwise write into the user's own repository)
            "GIT_DIR": git_dir,
            "GIT_WORK_TREE": str(self._dir),
            "GIT_COMMON_DIR": git_dir,
            "GIT_INDEX_FILE": f"{git_dir}/index",
            "GIT_OBJECT_DIRECTORY": f"{git_dir}/objects",
            "GIT_ALTERNATE_OBJECT_DIRECTORIES": "",
            "GIT_NAMESPACE": "",
            "GIT_TRACE_REDACT": "1",
            "GIT_SSH_COMMAND": _ssh_command(creds, self.timeout),
            # without a token, any credential prompt fails at once ("false" prints nothing)
            "GIT_ASKPASS": str(self._home / "askpass.sh") if creds.token_file else "false",
            "SSH_ASKPASS": "false",
        }
        if creds.token_file is not None:
            # absolute, not resolved: a mounted Secret is a symlink into a timestamped
            # directory that Kubernetes replaces when the Secret rotates
            env["GITSYNC_GIT_TOKEN_FILE"] = str(creds.token_file.absolute())
            env["GITSYNC_GIT_USERNAME"] = creds.username
            env["GITSYNC_GIT_HOST"] = urlsplit(self.url).netloc
        return env


def _ssh_command(creds: Credentials, timeout: float) -> str:
    # BatchMode: no prompts; StrictHostKeyChecking=yes: an unknown host key is an error,
    # never silently trusted
    args = ["ssh", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes"]
    args += ["-o", f"ConnectTimeout={max(1, int(timeout))}"]
    if creds.ssh_key_file is not None:
        args += ["-i", str(creds.ssh_key_file.absolute()), "-o", "IdentitiesOnly=yes"]
    if creds.known_hosts_file is not None:
        args += ["-o", f"UserKnownHostsFile={creds.known_hosts_file.absolute()}"]
    return shlex.join(args)


def _check_url(url: str, allow_insecure: bool) -> None:
    """Refuse what git must never be handed: embedded secrets, odd transports, options."""
    if not url or url.startswith("-") or any(c.isspace() or ord(c) < 32 for c in url):
        raise ConfigError("the repository URL is empty or contains spaces or control characters")
    if _SCP_URL.fullmatch(url):
        return  # user@host:path, i.e. ssh
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if parts.password is not None or (scheme in ("https", "http") and parts.username):
        # the message must not echo the URL: it holds the secret
        raise ConfigError(
            "the repository URL must not contain credentials; give a token file instead"
        )
    if scheme in _INSECURE_SCHEMES and not allow_insecure:
        raise ConfigError(
            f"{scheme}:// is neither authenticated nor encrypted; allow it explicitly"
            " (--allow-insecure-git) to use it"
        )
    if scheme not in (*_SECURE_SCHEMES, *_INSECURE_SCHEMES) or "::" in url.split("/", 1)[0]:
        raise ConfigError(f"unsupported repository URL scheme {scheme!r}")
    if scheme != "file" and not parts.hostname:
        raise ConfigError(f"the repository URL {url!r} has no host")
    if (parts.hostname or "").startswith("-"):  # ssh://-oProxyCommand=...: not a host
        raise ConfigError(f"the repository URL {url!r} has an invalid host")
