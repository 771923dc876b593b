from __future__ import annotations

import pytest

from gitsync.errors import SourceError
from gitsync.source.sparse import Entry, parse_sizes, parse_tree, plan, root_of


def blob(path: str, sha: str) -> Entry:
    return Entry("100644", "blob", sha, path)


def test_the_path_alone_minus_what_is_too_large() -> None:
    tree = parse_tree(
        "100644 blob a1\tapps/a.yaml\0"
        "100644 blob b2\tapps/big *[x]?.yaml\0"
        "100644 blob c3\tapps/unsent.yaml\0"
        "100644 blob d4\tdocs/huge.bin\0"
        "160000 commit e5\tapps/module\0"
    )
    sizes = parse_sizes("a1 10\nb2 2000\nd4 999999\n")
    got = plan(tree, sizes, "./apps/", max_file_bytes=1000)
    assert got.omitted == (("apps/big *[x]?.yaml", 2000), ("apps/unsent.yaml", None))
    assert got.patterns == "/apps\n!/apps/big\\ \\*\\[x\\]\\?.yaml\n!/apps/unsent.yaml\n"
    # what is checked out, listed with blob ids: under the path, not what was left out
    assert got.listing is not None and got.listing.root == "apps"
    assert dict(got.listing.blobs) == {"apps/a.yaml": "a1"}


@pytest.mark.parametrize(
    ("entry", "why"),
    [
        (Entry("120000", "blob", "l", "apps/link.yaml"), "a symbolic link"),
        (Entry("120000", "blob", "l", "elsewhere/link"), "a symbolic link outside the path"),
        (blob("docs/.gitattributes", "g"), "rules that rewrite bytes on checkout"),
        (blob("apps/a\ufffdb.yaml", "u"), "a name that is not UTF-8"),
    ],
)
def test_a_tree_the_loader_must_walk_has_no_listing(entry: Entry, why: str) -> None:
    tree = [blob("apps/a.yaml", "a"), entry]
    sizes = {"a": 5, "l": 5, "g": 5, "u": 5}
    assert plan(tree, sizes, "apps", max_file_bytes=10).listing is None, why
    assert plan([blob("apps/a.yaml", "a")], sizes, "apps", max_file_bytes=10).listing is not None


def test_the_whole_tree_and_its_total() -> None:
    tree = [blob("a.yaml", "a"), blob("b/c.yaml", "c")]
    assert plan(tree, {"a": 5, "c": 5}, ".", max_file_bytes=10).patterns == "/*\n"
    with pytest.raises(SourceError, match="are 10 bytes, more than 9; not checked out"):
        plan(tree, {"a": 5, "c": 5}, ".", max_file_bytes=10, max_total_bytes=9)


@pytest.mark.parametrize("name", ["a\nb.yaml", "a\ufffdb.yaml"])
def test_a_large_file_no_pattern_can_name_is_refused(name: str) -> None:
    with pytest.raises(SourceError, match="more than 10 bytes"):
        plan([blob(name, "x")], {}, ".", max_file_bytes=10)


@pytest.mark.parametrize(
    ("path", "root"), [(".", ""), ("", ""), ("apps/", "apps"), ("a/../b", "b"), ("../x", None)]
)
def test_root_of(path: str, root: str | None) -> None:
    assert root_of(path) == root
