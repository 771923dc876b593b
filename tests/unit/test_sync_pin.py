"""A sync pass under a pin (fake cluster, commits as directories): which revision it
reads, what it applies and prunes, what it records, and that a pin it cannot read
never sends it back to the head."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import cast

import pytest

from gitsync.errors import APIServerError
from gitsync.kube.client import path_of
from gitsync.kube.events import EventRecorder
from gitsync.model import pin as pinlib
from gitsync.model.api import KIND
from gitsync.source.checkout import CommitInfo, Revision
from tests.support import app_yaml
from tests.unit.test_sync_fakes import World, myapp_actions


class CommitSource:
    """The head is the world's directory; each pinned commit a snapshot of it."""

    def __init__(self, world: World, base: Path) -> None:
        self.world = world
        self.base = base
        self.commits: dict[str, Path] = {}
        self.head_fetches = 0
        self.pinned_fetches: list[str] = []

    def snapshot(self) -> str:
        sha = f"{len(self.commits) + 1:x}".rjust(40, "e")
        shutil.copytree(self.world.repo, self.base / sha)
        self.commits[sha] = self.base / sha
        return sha

    def fetch(self, after: str = "", accept: str = "") -> Revision:
        self.head_fetches += 1
        return self.world.source.fetch(after, accept)

    def fetch_commit(self, sha: str) -> Revision:
        self.pinned_fetches.append(sha)
        return Revision("main", sha, self.commits[sha], pinned=True)

    def remote_sha(self) -> str:
        return self.world.source.remote_sha()

    def commit_info(self, sha: str) -> CommitInfo | None:
        return None


@pytest.fixture
def world(tmp_path: Path) -> tuple[World, CommitSource]:
    w = World(tmp_path)
    src = CommitSource(w, tmp_path / "commits")
    w.syncer.source = src
    w.syncer._pinned.source = src
    w.state.events = cast(EventRecorder, w.events)  # the ConfigMap's Events, too
    return w, src


def pin(w: World, sha: str, app: str = "") -> pinlib.Pin:
    p = pinlib.Pin(sha, "alice", "2026-12-04T17:00:00Z", "bad release", app)
    path = w.state.path
    cm = w.cluster.store.setdefault(path, {"metadata": {"name": w.state.name}, "data": {}})
    cm["data"][p.key] = p.value()
    return p


def unpin(w: World, app: str = "") -> None:
    del w.cluster.store[w.state.path]["data"][pinlib.data_key(app)]


def image(w: World, name: str) -> str:
    return str(w.cluster.store[path_of(KIND, "shop", name)]["spec"]["image"])


def write(w: World, name: str, img: str) -> None:
    (w.repo / "apps" / f"{name}.yaml").write_text(app_yaml("shop", name, image=img))
    w.source.commits += 1


def test_an_instance_pin_syncs_its_commit_prunes_as_there_and_resume_goes_back(
    world: tuple[World, CommitSource],
) -> None:
    w, src = world
    w.declare("a", "b")
    first = w.syncer.run()
    assert first.ok, first.errors
    head_before_pin = first.applied_commit
    good = src.snapshot()
    # the head moves on: a breaks, c is added
    write(w, "a", "nginx:broken")
    write(w, "c", "nginx:1.27")
    w.syncer.run()
    assert image(w, "a") == "nginx:broken"
    p = pin(w, good)
    fetches = src.head_fetches
    pinned = w.syncer.run()
    assert pinned.ok, pinned.errors
    assert src.head_fetches == fetches  # the ref is not fetched while pinned
    assert pinned.revision == f"main@sha1:{good}"
    assert image(w, "a") == "nginx:1.27"
    assert myapp_actions(pinned) == {"a": "configured", "b": "unchanged", "c": "pruned"}
    data = w.cluster.store[w.state.path]["data"]
    assert data["revision"] == f"main@sha1:{good}"
    assert data["pinned"] == f"instance {p.describe()}"
    assert data["pin"] == p.value()  # the daemon's record leaves the pin in place
    # the commit recorded as applied stays the head applied before the pin
    assert data["appliedCommit"] != good and pinned.applied_commit != good
    assert "Pinned" in w.events.reasons()
    assert head_before_pin  # (a first pass records the head it applied)

    del w.myapps.objects["shop/c"]  # the watch brings the delete
    unpin(w)
    resumed = w.syncer.run()
    assert resumed.ok, resumed.errors
    assert image(w, "a") == "nginx:broken"
    assert myapp_actions(resumed)["c"] == "created"
    assert w.cluster.store[w.state.path]["data"]["pinned"] == ""
    assert "Resumed" in w.events.reasons()


def test_a_myapp_pin_takes_that_myapp_from_its_commit_and_the_rest_from_the_head(
    world: tuple[World, CommitSource],
) -> None:
    w, src = world
    w.declare("a", "b")
    w.syncer.run()
    good = src.snapshot()
    write(w, "a", "nginx:broken")
    w.syncer.run()
    write(w, "b", "nginx:1.28")
    pin(w, good, "shop/a")
    result = w.syncer.run()
    assert result.ok, result.errors
    assert (image(w, "a"), image(w, "b")) == ("nginx:1.27", "nginx:1.28")
    # its status names the commit it came from
    status = w.cluster.store[path_of(KIND, "shop", "a")]["status"]
    assert status["source"]["revision"] == f"main@sha1:{good}"
    w.syncer.run()
    assert src.pinned_fetches == [good]  # a pinned commit is fetched and read once


def test_a_pinned_myapp_its_commit_lacks_fails_and_is_not_pruned(
    world: tuple[World, CommitSource],
) -> None:
    w, src = world
    w.declare("a")
    w.syncer.run()
    old = src.snapshot()
    w.declare("a", "b")
    w.syncer.run()
    pin(w, old, "shop/b")
    w.declare("a")  # b left Git too: the pin holds it
    result = w.syncer.run()
    assert myapp_actions(result) == {"a": "unchanged", "b": "failed"}
    [why] = [c.reason for c in result.changes if c.action == "failed"]
    assert why.startswith("MyApp/shop/b is pinned to") and "does not declare it" in why
    assert path_of(KIND, "shop", "b") in w.cluster.store


def test_pins_that_cannot_be_read_apply_nothing_and_prune_nothing(
    world: tuple[World, CommitSource],
) -> None:
    w, _ = world
    w.declare("a", "b")
    w.syncer.run()
    w.declare("a")
    writes = len(w.cluster.writes)
    w.cluster.store[w.state.path] = {"metadata": {}, "data": {"pin": "{not json"}}
    result = w.syncer.run()
    assert not result.ok and "the instance's pin cannot be read" in result.errors[0]
    assert result.prune_skipped and path_of(KIND, "shop", "b") in w.cluster.store
    assert not [x for x in w.cluster.writes[writes:] if "/myapps/" in x[1]]

    def fail_get(path: str, **kw: object) -> dict[str, object]:
        raise APIServerError(path, "the server is down")

    w.cluster.get = fail_get  # type: ignore[method-assign]
    result = w.syncer.run()
    assert "the pins cannot be read" in result.errors[0] and w.syncer.pins is None
    assert result.prune_skipped == "the pins could not be read; nothing is pruned"
