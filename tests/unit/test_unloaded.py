"""Which MyApps' files no longer load, and what their Synced condition says."""

from __future__ import annotations

from gitsync.errors import ManifestError
from gitsync.gitops.unloaded import declared_by, load_failures
from gitsync.model.api import SOURCE_PATH_ANNOTATION, Obj
from gitsync.model.myapp_status import LOAD_FAILED

REV = "main@sha1:" + "b" * 40
BEFORE = "main@sha1:" + "a" * 40


def live(name: str, annotated: str | None = None, source: str | None = None) -> Obj:
    meta: Obj = {"namespace": "shop", "name": name}
    if annotated is not None:
        meta["annotations"] = {SOURCE_PATH_ANNOTATION: annotated}
    obj: Obj = {"metadata": meta, "spec": {"image": "nginx:1.27"}}
    if source is not None:
        obj["status"] = {
            "source": {"revision": BEFORE, "path": source, "lastSyncTime": "2026-01-01T00:00:00Z"}
        }
    return obj


def typo(file: str) -> ManifestError:
    return ManifestError(file, "unknown field", document=0, line=7, column=3, field="spec.imgae")


def test_the_file_a_myapp_came_from_is_its_annotation_else_its_status_source() -> None:
    assert declared_by(live("w", annotated="apps/w.yaml", source="apps/old.yaml")) == "apps/w.yaml"
    assert declared_by(live("w", source="apps/w.yaml")) == "apps/w.yaml"
    assert declared_by(live("w")) == ""
    assert declared_by({"metadata": {"annotations": {SOURCE_PATH_ANNOTATION: 3}}}) == ""


def test_only_myapps_missing_from_the_load_whose_file_has_errors_are_failures() -> None:
    tracked = {
        "shop/worker": live("worker", "apps/worker.yaml", "apps/worker.yaml"),
        # another document of the same file still loads
        "shop/sidecar": live("sidecar", "apps/worker.yaml", "apps/worker.yaml"),
        # its file is gone, or loads without it: it left Git, the prune judges it
        "shop/gone": live("gone", "apps/gone.yaml", "apps/gone.yaml"),
        "shop/web": live("web", "apps/web.yaml", "apps/web.yaml"),
    }
    errors = [typo("apps/worker.yaml"), ManifestError("apps/worker.yaml", "spec.image: required")]
    found = load_failures(tracked, {"shop/sidecar", "shop/web"}, errors, REV, "now")
    assert list(found) == ["shop/worker"]
    info = found["shop/worker"]
    assert not info.ok and info.reason == LOAD_FAILED
    # the source stays the commit that last changed it: this one changed nothing
    assert (info.revision, info.path, info.time) == (
        BEFORE,
        "apps/worker.yaml",
        "2026-01-01T00:00:00Z",
    )
    assert info.message == (
        f"apps/worker.yaml does not load at {REV}, so nothing of it is applied (the MyApp"
        f" stays as {BEFORE} left it): apps/worker.yaml:7:3 (document 0): spec.imgae:"
        " unknown field; and more errors in this file"
    )


def test_a_myapp_with_no_source_yet_reports_this_revision_and_untrusted_text_is_escaped() -> None:
    hostile = 'apps/a"\nb.yaml'
    tracked = {"shop/w": live("w", hostile)}
    found = load_failures(tracked, set(), [typo(hostile)], REV, "now")
    info = found["shop/w"]
    assert (info.revision, info.time) == (REV, "now")
    assert "\n" not in info.message and "stays as" not in info.message
    assert info.message.startswith("'apps/a\"\\nb.yaml' does not load at")
