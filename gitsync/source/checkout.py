"""The Git source: ``ls-remote``, then a shallow fetch and checkout of exactly one commit.

Every git call is a child process with a timeout and the environment of
:mod:`gitsync.source.gitenv` (an allow-list, and the configuration that hardens git). The
cache is private (:mod:`gitsync.source.cache`): checked before every use, never trusted as
found. Callers see :class:`SourceError` (temporary: retried) or :class:`ConfigError`.
"""

from __future__ import annotations

import atexit
import hashlib
import logging
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from gitsync.errors import MAX_BODY, ConfigError, SourceError, VerificationError
from gitsync.source import gitenv, localcheckout, sparse
from gitsync.source.cache import check_private, private_dir, write_private_file
from gitsync.source.gitenv import NO_CREDENTIALS, Credentials
from gitsync.source.giturl import SCP_URL, check_url, redact_url
from gitsync.source.keyring import Verifier
from gitsync.source.verify import message, reject

log = logging.getLogger(__name__)

_COMMIT = re.compile(r"[0-9a-fA-F]{40}")
# a conservative subset of git-check-ref-format: never an option, never a revision expression
_REF = re.compile(r"(?!-)(?!/)(?!.*\.\.)(?!.*//)(?!.*@\{)[A-Za-z0-9._/+-]+(?<![./])(?<!\.lock)")
_FETCHED = "refs/gitsync/fetched"
#: where a pinned commit is fetched to: apart from the ref's, whose history may be deepened
_PINNED = "refs/gitsync/pinned"
#: how much history is deepened by, in turn, to find the last applied commit in
_DEEPEN = (20, 200, 2000)
_TIDY_EVERY = 25  # fetches between two `git gc`: old shallow commits pile up otherwise


@dataclass(frozen=True)
class CommitInfo:
    """What a notification says of a commit: its first line and its author."""

    sha: str
    subject: str
    author: str


@dataclass(frozen=True)
class Revision:
    """A checked-out tree: ``dir`` holds exactly commit ``sha`` of ``ref``."""

    ref: str
    sha: str
    dir: Path
    #: with --verify-commits: the signature found good, in words
    verified: str = ""
    #: files under the manifest path not checked out, as larger than a manifest may be:
    #: (path in the repository, its size, or None when the server did not send it)
    omitted: tuple[tuple[str, int | None], ...] = ()
    #: checked out as a pin (``fetch_commit``), not as what the ref names
    pinned: bool = False
    #: the files the checkout wrote under the manifest path, with their blob ids (None:
    #: not known without walking ``dir``)
    listing: sparse.Listing | None = field(default=None, compare=False, repr=False)

    def __str__(self) -> str:
        return f"{self.ref}@sha1:{self.sha}" if self.sha else self.ref


class Source(Protocol):
    def fetch(self, after: str = "", accept: str = "") -> Revision: ...

    def fetch_commit(self, sha: str) -> Revision: ...

    def remote_sha(self) -> str: ...

    def commit_info(self, sha: str) -> CommitInfo | None: ...


class LocalSource:
    """A plain directory (uncommitted files too), for ``gitsync diff`` and ``validate``."""

    def __init__(
        self,
        directory: Path,
        *,
        path: str = ".",
        timeout: float = 60.0,
        max_file_bytes: int = 1 << 20,
    ) -> None:
        self.directory = directory
        self.path = path
        self.timeout = timeout
        self.max_file_bytes = max_file_bytes
        #: the pinned commits read from the checkout's history, each written out once
        self._commits: dict[str, Revision] = {}
        self._scratch: Path | None = None

    def fetch(self, after: str = "", accept: str = "") -> Revision:
        if not self.directory.is_dir():
            raise SourceError(f"{self.directory} is not a directory")
        return Revision(ref="local", sha="", dir=self.directory.resolve())

    def fetch_commit(self, sha: str) -> Revision:
        """Commit ``sha``'s files, read from the history of the checkout the directory
        is in (never its work tree: a preview under a pin is of what was pinned); a
        :class:`ConfigError` saying what to run when the directory cannot give it."""
        if not _COMMIT.fullmatch(sha):
            raise ConfigError(f"pinned revision {sha!r} is not a full commit sha")
        sha = sha.lower()
        found = self._commits.get(sha)
        if found is not None:
            return found
        if self._scratch is None:
            self._scratch = Path(tempfile.mkdtemp(prefix="gitsync-commits-"))
            # removed at exit: a revision read from it may outlive this source
            atexit.register(shutil.rmtree, self._scratch, True)
        files = localcheckout.files_at(
            self.directory,
            sha,
            self.path,
            self._scratch / sha,
            max_file_bytes=self.max_file_bytes,
            timeout=self.timeout,
        )
        rev = Revision("local", sha, files.dir, omitted=files.omitted, pinned=True)
        self._commits[sha] = rev
        log.info("read %s from the checkout at %s", rev, self.directory)
        return rev

    def remote_sha(self) -> str:
        return ""

    def commit_info(self, sha: str) -> CommitInfo | None:
        return None  # files, not commits


def open_source(repo: str, ref: str, cache_dir: Path, **kw: Any) -> GitSource | LocalSource:
    """An existing local directory, or else a Git URL."""
    local = Path(repo).expanduser()
    if local.is_dir():
        if kw.get("verifier") is not None:
            # uncommitted files carry no signature: there is nothing to verify
            raise ConfigError(
                f"--verify-commits needs a Git URL, not the directory {repo} (file:// works)"
            )
        return LocalSource(local, path=kw.get("path", "."), timeout=kw.get("timeout", 60.0))
    if "://" not in repo and not SCP_URL.fullmatch(repo):
        if not local.exists():
            raise ConfigError(
                f"repository {redact_url(repo)!r} does not exist (no such directory, and "
                "not a Git URL)"
            )
        raise ConfigError(f"repository {redact_url(repo)!r} is neither a directory nor a URL")
    return GitSource(repo, ref, cache_dir, **kw)


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
        credentials: Credentials = NO_CREDENTIALS,
        timeout: float = 60.0,
        allow_insecure: bool = False,
        verifier: Verifier | None = None,
        path: str = ".",
        max_file_bytes: int = 1 << 20,
        max_checkout_bytes: int = sparse.MAX_CHECKOUT_BYTES,
    ) -> None:
        check_url(url, allow_insecure)
        if not _REF.fullmatch(ref):
            raise ConfigError(f"ref {ref!r} is not a valid branch, tag or commit name")
        self.url = url
        self.ref = ref
        self.timeout = timeout
        self.fetches = 0
        #: the manifest path: all the checkout writes (sparse), minus files over
        #: ``max_file_bytes``, which the fetch asks the server not to send
        self.path = path
        self.max_file_bytes = max_file_bytes
        self.max_checkout_bytes = max_checkout_bytes
        self._credentials = credentials
        self._cache_dir = cache_dir
        self._dir = cache_dir / hashlib.sha256(url.encode()).hexdigest()[:16]
        self._home = cache_dir / ".home"
        self._env = gitenv.environment(
            url, credentials, self._dir, self._home, timeout, allow_insecure
        )
        self._lock = threading.Lock()
        self._current: Revision | None = None
        self._verifier = verifier
        #: (commit, object) last refused by the verifier: not fetched again while it stays
        self._rejected: tuple[str, str] | None = None
        #: (last applied, commit, verdict) last found not to descend (or not known to)
        self._undescended: tuple[str, str, bool | None] | None = None

    @property
    def dir(self) -> Path:
        return self._dir

    def remote_sha(self) -> str:
        """The commit the ref names on the remote now (a commit ref costs no network)."""
        if _COMMIT.fullmatch(self.ref):
            return self.ref.lower()
        self._check_token_file()
        with self._lock:
            self._ensure_repo()
            return self._ls_remote()[0]

    def fetch(self, after: str = "", accept: str = "") -> Revision:
        """Make ``dir`` hold the ref's current commit; fetch only when it moved.

        With a verifier, a commit that does not descend from ``after`` (the commit last
        applied; "" when none is known) is refused as ``not-a-descendant``, unless it is
        ``accept`` or the verifier allows non-fast-forwards: a signature says who made a
        commit, not that the ref may go back to it."""
        self._check_token_file()
        with self._lock:
            self._ensure_repo()
            if _COMMIT.fullmatch(self.ref):
                sha = remote_ref = obj = self.ref.lower()
            else:
                sha, remote_ref, obj = self._ls_remote()
            current = self._current
            if (
                current is not None
                and not current.pinned  # verified as a pin, not as the ref's commit
                and current.sha == sha
                and after.lower() in ("", sha)
            ):
                return current  # unchanged (and the commit last applied, when one is given)
            stale = self._head() != sha or (self._verifier is not None and not self._has(obj))
            if stale and self._rejected != (sha, obj):
                sha, obj = self._fetch(remote_ref)
            # before the checkout, on the very objects (named by their hashes) it reads: a
            # refused commit is never checked out, the previous tree stays
            verified = self._verify(remote_ref, sha, obj)
            verified += self._check_descent(remote_ref, sha, obj, after, accept)
            planned = self._sparse(sha)
            self._run("checkout", "--quiet", "--force", "--detach", sha)
            self._run("clean", "-ffdx", "--quiet")
            self._current = Revision(
                ref=self.ref, sha=sha, dir=self._dir, verified=verified,
                omitted=planned.omitted, listing=planned.listing,
            )  # fmt: skip
            log.info("checked out %s from %s", self._current, self._where())
            return self._current

    def fetch_commit(self, sha: str) -> Revision:
        """Make ``dir`` hold commit ``sha``, a pin, whatever the ref names now.

        With a verifier the commit itself must carry a good signature by a trusted key
        (with ``--verify tag`` too: a pin names a commit, so the commit is what must be
        signed). It need not descend from the commit last applied: a pin goes back on
        purpose, set by someone who may write to the cluster, which a pusher without a key
        cannot do; the ref's own commits are still held to descent (see ``fetch``)."""
        if not _COMMIT.fullmatch(sha):
            raise ConfigError(f"pinned revision {sha!r} is not a full commit sha")
        sha = sha.lower()
        self._check_token_file()
        with self._lock:
            self._ensure_repo()
            current = self._current
            if current is not None and current.pinned and current.sha == sha:
                return current  # the pin's commit is checked out, and was verified
            self._fetch_pinned(sha)
            verified = ""
            if self._verifier is not None:
                verifier = replace(self._verifier, mode="commit")
                try:
                    verified = verifier.check(self._call, self.ref, sha, sha, sha, tip=False)
                except VerificationError as e:
                    log.error("pinned %s", e)
                    raise
            planned = self._sparse(sha)
            self._run("checkout", "--quiet", "--force", "--detach", sha)
            self._run("clean", "-ffdx", "--quiet")
            self._current = Revision(
                ref=self.ref, sha=sha, dir=self._dir, verified=verified,
                omitted=planned.omitted, listing=planned.listing, pinned=True,
            )  # fmt: skip
            log.info("checked out %s (pinned) from %s", self._current, self._where())
            return self._current

    def resolve(self, rev: str) -> str:
        """The commit ``rev`` names on the remote: a full sha as it is (``fetch_commit``
        says whether the remote has it), else a tag or a branch, read with ``ls-remote``
        (an annotated tag peeled to its commit); :class:`ConfigError` for anything else, or
        :class:`SourceError` when the remote has no such name."""
        if _COMMIT.fullmatch(rev):
            return rev.lower()
        if re.fullmatch(r"[0-9a-fA-F]{4,39}", rev):
            raise ConfigError(
                f"revision {rev!r} looks like a short sha: give the full 40 hex digits"
            )
        if not _REF.fullmatch(rev):
            raise ConfigError(f"revision {rev!r} is not a valid commit, tag or branch name")
        self._check_token_file()
        with self._lock:
            self._ensure_repo()
            return self._ls_remote(rev)[0]

    # --- git calls -----------------------------------------------------------------------

    def _ls_remote(self, ref: str = "") -> tuple[str, str, str]:
        """(commit sha, remote ref name, the object it names: a tag object for an annotated
        tag, else the commit) of ``ref`` (default: the source's); a branch wins over a tag,
        like ``clone --branch``."""
        ref = ref or self.ref
        if ref.startswith("refs/") or ref == "HEAD":
            names = [ref]
        else:
            names = [f"refs/heads/{ref}", f"refs/tags/{ref}"]
        patterns = [p for name in names for p in (name, f"{name}^{{}}")]
        out = self._run("ls-remote", "--", self.url, *patterns)
        found: dict[str, str] = {}
        for line in out.splitlines():
            sha, _, name = line.partition("\t")
            found[name] = sha
        for name in names:
            # an annotated tag: the peeled ^{} entry names the commit, the plain one the tag
            peeled = found.get(f"{name}^{{}}") or found.get(name)
            if peeled:
                return peeled, name, found.get(name) or peeled
        raise SourceError(f"ref {ref!r} not found in {redact_url(self.url)}")

    def _fetch_pinned(self, sha: str) -> None:
        """Fetch commit ``sha`` by its hash (one commit, as ``_fetch``); a commit the
        remote does not have is a :class:`SourceError` that says so."""
        self.fetches += 1
        code, _, err = self._call(
            ["fetch", "--quiet", "--depth=1", "--no-tags", "--no-recurse-submodules",
             "--no-auto-gc", f"--filter=blob:limit={self.max_file_bytes}", "--", self.url,
             f"+{sha}:{_PINNED}"]
        )  # fmt: skip
        if code == 0:
            return
        if "not our ref" in err or "no such remote ref" in err or "unadvertised object" in err:
            raise SourceError(f"commit {sha} not found in {redact_url(self.url)}")
        raise SourceError(self._describe("fetch", err))

    def _fetch(self, remote_ref: str) -> tuple[str, str]:
        """(commit, the object the ref names) as fetched."""
        self.fetches += 1
        # --depth=1: one commit, whatever the history; "+": a force-pushed ref still moves
        self._run(
            "fetch",
            "--quiet",
            "--depth=1",
            "--no-tags",
            "--no-recurse-submodules",
            "--no-auto-gc",
            # blobs larger than a manifest may be stay on the server (a server that does
            # not allow filters sends them, compressed: _sparse keeps them out of the tree)
            f"--filter=blob:limit={self.max_file_bytes}",
            "--",
            self.url,
            f"+{remote_ref}:{_FETCHED}",
        )
        sha = self._run("rev-parse", "--verify", f"{_FETCHED}^{{commit}}")
        obj = self._run("rev-parse", "--verify", _FETCHED)
        if self.fetches % _TIDY_EVERY == 0:
            try:
                self._run("gc", "--quiet", "--prune=now")
            except SourceError as e:  # housekeeping only: the checkout is still good
                log.warning("git gc in %s failed: %s", self._dir, e)
        return sha, obj

    def _sparse(self, sha: str) -> sparse.Plan:
        """Make the checkout of ``sha`` write the manifest path alone, minus its files
        over the size limit (named in the plan returned); a :class:`SourceError` when what is
        left is more than :data:`sparse.MAX_CHECKOUT_BYTES`. Reads only objects the cache
        holds: a blob the server left out is never fetched."""
        tree = sparse.parse_tree(self._run("ls-tree", "-r", "-z", "--full-tree", sha))
        code, out, err = self._call(
            [
                "cat-file",
                "--batch-all-objects",
                "--batch-check=%(objectname) %(objectsize)",
            ]
        )
        if code != 0:
            raise SourceError(self._describe("cat-file", err))
        planned = sparse.plan(
            tree,
            sparse.parse_sizes(out),
            self.path,
            max_file_bytes=self.max_file_bytes,
            max_total_bytes=self.max_checkout_bytes,
        )
        info = self._dir / ".git" / "info"
        try:
            info.mkdir(mode=0o700, exist_ok=True)
        except OSError as e:
            raise SourceError(f"cache {info}: {e.strerror}") from None
        check_private(info, directory=True)
        write_private_file(info / "sparse-checkout", planned.patterns)
        self._run("config", "core.sparseCheckout", "true")
        return planned

    def _has(self, obj: str) -> bool:
        return self._call(["cat-file", "-e", obj])[0] == 0

    def _verify(self, remote_ref: str, sha: str, obj: str) -> str:
        if self._verifier is None:
            return ""
        try:
            verified = self._verifier.check(self._call, self.ref, remote_ref, sha, obj)
        except VerificationError as e:
            self._rejected = (sha, obj)
            log.error("%s", e)
            raise
        self._rejected = None
        log.info("%s", verified)
        return verified

    def _check_descent(self, remote_ref: str, sha: str, obj: str, after: str, accept: str) -> str:
        """ "" when ``sha`` descends from ``after`` (or nothing is to be checked), the words
        of an accepted exception, else :class:`VerificationError` (``not-a-descendant``)."""
        if self._verifier is None or not _COMMIT.fullmatch(after) or after.lower() == sha:
            return ""
        after = after.lower()
        how = ""
        if sha == accept.lower():
            how = "accepted once (annotation)"
        elif self._verifier.allow_non_fast_forward:
            how = "accepted by --allow-non-fast-forward"
        if how:
            # said whether or not it descends: the one who allowed it is to know
            words = f"; not checked to descend from {after}, the last applied: {how}"
            log.warning("commit %s of %s%s", sha, self.ref, words)
            return words
        refused = self._undescended
        if refused is not None and refused[:2] == (after, sha):
            descends: bool | None = refused[2]  # judged already: not deepened again each poll
        else:
            descends = self._descends(remote_ref, after, sha)
        if descends:
            return ""
        self._undescended = (after, sha, descends)
        why = (
            f"it does not descend from commit {after}, the last applied (a rewind or a jump"
            " sideways)"
            if descends is False
            else f"cannot tell whether it descends from commit {after}, the last applied,"
            f" within {sum(_DEEPEN)} commits of history"
        )
        self._rejected = (sha, obj)
        error = VerificationError(
            message(
                "commit",
                sha,
                self.ref,
                reject("not-a-descendant", f"{why}; to apply it, see --allow-non-fast-forward"),
            ),
            reason="not-a-descendant",
            sha=sha,
        )
        log.error("%s", error)
        raise error

    def _descends(self, remote_ref: str, old: str, new: str) -> bool | None:
        """Whether commit ``new`` descends from ``old``; None when it cannot be told.

        The fetch is shallow (one commit), so the history of ``new`` is deepened, a few
        times and by more each time, until ``old`` is in it, or the history ends (no: a
        rewind or a jump sideways), or the bound is met (cannot tell: refused, never
        assumed). ``old`` need not be here: were it in the history, the deepening brings it.
        """
        count = self._count(new)
        for step in (0, *_DEEPEN):
            if step:
                # commits and trees alone: ancestry needs no file, and a large blob of an
                # old commit must not reach the cache this way either
                self._run("fetch", "--quiet", f"--deepen={step}", "--no-tags",
                          "--no-recurse-submodules", "--no-auto-gc", "--filter=blob:none",
                          "--", self.url, f"+{remote_ref}:{_FETCHED}")  # fmt: skip
                deeper = self._count(new)
                if deeper == count:
                    return False  # the whole history is here, and old is not in it
                count = deeper
            if self._call(["merge-base", "--is-ancestor", old, new])[0] == 0:
                return True
        return None

    def commit_info(self, sha: str) -> CommitInfo | None:
        """Subject and author of ``sha`` in the cache repository (None: not there)."""
        if not re.fullmatch(r"[0-9a-f]{40}|[0-9a-f]{64}", sha):
            return None  # not an object name: nothing for git to read as an option
        try:
            out = self._run("show", "--no-patch", "--format=%s%x00%an", sha)
        except SourceError as e:
            log.debug("no commit info for %s: %s", sha, e)
            return None
        subject, _, author = out.partition("\0")
        return CommitInfo(sha, subject, author)

    def _count(self, commit: str) -> int:
        return int(self._run("rev-list", "--count", commit))

    def _check_token_file(self) -> None:
        # say so plainly, rather than through git's "unable to read askpass response"
        token_file = self._credentials.token_file
        if token_file is not None and not os.access(token_file, os.R_OK):
            raise SourceError(f"token file {token_file} cannot be read")

    def _head(self) -> str:
        try:
            return self._run("rev-parse", "--verify", "--quiet", "HEAD^{commit}")
        except SourceError:
            return ""  # a fresh repository has no HEAD yet

    def _run(self, command: str, *args: str) -> str:
        """One git call in the cache repository; its output, or :class:`SourceError`."""
        code, out, err = self._call([command, *args])
        if code != 0:
            raise SourceError(self._describe(command, err))
        return out.strip()

    def _call(
        self,
        args: Sequence[str],
        env: Mapping[str, str] | None = None,
        config: Sequence[tuple[str, str]] = (),
    ) -> tuple[int, str, str]:
        """One git call in the cache repository with our environment and timeout, plus
        ``env`` and ``config`` (the verifier's GNUPGHOME and gpg settings, for that call
        only): (exit code, stdout, stderr).

        A child process of its own session, so that a timeout kills git and its helpers
        (``git-remote-https``, ``ssh``, ``gpg``) together; umask 077, so that nothing git
        writes is open to other users (and the next use's checks pass).
        """
        command = args[0]
        full = {**self._env, **(env or {})}
        if config:
            gitenv.add_config(full, config)
        try:
            proc = subprocess.Popen(
                ["git", *args],
                cwd=self._dir,
                env=full,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
                umask=0o077,
            )
        except OSError as e:
            raise SourceError(f"git {command} {self._where()}: {e.strerror}") from None
        try:
            out, err = proc.communicate(timeout=self.timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            raise SourceError(
                f"git {command} {self._where()}: timed out after {self.timeout:g}s"
            ) from None
        return proc.returncode, out.decode(errors="replace"), err.decode(errors="replace")

    def _describe(self, command: str, stderr: str) -> str:
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

    def _ensure_repo(self) -> None:
        """Check every level of the cache git will read, then make sure there is a
        repository; a missing or broken one (no HEAD) is started over. Everything is
        checked before anything is made: a refused cache is left exactly as found."""
        private_dir(self._cache_dir)
        git_dir = self._dir / ".git"
        usable = check_private(self._dir, directory=True) and check_private(git_dir, directory=True)
        if usable:
            check_private(git_dir / "config", directory=False)
            check_private(git_dir / "hooks", directory=True)
            usable = check_private(git_dir / "HEAD", directory=False)
        askpass = self._home / "askpass.sh"
        has_askpass = check_private(self._home, directory=True) and check_private(
            askpass, directory=False
        )
        private_dir(self._home)
        # written into the directory just checked; one planted there was refused above
        if not has_askpass and self._credentials.token_file:
            write_private_file(askpass, gitenv.ASKPASS, 0o700)
        if not usable:
            self._reset_cache()

    def _reset_cache(self) -> None:
        """Start over with an empty repository (first use, or a cache found broken)."""
        try:
            # rmtree removes links, never what they point to
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir.mkdir(mode=0o700)
        except OSError as e:
            raise SourceError(f"cache {self._dir}: {e.strerror}") from None
        # --template=: no sample hooks or info files copied from the host's git install
        self._run("init", "--quiet", "--template=")
        for key, value in gitenv.REPO_CONFIG:
            self._run("config", key, value)
        self._current = None
