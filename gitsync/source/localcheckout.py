"""What a local checkout says of the repository it is a checkout of: its remote and
branch, so that ``gitsync diff --repo .`` names the instance a daemon syncing that
remote's URL has (design §13), rather than an instance named after the directory.

Only reads: ``git rev-parse``, ``git symbolic-ref`` and ``git config --get`` run no hook,
helper or filter, and the configuration that could (``core.fsmonitor``, hooks) is
overridden on the command line, as for every git call of gitsync's.
"""

from __future__ import annotations

import os
import posixpath
import subprocess
from dataclasses import dataclass
from pathlib import Path

from gitsync.source import gitenv
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
