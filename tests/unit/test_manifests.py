from __future__ import annotations

import itertools
import os
import textwrap
import time
from pathlib import Path

import pytest

from gitsync.errors import ConfigError, ManifestError
from gitsync.manifests import DesiredApp, Limits, LoadResult, load

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "repo"

APP = """\
apiVersion: apps.example.com/v1
kind: MyApp
metadata:
  name: {name}
  namespace: {namespace}
spec:
  image: nginx:1.27
"""


def app(name: str = "web", namespace: str = "shop") -> str:
    return APP.format(name=name, namespace=namespace)


def write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text))
    return root


def only_error(result: LoadResult) -> ManifestError:
    assert len(result.errors) == 1, [str(e) for e in result.errors]
    return result.errors[0]


def test_valid_myapp(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "apps/web.yaml": """\
            # the storefront
            apiVersion: apps.example.com/v1
            kind: MyApp
            metadata:
              name: web
              labels: {team: shop}
              annotations: {example.com/owner: "a@example.com"}
            spec:
              image: nginx:1.27
              replicas: "3"
              port: "80"
              env:
                - {name: MODE, value: prod}
                - {name: EMPTY}
              resources:
                requests: {cpu: 100m, memory: 64Mi}
                limits: {cpu: 1, memory: "1.5Gi"}
              driftPolicy: report
              suspend: false
            """
        },
    )
    result = load(tmp_path, default_namespace="shop")
    assert result.ok and result.files == 1
    assert result.apps == (
        DesiredApp(
            obj={
                "apiVersion": "apps.example.com/v1",
                "kind": "MyApp",
                "metadata": {
                    "name": "web",
                    "namespace": "shop",
                    "labels": {"team": "shop"},
                    "annotations": {"example.com/owner": "a@example.com"},
                },
                "spec": {
                    "image": "nginx:1.27",
                    "replicas": 3,
                    "port": 80,
                    "env": [{"name": "MODE", "value": "prod"}, {"name": "EMPTY"}],
                    "resources": {
                        "requests": {"cpu": "100m", "memory": "64Mi"},
                        "limits": {"cpu": 1, "memory": "1.5Gi"},
                    },
                    "driftPolicy": "report",
                    "suspend": False,
                },
            },
            file="apps/web.yaml",
            document=0,
            line=2,
        ),
    )
    assert result.apps[0].key == "shop/web"


def test_multi_document_indexes_and_lines(tmp_path: Path) -> None:
    text = "---\n" + app("a") + "---\n---\n# only a comment\n---\n" + app("b") + "...\n"
    write(tmp_path, {"all.yml": text})
    result = load(tmp_path)
    assert result.ok
    assert [(a.key, a.document, a.line) for a in result.apps] == [
        ("shop/a", 0, 2),
        ("shop/b", 3, 13),
    ]


def test_files_sorted_hidden_and_other_files_skipped(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "b/z.yaml": app("z"),
            "a.yaml": app("a"),
            "b/m.yml": app("m"),
            ".git/config.yaml": "not: a myapp",
            ".github/workflows/ci.yml": "on: push",
            "b/.hidden.yaml": "kind: Secret",
            "README.md": "# hi",
            "b/values.json": "{}",
        },
    )
    result = load(tmp_path)
    assert result.ok and result.files == 3
    assert [a.file for a in result.apps] == ["a.yaml", "b/m.yml", "b/z.yaml"]


def test_path_selects_a_subdirectory_or_file(tmp_path: Path) -> None:
    write(tmp_path, {"apps/a.yaml": app("a"), "other/b.yaml": app("b")})
    assert [a.key for a in load(tmp_path, "apps").apps] == ["shop/a"]
    assert [a.key for a in load(tmp_path, "./other/b.yaml").apps] == ["shop/b"]


@pytest.mark.parametrize("path", ["..", "../x", "/etc", "apps/../../"])
def test_path_escaping_the_root_is_a_config_error(tmp_path: Path, path: str) -> None:
    repo = write(tmp_path / "repo", {"apps/a.yaml": app()})
    with pytest.raises(ConfigError, match="outside the repository"):
        load(repo, path)


def test_missing_path_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load(tmp_path, "nope")


SPEC_CASES = [
    # (spec lines, field, message fragment)
    ("replicas: three", "spec.replicas", "found string 'three'"),
    ("replicas: -1", "spec.replicas", "integer from 0"),
    ("replicas: 1.5", "spec.replicas", "found number 1.5"),
    ("replicas: true", "spec.replicas", "found boolean true"),
    ('replicas: "-1"', "spec.replicas", "found string '-1'"),
    ("port: 0", "spec.port", "integer from 1 to 65535, found number 0"),
    ("port: 65536", "spec.port", "found number 65536"),
    ("port: http", "spec.port", "found string 'http'"),
    ("env: [{name: PORT, value: 8080}]", "spec.env[0].value", "quote it"),
    ("env: [{name: DEBUG, value: yes}]", "spec.env[0].value", "found boolean true"),
    ("env: [{name: A, value: x}, {name: A, value: z}]", "spec.env[1].name", "duplicate"),
    ("env: [{name: '', value: x}]", "spec.env[0].name", "non-empty string"),
    ("env: [{value: x}]", "spec.env[0].name", "found null"),
    ("env: [{name: A, valueFrom: {}}]", "spec.env[0].valueFrom", "unknown field"),
    ("env: {A: b}", "spec.env", "must be a list"),
    ("env: [A=b]", "spec.env[0]", "must be a mapping"),
    ("resources: {requests: {cpu: lots}}", "spec.resources.requests.cpu", "quantity"),
    ("resources: {limits: {cpu: 0.5}}", "spec.resources.limits.cpu", "quote it"),
    ("resources: {limits: {memory: -1}}", "spec.resources.limits.memory", "quantity"),
    ("resources: {limits: {memory: 1GB}}", "spec.resources.limits.memory", "quantity"),
    ("resources: {claims: []}", "spec.resources.claims", "unknown field"),
    ("resources: {limits: 1}", "spec.resources.limits", "mapping of quantities"),
    ("driftPolicy: ignore", "spec.driftPolicy", "correct, report"),
    ('suspend: "true"', "spec.suspend", "found string 'true'"),
    ("imagePullPolicy: Always", "spec.imagePullPolicy", "unknown field"),
    ("image: ''", "spec.image", "non-empty"),
    ("image: 1.27", "spec.image", "found number 1.27"),
]


@pytest.mark.parametrize(("spec_line", "field", "fragment"), SPEC_CASES)
def test_invalid_spec(tmp_path: Path, spec_line: str, field: str, fragment: str) -> None:
    text = APP.format(name="web", namespace="shop") + f"  {spec_line}\n"
    if spec_line.startswith("image:"):
        text = text.replace("  image: nginx:1.27\n", "")
    write(tmp_path, {"web.yaml": text})
    result = load(tmp_path)
    assert result.apps == ()
    err = only_error(result)
    assert (err.file, err.document, err.field) == ("web.yaml", 0, field)
    assert err.line == (8 if not spec_line.startswith("image:") else 7)
    assert fragment in err.message


def test_valid_quantities_and_integers(tmp_path: Path) -> None:
    spec = "resources: {requests: {cpu: '.5', memory: 1e3, x.io/gpu: 2, w: 1.5Ki, z: 10n}}"
    write(tmp_path, {"a.yaml": app() + f"  {spec}\n  replicas: 0\n  port: 65535\n"})
    result = load(tmp_path)
    assert result.ok, [str(e) for e in result.errors]
    assert result.apps[0].obj["spec"]["replicas"] == 0


@pytest.mark.parametrize(
    ("metadata", "field", "fragment"),
    [
        ("name: Bad_Name", "metadata.name", "DNS-1123"),
        ("name: web.v2", "metadata.name", "DNS-1123"),
        ("name: -web", "metadata.name", "DNS-1123"),
        ("name: web-", "metadata.name", "DNS-1123"),
        (f"name: {'a' * 64}", "metadata.name", "at most 63"),
        ("name: 123", "metadata.name", "found number 123"),
        ("{namespace: shop}", "metadata.name", "found null"),
        ("{name: web, namespace: Shop}", "metadata.namespace", "DNS-1123"),
        ("{name: web, namespace: kube-system}", "metadata.namespace", "not allowed"),
        ("{name: web, uid: abc}", "metadata.uid", "unknown field"),
        ("{name: web, labels: {version: 1.0}}", "metadata.labels.version", "quote it"),
        ("{name: web, labels: {a: 'has space'}}", "metadata.labels.a", "invalid label value"),
        ("{name: web, labels: {'bad key!': x}}", "metadata.labels['bad key!']", "invalid key"),
        (
            "{name: web, labels: {gitsync.apps.example.com/source: x}}",
            "metadata.labels.gitsync.apps.example.com/source",
            "set by gitsync",
        ),
        ("{name: web, annotations: [a]}", "metadata.annotations", "mapping of strings"),
    ],
)
def test_invalid_metadata(tmp_path: Path, metadata: str, field: str, fragment: str) -> None:
    meta = f"metadata: {metadata}\n" if metadata.startswith("{") else f"metadata:\n  {metadata}\n"
    text = f"apiVersion: apps.example.com/v1\nkind: MyApp\n{meta}spec: {{image: x}}\n"
    write(tmp_path, {"m.yaml": text})
    result = load(tmp_path, allowed_namespaces=frozenset({"shop", "default"}))
    err = only_error(result)
    assert err.field == field and fragment in err.message, str(err)
    assert result.apps == ()


def test_managed_by_label_may_be_written_as_gitsync(tmp_path: Path) -> None:
    meta = "{name: web, labels: {app.kubernetes.io/managed-by: gitsync}}"
    text = f"apiVersion: apps.example.com/v1\nkind: MyApp\nmetadata: {meta}\nspec: {{image: x}}\n"
    write(tmp_path, {"m.yaml": text})
    assert load(tmp_path).ok


@pytest.mark.parametrize(
    ("text", "field", "fragment", "line"),
    [
        ("apiVersion: v1\nkind: ConfigMap\n", "apiVersion", "found v1 ConfigMap", 1),
        ("apiVersion: apps.example.com/v1\nkind: Deployment\n", "kind", "v1 Deployment", 2),
        ("apiVersion: apps.example.com/v2\nkind: MyApp\n", "apiVersion", "v2 MyApp", 1),
        ("kind: MyApp\n", "apiVersion", "found (no apiVersion) MyApp", 1),
        ("- a\n- b\n", None, "found a list", 1),
        ("just text\n", None, "found string 'just text'", 1),
    ],
)
def test_wrong_kind(tmp_path: Path, text: str, field: str | None, fragment: str, line: int) -> None:
    write(tmp_path, {"x.yaml": text})
    err = only_error(load(tmp_path))
    assert (err.field, err.line) == (field, line) and fragment in err.message, str(err)


def test_missing_spec_and_status_and_unknown_top_level(tmp_path: Path) -> None:
    text = "apiVersion: apps.example.com/v1\nkind: MyApp\nmetadata: {name: a}\nstatus: {}\n"
    write(tmp_path, {"x.yaml": text})
    errors = {e.field: e.message for e in load(tmp_path).errors}
    assert errors == {
        "status": "status is written by the operator, not by Git",
        "spec": "must be a mapping with an image, found null",
    }


def test_syntax_error_names_line_and_other_files_still_load(tmp_path: Path) -> None:
    broken = app("first") + "---\n" + "apiVersion: apps.example.com/v1\nkind: [MyApp\n"
    write(tmp_path, {"a.yaml": app("a"), "b.yaml": broken, "c.yaml": app("c")})
    result = load(tmp_path)
    err = only_error(result)
    assert (err.file, err.document, err.line) == ("b.yaml", 1, 11)
    assert "invalid YAML" in err.message
    assert [a.key for a in result.apps] == ["shop/a", "shop/first", "shop/c"]
    assert not result.ok and result.files == 3


def test_unsafe_tags_are_refused_not_run(tmp_path: Path) -> None:
    evil = "!!python/object/apply:os.system ['touch pwned']"
    write(tmp_path, {"x.yaml": app() + f"  replicas: {evil}\n"})
    err = only_error(load(tmp_path))
    assert "invalid YAML" in err.message and err.line == 8
    assert not (tmp_path / "pwned").exists()


def test_duplicate_keys_are_an_error(tmp_path: Path) -> None:
    write(tmp_path, {"x.yaml": app() + "  replicas: 1\n  replicas: 5\n"})
    result = load(tmp_path)
    err = only_error(result)
    assert "duplicate key 'replicas'" in err.message and err.line == 9
    assert result.apps == ()


def test_duplicate_names_across_and_within_files(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "a.yaml": app("web"),
            "b.yaml": app("other") + "---\n" + app("web"),
            "c.yaml": app("twice", "blog") + "---\n" + app("twice", "blog"),
            "d.yaml": app("web", "blog"),  # same name, other namespace: fine
        },
    )
    result = load(tmp_path)
    assert sorted(a.key for a in result.apps) == ["blog/web", "shop/other"]
    messages = sorted(str(e) for e in result.errors)
    assert messages == [
        "b.yaml:9:1 (document 1): metadata.name: MyApp shop/web is also defined at a.yaml:1"
        " (document 0)",
        "c.yaml:9:1 (document 1): metadata.name: MyApp blog/twice is also defined at c.yaml:1"
        " (document 0)",
    ]


def test_allowed_namespaces_and_default(tmp_path: Path) -> None:
    meta = "apiVersion: apps.example.com/v1\nkind: MyApp\nmetadata: {name: a}\nspec: {image: x}\n"
    write(tmp_path, {"a.yaml": meta})
    assert load(tmp_path, default_namespace="team-a").apps[0].key == "team-a/a"
    result = load(tmp_path, default_namespace="team-a", allowed_namespaces=frozenset({"team-b"}))
    assert only_error(result).field == "metadata.namespace"
    with pytest.raises(ConfigError):
        load(tmp_path, default_namespace="Not Valid")


def test_alias_bomb_is_refused_quickly(tmp_path: Path) -> None:
    levels = "abcdefghi"
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for prev, cur in itertools.pairwise(levels):
        lines.append(f"{cur}: &{cur} [{', '.join([f'*{prev}'] * 9)}]")
    write(tmp_path, {"bomb.yaml": "\n".join(lines) + "\n", "ok.yaml": app()})
    start = time.perf_counter()
    result = load(tmp_path)
    elapsed = time.perf_counter() - start
    assert elapsed < 0.2
    err = only_error(result)
    assert err.file == "bomb.yaml" and "aliases expand more than 100" in err.message
    assert err.line is not None and err.line <= 4
    assert [a.key for a in result.apps] == ["shop/web"]


def test_modest_alias_use_is_fine(tmp_path: Path) -> None:
    text = (
        "apiVersion: apps.example.com/v1\nkind: MyApp\nmetadata: {name: a}\n"
        "spec:\n  image: x\n  resources:\n    requests: &r {cpu: 100m}\n    limits: *r\n"
    )
    write(tmp_path, {"a.yaml": text})
    result = load(tmp_path)
    assert result.ok
    assert result.apps[0].obj["spec"]["resources"]["limits"] == {"cpu": "100m"}


def test_alias_limit_is_configurable(tmp_path: Path) -> None:
    text = "x: &x 1\nl: [" + ", ".join(["*x"] * 5) + "]\n"
    write(tmp_path, {"a.yaml": text})
    assert "aliases expand" in only_error(load(tmp_path, limits=Limits(max_aliases=4))).message
    assert "aliases" not in only_error(load(tmp_path, limits=Limits(max_aliases=5))).message


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("a: &a [*a]\n", "recursive alias *a"),
        ("a: *nope\n", "undefined alias *nope"),
    ],
)
def test_bad_aliases(tmp_path: Path, text: str, fragment: str) -> None:
    write(tmp_path, {"a.yaml": text})
    assert fragment in only_error(load(tmp_path)).message


def test_nesting_depth_is_bounded(tmp_path: Path) -> None:
    write(tmp_path, {"deep.yaml": "a: " + "[" * 40 + "]" * 40 + "\n", "ok.yaml": app()})
    result = load(tmp_path)
    err = only_error(result)
    assert err.file == "deep.yaml" and "nested deeper than 32" in err.message
    assert [a.key for a in result.apps] == ["shop/web"]
    # libyaml's own limit (1000) is far beyond ours; this must not crash either
    write(tmp_path, {"deep.yaml": "[" * 100_000})
    assert only_error(load(tmp_path)).file == "deep.yaml"


def test_huge_file_is_refused_without_reading(tmp_path: Path) -> None:
    big = tmp_path / "big.yaml"
    with big.open("wb") as f:
        f.write(app().encode())
        f.truncate(20 << 20)  # 20 MiB, sparse: cheap to make, slow to read
    write(tmp_path, {"ok.yaml": app("ok")})
    start = time.perf_counter()
    result = load(tmp_path)
    assert time.perf_counter() - start < 0.2
    err = only_error(result)
    assert err.file == "big.yaml" and f"{20 << 20} bytes" in err.message
    assert [a.key for a in result.apps] == ["shop/ok"]


def test_file_size_limit_is_exact(tmp_path: Path) -> None:
    text = app()
    write(tmp_path, {"a.yaml": text})
    assert load(tmp_path, limits=Limits(max_file_bytes=len(text))).ok
    assert not load(tmp_path, limits=Limits(max_file_bytes=len(text) - 1)).ok


def test_too_many_documents(tmp_path: Path) -> None:
    write(tmp_path, {"a.yaml": "---\n".join(app(f"a{i}") for i in range(5))})
    result = load(tmp_path, limits=Limits(max_documents=3))
    assert "more than 3 documents" in only_error(result).message
    assert len(result.apps) == 3


def test_symlink_to_a_host_file_is_refused(tmp_path: Path) -> None:
    write(tmp_path, {"ok.yaml": app()})
    (tmp_path / "passwd.yaml").symlink_to("/etc/passwd")
    (tmp_path / "notes.txt").symlink_to("/etc/passwd")  # not a manifest: never read
    result = load(tmp_path)
    err = only_error(result)
    assert (err.file, err.message) == ("passwd.yaml", "symlink resolves outside the repository")
    assert "root:" not in str(err)
    assert [a.key for a in result.apps] == ["shop/web"]


def test_symlinked_directory_escaping_the_root_is_refused(tmp_path: Path) -> None:
    outside = write(tmp_path / "outside", {"secret.yaml": app("stolen")})
    repo = write(tmp_path / "repo", {"apps/ok.yaml": app()})
    (repo / "apps" / "linked").symlink_to(outside, target_is_directory=True)
    result = load(repo)
    err = only_error(result)
    assert (err.file, err.message) == ("apps/linked", "symlink resolves outside the repository")
    assert [a.key for a in result.apps] == ["shop/web"]


def test_symlinks_inside_the_root_are_followed_once(tmp_path: Path) -> None:
    repo = write(tmp_path, {"shared/base.yaml": app("base"), "apps/own.yaml": app("own")})
    (repo / "apps" / "base.yaml").symlink_to("../shared/base.yaml")
    (repo / "apps" / "loop").symlink_to("..", target_is_directory=True)
    result = load(repo, "apps")
    assert result.ok, [str(e) for e in result.errors]
    assert [(a.key, a.file) for a in result.apps] == [
        ("shop/base", "apps/base.yaml"),
        ("shop/own", "apps/own.yaml"),
    ]


def test_fifo_and_bad_encoding(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe.yaml")
    (tmp_path / "latin1.yaml").write_bytes(b"name: caf\xe9\n")
    messages = {e.file: e.message for e in load(tmp_path).errors}
    assert messages == {
        "latin1.yaml": "not valid UTF-8 (byte 9)",
        "pipe.yaml": "not a regular file",
    }


def test_examples_repo_loads_cleanly() -> None:
    result = load(EXAMPLES)
    assert result.ok, [str(e) for e in result.errors]
    assert result.files >= 4
    keys = sorted(a.key for a in result.apps)
    assert 4 <= len(keys) <= 6
    assert {k.split("/")[0] for k in keys} == {"shop", "blog"}
    assert any(a.obj["spec"].get("driftPolicy") == "report" for a in result.apps)
    assert all(1 <= a.obj["spec"]["replicas"] <= 3 for a in result.apps)
    assert any(a.document == 1 for a in result.apps)  # one multi-document file


def test_thousand_myapps_load_fast(tmp_path: Path) -> None:
    doc = APP + "  replicas: 2\n  port: 8080\n  env: [{{name: A, value: b}}]\n"
    docs = [doc.format(name=f"app-{i}", namespace=f"ns-{i % 10}") for i in range(1000)]
    write(tmp_path, {"all.yaml": "---\n".join(docs)})
    start = time.perf_counter()
    result = load(tmp_path)
    elapsed = time.perf_counter() - start
    assert result.ok and len(result.apps) == 1000
    assert elapsed < 1.0
