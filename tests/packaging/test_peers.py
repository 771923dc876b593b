"""The packaging tools are pinned and cached apart from the control plane."""

from __future__ import annotations

from testenv import build, peers


def test_pinning_a_tool_does_not_rebuild_the_control_plane() -> None:
    # the control plane's key hashes testenv/*/go.* and testenv/*/*.go: no file of the
    # peers may be among them, or a helm bump would rebuild kube-apiserver & co
    hashed = set(build.HERE.glob("*/go.*")) | set(build.HERE.glob("*/*.go"))
    assert hashed, "the control plane's pins were not found"
    assert not {p for p in hashed if peers.PEERS in p.parents}


def test_every_tool_is_pinned_with_a_go_sum() -> None:
    for name, tool in peers.TOOLS.items():
        module = tool.dir
        assert (module / "go.mod").is_file() and (module / "go.sum").is_file(), name
        path = f"gitsync.local/testenv/peers/{module.name}"
        assert f"module {path}\n" in (module / "go.mod").read_text(), name


def test_each_tool_has_a_key_and_a_place_of_its_own() -> None:
    places = {peers.binary(name).parent for name in peers.TOOLS}
    assert len(places) == len(peers.TOOLS)
    assert all(build.cache_root() in p.parents for p in places)
    assert {peers.cache_key(t) for t in peers.TOOLS.values()}.isdisjoint({build.cache_key()})
