"""FieldsV1 (gitsync.engine.managedfields) and drift canonicalisation
(gitsync.engine.drift) as properties."""

from __future__ import annotations

import copy
import json
from typing import Any

from hypothesis import example, given
from hypothesis import strategies as st

from gitsync.engine.drift import canonicalise, drift_items, fast_equal
from gitsync.engine.managedfields import fields_of, human_path, key_element, leaf_paths

# any text, the escapes the API server writes differently from Python's json included
TEXT = st.text(max_size=12)
KEY_VALUES = st.one_of(TEXT, st.integers(-(2**53), 2**53), st.booleans())


@given(st.dictionaries(st.text(min_size=1, max_size=8), KEY_VALUES, min_size=1, max_size=3))
@example({"name": "A&B<é>\u2028\b\f\x7f"})
@example({"containerPort": 80, "protocol": "TCP"})
def test_list_keys_round_trip(key: dict[str, Any]) -> None:
    element = key_element(key)
    assert element.startswith("k:")
    assert json.loads(element[2:]) == key
    # one line, whatever the key holds: it is a JSON object key in fieldsV1
    assert "\n" not in element
    human_path(("f:spec", "f:env", element, "f:value"))  # never raises


ELEMENT = st.one_of(
    st.builds(lambda s: f"f:{s}", TEXT),
    st.builds(lambda k: key_element(k), st.dictionaries(TEXT, KEY_VALUES, min_size=1, max_size=2)),
    st.builds(lambda v: "v:" + json.dumps(v), KEY_VALUES),
    st.builds(lambda i: f"i:{i}", st.integers(0, 99)),
)
PATHS = st.sets(st.lists(ELEMENT, min_size=1, max_size=5).map(tuple), max_size=12)


def encode(paths: set[tuple[str, ...]]) -> dict[str, Any]:
    """A fieldsV1 set as the API server writes one: a leaf is ``{}``; a member that also
    has members below it carries a ``"."`` entry."""
    root: dict[str, Any] = {}
    for path in paths:
        node = root
        for element in path:
            node = node.setdefault(element, {})
    for path in paths:
        node = root
        for element in path:
            node = node[element]
        if node:
            node["."] = {}
    return root


@given(PATHS)
def test_fields_v1_round_trip(paths: set[tuple[str, ...]]) -> None:
    tree = encode(paths)
    assert leaf_paths(tree) == paths
    # through JSON, as it comes from the API server
    assert leaf_paths(json.loads(json.dumps(tree))) == paths


NAMES = st.text(st.characters(codec="ascii", categories=["L", "N"]), min_size=1, max_size=6)
QUANTITY = st.sampled_from(
    ["1", "1000m", "0.5", "500m", "1Gi", "1024Mi", "128Mi", "2e3", "x", "2n", "1.4727", "100u"]
)


@st.composite
def deployment(draw: st.DrawFn) -> dict[str, Any]:
    env_names = draw(st.lists(NAMES, unique=True, max_size=5))
    ports = draw(st.lists(st.integers(1, 65535), unique=True, max_size=3))
    container = {
        "name": "app",
        "image": draw(st.sampled_from(["nginx:1.27", "nginx:1.28"])),
        "env": [{"name": n, "value": draw(TEXT)} for n in env_names],
        "ports": [
            {"containerPort": draw(st.sampled_from([p, str(p)])), "protocol": "TCP"} for p in ports
        ],
        "resources": {"limits": {"cpu": draw(QUANTITY), "memory": draw(QUANTITY)}},
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "labels": {"app": "web"}},
        "spec": {
            "replicas": draw(st.sampled_from([1, 2, "2"])),
            "template": {"spec": {"containers": [container]}},
        },
    }


@given(deployment())
def test_canonicalise_is_idempotent(obj: dict[str, Any]) -> None:
    once = canonicalise(obj)
    assert canonicalise(once) == once
    assert canonicalise(copy.deepcopy(obj)) == once  # and pure: no input is changed


@given(deployment(), st.randoms(use_true_random=False))
def test_keyed_lists_compare_in_any_order(obj: dict[str, Any], rnd: Any) -> None:
    live = copy.deepcopy(obj)
    container = live["spec"]["template"]["spec"]["containers"][0]
    rnd.shuffle(container["env"])
    rnd.shuffle(container["ports"])
    # the server's defaults and other managers' fields are no drift either
    container["terminationMessagePath"] = "/dev/termination-log"
    live["metadata"]["labels"]["added-by"] = "someone-else"
    assert fast_equal(obj, live)
    assert drift_items("Deployment/web", obj, live) == []


@given(deployment(), st.data())
def test_a_changed_value_is_drift(obj: dict[str, Any], data: st.DataObject) -> None:
    live = copy.deepcopy(obj)
    container = live["spec"]["template"]["spec"]["containers"][0]
    container["image"] = "evil:1"
    items = drift_items("Deployment/web", obj, live)
    assert not fast_equal(obj, live)
    assert [i.path for i in items] == ["spec.template.spec.containers[name=app].image"]


@given(deployment())
def test_fields_of_is_a_fields_v1_set(obj: dict[str, Any]) -> None:
    paths = fields_of(obj)
    assert leaf_paths(encode(paths)) == paths
    for path in paths:
        human_path(path)
