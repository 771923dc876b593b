"""Blame's rows and their two outputs, field by field: the origin each kind of field gets
(a Git line, the lines the loader kept, the MyApp's recorded source, a default, a
constant), which rows count as drifted, the JSON of ``-o json``, and the text table."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import yaml

from gitsync.engine.blame import (
    BlameRow,
    Commit,
    GitView,
    Origin,
    _show,
    blame,
    describe,
    render_text,
)
from gitsync.engine.fieldpaths import lines_of
from gitsync.model.render import DEFAULT_REPLICAS, render
from gitsync.source._yaml import Loader

A = "a" * 40
REVISION = f"main@sha1:{A}"
#: no replicas, no progressDeadlineSeconds: the Deployment gets a default and nothing
MANIFEST = """\
apiVersion: apps.example.com/v1
kind: MyApp
metadata:
  name: web
  namespace: shop
spec:
  image: nginx:1.28
  env:
    - name: MODE
      value: fast
"""
IMAGE = "spec.template.spec.containers[name=app].image"


def _live(manifest: str = MANIFEST) -> tuple[dict[str, Any], dict[str, Any]]:
    myapp = yaml.safe_load(manifest)
    myapp["metadata"].update(uid="u-1", managedFields=[])
    return myapp, render(myapp)


def _git(manifest: str = MANIFEST, *, nodes: bool = True) -> GitView:
    node = yaml.compose(manifest, Loader=Loader)
    assert node is not None
    obj = yaml.safe_load(manifest)
    if nodes:
        return GitView(file="apps/web.yaml", revision=REVISION, obj=obj, node=node)
    return GitView(file="apps/web.yaml", revision=REVISION, obj=obj, field_lines=lines_of(node))


def _by(rows: list[BlameRow]) -> dict[tuple[str, str], BlameRow]:
    return {(r.object, r.path): r for r in rows}


def test_each_kind_of_field_gets_its_origin() -> None:
    myapp, deployment = _live()
    rows = _by(blame(myapp, deployment, _git()))
    git = Origin("git", file="apps/web.yaml", line=7, revision=REVISION)
    assert rows[("MyApp/shop/web", "spec.image")].origin == git
    assert rows[("Deployment/shop/web", IMAGE)].origin == Origin(
        "git", file="apps/web.yaml", line=7, revision=REVISION, via="spec.image"
    )
    # the MyApp sets no replicas: the Deployment's come from the CRD's default
    replicas = rows[("Deployment/shop/web", "spec.replicas")]
    assert replicas.origin == Origin(
        "default",
        via="spec.replicas",
        note=f"the MyApp sets no replicas: default {DEFAULT_REPLICAS}",
    )
    assert (replicas.live, replicas.desired) == (DEFAULT_REPLICAS, DEFAULT_REPLICAS)
    # the selector and the labels are the MyApp's name, on line 4
    name = Origin("git", file="apps/web.yaml", line=4, revision=REVISION, via="metadata.name")
    assert rows[("Deployment/shop/web", "spec.selector")].origin == name
    label = "metadata.labels[app.kubernetes.io/name]"
    assert rows[("Deployment/shop/web", label)].origin == name
    constant = Origin("rendered", note="set by gitsync (constant, or the MyApp's uid)")
    assert rows[("Deployment/shop/web", "metadata.ownerReferences[uid=u-1]")].origin == constant
    assert not any(r.drifted or r.wanted for r in rows.values())


def test_a_field_the_live_myapp_holds_and_git_does_not_is_rendered_by_gitsync() -> None:
    myapp, _ = _live()
    myapp["spec"]["progressDeadlineSeconds"] = 30  # a kubectl edit of the MyApp
    rows = _by(blame(myapp, render(myapp), _git()))
    deadline = rows[("Deployment/shop/web", "spec.progressDeadlineSeconds")]
    assert deadline.origin == Origin(
        "rendered", via="spec.progressDeadlineSeconds", note="set by gitsync"
    )
    assert ("MyApp/shop/web", "spec.progressDeadlineSeconds") not in rows


def test_the_lines_the_loader_kept_give_the_same_origins_as_the_nodes() -> None:
    myapp, deployment = _live()
    with_nodes = blame(myapp, deployment, _git())
    with_lines = blame(myapp, deployment, _git(nodes=False))
    assert [r.origin for r in with_lines] == [r.origin for r in with_nodes]
    assert _by(with_lines)[("MyApp/shop/web", "spec.env[name=MODE].value")].origin.line == 10


def test_drifted_rows_say_what_git_wants_and_from_where() -> None:
    myapp, deployment = _live()
    deployment["spec"]["template"]["spec"]["containers"][0]["image"] = "evil:1"
    deployment["metadata"]["managedFields"] = [
        {
            "manager": "kubectl-edit",
            "fieldsV1": {
                "f:spec": {
                    "f:template": {
                        "f:spec": {"f:containers": {'k:{"name":"app"}': {"f:image": {}}}}
                    }
                }
            },
        }
    ]
    rows = _by(blame(myapp, deployment, _git()))
    image = rows[("Deployment/shop/web", IMAGE)]
    # an entry with no operation and no time: none is made up
    assert image.origin == Origin("drift", manager="kubectl-edit")
    assert (image.drifted, image.live, image.desired) == (True, "evil:1", "nginx:1.28")
    assert image.wanted == Origin(
        "git", file="apps/web.yaml", line=7, revision=REVISION, via="spec.image"
    )
    assert [r.path for r in rows.values() if r.drifted] == [IMAGE]
    assert all(r.wanted is None for r in rows.values() if not r.drifted)


def test_without_a_deployment_only_the_myapps_rows() -> None:
    myapp, _ = _live()
    rows = blame(myapp, None, _git())
    assert {r.object for r in rows} == {"MyApp/shop/web"}
    assert [r.path for r in rows] == [
        "spec.image",
        "spec.env[name=MODE].name",
        "spec.env[name=MODE].value",
    ]


def test_a_myapp_without_a_namespace_is_named_without_one() -> None:
    manifest = MANIFEST.replace("  namespace: shop\n", "")
    myapp, deployment = _live(manifest)
    rows = blame(myapp, deployment, _git(manifest))
    assert {r.object for r in rows} == {"MyApp/web", "Deployment/web"}


def test_without_git_the_recorded_source_and_drift_of_this_myapp_only() -> None:
    myapp, deployment = _live()
    myapp["status"] = {
        "source": {"path": "apps/web.yaml", "revision": REVISION},
        "drift": [
            {"object": "MyApp/other", "path": "spec.image", "manager": "kubectl-edit"},
            {"object": "MyApp/shop/web", "path": "spec.env[name=MODE]", "manager": "kubectl-patch"},
        ],
    }
    rows = _by(blame(myapp, deployment, None))
    assert rows[("MyApp/shop/web", "spec.image")].origin == Origin(
        "git", file="apps/web.yaml", revision=REVISION
    )
    # recorded on the missing item: every field under it
    env = rows[("MyApp/shop/web", "spec.env[name=MODE].value")]
    assert (env.origin, env.drifted) == (Origin("drift", manager="kubectl-patch"), True)
    assert not rows[("MyApp/shop/web", "spec.image")].drifted


def test_without_git_a_source_without_its_revision_names_none() -> None:
    myapp, deployment = _live()
    myapp["status"] = {"source": {"path": "apps/web.yaml"}}
    rows = _by(blame(myapp, deployment, None))
    assert rows[("MyApp/shop/web", "spec.image")].origin == Origin("git", file="apps/web.yaml")


def test_without_git_a_myapp_made_in_the_cluster_is_not_from_git() -> None:
    myapp, deployment = _live()
    rows = _by(blame(myapp, deployment, None))
    note = "not from Git: this MyApp was created in the cluster"
    assert rows[("MyApp/shop/web", "spec.image")].origin == Origin("rendered", note=note)
    assert rows[("Deployment/shop/web", IMAGE)].origin == Origin(
        "rendered", note=note, via="spec.image"
    )


def test_json_gives_what_is_known_and_nothing_empty() -> None:
    assert Origin("rendered").to_json() == {"kind": "rendered"}
    assert Origin("git", line=0).to_json() == {"kind": "git", "line": 0}
    commit = Commit(A, "Alice", "2023-11-14T22:13:20Z", "add web")
    full = Origin(
        "git", file="apps/web.yaml", line=7, revision=REVISION, commit=commit, via="spec.image"
    )
    assert full.to_json() == {
        "kind": "git",
        "file": "apps/web.yaml",
        "line": 7,
        "revision": REVISION,
        "via": "spec.image",
        "commit": {
            "sha": A,
            "author": "Alice",
            "date": "2023-11-14T22:13:20Z",
            "subject": "add web",
        },
    }
    drift = Origin("drift", manager="kubectl-scale", operation="Update", time="T", note="n")
    assert drift.to_json() == {
        "kind": "drift",
        "manager": "kubectl-scale",
        "operation": "Update",
        "time": "T",
        "note": "n",
    }
    row = BlameRow("MyApp/shop/web", "spec.replicas", 1, 2, Origin("rendered"))
    assert row.drifted is False
    assert row.to_json() == {
        "object": "MyApp/shop/web",
        "path": "spec.replicas",
        "live": 1,
        "desired": 2,
        "drifted": False,
        "origin": {"kind": "rendered"},
    }
    wanted = replace(row, drifted=True, origin=drift, wanted=full)
    assert wanted.to_json()["desiredOrigin"] == full.to_json()


def test_describe_each_kind() -> None:
    assert describe(Origin("drift", manager="m", operation="Update", time="T")) == (
        "drift: changed by m (Update) at T"
    )
    assert describe(Origin("drift", manager="m")) == "drift: changed by m"
    assert describe(Origin("conflict", manager="hpa", operation="Update")) == (
        "conflict: another controller, hpa (Update)"
    )
    assert describe(Origin("default", via="spec.replicas", note="one")) == "← spec.replicas one"
    assert describe(Origin("rendered", note="set")) == "set"
    assert describe(Origin("git", file="f.yaml", revision="r")) == "← f.yaml at r"
    assert describe(Origin("git", file="f.yaml", line=3, via="spec.image")) == (
        "← spec.image ← f.yaml:3"
    )


def test_the_text_table_aligns_its_columns_and_heads_each_object_once() -> None:
    git = Origin("git", file="apps/web.yaml", line=7, revision="r")
    rows = [
        BlameRow("MyApp/shop/web", "spec.image", "nginx:1.28", "nginx:1.28", git),
        BlameRow(
            "MyApp/shop/web",
            "spec.replicas",
            5,
            2,
            Origin("drift", manager="kubectl-scale", operation="Update"),
            drifted=True,
            wanted=Origin("git", file="apps/web.yaml", line=8, revision="r"),
        ),
        BlameRow(
            "Deployment/shop/web",
            "spec.template.spec.containers[name=app].name",
            "app",
            "app",
            Origin("rendered", note="set by gitsync"),
        ),
        BlameRow("Deployment/shop/web", "spec.x", None, "v", Origin("drift", manager="m"), True),
    ]
    # the widest path is 44 characters, the widest value 10 ("nginx:1.28")
    assert render_text(rows).splitlines() == [
        "MyApp/shop/web",
        f"  {'spec.image':44}  nginx:1.28  ← apps/web.yaml:7 at r",
        f"  {'spec.replicas':44}  {'5':10}  drift: changed by kubectl-scale (Update);"
        " Git says 2 ← apps/web.yaml:8 at r",
        "Deployment/shop/web",
        f"  spec.template.spec.containers[name=app].name  {'app':10}  set by gitsync",
        f"  {'spec.x':44}  {'<none>':10}  drift: changed by m; Git says v",
    ]
    assert render_text([]) == "\n"


def test_values_in_the_table_are_cut_at_forty_characters() -> None:
    assert _show(None) == "<none>"
    assert _show("plain") == "plain"  # a string as it is, not as JSON
    assert _show({"b": 1, "a": [2]}) == '{"a": [2], "b": 1}'
    assert _show("x" * 40) == "x" * 40
    assert _show("x" * 41) == "x" * 39 + "…"
