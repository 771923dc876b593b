"""A load with a ParseCache gives what a load without one gives, parsing only new files."""

from __future__ import annotations

from pathlib import Path

from gitsync.gitops.sync import myapp_body
from gitsync.source.manifests import Limits, LoadResult, ParseCache, load
from tests.unit.test_manifests import app, write

BROKEN = """\
apiVersion: apps.example.com/v1
kind: MyApp
metadata: {name: Bad_Name}
spec: {image: "", replicas: -1}
"""


def tree(root: Path, n: int = 5) -> Path:
    files = {f"apps/app-{i}.yaml": app(f"app-{i}") for i in range(n)}
    return write(root, {**files, "apps/broken.yaml": BROKEN})


def same(a: LoadResult, b: LoadResult) -> None:
    assert a.apps == b.apps
    assert [str(e) for e in a.errors] == [str(e) for e in b.errors]
    assert (a.files, a.error_count) == (b.files, b.error_count)


def test_an_unchanged_tree_is_read_but_not_parsed_again(tmp_path: Path) -> None:
    root = tree(tmp_path)
    cache = ParseCache()
    first = load(root, "apps", cache=cache)
    assert (cache.parsed, cache.reused) == (6, 0)
    again = load(root, "apps", cache=cache)
    assert (cache.parsed, cache.reused) == (0, 6)
    same(again, first)
    same(again, load(root, "apps"))
    assert len(first.apps) == 5 and first.error_count >= 3  # the broken file's errors kept


def test_a_changed_file_alone_is_parsed_and_its_change_is_seen(tmp_path: Path) -> None:
    root = tree(tmp_path)
    cache = ParseCache()
    load(root, "apps", cache=cache)
    (root / "apps" / "app-2.yaml").write_text(app("app-2").replace("1.27", "1.28"))
    (root / "apps" / "broken.yaml").write_text(app("fixed"))
    loaded = load(root, "apps", cache=cache)
    assert (cache.parsed, cache.reused) == (2, 4)
    same(loaded, load(root, "apps"))
    images = {a.obj["metadata"]["name"]: a.obj["spec"]["image"] for a in loaded.apps}
    assert images["app-2"] == "nginx:1.28" and images["app-1"] == "nginx:1.27"
    assert "fixed" in images and loaded.ok


def test_a_file_that_left_the_tree_is_forgotten(tmp_path: Path) -> None:
    root = tree(tmp_path)
    cache = ParseCache()
    load(root, "apps", cache=cache)
    kept = (root / "apps" / "app-0.yaml").read_text()
    (root / "apps" / "app-0.yaml").unlink()
    gone = load(root, "apps", cache=cache)
    assert "app-0" not in {a.obj["metadata"]["name"] for a in gone.apps}
    (root / "apps" / "app-0.yaml").write_text(kept)
    load(root, "apps", cache=cache)
    assert (cache.parsed, cache.reused) == (1, 5)  # back with the same bytes: parsed anew


def test_the_same_bytes_under_another_name_are_placed_at_that_name(tmp_path: Path) -> None:
    root = tree(tmp_path)
    cache = ParseCache()
    load(root, "apps", cache=cache)
    (root / "apps" / "broken.yaml").rename(root / "apps" / "moved.yaml")
    (root / "apps" / "app-3.yaml").rename(root / "apps" / "z.yaml")
    loaded = load(root, "apps", cache=cache)
    assert cache.parsed == 2
    assert {str(e).split(":", 1)[0] for e in loaded.errors} == {"apps/moved.yaml"}
    assert (
        next(a.file for a in loaded.apps if a.obj["metadata"]["name"] == "app-3") == "apps/z.yaml"
    )


def test_other_settings_check_every_file_again(tmp_path: Path) -> None:
    root = write(tmp_path, {"apps/web.yaml": app("web").replace("  namespace: shop\n", "")})
    cache = ParseCache()
    assert load(root, "apps", cache=cache).apps[0].key == "default/web"
    loaded = load(root, "apps", default_namespace="shop", cache=cache)
    assert cache.parsed == 1 and loaded.apps[0].key == "shop/web"
    refused = load(root, "apps", default_namespace="shop", watch_namespace="other", cache=cache)
    assert cache.parsed == 1 and not refused.apps and not refused.ok
    load(root, "apps", default_namespace="shop", limits=Limits(max_depth=8), cache=cache)
    assert cache.parsed == 1


def test_a_capped_flood_of_errors_comes_back_capped_the_same(tmp_path: Path) -> None:
    flood = "".join(f"---\nkind: Nope{i}\n" for i in range(50))
    root = write(tmp_path, {"apps/flood.yaml": flood})
    cache = ParseCache()
    first = load(root, "apps", cache=cache)
    again = load(root, "apps", cache=cache)
    assert cache.reused == 1
    same(again, first)
    assert first.error_count == 50 and len(first.errors) == Limits().max_errors_per_file + 1


def test_what_a_sync_builds_from_a_cached_app_leaves_the_cache_as_it_was(
    tmp_path: Path,
) -> None:
    root = tree(tmp_path, 1)
    cache = ParseCache()
    first = load(root, "apps", cache=cache).apps[0]
    body = myapp_body(first, "source-label")
    body["spec"]["image"] = "edited"
    body["metadata"]["labels"]["x"] = "y"
    again = load(root, "apps", cache=cache).apps[0]
    assert cache.reused == 2
    assert again.obj == load(root, "apps").apps[0].obj
