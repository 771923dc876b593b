"""Prune planning (design §5): which tracked MyApps to delete, or why not to delete any.

Pure. Deleting a MyApp deletes its Deployment too (garbage collection through
ownerReferences), so every guard here errs on the side of deleting nothing.
"""

from __future__ import annotations

import hashlib
import posixpath
import re
from collections.abc import Collection
from dataclasses import dataclass


@dataclass(frozen=True)
class PrunePlan:
    #: keys (``namespace/name``) of MyApps to delete, sorted
    delete: tuple[str, ...]
    #: why nothing is deleted; None when the plan may be carried out
    skipped: str | None = None


def plan_prune(
    desired: Collection[str],
    tracked: Collection[str],
    *,
    enabled: bool = True,
    source_ok: bool = True,
    manifests_ok: bool = True,
    allow_empty: bool = False,
    max_fraction: float = 0.5,
) -> PrunePlan:
    """Plan the deletion of ``tracked`` MyApps (those carrying this instance's source label)
    that are not in ``desired``."""
    if not enabled:
        return _skip("prune is disabled (--no-prune)")
    if not source_ok:
        # with no checkout we do not know what Git wants; absence proves nothing
        return _skip("the Git fetch failed")
    if not manifests_ok:
        # a file that failed to parse would look like every MyApp in it was deleted
        return _skip("some manifests failed to load or validate")
    gone = sorted(set(tracked) - set(desired))
    if not gone:
        return PrunePlan(delete=())
    if not desired and not allow_empty:
        # an empty desired set is far more often a wrong --path or ref than an intent
        return _skip(f"Git has no MyApps; refusing to delete all {len(gone)} (--allow-empty)")
    if len(gone) > max_fraction * len(tracked):
        # a mass deletion is more likely a mistake (a moved directory) than a plan
        return _skip(
            f"{len(gone)} of {len(tracked)} tracked MyApps would be deleted,"
            f" more than {max_fraction:.0%} (--prune-max-fraction)"
        )
    return PrunePlan(delete=tuple(gone))


def _skip(reason: str) -> PrunePlan:
    return PrunePlan(delete=(), skipped=reason)


def source_label_value(repo_url: str, path: str) -> str:
    """A label-safe name for one source instance (repository + path).

    Two spellings of one repository (a trailing ``/`` or ``.git``, credentials, upper-case
    host) name the same instance; otherwise a restart with a cosmetic change of ``--repo``
    would orphan every MyApp it created.
    """
    key = f"{_normalise_url(repo_url)}\n{_normalise_path(path)}"
    return hashlib.sha256(key.encode()).hexdigest()[:16]


_SCHEME_URL = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*)://(?P<auth>[^/@]*@)?(?P<rest>.*)")


def _normalise_url(url: str) -> str:
    url = url.strip()
    m = _SCHEME_URL.fullmatch(url)
    if m is not None:
        host, _, rest = m["rest"].partition("/")
        url = f"{m['scheme'].lower()}://{host.lower()}/{rest}"
    url = url.rstrip("/")
    return url.removesuffix(".git").rstrip("/")


def _normalise_path(path: str) -> str:
    norm = posixpath.normpath(path.strip().replace("\\", "/") or ".")
    return norm.lstrip("/") or "."
