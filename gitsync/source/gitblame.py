"""The Git half of ``gitsync blame``: a MyApp's manifest at the revision it was applied
from, with line numbers, and the commit that last changed each line.

Reads a local repository (the user's clone) with GitPython: ``git show <sha>:<file>``
and ``git blame --porcelain <sha> -- <file>``. The daemon's own cache is a depth-1
clone, whose blame would name its one commit for every line; so blame needs a clone
with history. GitPython exceptions stop here: callers see :class:`SourceError`.
"""

from __future__ import annotations

import datetime as dt
import os
import re
from pathlib import Path, PurePosixPath
from typing import Any

import git
import yaml

from gitsync.engine.blame import Commit, GitView
from gitsync.errors import SourceError, one_line, plain_or_quote
from gitsync.model.api import SOURCE_PATH_ANNOTATION, Obj
from gitsync.source._yaml import Loader

_REVISION_SHA = re.compile(r"(?:^|@sha1:)([0-9a-f]{40})$")
_SHA_LINE = re.compile(r"([0-9a-f]{40}) \d+ (\d+)(?: \d+)?")


def revision_sha(revision: str) -> str:
    """The commit in ``main@sha1:<40 hex>`` (a MyApp's status.source.revision), or ""."""
    m = _REVISION_SHA.search(revision)
    return m.group(1) if m else ""


def source_of(myapp: Obj) -> tuple[str, str]:
    """(file, revision) a MyApp was applied from, or ("", "") when not from Git."""
    source = (myapp.get("status") or {}).get("source") or {}
    annotations = (myapp.get("metadata") or {}).get("annotations") or {}
    file = str(source.get("path") or annotations.get(SOURCE_PATH_ANNOTATION) or "")
    return file, str(source.get("revision") or "")


def view(myapp: Obj, repo_dir: Path | None, *, timeout: float = 30.0) -> GitView | None:
    """The MyApp as Git declares it, or None when it did not come from Git.

    Without ``repo_dir`` only the file and revision are known (no lines)."""
    file, revision = source_of(myapp)
    if not file:
        return None
    if repo_dir is None:
        return GitView(file=file, revision=revision)
    _check_file(file)
    sha = revision_sha(revision)
    try:
        repo = git.Repo(repo_dir, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        raise SourceError(f"{repo_dir} is not a Git repository") from None
    try:
        if sha:
            where = plain_or_quote(file)
            text = _git(repo, timeout, "show", f"{sha}:{file}", what=f"{where} at {sha[:7]}")
            lines = parse_porcelain(
                _git(repo, timeout, "blame", "--porcelain", sha, "--", file, what=where)
            )
        else:  # synced from a plain directory: the files as they are, no history
            text = (Path(repo.working_tree_dir or repo_dir) / file).read_text()
            lines = {}
    except OSError as e:
        raise SourceError(
            f"cannot read {plain_or_quote(file)} in {repo_dir}: {e.strerror}"
        ) from None
    finally:
        repo.close()
    node, obj = find_document(text, myapp, file)
    return GitView(file=file, revision=revision, obj=obj, node=node, lines=lines)


def _check_file(file: str) -> None:
    # the path comes from the cluster: it must name a file inside the repository
    p = PurePosixPath(file)
    if p.is_absolute() or ".." in p.parts or file.startswith("-"):
        raise SourceError(f"the MyApp's source path {file!r} is not a path in a repository")


def _git(repo: git.Repo, timeout: float, command: str, *args: str, what: str) -> str:
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_OPTIONAL_LOCKS": "0"}
    try:
        out = getattr(repo.git, command)(*args, env=env, kill_after_timeout=timeout)
    except git.GitCommandError as e:
        stderr = str(e.stderr).strip().removeprefix("stderr: '").removesuffix("'").strip()
        hint = (
            " (fetch that commit into this clone)"
            if "bad revision" in stderr
            or ("does not exist" in stderr or "invalid object" in stderr)
            else ""
        )
        first = stderr.splitlines()[0] if stderr else "failed"
        # git's message may quote the file name: one line, escaped, as everything from Git
        raise SourceError(f"git {command} {what}: {one_line(first)}{hint}") from None
    except git.GitError as e:
        raise SourceError(f"git {command} {what}: {type(e).__name__}") from None
    return str(out)


def parse_porcelain(text: str) -> dict[int, Commit]:
    """``git blame --porcelain`` → the commit of each final line number.

    Each line group starts ``<sha> <orig> <final> [<count>]``; a commit's headers
    (author, author-time, summary) follow only its first group.
    """
    headers: dict[str, dict[str, str]] = {}
    lines: dict[int, str] = {}
    current = ""
    for raw in text.splitlines():
        if raw.startswith("\t"):
            continue  # the line's content
        m = _SHA_LINE.fullmatch(raw)
        if m:
            current = m.group(1)
            lines[int(m.group(2))] = current
            headers.setdefault(current, {})
            continue
        name, _, value = raw.partition(" ")
        if current:
            headers[current].setdefault(name, value)
    commits = {sha: _commit(sha, h) for sha, h in headers.items()}
    return {n: commits[sha] for n, sha in lines.items()}


def _commit(sha: str, h: dict[str, str]) -> Commit:
    try:
        when = dt.datetime.fromtimestamp(int(h.get("author-time", "0")), dt.UTC)
        date = when.strftime("%Y-%m-%dT%H:%M:%SZ")
    except ValueError:
        date = ""
    return Commit(sha=sha, author=h.get("author", ""), date=date, summary=h.get("summary", ""))


def find_document(text: str, myapp: Obj, file: str) -> tuple[yaml.Node, Obj]:
    """The YAML document of ``file`` that declares this MyApp, as node and value."""
    meta = myapp.get("metadata") or {}
    try:
        nodes = list(yaml.compose_all(text, Loader=Loader))
        values: list[Any] = list(yaml.load_all(text, Loader=Loader))  # a SafeLoader
    except yaml.YAMLError as e:
        problem = one_line(str(e).splitlines()[0])
        raise SourceError(f"{plain_or_quote(file)}: not valid YAML: {problem}") from None
    for node, obj in zip(nodes, values, strict=False):
        if node is None or not isinstance(obj, dict):
            continue
        m = obj.get("metadata") or {}
        same_ns = m.get("namespace") in (None, meta.get("namespace"))
        if obj.get("kind") == "MyApp" and m.get("name") == meta.get("name") and same_ns:
            return node, obj
    raise SourceError(
        f"{plain_or_quote(file)} declares no MyApp {meta.get('name')!r} at this revision"
    )
