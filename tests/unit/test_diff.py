"""diff: changes of one object, the unified YAML diff, and server fields."""

from __future__ import annotations

import copy
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pytest

from gitsync.engine.differences import Change, changes, strip_server_fields, unified
from gitsync.model.api import Obj
from gitsync.model.render import render

C = "spec.template.spec.containers[name=app]"
MYAPP: Obj = {
    "metadata": {"name": "web", "namespace": "shop", "uid": "u-1"},
    "spec": {
        "image": "nginx:1.27",
        "replicas": 3,
        "port": 80,
        "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
        "resources": {"limits": {"memory": "1Gi"}},
    },
}


def desired() -> Obj:
    return render(MYAPP)


def live() -> Obj:
    """The stored Deployment: what gitsync set plus defaults and server fields."""
    obj = copy.deepcopy(desired())
    obj["metadata"].update(uid="d-1", resourceVersion="9", generation=1)
    obj["metadata"]["labels"]["team"] = "payments"
    obj["spec"]["revisionHistoryLimit"] = 10
    main = obj["spec"]["template"]["spec"]["containers"][0]
    main["terminationMessagePath"] = "/dev/termination-log"
    obj["status"] = {"replicas": 3}
    return obj


def app(obj: Obj) -> Obj:
    found: Obj = obj["spec"]["template"]["spec"]["containers"][0]
    return found


def edit(change: Callable[[Obj], object]) -> Obj:
    obj = live()
    change(obj)
    return obj


CHANGES: list[Any] = [
    pytest.param(live(), [], id="unchanged, defaults and foreign labels ignored"),
    pytest.param(
        edit(lambda o: o["spec"].update(replicas=5)),
        [Change("spec.replicas", 5, 3)],
        id="replicas",
    ),
    pytest.param(
        edit(lambda o: app(o).update(image="nginx:1.28")),
        [Change(f"{C}.image", "nginx:1.28", "nginx:1.27")],
        id="image",
    ),
    pytest.param(
        edit(lambda o: app(o)["env"].reverse()),
        [],
        id="env order is no change",
    ),
    pytest.param(
        edit(lambda o: app(o)["resources"]["limits"].update(memory="1024Mi")),
        [],
        id="equal quantity",
    ),
    pytest.param(
        edit(lambda o: app(o)["ports"][0].update(containerPort="80")),
        [],
        id="int as string",
    ),
    pytest.param(
        edit(lambda o: (app(o)["env"].pop(0), app(o)["env"][0].update(value="9"))),
        [
            Change(f"{C}.env[name=A]", None, {"name": "A", "value": "1"}),
            Change(f"{C}.env[name=B].value", "9", "2"),
        ],
        id="item removed and a later item changed: matched by name",
    ),
    pytest.param(
        edit(lambda o: app(o).update(ports=[{"containerPort": 81, "protocol": "TCP"}])),
        [
            Change(
                f"{C}.ports[containerPort=80,protocol=TCP]",
                None,
                {"containerPort": 80, "protocol": "TCP"},
            )
        ],
        id="port replaced: ours is added back",
    ),
    pytest.param(
        edit(
            lambda o: app(o)["ports"].insert(
                0, {"containerPort": 9090, "protocol": "TCP", "name": "metrics"}
            )
        ),
        [],
        id="a port others added first: matched by port and protocol, not by index",
    ),
    pytest.param(
        edit(lambda o: app(o)["ports"].insert(0, {"containerPort": 80, "protocol": "UDP"})),
        [],
        id="the same port number over UDP first: another item",
    ),
    pytest.param(
        edit(lambda o: o["spec"]["template"]["spec"]["containers"].insert(0, {"name": "side"})),
        [],
        id="a container others added first",
    ),
    pytest.param(
        edit(lambda o: o["metadata"]["labels"].pop("app.kubernetes.io/managed-by")),
        [Change("metadata.labels[app.kubernetes.io/managed-by]", None, "gitsync")],
        id="label removed",
    ),
]


@pytest.mark.parametrize(("live_obj", "expected"), CHANGES)
def test_changes(live_obj: Obj, expected: list[Change]) -> None:
    assert changes(live_obj, desired()) == expected


def test_changes_of_a_new_object() -> None:
    found = changes(None, desired())
    assert [c.path for c in found] == ["metadata", "spec"]
    assert all(c.old is None for c in found)
    assert found[1].new["replicas"] == 3


def test_changes_of_an_atomic_list_by_index() -> None:
    want = {"spec": {"args": ["a", "b", "c"]}}
    have = {"spec": {"args": ["a", "x"]}}
    assert changes(have, want) == [
        Change("spec.args[1]", "x", "b"),
        Change("spec.args[2]", None, "c"),
    ]


def test_unified_plain() -> None:
    text = unified(
        "Deployment/shop/web",
        {"spec": {"replicas": 5, "paused": False}},
        {"spec": {"replicas": 3, "paused": False}},
        color=False,
    )
    assert text == (
        "--- live/Deployment/shop/web\n"
        "+++ git/Deployment/shop/web\n"
        "@@ -1,3 +1,3 @@\n"
        " spec:\n"
        "   paused: false\n"
        "-  replicas: 5\n"
        "+  replicas: 3\n"
    )


def test_unified_sorts_keys_and_uses_block_style() -> None:
    text = unified("X", None, {"b": {"z": [1, 2], "a": "x"}}, color=False)
    assert text.splitlines()[3:] == ["+b:", "+  a: x", "+  z:", "+  - 1", "+  - 2"]


def test_unified_color() -> None:
    text = unified("X", {"a": 1}, {"a": 2}, color=True)
    assert text.splitlines() == [
        "\x1b[1m--- live/X\x1b[0m",
        "\x1b[1m+++ git/X\x1b[0m",
        "\x1b[36m@@ -1 +1 @@\x1b[0m",
        "\x1b[31m-a: 1\x1b[0m",
        "\x1b[32m+a: 2\x1b[0m",
    ]


@pytest.mark.parametrize(
    ("live_obj", "desired_obj", "expected"),
    [
        (None, {"a": 1}, ["--- live/X", "+++ git/X", "@@ -0,0 +1 @@", "+a: 1"]),
        ({"a": 1}, None, ["--- live/X", "+++ git/X", "@@ -1 +0,0 @@", "-a: 1"]),
        ({"a": 1}, {"a": 1}, []),
    ],
)
def test_unified_created_pruned_unchanged(
    live_obj: Obj | None, desired_obj: Obj | None, expected: list[str]
) -> None:
    assert unified("X", live_obj, desired_obj, color=False).splitlines() == expected


def test_unified_color_off_has_no_escapes() -> None:
    assert "\x1b" not in unified("X", {"a": 1}, {"a": 2}, color=False)


def test_strip_server_fields() -> None:
    obj = live()
    obj["metadata"]["creationTimestamp"] = "2025-06-01T10:00:00Z"
    obj["metadata"]["selfLink"] = "/apis/apps/v1/namespaces/shop/deployments/web"
    obj["metadata"]["managedFields"] = [{"manager": "gitsync"}]
    original = copy.deepcopy(obj)
    stripped = strip_server_fields(obj)
    assert "status" not in stripped
    assert set(stripped["metadata"]) == {"name", "namespace", "labels", "ownerReferences"}
    assert stripped["spec"] == obj["spec"]
    assert obj == original


def test_strip_server_fields_makes_a_dry_run_equal_to_live() -> None:
    stored = live()
    stored["metadata"]["managedFields"] = [{"manager": "gitsync", "time": "t1"}]
    dry_run = copy.deepcopy(stored)
    dry_run["metadata"].update(resourceVersion="10", generation=2)
    dry_run["metadata"]["managedFields"] = [{"manager": "gitsync", "time": "t2"}]
    assert strip_server_fields(dry_run) == strip_server_fields(stored)
    dry_run["spec"]["replicas"] = 4
    assert strip_server_fields(dry_run) != strip_server_fields(stored)


def test_deepdiff_is_imported_only_when_an_object_differs() -> None:
    """Its import is a fifth of a second that a run finding nothing changed never needs."""
    code = (
        "import sys, gitsync.cli.app, gitsync.daemon.daemon\n"
        "from gitsync.engine import differences\n"
        "assert 'deepdiff' not in sys.modules, 'imported with the CLI'\n"
        "differences.changes({'spec': {'a': 1}}, {'spec': {'a': 2}})\n"
        "assert 'deepdiff' in sys.modules\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize(
    ("value", "line"),
    [
        # non-ASCII as written in the manifest, not as \u escapes
        pytest.param("Grüße, 名前 😀", "+a: Grüße, 名前 😀", id="non-ascii-raw"),
        # a long value with spaces stays one line of the diff, not folded at 80 columns
        pytest.param("word " * 40 + "end", "+a: " + "word " * 40 + "end", id="long-line"),
        pytest.param("w " * 20000 + "end", "+a: " + "w " * 20000 + "end", id="very-long-line"),
    ],
)
def test_unified_writes_a_value_as_one_readable_line(value: str, line: str) -> None:
    assert unified("X", None, {"a": value}, color=False).splitlines()[3:] == [line]
