"""The MyApps of a pass that come from a pin of their own (``gitsync rollback
MyApp/NS/NAME --to REV``): each pinned commit fetched, verified and read once, and each
pinned MyApp taken from it (:func:`gitsync.model.pin.select`)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator

from gitsync.engine.changeset import Change
from gitsync.errors import APIError, ConfigError, SourceError, VerificationError
from gitsync.model import pin as pinlib
from gitsync.model.api import KIND, subject
from gitsync.source import manifests
from gitsync.source.checkout import Revision, Source

log = logging.getLogger(__name__)

Apps = dict[str, manifests.DesiredApp]


class PinnedRevisions:
    def __init__(self, source: Source, load: Callable[[Revision], manifests.LoadResult]) -> None:
        self.source = source
        self.load = load
        #: the MyApps of each commit a MyApp is pinned to, by commit: a commit's files
        #: never change, so each is fetched (and verified) once, not on every poll; kept
        #: only while some MyApp is pinned to it
        self._loads: dict[str, Apps] = {}

    def select(self, base: Apps, pins: pinlib.Pins) -> pinlib.Selection[manifests.DesiredApp]:
        """Each MyApp from the revision it is pinned to, the others from ``base`` (run
        after ``base`` was read: the checkout moves). A pinned MyApp that cannot be read
        is missing, so held (neither applied nor pruned), while every other one applies."""
        revisions = pinlib.app_revisions(pins)
        at: dict[str, Apps] = {}
        unread: dict[str, str] = {}
        for sha in sorted(revisions):
            try:
                at[sha] = self._apps_at(sha)
            except (SourceError, VerificationError, ConfigError, APIError) as e:
                unread[sha] = str(e)
                log.error("pinned revision %s cannot be read: %s", sha, e)
        self._loads = {k: v for k, v in self._loads.items() if k in revisions}
        selection = pinlib.select(base, at, pins)
        for key, pin in pins.apps.items():
            if pin.revision in unread:
                selection.missing[key] = (
                    f"{KIND}/{key} is {pin.describe()}, and that revision cannot be read: "
                    f"{unread[pin.revision]}"
                )
        for data_key, why in pins.invalid.items():
            app = pinlib.app_of_key(data_key)
            if app:
                selection.apps.pop(app, None)
                selection.pinned.pop(app, None)
                selection.missing[app] = f"{KIND}/{app}: its pin cannot be read ({why})"
        return selection

    def _apps_at(self, sha: str) -> Apps:
        cached = self._loads.get(sha)
        if cached is not None:
            return cached
        loaded = self.load(self.source.fetch_commit(sha))
        # (another file broken at that commit is no concern of the pinned MyApp's)
        apps = {app.key: app for app in loaded.apps}
        self._loads[sha] = apps
        return apps


def selection_failures(selection: pinlib.Selection[manifests.DesiredApp]) -> Iterator[Change]:
    """A failed change per pinned MyApp the pass cannot apply, naming the pin."""
    for key, why in sorted(selection.missing.items()):
        ns, name = key.split("/", 1)
        yield Change(subject(KIND, ns, name), "failed", reason=why)
