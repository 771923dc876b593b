"""A load from the checkout's listing (the files and blob ids git wrote) is the walk's
load, file for file and error for error: random trees of real git commits, loaded both
ways, cold and after another commit with the cache of the first."""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from gitsync.source import manifests, sparse
from gitsync.source.manifests import Limits, LoadResult
from tests.support import app_yaml

GIT = [
    "git",
    "-c",
    "user.name=t",
    "-c",
    "user.email=t@example.com",
    "-c",
    "init.defaultBranch=main",
]
DIRS = ("a", "b", ".hidden", "c.yaml", "apps")
NAMES = ("m.yaml", "n.yml", "t.txt", ".k.yaml", "z.YAML", "0.yaml")
#: a file's bytes: a MyApp (two files may declare one: a duplicate), or not one
CONTENTS = st.one_of(
    st.sampled_from(("x", "y", "z")).map(lambda n: app_yaml("shop", n)),
    st.sampled_from(("u", "v")).map(lambda n: app_yaml("shop", n, image="nginx:1.28")),
    st.just("kind: [\n"),
    st.just("apiVersion: apps.example.com/v1\nkind: MyApp\nmetadata: {name: Bad_Name}\n"),
    st.just(""),
)
PATHS = st.tuples(st.lists(st.sampled_from(DIRS), max_size=4), st.sampled_from(NAMES)).map(
    lambda t: "/".join((*t[0], t[1]))
)
TREES = st.dictionaries(PATHS, CONTENTS, max_size=12)


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        [*GIT, *args], cwd=repo, check=True, capture_output=True, text=True
    ).stdout


def commit(repo: Path, tree: dict[str, str]) -> sparse.Listing | None:
    """Make the work tree ``tree`` (paths that would be both a file and a directory are
    left out), commit it, and list it as the source does."""
    for old in git(repo, "ls-files", "-z").split("\0"):
        if old:
            (repo / old).unlink()
    files = sorted(tree)
    kept = [p for p in files if not any(q.startswith(p + "/") for q in files)]
    for path in kept:
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(tree[path])
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "--allow-empty", "-m", "c")
    git(repo, "clean", "-ffdxq")  # the directories emptied, as a checkout leaves none
    entries = sparse.parse_tree(git(repo, "ls-tree", "-r", "-z", "--full-tree", "HEAD"))
    sizes = sparse.parse_sizes(
        git(repo, "cat-file", "--batch-all-objects", "--batch-check=%(objectname) %(objectsize)")
    )
    return sparse.plan(entries, sizes, ".", max_file_bytes=1 << 20).listing


def same(a: LoadResult, b: LoadResult) -> None:
    assert [(x.key, x.file, x.document, x.line, x.obj) for x in a.apps] == [
        (x.key, x.file, x.document, x.line, x.obj) for x in b.apps
    ]
    assert [str(e) for e in a.errors] == [str(e) for e in b.errors]
    assert (a.files, a.error_count) == (b.files, b.error_count)


@settings(max_examples=40)
@given(TREES, TREES, st.sampled_from((".", "apps", "a/b")), st.sampled_from((64, 1)))
def test_a_load_from_the_listing_is_the_walks_load(
    first: dict[str, str], second: dict[str, str], path: str, depth: int
) -> None:
    limits = Limits(max_dir_depth=depth)
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp)
        git(repo, "init", "-q")
        cache = manifests.ParseCache()
        for tree in (first, second):
            listing = commit(repo, tree)
            assert listing is not None  # plain files only
            if not (repo / path).is_dir():
                continue  # the loader says the path is missing, with or without a listing
            walked = manifests.load(repo, path, limits=limits)
            listed = manifests.load(repo, path, limits=limits, cache=cache, listing=listing)
            same(walked, listed)


def test_a_tree_with_a_symbolic_link_or_attributes_has_no_listing(tmp_path: Path) -> None:
    git(tmp_path, "init", "-q")
    assert commit(tmp_path, {"apps/a.yaml": app_yaml("shop", "a")}) is not None
    (tmp_path / "link.yaml").symlink_to("apps/a.yaml")
    git(tmp_path, "add", "-A")
    git(tmp_path, "commit", "-q", "-m", "link")
    entries = sparse.parse_tree(git(tmp_path, "ls-tree", "-r", "-z", "--full-tree", "HEAD"))
    assert sparse.plan(entries, {}, "apps", max_file_bytes=1 << 20).listing is None
    listed = commit(tmp_path, {"apps/a.yaml": "x: 1\n", ".gitattributes": "*.yaml eol=crlf\n"})
    assert listed is None


def test_a_file_listed_with_a_blob_parsed_before_is_not_read_again(tmp_path: Path) -> None:
    git(tmp_path, "init", "-q")
    listing = commit(tmp_path, {"apps/a.yaml": app_yaml("shop", "a"), "b.yaml": "kind: [\n"})
    cache = manifests.ParseCache()
    first = manifests.load(tmp_path, ".", cache=cache, listing=listing)
    assert [a.key for a in first.apps] == ["shop/a"] and cache.parsed == 2
    # the bytes under a listed blob are not looked at: a load knows the file by its id
    (tmp_path / "apps" / "a.yaml").write_text("kind: [\n")
    again = manifests.load(tmp_path, ".", cache=cache, listing=listing)
    assert again.apps == first.apps and cache.reused == 2 and cache.parsed == 0
    assert not manifests.load(tmp_path, ".", cache=cache).apps  # a walk reads them
    # a listing of another path, or a path deeper than the walk goes: the walk decides
    deep = manifests.load(tmp_path, ".", limits=Limits(max_dir_depth=0), listing=listing)
    assert str(deep.errors[0]).startswith("apps: directory nested")
    other = sparse.Listing("apps", listing.blobs) if listing else None
    assert not manifests.load(tmp_path, ".", cache=cache, listing=other).apps
