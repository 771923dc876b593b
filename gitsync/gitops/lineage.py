"""The commit the cluster is at, and the rule that a new revision descends from it.

With ``--verify-commits`` a signature says who made a commit, not that the ref may go
back to it: a pusher without a key could force-push an old signed commit (a rollback to a
vulnerable version) or a signed commit of another branch. So a revision must descend from
the commit last applied, as the status ConfigMap records it, unless ``--allow-non-fast-
forward`` is given or the ConfigMap's annotation names that very commit (once)."""

from __future__ import annotations

import logging

from gitsync.errors import VerificationError
from gitsync.gitops.sync_state import StateWriter, last_applied
from gitsync.model.api import ACCEPT_ANNOTATION
from gitsync.source.checkout import Revision, Source

log = logging.getLogger(__name__)


class Lineage:
    def __init__(self, state: StateWriter | None) -> None:
        self.state = state
        #: (the commit the cluster is at, the last one accepted once by annotation); read
        #: from the status ConfigMap on the first pass, then kept here; None while unread
        #: (a pass must then not write its record: it would erase the commit)
        self.baseline: tuple[str, str] | None = None

    def fetch(self, source: Source) -> Revision:
        """The source's revision, which must descend from the commit last applied (with
        --verify-commits; :meth:`GitSource.fetch` checks), or be the one commit the accept
        annotation names, once."""
        known = self.baseline is not None and self.state is not None
        applied, once = self._last_applied()
        try:
            rev, once = self._fetch_after(source, applied, once)
            stale = known and bool(rev.sha) and rev.sha != applied and self._moved(applied)
        except VerificationError as e:
            if not (known and e.reason == "not-a-descendant" and self._moved(applied)):
                raise
            stale = True
        if stale:
            # judged against what this replica applied last, while another replica may
            # have applied more since (leadership moves): the record, read again once per
            # new commit (never in steady state), decides
            applied, once = self._last_applied()
            rev, once = self._fetch_after(source, applied, once)
        self.baseline = (rev.sha or applied, once)
        return rev

    def hold(self) -> tuple[str, str]:
        """The commit the cluster is at, read (once) without fetching the ref: a pinned pass
        keeps it, so that when the pin is lifted the ref's commit must descend from the
        head applied before the pin, not from the pinned commit (a pin to an old commit
        must not make an old commit, force-pushed meanwhile, pass as a descendant)."""
        return self._last_applied()

    def _moved(self, applied: str) -> bool:
        """Whether the record, read again, names another commit than ``applied``."""
        self.baseline = None
        return self._last_applied()[0] != applied

    def _fetch_after(self, source: Source, applied: str, once: str) -> tuple[Revision, str]:
        try:
            return source.fetch(after=applied), once
        except VerificationError as e:
            if e.reason != "not-a-descendant" or self.state is None or e.sha == once:
                raise
            if last_applied(self.state.read_object())[2] != e.sha:
                raise
            log.warning(
                "commit %s is applied although it does not descend from %s: annotation %s"
                " on ConfigMap/%s/%s names it (once)",
                e.sha, applied, ACCEPT_ANNOTATION, self.state.namespace, self.state.name,
            )  # fmt: skip
            return source.fetch(after=applied, accept=e.sha), e.sha

    def _last_applied(self) -> tuple[str, str]:
        """The commit the cluster is at and the last accepted once, as the status ConfigMap
        records them. That ConfigMap, not the MyApps' status.source, is the record: it is
        one per instance, written by the pass after the commit was accepted, while each
        MyApp's status names the revision that last changed that MyApp (a pass that fails
        for some leaves them at several) and may be written by whoever edits MyApps. No
        record (a first sync): any verified commit is accepted."""
        if self.baseline is None:
            cm = self.state.read_object() if self.state is not None else None
            applied, once, _ = last_applied(cm)
            self.baseline = (applied, once)
        return self.baseline
