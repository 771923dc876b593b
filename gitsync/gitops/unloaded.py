"""The MyApps whose file in Git no longer loads, and what their status says of it.

A file that fails to load declares nothing, so its MyApps are missing from the pass's
desired set: they are not applied (nothing of the broken file can be), not pruned (the
prune is skipped while any file is broken) and not let go by the operator. Without a
word in their own status they would go on saying ``Synced`` ``True`` for the last
revision while the one at the ref is not theirs at all; so each one's Synced condition
names the file, its first error and the revision (:data:`~gitsync.model.myapp_status.LOAD_FAILED`).

Pure: which file declared a MyApp is read from the live MyApp, where every apply put it
(the source-path annotation, else ``status.source.path``); it only chooses what status
reports, never what is written to a spec.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import Final

from gitsync.errors import ManifestError, one_line, plain_or_quote
from gitsync.model.api import SOURCE_PATH_ANNOTATION, Obj
from gitsync.model.myapp_status import LOAD_FAILED, SyncInfo

#: characters of a file's first error quoted in the Synced message
ERROR_CHARS: Final = 1024


def declared_by(myapp: Obj) -> str:
    """The file that declared ``myapp`` when gitsync last applied it ("" if unknown)."""
    annotations = (myapp.get("metadata") or {}).get("annotations") or {}
    path = annotations.get(SOURCE_PATH_ANNOTATION)
    if not path:
        path = ((myapp.get("status") or {}).get("source") or {}).get("path")
    return path if isinstance(path, str) else ""


def load_failures(
    tracked: Mapping[str, Obj],
    loaded: Collection[str],
    errors: Iterable[ManifestError],
    revision: str,
    time: str,
) -> dict[str, SyncInfo]:
    """What the status of each of ``tracked`` (this instance's live MyApps, by key) says
    when the load of ``revision`` did not give it (not in ``loaded``) and the file that
    declared it has ``errors``; the others are not in the result (one whose file is
    gone or loads fine left Git, and the prune judges it)."""
    by_file: dict[str, list[ManifestError]] = {}
    for error in errors:
        if error.file:
            by_file.setdefault(error.file, []).append(error)
    out: dict[str, SyncInfo] = {}
    for key, live in sorted(tracked.items()):
        if key in loaded:
            continue
        file = declared_by(live)
        if found := by_file.get(file):
            out[key] = load_failed(live, file, found, revision, time)
    return out


def load_failed(
    myapp: Obj, file: str, errors: list[ManifestError], revision: str, time: str
) -> SyncInfo:
    """The sync info of ``myapp``, whose ``file`` has ``errors`` at ``revision``: Synced
    False with the file's first error; its source stays the commit that last changed
    it, since this one changed nothing of it."""
    source = (myapp.get("status") or {}).get("source") or {}
    before = source.get("revision") if isinstance(source.get("revision"), str) else ""
    since = source.get("lastSyncTime") if isinstance(source.get("lastSyncTime"), str) else ""
    # both read back from the cluster: shown as data, never as lines of their own
    left = f" (the MyApp stays as {one_line(before, 200)} left it)" if before else ""
    more = "; and more errors in this file" if len(errors) > 1 else ""
    message = (
        f"{plain_or_quote(file)} does not load at {revision}, so nothing of it is"
        f" applied{left}: "
        f"{one_line(str(errors[0]), ERROR_CHARS)}{more}"
    )
    return SyncInfo(
        before or revision, file, since or time, ok=False, message=message, reason=LOAD_FAILED
    )
