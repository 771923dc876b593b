"""Which MyApps a pass applies: all of them, or only what a new commit changed.

A pass for a new commit need not apply the MyApps the commit left as they were: the last
pass applied them, and the operator has kept them in Git's state since (it reconciles each
one its watch shows changed). So a pass applies the MyApps of the files the commit changed,
the ones that were not left in Git's state last time (failed, refused, held), and prunes
from the whole of Git as always. Whatever the operator could have missed is caught by a
full, level-based pass over every MyApp, which runs:

- when the commit did not move (each poll of an unchanged ref, as before);
- when the last full pass is older than ``full_every`` (a daemon's interval), so a busy
  repository still gets one an interval;
- on any doubt: the last pass did not end clean (an error, a broken file, an interrupted
  pass), a pin is set, or an informer relisted since (events may have been missed).

Pure: the sync pass (:mod:`gitsync.gitops.sync`) gives the facts and carries out the
answer.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from gitsync.source.manifests import DesiredApp


@dataclass(frozen=True)
class Base:
    """What a pass that ended clean leaves for the next."""

    #: the commit it applied
    sha: str
    #: Git's MyApps at that commit, by key: the loader hands out the same object for a
    #: file it did not parse again, so a MyApp is unchanged when it is the same object
    apps: Mapping[str, DesiredApp]
    #: the MyApps it left in Git's state (applied, or found so)
    clean: frozenset[str]
    #: the informers' relists when it began
    relists: int
    #: when the last full pass began (monotonic seconds)
    full_at: float


def scope(
    base: Base | None,
    *,
    sha: str,
    apps: Mapping[str, DesiredApp],
    pinned: bool,
    relists: int,
    now: float,
    full_every: float,
) -> frozenset[str] | None:
    """The keys of ``apps`` a pass for commit ``sha`` must apply; None: every one
    (with ``full_every`` 0, always: the last full pass is never younger than that)."""
    if (
        base is None
        or not sha
        or sha == base.sha
        or pinned
        or relists != base.relists
        or now - base.full_at >= full_every
    ):
        return None
    return frozenset(
        key for key, app in apps.items() if base.apps.get(key) is not app or key not in base.clean
    )


def after(
    base: Base | None,
    *,
    sha: str,
    apps: Mapping[str, DesiredApp],
    clean: Iterable[str],
    relists: int,
    started: float,
    full: bool,
) -> Base:
    """The base a clean pass leaves: ``full`` when it applied every MyApp (begun at
    ``started``), else the last full pass's time is kept."""
    full_at = started if full or base is None else base.full_at
    return Base(sha, apps, frozenset(clean), relists, full_at)
