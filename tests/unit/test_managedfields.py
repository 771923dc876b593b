"""managedFields: field sets, the paths gitsync applies, and who owns a path.

The fixtures have the shape kube-apiserver 1.35 writes: an Apply by gitsync, then
the controller manager's Updates, then other managers taking fields away.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gitsync.engine.drift import DriftItem, attribute
from gitsync.engine.fieldrules import rule_at
from gitsync.engine.managedfields import (
    Owner,
    Path,
    fields_of,
    human_path,
    item_key,
    key_element,
    leaf_paths,
    owner_of,
    owner_sets,
    owners_of,
    pick_owner,
)
from gitsync.model.api import Obj
from gitsync.model.render import render

UID = "6f1c2a7e-2b7a-4d8e-9c41-0a6c9b1f2d3e"
APP = 'k:{"name":"app"}'
PORT = 'k:{"containerPort":8080,"protocol":"TCP"}'
CONTAINER: Path = ("f:spec", "f:template", "f:spec", "f:containers", APP)
REPLICAS: Path = ("f:spec", "f:replicas")
IMAGE: Path = (*CONTAINER, "f:image")

GITSYNC_FIELDS: Obj = {
    "f:metadata": {
        "f:labels": {
            "f:app.kubernetes.io/instance": {},
            "f:app.kubernetes.io/managed-by": {},
            "f:app.kubernetes.io/name": {},
            "f:gitsync.apps.example.com/bucket": {},
        },
        "f:ownerReferences": {f'k:{{"uid":"{UID}"}}': {}},
    },
    "f:spec": {
        "f:replicas": {},
        "f:selector": {},
        "f:template": {
            "f:metadata": {
                "f:labels": {"f:app.kubernetes.io/instance": {}, "f:app.kubernetes.io/name": {}}
            },
            "f:spec": {
                "f:containers": {
                    APP: {
                        ".": {},
                        "f:env": {'k:{"name":"LOG_LEVEL"}': {".": {}, "f:name": {}, "f:value": {}}},
                        "f:image": {},
                        "f:name": {},
                        "f:ports": {PORT: {".": {}, "f:containerPort": {}, "f:protocol": {}}},
                        "f:resources": {
                            "f:limits": {"f:memory": {}},
                            "f:requests": {"f:cpu": {}, "f:memory": {}},
                        },
                    }
                }
            },
        },
    },
}


def entry(manager: str, operation: str, fields: Obj, time: str, subresource: str = "") -> Obj:
    out: Obj = {
        "apiVersion": "apps/v1",
        "fieldsType": "FieldsV1",
        "fieldsV1": fields,
        "manager": manager,
        "operation": operation,
        "time": time,
    }
    if subresource:
        out["subresource"] = subresource
    return out


def without(fields: Obj, path: Path) -> Obj:
    """``fields`` minus one leaf: what an Update or a forced Apply by another manager does."""
    out = copy.deepcopy(fields)
    node = out
    for element in path[:-1]:
        node = node[element]
    del node[path[-1]]
    return out


def nested(path: Path) -> Obj:
    out: Obj = {}
    for element in reversed(path):
        out = {element: out}
    return out


GITSYNC = entry("gitsync", "Apply", GITSYNC_FIELDS, "2025-06-01T10:00:00Z")
KCM_REVISION = entry(
    "kube-controller-manager",
    "Update",
    {"f:metadata": {"f:annotations": {".": {}, "f:deployment.kubernetes.io/revision": {}}}},
    "2025-06-01T10:00:01Z",
)
KCM_STATUS = entry(
    "kube-controller-manager",
    "Update",
    {
        "f:status": {
            "f:availableReplicas": {},
            "f:conditions": {
                ".": {},
                'k:{"type":"Available"}': {".": {}, "f:status": {}, "f:type": {}},
            },
            "f:observedGeneration": {},
            "f:replicas": {},
        }
    },
    "2025-06-01T10:00:05Z",
    subresource="status",
)


def managed(*others: Obj, gitsync_fields: Obj = GITSYNC_FIELDS) -> list[Obj]:
    gitsync = {**GITSYNC, "fieldsV1": gitsync_fields}
    return [gitsync, KCM_REVISION, KCM_STATUS, *others]


KUBECTL_SCALE = entry("kubectl", "Update", nested(REPLICAS), "2025-06-01T11:00:00Z", "scale")
KUBECTL_SET = entry("kubectl-set", "Update", nested(IMAGE), "2025-06-01T11:05:00Z")
HPA_SIM = entry("hpa-sim", "Apply", nested(REPLICAS), "2025-06-01T11:10:00Z")

CASES: list[Any] = [
    pytest.param(
        managed(),
        REPLICAS,
        Owner("gitsync", "Apply", "2025-06-01T10:00:00Z"),
        id="gitsync owns what it applied",
    ),
    pytest.param(
        managed(KUBECTL_SCALE, gitsync_fields=without(GITSYNC_FIELDS, REPLICAS)),
        REPLICAS,
        Owner("kubectl", "Update", "2025-06-01T11:00:00Z", "scale"),
        id="kubectl scale took replicas",
    ),
    pytest.param(
        managed(KUBECTL_SET, gitsync_fields=without(GITSYNC_FIELDS, IMAGE)),
        IMAGE,
        Owner("kubectl-set", "Update", "2025-06-01T11:05:00Z"),
        id="kubectl set image took the image",
    ),
    pytest.param(
        managed(HPA_SIM, gitsync_fields=without(GITSYNC_FIELDS, REPLICAS)),
        REPLICAS,
        Owner("hpa-sim", "Apply", "2025-06-01T11:10:00Z"),
        id="forced apply by another manager",
    ),
    pytest.param(
        managed(HPA_SIM),
        REPLICAS,
        Owner("hpa-sim", "Apply", "2025-06-01T11:10:00Z"),
        id="shared by two appliers: the other one is named",
    ),
    pytest.param(
        managed(),
        ("f:spec", "f:selector", "f:matchLabels", "f:app.kubernetes.io/name"),
        Owner("gitsync", "Apply", "2025-06-01T10:00:00Z"),
        id="inside an atomic field",
    ),
    pytest.param(
        managed(),
        (*CONTAINER, "f:ports", 'k:{"containerPort":9090,"protocol":"TCP"}'),
        Owner("gitsync", "Apply", "2025-06-01T10:00:00Z"),
        id="a removed item: the nearest owned ancestor",
    ),
    pytest.param(
        managed(
            entry(
                "kubectl-annotate",
                "Update",
                nested(("f:metadata", "f:annotations", "f:team")),
                "2025-06-01T09:00:00Z",
            )
        ),
        ("f:metadata", "f:annotations", "f:team"),
        Owner("kubectl-annotate", "Update", "2025-06-01T09:00:00Z"),
        id="the exact owner wins over the owner of the whole map",
    ),
    pytest.param(
        managed(),
        ("f:status", "f:availableReplicas"),
        Owner("kube-controller-manager", "Update", "2025-06-01T10:00:05Z", "status"),
        id="status subresource",
    ),
    pytest.param(managed(), ("f:spec", "f:strategy"), None, id="nobody owns it"),
    pytest.param([], REPLICAS, None, id="no managedFields at all"),
]


@pytest.mark.parametrize(("managed_fields", "path", "owner"), CASES)
def test_owner_of(managed_fields: list[Obj], path: Path, owner: Owner | None) -> None:
    assert owner_of(managed_fields, path) == owner


def test_leaf_paths_of_an_apply_entry() -> None:
    leaves = leaf_paths(GITSYNC_FIELDS)
    assert REPLICAS in leaves
    assert ("f:spec", "f:selector") in leaves
    assert CONTAINER in leaves  # the "." entry marks the item itself
    assert IMAGE in leaves
    assert (*CONTAINER, "f:ports", PORT, "f:protocol") in leaves
    assert ("f:metadata", "f:ownerReferences", f'k:{{"uid":"{UID}"}}') in leaves
    assert ("f:spec", "f:template") not in leaves  # a map with fields is no leaf
    assert len(leaves) == 21


@pytest.mark.parametrize(
    ("fields", "leaves"),
    [
        ({}, set()),
        ({".": {}}, set()),
        ({"f:a": {}}, {("f:a",)}),
        ({"f:a": {".": {}, "f:b": {}}}, {("f:a",), ("f:a", "f:b")}),
        ({"f:a": {'k:{"name":"x"}': {}}}, {("f:a", 'k:{"name":"x"}')}),
        ({"f:a": {'v:"x"': {}, "i:0": {}}}, {("f:a", 'v:"x"'), ("f:a", "i:0")}),
    ],
)
def test_leaf_paths(fields: Obj, leaves: set[Path]) -> None:
    assert leaf_paths(fields) == leaves


def rendered() -> Obj:
    return render(
        {
            "metadata": {"name": "web", "namespace": "shop", "uid": UID},
            "spec": {
                "image": "nginx:1.27",
                "replicas": 3,
                "port": 8080,
                "env": [{"name": "LOG_LEVEL", "value": "debug"}],
                "resources": {
                    "requests": {"cpu": "250m", "memory": "128Mi"},
                    "limits": {"memory": "256Mi"},
                },
            },
        }
    )


def test_fields_of_a_rendered_deployment_is_what_the_server_records() -> None:
    assert fields_of(rendered()) == leaf_paths(GITSYNC_FIELDS)


def test_fields_of_a_myapp_body() -> None:
    body = {
        "apiVersion": "apps.example.com/v1",
        "kind": "MyApp",
        "metadata": {"name": "web", "namespace": "shop", "labels": {"a": "b"}},
        "spec": {"image": "x", "env": [{"name": "A", "value": "1"}], "resources": {}},
    }
    env = ("f:spec", "f:env", 'k:{"name":"A"}')
    assert fields_of(body) == {
        ("f:metadata", "f:labels", "f:a"),
        ("f:spec", "f:image"),
        env,
        (*env, "f:name"),
        (*env, "f:value"),
        ("f:spec", "f:resources"),  # an empty map is a leaf of its own
    }


def test_fields_of_atomic_lists_and_identity_only() -> None:
    body = {"metadata": {"name": "x"}, "spec": {"args": ["a", "b"], "status": "kept"}}
    assert fields_of(body) == {("f:spec", "f:args"), ("f:spec", "f:status")}


def test_fields_of_a_status_apply_body() -> None:
    body = {
        "apiVersion": "apps.example.com/v1",
        "kind": "MyApp",
        "metadata": {"name": "web", "namespace": "shop"},
        "status": {"observedGeneration": 2, "conditions": [{"type": "Synced", "status": "True"}]},
    }
    synced = ("f:status", "f:conditions", 'k:{"type":"Synced"}')
    assert fields_of(body) == {
        ("f:status", "f:observedGeneration"),
        synced,
        (*synced, "f:type"),
        (*synced, "f:status"),
    }


@pytest.mark.parametrize(
    ("path", "text"),
    [
        (REPLICAS, "spec.replicas"),
        (IMAGE, "spec.template.spec.containers[name=app].image"),
        (
            (*CONTAINER, "f:ports", PORT),
            "spec.template.spec.containers[name=app].ports[containerPort=8080,protocol=TCP]",
        ),
        (
            ("f:metadata", "f:labels", "f:app.kubernetes.io/name"),
            "metadata.labels[app.kubernetes.io/name]",
        ),
        ((*CONTAINER, "."), "spec.template.spec.containers[name=app]"),
        (("f:spec", "f:args", "i:2"), "spec.args[2]"),
        (("f:spec", "f:finalizers", 'v:"x"'), "spec.finalizers[=x]"),
        ((), ""),
    ],
)
def test_human_path(path: Path, text: str) -> None:
    assert human_path(path) == text


@pytest.mark.parametrize(
    ("key", "element"),
    [
        pytest.param({"name": "app"}, 'k:{"name":"app"}', id="plain"),
        pytest.param(
            {"protocol": "TCP", "containerPort": 80},
            'k:{"containerPort":80,"protocol":"TCP"}',
            id="sorted-keys",
        ),
        # the HTML-safe escapes, lower-case hex
        pytest.param({"name": "A&B"}, 'k:{"name":"A\\u0026B"}', id="ampersand"),
        pytest.param({"name": "<tag>"}, 'k:{"name":"\\u003ctag\\u003e"}', id="angle-brackets"),
        # non-ASCII is written raw, not as \\uXXXX
        pytest.param({"name": "GRÜSSE_€"}, 'k:{"name":"GRÜSSE_€"}', id="latin-raw"),
        pytest.param({"name": "名前"}, 'k:{"name":"名前"}', id="cjk-raw"),
        pytest.param({"name": "emoji_😀"}, 'k:{"name":"emoji_😀"}', id="astral-raw"),
        # the JavaScript line separators are escaped even though they are not ASCII
        pytest.param(
            {"name": "a\u2028b\u2029c"}, 'k:{"name":"a\\u2028b\\u2029c"}', id="line-separators"
        ),
        # quote, backslash and control characters: short escapes where JSON has them
        pytest.param({"name": 'q"b\\s'}, 'k:{"name":"q\\"b\\\\s"}', id="quote-backslash"),
        pytest.param({"name": "t\tn\nr\r"}, 'k:{"name":"t\\tn\\nr\\r"}', id="short-escapes"),
        pytest.param({"name": "x\x01\x1f"}, 'k:{"name":"x\\u0001\\u001f"}', id="other-control"),
        # unlike Python's json, no short escapes for backspace and form feed
        pytest.param({"name": "b\bf\f"}, 'k:{"name":"b\\u0008f\\u000c"}', id="backspace-formfeed"),
        # a backslash followed by "b" is no backspace
        pytest.param({"name": "\\b"}, 'k:{"name":"\\\\b"}', id="backslash-b"),
        pytest.param({"port": 80, "on": True}, 'k:{"on":true,"port":80}', id="non-strings"),
        # printable ASCII that Go leaves alone
        pytest.param({"name": "a=b'c/d~\x7f"}, 'k:{"name":"a=b\'c/d~\x7f"}', id="printable-ascii"),
    ],
)
def test_key_element_encodes_like_the_api_server(key: dict[str, Any], element: str) -> None:
    assert key_element(key) == element


def test_an_env_var_with_an_escaped_name_has_its_owner() -> None:
    container = ("f:spec", "f:template", "f:spec", "f:containers", APP)
    # as kube-apiserver writes it for an env var named "A&B<é>"
    raw = 'k:{"name":"A\\u0026B\\u003cé\\u003e"}'
    other = entry(
        "other-operator",
        "Apply",
        nested((*container, "f:env", raw, "f:value")),
        "2025-06-01T12:00:00Z",
    )
    path = (*container, "f:env", key_element({"name": "A&B<é>"}), "f:value")
    assert owner_of(managed(other), path) == Owner(
        "other-operator", "Apply", "2025-06-01T12:00:00Z"
    )


# a Deployment's container from which `kubectl edit` removed the env var MODE: the var
# is owned by nobody now; kubectl-edit owns the env list it changed, gitsync the
# container around it (and, with an older time, the Deployment's labels)
APP_ITEM = 'k:{"name":"app"}'
REMOVED_ENV = (
    "f:spec",
    "f:template",
    "f:spec",
    "f:containers",
    APP_ITEM,
    "f:env",
    'k:{"name":"MODE"}',
)


def timed_entry(manager: str, operation: str, time: str, fields: Obj) -> Obj:
    return {
        "manager": manager,
        "operation": operation,
        "time": time,
        "fieldsType": "FieldsV1",
        "fieldsV1": fields,
    }


def under_container(fields: Obj) -> Obj:
    return {"f:spec": {"f:template": {"f:spec": {"f:containers": {APP_ITEM: fields}}}}}


def test_a_removed_item_is_owned_by_the_nearest_owned_ancestor_only() -> None:
    fields = [
        timed_entry(
            "gitsync",
            "Apply",
            "2026-01-01T00:00:00Z",
            under_container({".": {}, "f:name": {}, "f:image": {}}),
        ),
        timed_entry(
            "kubectl-edit", "Update", "2026-01-02T00:00:00Z", under_container({"f:env": {}})
        ),
    ]
    # the env list (one level up), not the container (two levels up)
    assert [o.manager for o in owners_of(owner_sets(fields), REMOVED_ENV)] == ["kubectl-edit"]
    owner = owner_of(fields, REMOVED_ENV)
    assert owner is not None and owner.manager == "kubectl-edit"
    # and drift names it
    item = DriftItem(
        "Deployment/web",
        human_path(REMOVED_ENV),
        REMOVED_ENV,
        desired={"name": "MODE", "value": "prod"},
    )
    [attributed] = attribute([item], fields)
    assert (attributed.manager, attributed.operation) == ("kubectl-edit", "Update")


def test_of_several_other_managers_the_most_recent_is_named() -> None:
    path = ("f:spec", "f:replicas")
    older = Owner("kubectl-scale", "Update", "2026-01-01T00:00:00Z", "")
    newer = Owner("hpa-sim", "Apply", "2026-01-03T00:00:00Z", "")
    ours = Owner("gitsync", "Apply", "2026-01-04T00:00:00Z", "")
    for order in ([older, newer, ours], [newer, older, ours], [ours, older, newer]):
        assert pick_owner(order) == newer
    # an entry without a time is the oldest
    untimed = Owner("kubectl-edit", "Update", None, "")
    assert pick_owner([older, untimed]) == older
    assert pick_owner([untimed, older]) == older
    # through managedFields as the API server writes them, and as drift reports it
    fields = [
        timed_entry("hpa-sim", "Apply", "2026-01-03T00:00:00Z", {"f:spec": {"f:replicas": {}}}),
        timed_entry(
            "other-operator", "Apply", "2026-01-02T00:00:00Z", {"f:spec": {"f:replicas": {}}}
        ),
    ]
    for entries in (fields, fields[::-1]):
        [attributed] = attribute(
            [DriftItem("Deployment/web", "spec.replicas", path, desired=2, live=6)], entries
        )
        assert attributed.manager == "hpa-sim" and attributed.conflict


@pytest.mark.parametrize(
    ("position", "item", "key"),
    [
        pytest.param("spec.env", {"name": "A", "value": "1"}, {"name": "A"}, id="keyed"),
        pytest.param(
            "spec.template.spec.containers[].ports",
            {"containerPort": 80},
            {"containerPort": 80, "protocol": "TCP"},
            id="a defaulted key field",
        ),
        pytest.param("spec.env", {"value": "1"}, None, id="without its key field"),
        pytest.param("spec.env", "A", None, id="not a map"),
        pytest.param("spec.template.spec.env", {"name": "A"}, None, id="a list not keyed"),
        pytest.param("metadata.labels", {"name": "A"}, None, id="no list at all"),
    ],
)
def test_item_key_by_the_lists_position(position: str, item: Any, key: Obj | None) -> None:
    assert item_key(rule_at(position), item) == key


def test_fields_of_leaves_out_an_item_without_its_key() -> None:
    # the server refuses such an item: it is recorded nowhere
    assert fields_of({"spec": {"env": [{"value": "x"}], "image": "i"}}) == {("f:spec", "f:image")}


@pytest.mark.parametrize(
    ("key", "element"),
    [
        # a list as a key value (the server refuses such an item, but its path is still
        # spelled): compact like Go's JSON, not Python's ", ", each member escaped
        pytest.param({"name": ["a", "b"]}, 'k:{"name":["a","b"]}', id="list-of-strings"),
        pytest.param({"name": [1, "&", "é"]}, 'k:{"name":[1,"\\u0026","é"]}', id="list-escaped"),
        pytest.param({"name": []}, 'k:{"name":[]}', id="empty-list"),
        pytest.param({"name": [{"b": 1, "a": 2}]}, 'k:{"name":[{"a":2,"b":1}]}', id="list-of-maps"),
    ],
)
def test_key_element_of_a_list_value(key: dict[str, Any], element: str) -> None:
    assert key_element(key) == element


@pytest.mark.parametrize(
    ("entry", "owner"),
    [
        pytest.param({}, Owner("", "", None, ""), id="nothing"),
        pytest.param(
            {"manager": "kubectl", "fieldsV1": {}},
            Owner("kubectl", "", None, ""),
            id="no operation",
        ),
        pytest.param(
            {"operation": "Update", "time": "t"}, Owner("", "Update", "t", ""), id="no manager"
        ),
        pytest.param(
            {"manager": "m", "operation": "Apply", "subresource": "status"},
            Owner("m", "Apply", None, "status"),
            id="a subresource",
        ),
    ],
)
def test_owner_sets_with_missing_entry_fields(entry: Obj, owner: Owner) -> None:
    # a field the server left out reads as empty, never as some made-up value
    assert owner_sets([entry]) == [(owner, set())]


A = Owner("a", "Apply", "2025-06-01T10:00:00Z")
B = Owner("b", "Update", "2025-06-01T11:00:00Z")


@pytest.mark.parametrize(
    ("sets", "path", "owners"),
    [
        pytest.param([(A, {("f:spec",)})], ("f:spec", "f:replicas"), [A], id="the top field"),
        pytest.param(
            [(A, {("f:spec", "f:template")})],
            ("f:spec", "f:template", "f:spec"),
            [A],
            id="the parent",
        ),
        pytest.param(
            [(A, {("f:spec",)}), (B, {("f:spec", "f:template")})],
            ("f:spec", "f:template", "f:spec", "f:containers"),
            [B],
            id="two levels up, not three",
        ),
        pytest.param(
            [(A, {("f:spec", "f:x")}), (B, {("f:spec", "f:x")})],
            ("f:spec", "f:x"),
            [A, B],
            id="the path itself, shared",
        ),
        pytest.param([(A, {("f:spec",)})], ("f:status", "f:x"), [], id="nobody"),
        pytest.param([(A, {("f:spec",)})], (), [], id="the empty path"),
    ],
)
def test_owners_of_the_nearest_owned_level(
    sets: list[tuple[Owner, set[Path]]], path: Path, owners: list[Owner]
) -> None:
    assert owners_of(sets, path) == owners


@pytest.mark.parametrize(
    ("path", "text"),
    [
        pytest.param(("f:spec", "x:odd"), "spec[x:odd]", id="an unknown kind"),
        pytest.param(("f:spec", "bare", "f:image"), "spec[bare].image", id="no kind at all"),
        pytest.param(("z:1",), "[z:1]", id="first"),
    ],
)
def test_human_path_with_an_unknown_element(path: Path, text: str) -> None:
    # shown as it is, bracketed, rather than dropped or misread
    assert human_path(path) == text
