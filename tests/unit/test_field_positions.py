"""The schema's rules (integer fields, keyed lists, atomic fields, resource quantities)
hold at their positions in a MyApp and a Deployment, and nowhere else: a label, an
annotation or a map key named like a field (``port``, ``replicas``, ``env``) is a plain
value (issue 22, finding 4).

Only APIs the consumers had before the rules were keyed by position, so that each case
can be run against the old code too.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gitsync.engine.differences import changes
from gitsync.engine.drift import canonicalise, drift_items, fast_equal, project
from gitsync.engine.fieldpaths import leaves, value_at
from gitsync.engine.managedfields import fields_of
from gitsync.engine.planner import Step, after
from gitsync.model.api import Obj
from gitsync.model.render import desired_myapp, render
from tests.unit.drift_samples import MYAPP, C, container, live_deployment

GIT_APP: Obj = {
    "apiVersion": "apps.example.com/v1",
    "kind": "MyApp",
    "metadata": {"name": "web", "namespace": "shop"},
    "spec": {"image": "nginx:1.27", "port": 80, "replicas": 2},
}


def stored(app: Obj) -> Obj:
    """The MyApp as the API server stores it: the body plus identity and status."""
    out = copy.deepcopy(app)
    out["metadata"]["uid"] = "u1"
    out["status"] = {"phase": "Available"}
    return out


def set_at(obj: Obj, where: str, value: str) -> None:
    *parents, name = where.split(".")
    node = obj
    for part in parents:
        node = node.setdefault(part, {})
    node[name] = value


# (kind, where, what Git sets, what the cluster holds): equal only if read as integers
INTEGER_LOOKALIKES: list[Any] = [
    pytest.param("MyApp", "metadata.annotations.port", "0080", "80", id="MyApp annotation"),
    pytest.param("MyApp", "metadata.labels.replicas", "010", "10", id="MyApp label"),
    pytest.param("Deployment", "metadata.labels.containerPort", "08080", "8080", id="label"),
    pytest.param("Deployment", "metadata.annotations.replicas", "03", "3", id="annotation"),
    pytest.param("Deployment", "spec.template.metadata.labels.port", "080", "80", id="pod label"),
]


@pytest.mark.parametrize(("kind", "where", "wanted", "held"), INTEGER_LOOKALIKES)
def test_a_label_or_annotation_named_like_an_integer_field_is_a_string(
    kind: str, where: str, wanted: str, held: str
) -> None:
    desired = desired_myapp(GIT_APP) if kind == "MyApp" else render(MYAPP)
    live = stored(desired) if kind == "MyApp" else live_deployment()
    set_at(desired, where, wanted)
    # the same digits without the leading zeros: a real change, not the same integer
    set_at(live, where, held)
    assert not fast_equal(desired, live)
    items = drift_items(f"{kind}/web", desired, live)
    # reported as the strings they are, not as the integers they look like
    assert [(i.path, i.desired, i.live) for i in items] == [(where, wanted, held)]


# (object, its canonical form): integer fields are read as integers where they stand only
CANONICAL: list[Any] = [
    pytest.param({"spec": {"replicas": "3"}}, {"spec": {"replicas": 3}}, id="spec.replicas"),
    pytest.param({"spec": {"port": "80"}}, {"spec": {"port": 80}}, id="MyApp spec.port"),
    pytest.param(
        {"spec": {"template": {"spec": {"containers": [{"ports": [{"containerPort": "80"}]}]}}}},
        {"spec": {"template": {"spec": {"containers": [{"ports": [{"containerPort": 80}]}]}}}},
        id="containerPort",
    ),
    pytest.param(
        {"spec": {"template": {"spec": {"initContainers": [{"ports": [{"containerPort": "9"}]}]}}}},
        {"spec": {"template": {"spec": {"initContainers": [{"ports": [{"containerPort": 9}]}]}}}},
        id="an init container's containerPort",
    ),
    pytest.param(
        {"metadata": {"labels": {"replicas": "010", "port": "80", "containerPort": "1"}}},
        {"metadata": {"labels": {"replicas": "010", "port": "80", "containerPort": "1"}}},
        id="labels",
    ),
    pytest.param(
        {"metadata": {"annotations": {"port": "0080"}}},
        {"metadata": {"annotations": {"port": "0080"}}},
        id="annotations",
    ),
    pytest.param(
        {"spec": {"template": {"spec": {"replicas": "2", "port": "1"}}}},
        {"spec": {"template": {"spec": {"replicas": "2", "port": "1"}}}},
        id="the same names deeper",
    ),
    pytest.param({"replicas": "2", "port": "1"}, {"replicas": "2", "port": "1"}, id="at the top"),
    pytest.param(
        {"spec": {"template": {"spec": {"containers": [{"containerPort": "80"}]}}}},
        {"spec": {"template": {"spec": {"containers": [{"containerPort": "80"}]}}}},
        id="containerPort outside ports",
    ),
    pytest.param(
        {"spec": {"resources": {"limits": {"cpu": "1000m"}, "requests": {"memory": "1Gi"}}}},
        {"spec": {"resources": {"limits": {"cpu": "1"}, "requests": {"memory": "1Gi"}}}},
        id="MyApp resources",
    ),
    pytest.param(
        {
            "spec": {
                "template": {"spec": {"containers": [{"resources": {"limits": {"cpu": "1000m"}}}]}}
            }
        },
        {"spec": {"template": {"spec": {"containers": [{"resources": {"limits": {"cpu": "1"}}}]}}}},
        id="container resources",
    ),
    pytest.param(
        {"spec": {"resources": {"limits": {"cpu": "lots", "memory": "1Gi"}}}},
        {"spec": {"resources": {"limits": {"cpu": "lots", "memory": "1Gi"}}}},
        id="an invalid quantity stays as written",
    ),
    pytest.param(
        {"spec": {"template": {"spec": {"resources": {"limits": {"cpu": "1000m"}}}}}},
        {"spec": {"template": {"spec": {"resources": {"limits": {"cpu": "1000m"}}}}}},
        id="a map named resources elsewhere",
    ),
]


@pytest.mark.parametrize(("obj", "canonical"), CANONICAL)
def test_canonical_at_the_rules_positions_only(obj: Obj, canonical: Obj) -> None:
    assert canonicalise(obj) == canonical


def test_a_containerport_as_a_string_is_still_the_same_port() -> None:
    desired = render(MYAPP)
    container(desired)["ports"][0]["containerPort"] = "8080"
    live = live_deployment()
    assert fast_equal(desired, live)
    assert drift_items("Deployment/web", desired, live) == []
    container(live)["ports"][0]["containerPort"] = 8081
    assert [i.path for i in drift_items("Deployment/web", desired, live)] == [
        f"{C}.ports[containerPort=8080,protocol=TCP]"
    ]


def test_the_myapp_port_and_replicas_as_strings_are_the_same_integers() -> None:
    desired = {**GIT_APP, "spec": {**GIT_APP["spec"], "port": "80", "replicas": "2"}}
    live = stored(GIT_APP)
    assert fast_equal(desired, live)
    assert drift_items("MyApp/web", desired, live) == []


# a list at a position that is no keyed list: SMD holds it atomic, a leaf of its own
ENV_ELSEWHERE: Obj = {
    "spec": {"template": {"spec": {"env": [{"name": "A", "value": "1"}, {"name": "B"}]}}}
}


@pytest.mark.parametrize(
    ("body", "paths"),
    [
        pytest.param(
            ENV_ELSEWHERE, {("f:spec", "f:template", "f:spec", "f:env")}, id="env elsewhere"
        ),
        pytest.param(
            {"spec": {"ownerReferences": [{"uid": "u"}], "conditions": [{"type": "T"}]}},
            {("f:spec", "f:ownerReferences"), ("f:spec", "f:conditions")},
            id="ownerReferences and conditions elsewhere",
        ),
        pytest.param(
            {"spec": {"strategy": {"selector": {"a": "b"}}}},
            {("f:spec", "f:strategy", "f:selector", "f:a")},
            id="a map named selector elsewhere",
        ),
        pytest.param(
            {"spec": {"selector": {"matchLabels": {"a": "b"}}}},
            {("f:spec", "f:selector")},
            id="spec.selector: atomic",
        ),
        pytest.param(
            {"spec": {"env": [{"name": "A"}]}},
            {
                ("f:spec", "f:env", 'k:{"name":"A"}'),
                ("f:spec", "f:env", 'k:{"name":"A"}', "f:name"),
            },
            id="MyApp spec.env: keyed",
        ),
        pytest.param(
            {"status": {"conditions": [{"type": "T"}]}},
            {
                ("f:status", "f:conditions", 'k:{"type":"T"}'),
                ("f:status", "f:conditions", 'k:{"type":"T"}', "f:type"),
            },
            id="status.conditions: keyed",
        ),
    ],
)
def test_fields_of_keys_lists_where_they_are_keyed(body: Obj, paths: set[Any]) -> None:
    assert fields_of(body) == paths


def test_a_list_named_env_elsewhere_is_projected_and_compared_whole() -> None:
    live = copy.deepcopy(ENV_ELSEWHERE)
    live["spec"]["template"]["spec"]["env"].reverse()
    assert project(live, ENV_ELSEWHERE) == live
    assert not fast_equal(ENV_ELSEWHERE, live)
    [item] = drift_items("X/x", ENV_ELSEWHERE, live)
    assert item.path == "spec.template.spec.env"
    assert item.smd_path == ("f:spec", "f:template", "f:spec", "f:env")


def test_an_env_reordered_where_it_is_keyed_is_no_drift() -> None:
    live = stored({**GIT_APP, "spec": {**GIT_APP["spec"], "env": [{"name": "B"}, {"name": "A"}]}})
    desired = {**GIT_APP, "spec": {**GIT_APP["spec"], "env": [{"name": "A"}, {"name": "B"}]}}
    assert fast_equal(desired, live)
    assert changes(live, desired) == []


def test_a_list_named_env_elsewhere_changes_by_index() -> None:
    live = copy.deepcopy(ENV_ELSEWHERE)
    live["spec"]["template"]["spec"]["env"].reverse()
    paths = [c.path for c in changes(live, ENV_ELSEWHERE)]
    assert paths and all(
        p.startswith("spec.template.spec.env[0]") or p.startswith("spec.template.spec.env[1]")
        for p in paths
    )


def test_the_merge_replaces_a_list_named_env_elsewhere_whole() -> None:
    live = copy.deepcopy(ENV_ELSEWHERE)
    live["spec"]["template"]["spec"]["env"].append({"name": "C"})
    step = Step("X/x", "configured", live, ENV_ELSEWHERE, body=ENV_ELSEWHERE)
    assert after(step)["spec"]["template"]["spec"]["env"] == [
        {"name": "A", "value": "1"},
        {"name": "B"},
    ]


def test_the_merge_keys_the_myapp_env() -> None:
    live = stored({**GIT_APP, "spec": {**GIT_APP["spec"], "env": [{"name": "C"}]}})
    body = {**GIT_APP, "spec": {**GIT_APP["spec"], "env": [{"name": "A"}]}}
    merged = after(Step("MyApp/shop/web", "configured", live, body, body=body))
    assert merged["spec"]["env"] == [{"name": "C"}, {"name": "A"}]


def test_a_key_default_holds_where_its_list_is_only() -> None:
    dep = {
        "spec": {
            "template": {
                "spec": {"containers": [{"name": "app", "ports": [{"containerPort": 80}]}]}
            }
        }
    }
    port = 'k:{"containerPort":80,"protocol":"TCP"}'
    at = ("f:spec", "f:template", "f:spec", "f:containers", 'k:{"name":"app"}', "f:ports", port)
    assert value_at(dep, at) == {"containerPort": 80}
    # a list named ports elsewhere has no protocol defaulted to TCP
    service_like = {"spec": {"ports": [{"containerPort": 80}]}}
    assert value_at(service_like, ("f:spec", "f:ports", port)) is None


def test_leaves_name_items_of_keyed_lists_only() -> None:
    assert leaves(ENV_ELSEWHERE) == [("f:spec", "f:template", "f:spec", "f:env")]


def test_an_item_without_its_key_is_no_item_of_a_keyed_list() -> None:
    # the server refuses such a body, so there is nothing to compare it with
    desired = render(MYAPP)
    desired["spec"]["template"]["spec"]["containers"].append({"image": "sidecar:1"})
    assert drift_items("Deployment/web", desired, live_deployment()) == []
