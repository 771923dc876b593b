"""What a local checkout says of the repository it is a checkout of: its remote and
branch, so that ``gitsync diff --repo .`` names the instance a daemon syncing that
remote's URL has (design §13), rather than an instance named after the directory; and
the files of one of its commits (:func:`files_at`), so that a preview under a pin
(``gitsync rollback --to``) reads what was pinned, not the work tree.

Only reads the repository: ``git rev-parse``, ``git symbolic-ref``, ``git config --get``,
``git ls-tree`` and ``git cat-file`` run no hook, helper or filter (blobs are read raw),
and the configuration that could (``core.fsmonitor``, hooks) is overridden on the
command line, as for every git call of gitsync's. A commit's files are written to a
directory of the caller's, never into the checkout.
"""

from __future__ import annotations

import os
import posixpath
import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path

from gitsync.errors import ConfigError, SourceError, printable, quote
from gitsync.source import gitenv, sparse
from gitsync.source.giturl import SCP_URL


@dataclass(frozen=True)
class Checkout:
    #: the top of the work tree
    top: Path
    #: the directory given, relative to ``top`` ("." at the top)
    prefix: str
    #: the name of the remote the checkout follows, "" when it has none
    remote: str
    #: that remote's URL; a local path is made absolute, as a ``file://`` URL
    url: str
    #: the branch it follows on that remote, else the branch checked out ("": detached)
    branch: str


def describe(directory: Path, timeout: float = 10.0) -> Checkout | None:
    """The checkout ``directory`` is in, or None when it is in none (or git cannot
    read it: not installed, or a repository of another user that git refuses)."""
    env = _environment()
    top_prefix = _git(directory, env, timeout, "rev-parse", "--show-toplevel", "--show-prefix")
    if top_prefix is None:
        return None
    lines = top_prefix.split("\n")
    if not lines or not lines[0]:
        return None
    top = Path(lines[0])
    prefix = posixpath.normpath(lines[1].rstrip("/")) if len(lines) > 1 and lines[1] else "."
    head = _git(directory, env, timeout, "symbolic-ref", "--quiet", "--short", "HEAD") or ""
    remote, branch = "", head
    if head:
        upstream = _config(directory, env, timeout, f"branch.{head}.remote")
        merge = _config(directory, env, timeout, f"branch.{head}.merge")
        if upstream and upstream != "." and merge:
            remote, branch = upstream, merge.removeprefix("refs/heads/")
    if not remote:
        names = (_git(directory, env, timeout, "remote") or "").split()
        # without an upstream: origin, as git clone names it, or the only remote
        remote = "origin" if "origin" in names else names[0] if len(names) == 1 else ""
    url = _config(directory, env, timeout, f"remote.{remote}.url") if remote else ""
    if not url:
        remote = ""
    elif "://" not in url and not SCP_URL.fullmatch(url):
        # a clone of a local repository: its path, as git reads it from the top
        url = "file://" + os.path.normpath(top / url)
    return Checkout(top=top, prefix=prefix, remote=remote, url=url or "", branch=branch)


def has_ref(checkout: Checkout, ref: str, timeout: float = 10.0) -> bool:
    """Whether ``checkout`` has ``ref`` (a branch, a tag, ``refs/…`` or a commit) of its
    own or as a branch of its remote, as a daemon syncing that remote would find it."""
    if not ref or ref.startswith("-"):  # never an option to git
        return False
    env = _environment()
    candidates = [ref]
    if checkout.remote:
        candidates.append(f"refs/remotes/{checkout.remote}/{ref.removeprefix('refs/heads/')}")
    return any(
        _git(checkout.top, env, timeout, "rev-parse", "--verify", "--quiet", f"{name}^{{commit}}")
        is not None
        for name in candidates
    )


def _environment() -> dict[str, str]:
    # HOME too: the user's own checkout, read as their git reads it (safe.directory)
    allowed = (*gitenv.ENV_ALLOWED, "HOME")
    env = {name: os.environ[name] for name in allowed if name in os.environ}
    env |= {"LC_ALL": "C", "GIT_TERMINAL_PROMPT": "0", "GIT_OPTIONAL_LOCKS": "0"}
    env["GIT_CONFIG_COUNT"] = "0"
    gitenv.add_config(env, gitenv.FORCED_CONFIG)
    return env


def _config(directory: Path, env: dict[str, str], timeout: float, key: str) -> str:
    return _git(directory, env, timeout, "config", "--get", key) or ""


def _git(directory: Path, env: dict[str, str], timeout: float, *args: str) -> str | None:
    try:
        proc = subprocess.run(
            ["git", *args],
            cwd=directory,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=timeout,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if proc.returncode != 0:
        return None
    return proc.stdout.decode(errors="replace").strip("\n")


@dataclass(frozen=True)
class Files:
    """A commit's files under the manifest path, written out."""

    #: stands for the directory given, at the commit
    dir: Path
    #: files left out as larger than a manifest may be (path under ``dir``, size)
    omitted: tuple[tuple[str, int | None], ...]


def files_at(
    directory: Path, sha: str, path: str, dest: Path, *, max_file_bytes: int, timeout: float
) -> Files:
    """The files under ``path`` (relative to ``directory``, as ``--path`` is) of commit
    ``sha`` of the checkout ``directory`` is in, written under ``dest`` (which must not
    exist); a :class:`ConfigError` saying what to run when ``directory`` is no checkout,
    or one that does not hold the commit. Files larger than ``max_file_bytes`` are
    left out and named, as a fetch leaves them out."""
    checkout = describe(directory, timeout)
    if checkout is None:
        raise ConfigError(
            f"pinned to commit {sha}, which the directory {quote(str(directory))} cannot give"
            " (it is not a Git checkout): run this command again with --repo set to the"
            " repository's Git URL"
        )
    env = _environment()
    # a partial clone would otherwise fetch a missing object from its remote unasked
    env["GIT_NO_LAZY_FETCH"] = "1"
    held = _git(directory, env, timeout, "rev-parse", "--verify", "--quiet", f"{sha}^{{commit}}")
    if held is None:
        remote = shlex.quote(checkout.remote) if checkout.remote else "<the repository's Git URL>"
        fetch = f"git -C {shlex.quote(str(directory))} fetch {remote} {sha}"
        raise ConfigError(
            f"pinned to commit {sha}, which the checkout {quote(str(directory))} does not hold:"
            f" run {printable(fetch)}, then this command again"
        )
    listed = _run_bytes(directory, env, timeout, ["ls-tree", "-r", "-z", "--full-tree", sha])
    entries = sparse.parse_tree(listed.decode(errors="replace"))
    # None: outside the repository, nothing is written (the loader says so)
    root = sparse.root_of(posixpath.join(checkout.prefix, path))
    blobs = [e for e in entries if e.type == "blob" and root is not None and _under(root, e.path)]
    checked = _run_bytes(
        directory,
        env,
        timeout,
        ["cat-file", "--batch-check=%(objectname) %(objectsize)"],
        "".join(f"{e.sha}\n" for e in blobs).encode(),
    )
    planned = sparse.plan(
        blobs,
        sparse.parse_sizes(checked.decode()),
        root or ".",
        max_file_bytes=max_file_bytes,
    )
    left_out = {p for p, _ in planned.omitted}
    wanted = [e for e in blobs if e.path not in left_out and _safe(e.path)]
    _write(directory, env, timeout, wanted, dest)
    top = dest / checkout.prefix
    top.mkdir(parents=True, exist_ok=True)
    omitted = tuple(
        (p if checkout.prefix == "." else posixpath.relpath(p, checkout.prefix), size)
        for p, size in planned.omitted
    )
    return Files(top, omitted)


def _under(root: str, path: str) -> bool:
    return not root or path == root or path.startswith(root + "/")


def _safe(path: str) -> bool:
    # git refuses to check such a path out; a tree that holds one is not written either
    return not path.startswith("/") and all(
        part not in ("", ".", "..") and part.lower() != ".git" for part in path.split("/")
    )


def _write(
    directory: Path, env: dict[str, str], timeout: float, files: list[sparse.Entry], dest: Path
) -> None:
    """Each of ``files`` under ``dest``, its blob's bytes as stored (no filter, no eol
    conversion); a symbolic link as a link (the loader judges where it goes)."""
    dest.mkdir(mode=0o700, parents=True)
    out = _run_bytes(
        directory,
        env,
        timeout,
        ["cat-file", "--batch"],
        "".join(f"{e.sha}\n" for e in files).encode(),
    )
    at = 0
    for e in files:
        end = out.index(b"\n", at)
        header = out[at:end].split(b" ")
        if len(header) != 3 or header[1] != b"blob":
            raise SourceError(f"cannot read {quote(e.path)} at the pinned commit")
        size = int(header[2])
        data = out[end + 1 : end + 1 + size]
        at = end + 1 + size + 1
        target = dest / e.path
        target.parent.mkdir(parents=True, exist_ok=True)
        if e.mode == "120000":
            os.symlink(os.fsdecode(data), target)
        else:
            target.write_bytes(data)


def _run_bytes(
    directory: Path, env: dict[str, str], timeout: float, args: list[str], stdin: bytes = b""
) -> bytes:
    try:
        proc = subprocess.run(
            ["git", *args],
            cwd=directory,
            env=env,
            input=stdin,
            capture_output=True,
            timeout=timeout,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        raise SourceError(f"git {args[0]} in {quote(str(directory))} failed: {e}") from None
    if proc.returncode != 0:
        err = proc.stderr.decode(errors="replace").strip()
        raise SourceError(f"git {args[0]} in {quote(str(directory))} failed: {quote(err)}")
    return proc.stdout
