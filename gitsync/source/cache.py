"""The Git cache directory: private to the user who runs gitsync, checked before every use.

Whatever git finds in a repository's ``.git`` (its ``config``, its hooks) it obeys: a
``core.hooksPath`` or ``core.fsmonitor`` there runs a command as whoever runs gitsync. git's
own guard (``safe.directory``) is off when ``GIT_DIR`` is set, as gitsync sets it, so the
ownership check is done here: every level gitsync reads or writes must be owned by this
user, not a symbolic link, and writable by no one else. Anything else is refused, never
repaired: the directory may be another user's, and deleting it is not gitsync's call.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from gitsync.errors import SourceError

_OTHERS_WRITE = stat.S_IWGRP | stat.S_IWOTH


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/gitsync``, else ``~/.cache/gitsync`` (the XDG base directory rule:
    a relative ``XDG_CACHE_HOME`` is ignored)."""
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".cache"
    return base / "gitsync"


def check_private(path: Path, *, directory: bool) -> bool:
    """Whether ``path`` exists; if it does, it must be this user's and only this user's.

    ``lstat``: a symbolic link is refused, never followed (it could lead anywhere).
    """
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return False
    except OSError as e:
        raise SourceError(f"cache {path}: {e.strerror}") from None
    problem = ""
    if stat.S_ISLNK(st.st_mode):
        problem = "is a symbolic link"
    elif directory and not stat.S_ISDIR(st.st_mode):
        problem = "is not a directory"
    elif not directory and not stat.S_ISREG(st.st_mode):
        problem = "is not a regular file"
    elif st.st_uid != os.geteuid():
        problem = f"is owned by uid {st.st_uid}, not by this user (uid {os.geteuid()})"
    elif st.st_mode & _OTHERS_WRITE:
        problem = f"is writable by group or others (mode {stat.S_IMODE(st.st_mode):04o})"
    if problem:
        raise SourceError(
            f"cache {path} {problem}: refusing to use it (git would obey whatever another "
            "user put there); remove it or choose another --cache-dir"
        )
    return True


def private_dir(path: Path) -> Path:
    """``path`` as a checked private directory, created (mode 0700) when missing."""
    if not check_private(path, directory=True):
        try:
            # the parents are the user's to secure (a home, a volume); the last level is ours
            path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            path.mkdir(mode=0o700)
        except FileExistsError:
            pass  # another process made it meanwhile: checked below like any other
        except OSError as e:
            raise SourceError(f"cache {path}: cannot create it: {e.strerror}") from None
        check_private(path, directory=True)
    _check_ancestors(path)
    return path


def _check_ancestors(path: Path) -> None:
    """Refuse a cache under a directory of another (non-root) user: its owner could
    rename the checked directory away and put their own in its place between the check
    and git's use of it. A directory that others may write to (a shared group directory,
    a volume mounted mode 0777) is the operator's to secure: refusing it would refuse
    every emptyDir, whose mount point is 0777 and root's."""
    for parent in path.absolute().parents:
        try:
            owner = os.stat(parent).st_uid
        except OSError as e:
            raise SourceError(f"cache {path}: {parent}: {e.strerror}") from None
        if owner not in (0, os.geteuid()):
            raise SourceError(
                f"cache {path} is inside {parent}, owned by uid {owner}: refusing to use it"
                " (its owner could replace it); choose another --cache-dir"
            )


def write_private_file(path: Path, text: str, mode: int = 0o600) -> None:
    """Replace ``path`` (in a directory just checked private) with ``text``.

    ``O_EXCL|O_NOFOLLOW``: the file is made new by this call, so a link planted in its
    place is never written through.
    """
    try:
        os.unlink(path)  # a symbolic link is removed itself, its target left alone
    except FileNotFoundError:
        pass
    except OSError as e:
        raise SourceError(f"cache {path}: {e.strerror}") from None
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
    except OSError as e:
        raise SourceError(f"cache {path}: {e.strerror}") from None
    with os.fdopen(fd, "w") as f:
        f.write(text)
