"""Compaction: an equal tree, nodes shared across trees, a table that forgets."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gitsync.engine import blame, drift, planner
from gitsync.engine.managedfields import fields_of
from gitsync.model.api import APPLIED_ANNOTATION, LAST_APPLIED_ANNOTATION, Obj
from gitsync.model.compact import Compactor, _signature, cached
from gitsync.model.render import render
from tests.fuzz.test_fields import encode
from tests.unit.drift_samples import MYAPP, live_deployment

_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=80),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=30,
)


def obj(name: str, spec: Any) -> Obj:
    return {"metadata": {"name": name}, "spec": spec}


@settings(max_examples=300)
@given(st.lists(_json, min_size=1, max_size=6))
def test_a_compacted_tree_is_the_same_json_as_the_one_given(specs: list[Any]) -> None:
    c = Compactor()
    given_ = [obj(f"o{i}", s) for i, s in enumerate(specs)]
    out = [c.compact(o) for o in given_]
    # types, key order and all: True is not 1, 1 is not 1.0
    assert [json.dumps(o) for o in out] == [json.dumps(o) for o in given_]
    assert c.changed() == []


@settings(max_examples=200)
@given(st.lists(_json, min_size=1, max_size=6))
def test_nodes_whose_signatures_collide_are_shared_only_when_equal(specs: list[Any]) -> None:
    c = Compactor(signature=lambda items: 0)  # every node collides with the first
    given_ = [obj(f"o{i}", {"a": s, "b": [s]}) for i, s in enumerate(specs)]
    out = [c.compact(o) for o in given_]
    assert [json.dumps(o) for o in out] == [json.dumps(o) for o in given_]


def test_under_collisions_equal_nodes_are_still_one() -> None:
    c = Compactor(signature=lambda items: 0)
    a = c.compact(obj("a", {"x": {"y": "1"}}))
    b = c.compact(obj("b", {"x": {"y": "1"}}))
    d = c.compact(obj("d", {"x": {"y": 1}}))
    e = c.compact(obj("e", {"x": {"z": "1"}}))
    assert a["spec"]["x"] is b["spec"]["x"]
    # equal values that are not one object (too long to intern, floats) are equal
    c = Compactor(signature=lambda items: 0)
    long_ = [c.compact(obj(n, {"x": {"y": _fresh("l" * 65), "f": 0.5}})) for n in "fg"]
    assert long_[0]["spec"]["x"] is long_[1]["spec"]["x"]
    assert d["spec"]["x"] == {"y": 1} and e["spec"]["x"] == {"z": "1"}


# one JSON type per value, and a map's keys in one order: the API server gives each field
# one type, and writes an object's fields in its schema's order (see Compactor.compact)
_typed = st.recursive(
    st.none() | st.integers(0, 3) | st.sampled_from(["a", "b", "l" * 70]),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from("xyz"), inner).map(lambda d: dict(sorted(d.items())))
    ),
    max_leaves=20,
)


@settings(max_examples=300)
@given(_typed, _typed)
def test_compacted_like_an_earlier_version_it_is_still_the_same_json(spec: Any, old: Any) -> None:
    c = Compactor()
    like = c.compact(obj("a", old))
    out = c.compact(obj("a", spec), like)
    assert json.dumps(out) == json.dumps(obj("a", spec))
    assert c.changed() == []


def test_the_parts_equal_to_the_earlier_version_are_taken_from_it_whole() -> None:
    c = Compactor()
    like = c.compact({"metadata": {"name": "a", "v": "1"}, "spec": {"x": [1]}, "status": {"n": 1}})
    out = c.compact(
        {"metadata": {"name": "a", "v": "2"}, "spec": {"x": [1]}, "status": {"n": 1}}, like
    )
    assert out["spec"] is like["spec"] and out["status"] is like["status"]
    assert out["metadata"] == {"name": "a", "v": "2"} and like["metadata"]["v"] == "1"
    same = {"metadata": {"name": "a", "v": "1"}, "spec": {"x": [1]}, "status": {"n": 1}}
    assert c.compact(same, like) is like


def test_equal_subtrees_of_two_objects_are_one_node() -> None:
    c = Compactor()
    a = c.compact(obj("a", {"template": {"ports": [{"port": 80}], "env": {"A": "1"}}}))
    b = c.compact(obj("b", {"template": {"ports": [{"port": 80}], "env": {"A": "1"}}}))
    assert a["spec"]["template"] is b["spec"]["template"]
    # each object's top, metadata and spec stay its own: they hold its name
    assert a is not b and a["spec"] is not b["spec"] and a["metadata"] is not b["metadata"]


def test_lists_below_the_top_level_fields_are_shared_and_their_items_too() -> None:
    c = Compactor()
    a = c.compact({"metadata": {"name": "a"}, "items": [{"p": 80}], "spec": {"ports": [80]}})
    b = c.compact({"metadata": {"name": "b"}, "items": [{"p": 80}], "spec": {"ports": [80]}})
    assert a["spec"]["ports"] is b["spec"]["ports"]
    assert a["items"] is not b["items"] and a["items"][0] is b["items"][0]


def _fresh(text: str) -> str:
    return "".join(list(text))  # an equal string that is not the same object


def test_short_strings_are_interned_long_and_unique_ones_are_not() -> None:
    c = Compactor()
    short, long_, uid = "s" * 64, "l" * 65, "6f1c2a7e-2b7a-4d8e-9c41-0a6c9b1f2d3e"
    one = c.compact({"metadata": {"uid": _fresh(uid), "name": _fresh(short)}, "x": _fresh(long_)})
    two = c.compact({"metadata": {"uid": _fresh(uid), "name": _fresh(short)}, "x": _fresh(long_)})
    assert one["metadata"]["name"] is two["metadata"]["name"]
    assert one["x"] is not two["x"]
    assert one["metadata"]["uid"] is not two["metadata"]["uid"]
    assert one == two
    # a node holding a string too long to intern, or a float, is shared all the same
    nodes = [c.compact(obj(n, {"m": {"text": _fresh(long_), "f": 0.5}})) for n in "ab"]
    assert nodes[0]["spec"]["m"] is nodes[1]["spec"]["m"]


def test_values_equal_in_python_but_not_in_json_are_not_shared() -> None:
    c = Compactor()
    trees = [c.compact(obj(str(v), {"x": {"v": v}})) for v in (True, 1, 1.0)]
    assert [json.dumps(t["spec"]["x"]) for t in trees] == ['{"v": true}', '{"v": 1}', '{"v": 1.0}']
    assert trees[0]["spec"]["x"] is not trees[1]["spec"]["x"]


def test_a_compacted_tree_is_a_copy_the_caller_cannot_change() -> None:
    c = Compactor()
    given_ = obj("a", {"x": {"y": [1, 2]}})
    out = c.compact(given_)
    given_["spec"]["x"]["y"].append(3)
    assert out["spec"]["x"]["y"] == [1, 2]


def test_a_version_equal_to_the_one_it_replaces_is_that_one() -> None:
    c = Compactor()
    first = c.compact(obj("a", {"x": {"y": [1, 2]}}))
    again = c.compact(obj("a", {"x": {"y": [1, 2]}}), like=first)
    assert again is first
    changed = c.compact(obj("a", {"x": {"y": [1, 2]}, "z": 1}), like=first)
    assert changed == obj("a", {"x": {"y": [1, 2]}, "z": 1})
    assert changed["metadata"] is first["metadata"] and changed["spec"] is not first["spec"]


def test_changed_finds_a_shared_node_changed_in_place() -> None:
    c = Compactor()
    a = c.compact(obj("a", {"x": {"y": "1"}}))
    b = c.compact(obj("b", {"x": {"y": "1"}}))
    assert c.changed() == []
    a["spec"]["x"]["y"] = "2"  # what nothing may do: b changes too
    assert b["spec"]["x"]["y"] == "2"
    assert c.changed() == [{"y": "2"}]


def test_sweep_forgets_what_only_the_table_holds_and_keeps_the_rest() -> None:
    c = Compactor()
    kept = c.compact(obj("a", {"x": {"y": [{"z": 1}]}}))
    gone = c.compact(obj("b", {"q": {"r": [{"s": 2}]}}))
    assert len(c) == 6
    del gone
    assert c.sweep() == 3  # the whole of b's subtree in one sweep
    assert len(c) == 3
    again = c.compact(obj("c", {"x": {"y": [{"z": 1}]}}))
    assert again["spec"]["x"] is kept["spec"]["x"]


def _height(node: Any) -> int:
    if isinstance(node, dict):
        node = list(node.values())
    if not isinstance(node, list):
        return 0
    return 1 + max((_height(v) for v in node), default=0)


@pytest.mark.parametrize("parents_first", [True, False])
def test_a_sweep_forgets_a_whole_subtree_in_whatever_order_it_meets_its_nodes(
    parents_first: bool,
) -> None:
    # the table's dicts are walked in order; a signature whose low bits grow (or
    # shrink) with a node's height puts each parent in a dict walked before (after)
    # its children's
    def signature(items: Iterable[Any]) -> int:
        items = list(items)
        height = _height([v[1] if isinstance(v, tuple) else v for v in items]) + 1
        low = 255 - height if parents_first else height
        return (_signature(items) & ~0xFF) | low

    c = Compactor(signature)
    deep: Any = {"leaf": 1}
    for level in range(8):
        deep = {f"l{level}": deep, "list": [deep, {"n": level}]}
    kept = c.compact(obj("a", {"x": {"y": [{"z": 1}]}}))
    gone = c.compact(obj("b", deep))
    before = len(c)
    del gone
    assert c.sweep() == before - 3
    assert len(c) == 3
    again = c.compact(obj("c", {"x": {"y": [{"z": 1}]}}))
    assert again["spec"]["x"] is kept["spec"]["x"]


def test_the_table_stays_bounded_under_churn() -> None:
    c = Compactor()
    for i in range(50_000):
        c.compact(obj(f"o{i}", {"unique": {"i": i}}))  # each held by nobody afterwards
    assert len(c) <= 20_000


def test_a_table_of_live_nodes_is_swept_rarely() -> None:
    c = Compactor()
    held = [c.compact(obj(f"o{i}", {"unique": {"i": i}})) for i in range(40_000)]
    # 10,000 nodes, then twice as many each time: every node is held, none goes
    assert len(c) == len(held) and c.sweeps == 2


def test_the_cache_drops_kubectls_last_applied_annotation_and_nothing_else() -> None:
    live = live_deployment()
    live["metadata"]["annotations"][LAST_APPLIED_ANNOTATION] = json.dumps(live)
    out = cached(live)
    assert LAST_APPLIED_ANNOTATION not in out["metadata"]["annotations"]
    del live["metadata"]["annotations"][LAST_APPLIED_ANNOTATION]
    assert out == live
    assert cached(live) == live


def _applied(live: Obj) -> Obj:
    """The sample Deployment with gitsync's stamp and managedFields entry, as the
    server keeps it after gitsync's apply."""
    stamp = planner.stamped(render(MYAPP))["metadata"]["annotations"][APPLIED_ANNOTATION]
    live["metadata"]["annotations"][APPLIED_ANNOTATION] = stamp
    live["metadata"]["managedFields"] = [
        {
            "manager": "gitsync",
            "operation": "Apply",
            "apiVersion": "apps/v1",
            "time": "2025-06-01T10:00:00Z",
            "fieldsType": "FieldsV1",
            "fieldsV1": encode(fields_of(render(MYAPP))),
        }
    ]
    return live


def _with_drift(live: Obj) -> Obj:
    """The sample Deployment after others changed it: kubectl scaled it, a human set
    an image by hand, and kubectl's client-side apply left its annotation."""
    live = copy.deepcopy(live)
    live["spec"]["replicas"] = 7
    live["spec"]["template"]["spec"]["containers"][0]["image"] = "nginx:hand"
    live["metadata"]["annotations"][LAST_APPLIED_ANNOTATION] = json.dumps(live["spec"])
    live["metadata"]["managedFields"].append(
        {
            "manager": "kubectl",
            "operation": "Update",
            "apiVersion": "apps/v1",
            "time": "2025-06-02T10:00:00Z",
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:spec": {"f:replicas": {}}},
        }
    )
    return live


def test_decisions_on_a_cached_object_equal_those_on_the_whole_object() -> None:
    desired = render(MYAPP)
    settings_ = planner.Settings("correct", ("kubectl",), "gitsync", "off")
    policy = planner.policy_for(MYAPP, settings_)
    for live in (_applied(live_deployment()), _with_drift(_applied(live_deployment()))):
        whole = planner.decide("Deployment/web", desired, live, policy)
        projected = planner.decide("Deployment/web", desired, cached(live), policy)
        # every decision alike; only the live object they carry lacks the annotation
        assert replace(projected, live=None) == replace(whole, live=None)
        assert whole.action == ("unchanged" if live["spec"]["replicas"] == 3 else "configured")
        whole_rows = blame.blame(MYAPP, live, None)
        assert blame.blame(cached(MYAPP), cached(live), None) == whole_rows
        assert blame.drifted(whole_rows) == (live["spec"]["replicas"] == 7)


def test_git_declaring_kubectls_annotation_is_no_drift_on_a_cache_without_it() -> None:
    desired = render(MYAPP)
    desired["metadata"].setdefault("annotations", {})[LAST_APPLIED_ANNOTATION] = "{}"
    live = _applied(live_deployment())
    live["metadata"]["annotations"][LAST_APPLIED_ANNOTATION] = "{}"
    assert drift.fast_equal(desired, cached(live))
    assert drift.drift_items("Deployment/web", desired, cached(live)) == []


def test_tidy_sweeps_only_when_nodes_were_added_since_the_last_sweep() -> None:
    c = Compactor()
    assert c.tidy() == 0 and c.sweeps == 0  # nothing added yet
    kept = c.compact(obj("a", {"x": {"y": "1"}}))
    c.compact(obj("b", {"z": {"y": "2"}}))  # held by nobody
    assert c.tidy() == 1 and c.sweeps == 1
    assert c.tidy() == 0 and c.sweeps == 1  # nothing added since
    c.compact(obj("c", {"x": {"y": "1"}}))  # an equal node: the held one, nothing added
    assert c.tidy() == 0 and c.sweeps == 1
    c.compact(obj("d", {"w": {"y": "3"}}))
    assert c.tidy() == 1 and c.sweeps == 2
    assert len(c) == 1 and kept["spec"]["x"] == {"y": "1"}


def test_tidy_sweeps_after_a_single_node_was_added() -> None:
    c = Compactor()
    c.compact(obj("a", {"x": {"y": "1"}}))  # one node, held by nobody
    assert c.tidy() == 1 and len(c) == 0


def test_a_list_equal_to_the_earlier_version_is_taken_from_it_whole() -> None:
    c = Compactor()
    like = c.compact({"metadata": {"name": "a", "v": "1"}, "spec": [[1], 2]})
    # another version (the top differs), its spec a list: the object's own, not shared
    out = c.compact({"metadata": {"name": "a", "v": "2"}, "spec": [[1], 2]}, like)
    assert out["spec"] is like["spec"]


def test_a_child_someone_holds_stays_shared_when_its_parent_goes() -> None:
    c = Compactor()
    tree = c.compact(obj("a", {"x": {"y": {"z": "1"}}}))
    held = tree["spec"]["x"]["y"]  # the child; its parent x goes with the tree
    del tree
    c.sweep()
    again = c.compact(obj("b", {"w": {"z": "1"}}))
    assert again["spec"]["w"] is held
