"""Blame without a cluster: porcelain parsing, lines of keyed items, the Deployment → MyApp
mapping, origins of drift and conflicts, and the target syntax."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from gitsync.cli.blame import parse_target
from gitsync.engine.blame import (
    BlameRow,
    Commit,
    GitView,
    Origin,
    blame,
    drifted,
    render_text,
    rendered_from,
)
from gitsync.engine.fieldpaths import line_in, line_of, lines_of
from gitsync.errors import ConfigError, SourceError
from gitsync.model.render import render
from gitsync.source._yaml import Loader
from gitsync.source.gitblame import find_document, parse_porcelain, revision_sha, view
from gitsync.source.manifests import load

A = "a" * 40
B = "b" * 40
PORCELAIN = f"""{A} 1 1 2
author Alice
author-mail <a@example.com>
author-time 1700000000
author-tz +0000
summary add web
filename apps/web.yaml
\tapiVersion: apps.example.com/v1
{A} 2 2
\tkind: MyApp
{B} 3 3 1
author Bob
author-time 1700003600
summary bump nginx
previous {A} apps/web.yaml
filename apps/web.yaml
\t  image: nginx:1.28
"""

MANIFEST = """\
apiVersion: apps.example.com/v1
kind: MyApp
metadata:
  name: web
  namespace: shop
spec:
  image: nginx:1.28
  replicas: 2
  env:
    - name: MODE
      value: fast
    - name: LEVEL
      value: "3"
"""


def test_porcelain_gives_each_line_its_commit_with_headers_from_the_first_group() -> None:
    lines = parse_porcelain(PORCELAIN)
    assert lines[1] == lines[2] == Commit(A, "Alice", "2023-11-14T22:13:20Z", "add web")
    assert lines[3] == Commit(B, "Bob", "2023-11-14T23:13:20Z", "bump nginx")
    assert lines[3].short == "bbbbbbb"


def test_revision_sha_accepts_only_a_full_commit() -> None:
    assert revision_sha(f"main@sha1:{A}") == A
    assert revision_sha("local") == ""
    assert revision_sha("main@sha1:abc") == ""


def test_line_of_follows_fields_and_keyed_items() -> None:
    node = yaml.compose(MANIFEST, Loader=Loader)
    assert node is not None
    assert line_of(node, ("f:spec", "f:image")) == 7
    assert line_of(node, ("f:spec", "f:env", 'k:{"name":"LEVEL"}', "f:value")) == 13
    assert line_of(node, ("f:spec", "f:env", 'k:{"name":"MODE"}')) == 10
    assert line_of(node, ("f:spec", "f:port")) is None


def test_the_lines_the_loader_keeps_give_the_lines_the_nodes_give(tmp_path: Path) -> None:
    """The drift page has no YAML nodes, only what the loader kept of them: the same
    lines, keyed items included, for a MyApp in the middle of a multi-document file."""
    other = MANIFEST.replace("name: web", "name: api")
    text = other + "---\n" + MANIFEST + "---\n" + other.replace("name: api", "name: db")
    (tmp_path / "apps.yaml").write_text(text)
    loaded = load(tmp_path)
    assert loaded.ok
    web = next(a for a in loaded.apps if a.key == "shop/web")
    node = list(yaml.compose_all(text, Loader=Loader))[1]
    paths = [
        ("f:metadata", "f:name"),
        ("f:spec", "f:image"),
        ("f:spec", "f:replicas"),
        ("f:spec", "f:env", 'k:{"name":"LEVEL"}', "f:value"),
        ("f:spec", "f:env", 'k:{"name":"MODE"}'),
    ]
    assert [line_in(web.lines, web.obj, p) for p in paths] == [line_of(node, p) for p in paths]
    assert line_in(web.lines, web.obj, ("f:spec", "f:image")) == 14 + 7
    assert line_in(web.lines, web.obj, ("f:spec", "f:env", 'k:{"name":"NONE"}')) is None
    assert line_in(web.lines, web.obj, ("f:spec", "f:port")) is None


def test_rendered_fields_point_to_the_myapp_field_they_come_from() -> None:
    container = ("f:spec", "f:template", "f:spec", "f:containers", 'k:{"name":"app"}')
    assert rendered_from((*container, "f:image")) == ("f:spec", "f:image")
    assert rendered_from((*container, "f:env", 'k:{"name":"X"}', "f:value")) == (
        "f:spec",
        "f:env",
        'k:{"name":"X"}',
        "f:value",
    )
    assert rendered_from(("f:spec", "f:replicas")) == ("f:spec", "f:replicas")
    assert rendered_from(("f:spec", "f:selector")) == ("f:metadata", "f:name")
    assert rendered_from((*container, "f:name")) is None


_APP = ("f:spec", "f:template", "f:spec", "f:containers", 'k:{"name":"app"}')
_PORT = 'k:{"containerPort":80,"protocol":"TCP"}'
#: (a Deployment field, the MyApp field it is rendered from): every row of render's
#: FROM_SPEC, and what gitsync derives from the MyApp's identity
_RENDERED_FROM: list[Any] = [
    pytest.param(("f:spec", "f:replicas"), ("f:spec", "f:replicas"), id="replicas"),
    pytest.param((*_APP, "f:image"), ("f:spec", "f:image"), id="image"),
    pytest.param((*_APP, "f:ports", _PORT, "f:containerPort"), ("f:spec", "f:port"), id="port"),
    pytest.param(
        (*_APP, "f:env", 'k:{"name":"X"}', "f:value"),
        ("f:spec", "f:env", 'k:{"name":"X"}', "f:value"),
        id="env, the same shape",
    ),
    pytest.param(
        (*_APP, "f:resources", "f:limits", "f:cpu"),
        ("f:spec", "f:resources", "f:limits", "f:cpu"),
        id="resources, the same shape",
    ),
    pytest.param((*_APP, "f:name"), None, id="the container's name"),
    pytest.param(("f:metadata", "f:ownerReferences", 'k:{"uid":"u-1"}'), None, id="the owner"),
    pytest.param(
        ("f:metadata", "f:labels", "f:app.kubernetes.io/managed-by"), None, id="gitsync's label"
    ),
    pytest.param(
        ("f:metadata", "f:labels", "f:app.kubernetes.io/name"),
        ("f:metadata", "f:name"),
        id="another label",
    ),
    pytest.param(
        ("f:spec", "f:template", "f:metadata", "f:labels", "f:app.kubernetes.io/name"),
        ("f:metadata", "f:name"),
        id="the pod's label",
    ),
]


@pytest.mark.parametrize(("path", "source"), _RENDERED_FROM)
def test_rendered_from_follows_renders_table(path: tuple[str, ...], source: Any) -> None:
    assert rendered_from(path) == source


def _live(manifest: str) -> tuple[dict[str, Any], dict[str, Any]]:
    obj = yaml.safe_load(manifest)
    obj["metadata"]["uid"] = "u-1"
    obj["metadata"]["managedFields"] = []
    deployment = render(obj)
    return obj, deployment


def test_blame_names_git_lines_drift_and_conflicts() -> None:
    myapp, deployment = _live(MANIFEST)
    node = yaml.compose(MANIFEST, Loader=Loader)
    git = GitView(
        file="apps/web.yaml",
        revision=f"main@sha1:{B}",
        obj=yaml.safe_load(MANIFEST),
        node=node,
        lines={7: Commit(B, "Bob", "2023-11-14T23:13:20Z", "bump nginx")},
    )
    deployment["spec"]["replicas"] = 5
    deployment["spec"]["template"]["spec"]["containers"][0]["image"] = "evil:1"
    deployment["metadata"]["managedFields"] = [
        {
            "manager": "kube-controller-manager",
            "operation": "Update",
            "time": "2026-01-01T00:00:00Z",
            "fieldsV1": {"f:spec": {"f:replicas": {}}},
        },
        {
            "manager": "kubectl-edit",
            "operation": "Update",
            "time": "2026-01-02T00:00:00Z",
            "fieldsV1": {
                "f:spec": {
                    "f:template": {
                        "f:spec": {"f:containers": {'k:{"name":"app"}': {"f:image": {}}}}
                    }
                }
            },
        },
    ]
    rows = blame(myapp, deployment, git)
    by = {(r.object.split("/")[0], r.path): r for r in rows}
    image = by[("MyApp", "spec.image")]
    assert (image.origin.kind, image.origin.line, image.origin.commit) == ("git", 7, git.lines[7])
    level = by[("MyApp", "spec.env[name=LEVEL].value")]
    assert level.origin.line == 13 and level.origin.commit is None  # no blame for that line
    replicas = by[("Deployment", "spec.replicas")]
    assert replicas.origin.kind == "conflict"
    assert replicas.origin.manager == "kube-controller-manager"
    assert (replicas.live, replicas.desired) == (5, 2)
    edited = by[("Deployment", "spec.template.spec.containers[name=app].image")]
    assert edited.origin.kind == "drift" and edited.origin.manager == "kubectl-edit"
    env = by[("Deployment", "spec.template.spec.containers[name=app].env[name=MODE].value")]
    assert env.origin.via == "spec.env[name=MODE].value" and env.origin.line == 11
    assert drifted(rows)
    text = render_text(rows)
    assert '← apps/web.yaml:7, bbbbbbb "bump nginx" by Bob, 2023-11-14T23:13:20Z' in text
    assert "← spec.env[name=MODE].value ← apps/web.yaml:11 at main@sha1:" in text
    assert "conflict: another controller, kube-controller-manager (Update)" in text


def test_blame_without_git_reports_recorded_drift() -> None:
    myapp, deployment = _live(MANIFEST)
    myapp["status"] = {
        "source": {"path": "apps/web.yaml", "revision": f"main@sha1:{A}"},
        "drift": [
            {
                "object": "MyApp/web",
                "path": "spec.image",
                "desired": "nginx:1.27",
                "live": "nginx:1.28",
                "manager": "kubectl-edit",
                "operation": "Update",
            }
        ],
    }
    rows = blame(myapp, deployment, GitView(file="apps/web.yaml", revision=f"main@sha1:{A}"))
    by = {(r.object.split("/")[0], r.path): r for r in rows}
    assert by[("MyApp", "spec.image")].origin.manager == "kubectl-edit"
    assert by[("MyApp", "spec.replicas")].origin.file == "apps/web.yaml"
    # the Deployment's image comes from the drifted MyApp field: the drift is shown through
    rendered = by[("Deployment", "spec.template.spec.containers[name=app].image")]
    assert rendered.origin.kind == "drift" and rendered.origin.via == "spec.image"


def test_find_document_picks_the_myapp_among_several() -> None:
    text = MANIFEST.replace("name: web", "name: other") + "---\n" + MANIFEST
    node, obj = find_document(text, {"metadata": {"name": "web", "namespace": "shop"}}, "f.yaml")
    assert obj["metadata"]["name"] == "web"
    assert line_of(node, ("f:spec", "f:image")) == 21
    with pytest.raises(SourceError, match="declares no MyApp 'nope'"):
        find_document(text, {"metadata": {"name": "nope"}}, "f.yaml")


def test_view_refuses_a_source_path_outside_the_repository(tmp_path: Path) -> None:
    app = {"metadata": {"name": "web"}, "status": {"source": {"path": "../../etc/passwd"}}}
    with pytest.raises(SourceError, match="not a path in a repository"):
        view(app, tmp_path)


@pytest.mark.parametrize(
    ("target", "ns", "want"),
    [
        ("MyApp/shop/web", None, ("shop", "web")),
        ("shop/web", None, ("shop", "web")),
        ("web", "shop", ("shop", "web")),
        ("web", None, ("ctx", "web")),
        ("myapp/web", "shop", ("shop", "web")),
    ],
)
def test_targets(target: str, ns: str | None, want: tuple[str, str]) -> None:
    assert parse_target(target, ns, "ctx") == want


@pytest.mark.parametrize(("target", "ns"), [("a/b/c/d", None), ("shop/web", "other"), ("/", None)])
def test_bad_targets(target: str, ns: str | None) -> None:
    with pytest.raises(ConfigError):
        parse_target(target, ns)


def test_text_escapes_what_git_and_the_cluster_hold() -> None:
    """A commit subject, an author, a file name or a value may hold an escape sequence
    (OSC 52 writes the terminal's clipboard) or a newline (a forged row): printed
    escaped, one row a line."""
    osc52 = "\x1b]52;c;aGFja2Vk\x07"
    commit = Commit(A, f"Mallory{osc52}", "2023-11-14T22:13:20Z", f"add web{osc52}\nforged")
    origin = Origin("git", file="apps/we\x1bb.yaml", line=7, commit=commit)
    rows = [
        BlameRow(f"MyApp/shop/web{osc52}", "spec.image", f"nginx{osc52}", "nginx", origin),
        BlameRow(
            "MyApp/shop/web",
            "spec.env[name=X].value",
            f"v{osc52}",
            "v",
            Origin("drift", manager="kubectl\u202e", operation="Update"),
            drifted=True,
            wanted=origin,
        ),
    ]
    text = render_text(rows)
    assert "\x1b" not in text and "\x07" not in text and "\u202e" not in text
    assert len(text.splitlines()) == 4  # two object headings, two rows
    assert "\\x1b]52;c;aGFja2Vk\\x07" in text  # shown, escaped


PORTS_AND_MERGE = """\
spec:
  template:
    spec:
      containers:
        - name: app
          ports:
            - containerPort: 81
              protocol: UDP
            - containerPort: 80
  ports:
    - containerPort: 80
  base: &base
    x: 1
  merged:
    <<: *base
    y: 2
"""
_PORT = 'k:{"containerPort":80,"protocol":"TCP"}'


def _composed() -> yaml.Node:
    node = yaml.compose(PORTS_AND_MERGE)
    assert node is not None
    return node


_APP_PORTS = ("f:spec", "f:template", "f:spec", "f:containers", 'k:{"name":"app"}', "f:ports")


@pytest.mark.parametrize(
    ("path", "line"),
    [
        # the protocol the server defaults where the list is: the item written without it
        pytest.param((*_APP_PORTS, _PORT), 9, id="a defaulted key field"),
        pytest.param((*_APP_PORTS, _PORT, "f:containerPort"), 9, id="below it"),
        pytest.param(
            (*_APP_PORTS, 'k:{"containerPort":81,"protocol":"UDP"}'), 7, id="the key as written"
        ),
        # a list named ports elsewhere defaults nothing
        pytest.param(("f:spec", "f:ports", _PORT), None, id="no default elsewhere"),
        pytest.param(("f:spec", "f:merged", "f:y"), 16, id="beside a merge key"),
    ],
)
def test_line_of_and_line_in_at_the_rules_positions(
    path: tuple[str, ...], line: int | None
) -> None:
    node = _composed()
    obj = yaml.safe_load(PORTS_AND_MERGE)
    assert line_of(node, path) == line
    assert line_in(lines_of(node), obj, path) == line


def test_line_in_a_merged_key_is_nowhere() -> None:
    # the value has it, but no line of the document sets it under that map
    node = _composed()
    obj = yaml.safe_load(PORTS_AND_MERGE)
    assert obj["spec"]["merged"]["x"] == 1
    assert line_in(lines_of(node), obj, ("f:spec", "f:merged", "f:x")) is None
