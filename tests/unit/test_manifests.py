from __future__ import annotations

import errno
import itertools
import os
import textwrap
import time
from pathlib import Path

import pytest

from gitsync.errors import ConfigError, ManifestError
from gitsync.source import _yaml
from gitsync.source.manifests import DesiredApp, Limits, LoadResult, load

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
              replicas: 3
              port: 80
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


def test_a_number_with_no_fraction_is_an_integer(tmp_path: Path) -> None:
    # the API server takes replicas: 2.0 for a MyApp and stores 2 (tests/integration/
    # test_integers.py); gitsync reads it the same, and sends the integer
    write(tmp_path, {"a.yaml": app() + "  replicas: 2.0\n  port: 8080.0\n"})
    result = load(tmp_path)
    assert result.ok, [str(e) for e in result.errors]
    spec = result.apps[0].obj["spec"]
    assert (spec["replicas"], spec["port"]) == (2, 8080)
    assert type(spec["replicas"]) is int and type(spec["port"]) is int


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


RESERVED_KEYS = [
    ("annotations", "gitsync.apps.example.com/sync-window-override"),
    ("annotations", "gitsync.apps.example.com/adopt"),
    ("annotations", "gitsync.apps.example.com/applied"),
    ("annotations", "gitsync.apps.example.com/accept-non-fast-forward"),
    ("annotations", "gitsync.apps.example.com/anything-new"),
    ("labels", "gitsync.apps.example.com/instance"),
    ("labels", "gitsync.apps.example.com/bucket"),
    ("labels", "gitsync.apps.example.com/sync-window-override"),
]


@pytest.mark.parametrize(("field", "key"), RESERVED_KEYS)
def test_control_keys_are_refused_in_git_naming_file_and_line(
    tmp_path: Path, field: str, key: str
) -> None:
    # a control declared in Git would be applied back after each use: a one-shot window
    # override would let every later change through
    text = APP.format(name="web", namespace="shop").replace(
        "spec:\n", f"  {field}:\n    team: shop\n    {key}: INC-1\n" + "spec:\n"
    )
    write(tmp_path, {"apps/web.yaml": text, "apps/ok.yaml": app("ok")})
    result = load(tmp_path)
    err = only_error(result)
    assert (err.file, err.line, err.field) == ("apps/web.yaml", 8, f"metadata.{field}.{key}")
    assert str(err).startswith(f"apps/web.yaml:8:5 (document 0): metadata.{field}.{key}: ")
    assert "is reserved" in err.message and "never declared in Git" in err.message
    assert [a.obj["metadata"]["name"] for a in result.apps] == ["ok"]


def test_a_lookalike_prefix_is_not_reserved(tmp_path: Path) -> None:
    meta = "{name: web, annotations: {apps.example.com/x: a, gitsync.apps.example.com.io/y: b}}"
    text = f"apiVersion: apps.example.com/v1\nkind: MyApp\nmetadata: {meta}\nspec: {{image: x}}\n"
    write(tmp_path, {"m.yaml": text})
    assert load(tmp_path).ok


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
    start = time.process_time()
    result = load(tmp_path)
    # unbounded, 9^9 nodes would never finish: a generous CPU bound, not a figure
    assert time.process_time() - start < 1.0
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


def test_thousand_myapps_load(tmp_path: Path) -> None:
    doc = APP + "  replicas: 2\n  port: 8080\n  env: [{{name: A, value: b}}]\n"
    docs = [doc.format(name=f"app-{i}", namespace=f"ns-{i % 10}") for i in range(1000)]
    write(tmp_path, {"all.yaml": "---\n".join(docs)})
    start = time.perf_counter()
    result = load(tmp_path)
    # a figure to watch (about 0.25 s here), not an assertion: the benchmark measures it
    print(f"1000 MyApps loaded in {time.perf_counter() - start:.2f}s")
    assert result.ok and len(result.apps) == 1000


# --- scalars as kubectl reads them -------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "tag", "value"),
    [
        ("1:20", "str", "1:20"),  # YAML 1.1 sexagesimal 80 in PyYAML, a string in kubectl
        ("1:20.5", "str", "1:20.5"),
        ("0x1F", "int", 31),
        ("0X1f", "int", 31),
        ("0b101", "int", 5),
        ("-0b101", "int", -5),
        ("0o17", "int", 15),  # YAML 1.2 octal: a string in PyYAML
        ("017", "int", 15),
        ("1_000", "int", 1000),
        ("+12", "int", 12),
        ("_1", "str", "_1"),  # go-yaml looks at the first character only
        ("9223372036854775807", "int", 2**63 - 1),
        ("-9223372036854775808", "int", -(2**63)),
        ("18446744073709551615", "int", 2**64 - 1),  # unsigned: ParseUint
        ("0x" + "f" * 16, "int", 2**64 - 1),
        ("+18446744073709551615", "float", 1.8446744073709552e19),  # no sign for unsigned
        ("18446744073709551616", "float", 1.8446744073709552e19),
        ("0x1" + "0" * 16, "str", "0x1" + "0" * 16),
        ("0" * 100_000 + "7", "int", 7),
        ("1" * 5000, "str", "1" * 5000),  # +Inf as a float: out of range, so a string
        ("0x" + "f" * 5000, "str", "0x" + "f" * 5000),
        ("0b" + "1" * 5000, "str", "0b" + "1" * 5000),
        ("08", "float", 8.0),
        ("1e3", "float", 1000.0),
        (".5", "float", 0.5),
        ("1e400", "str", "1e400"),
        ("y", "bool", True),  # go-yaml v2, so kubectl; not PyYAML nor YAML 1.2
        ("N", "bool", False),
        ("Off", "bool", False),
        ("~", "null", None),
        ("2024-01-02", "str", "2024-01-02"),  # a timestamp reaches JSON as a string
        ("<<", "merge", None),
    ],
)
def test_plain_scalars_resolve_as_in_go_yaml_v2(text: str, tag: str, value: object) -> None:
    assert _yaml.resolve(text, True) == f"tag:yaml.org,2002:{tag}"
    assert _yaml.resolve(text, False) == _yaml.STR  # quoted: always a string
    if tag == "int":
        assert _yaml.go_int(text) == value
    elif tag == "float":
        assert _yaml.go_int(text) is None and _yaml.go_float(text) == value


@pytest.mark.parametrize(
    ("spec_line", "key", "value"),
    [
        ("port: 0x1F90", "port", 8080),
        ("port: 0o17", "port", 15),
        ("replicas: 0b11", "replicas", 3),
        ("replicas: 1_0", "replicas", 10),
        ("env: [{name: D, value: 2024-01-02}]", "env", [{"name": "D", "value": "2024-01-02"}]),
        ("resources: {limits: {memory: 1e3}}", "resources", {"limits": {"memory": 1000}}),
    ],
)
def test_numbers_load_as_kubectl_sends_them(
    tmp_path: Path, spec_line: str, key: str, value: object
) -> None:
    write(tmp_path, {"a.yaml": app() + f"  {spec_line}\n"})
    result = load(tmp_path)
    assert result.ok, [str(e) for e in result.errors]
    assert result.apps[0].obj["spec"][key] == value


def test_sexagesimal_port_is_a_schema_error_not_80(tmp_path: Path) -> None:
    write(tmp_path, {"a.yaml": app() + "  port: 1:20\n", "ok.yaml": app("ok")})
    result = load(tmp_path)
    err = only_error(result)
    assert (err.file, err.line, err.column, err.field) == ("a.yaml", 8, 3, "spec.port")
    assert "found string '1:20'" in err.message
    assert [a.key for a in result.apps] == ["shop/ok"]


HOSTILE = {
    # a 100k-part sexagesimal: quadratic in PyYAML (seconds of CPU)
    "sexagesimal": "  replicas: " + ":".join(["1"] * 100_000) + "\n",
    "tagged-sexagesimal": "  replicas: !!int " + ":".join(["1"] * 100_000) + "\n",
    "hex": "  replicas: 0x" + "f" * 5000 + "\n",
    "binary": "  replicas: 0b" + "1" * 5000 + "\n",
    "decimal": "  replicas: " + "9" * 5000 + "\n",
    "tagged-decimal": "  replicas: !!int " + "9" * 5000 + "\n",
    "quoted-decimal": '  replicas: "' + "9" * 5000 + '"\n',
    "quoted-quantity": '  resources: {limits: {cpu: "' + "9" * 5000 + '"}}\n',
    "float-quantity": "  resources: {limits: {cpu: " + "9" * 300 + ".5}}\n",
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_scalars_are_one_clear_error(tmp_path: Path, case: str) -> None:
    write(tmp_path, {"bad.yaml": app() + HOSTILE[case], "ok.yaml": app("ok")})
    start = time.process_time()
    result = load(tmp_path)
    cpu = time.process_time() - start
    assert cpu < 0.5, f"{cpu:.2f} s of CPU"
    err = only_error(result)
    assert (err.file, err.line, err.document) == ("bad.yaml", 8, 0)
    assert err.column is not None
    assert err.field is not None or "cannot read" in err.message, str(err)
    assert len(str(err)) < 400 and "\n" not in str(err)
    assert [a.key for a in result.apps] == ["shop/ok"]


def test_a_300k_part_sexagesimal_costs_linear_time(tmp_path: Path) -> None:
    write(tmp_path, {"a.yaml": app() + "  replicas: " + ":".join(["1"] * 300_000) + "\n"})
    start = time.process_time()
    result = load(tmp_path, limits=Limits(max_value_bytes=1 << 20))
    cpu = time.process_time() - start
    assert only_error(result).field == "spec.replicas"
    assert cpu < 0.5, f"{cpu:.2f} s of CPU"


def test_symlink_loops_fail_their_file_only(tmp_path: Path) -> None:
    write(tmp_path, {"ok.yaml": app()})
    (tmp_path / "self.yaml").symlink_to("self.yaml")
    (tmp_path / "a.yml").symlink_to("b.yml")
    (tmp_path / "b.yml").symlink_to("a.yml")
    (tmp_path / "loop").symlink_to("loop")  # not a manifest name: holds none
    result = load(tmp_path)
    assert sorted(str(e) for e in result.errors) == [
        "a.yml: cannot read: Too many levels of symbolic links",
        "b.yml: cannot read: Too many levels of symbolic links",
        "self.yaml: cannot read: Too many levels of symbolic links",
    ]
    assert [a.key for a in result.apps] == ["shop/web"]


def test_a_read_error_fails_its_file_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path, {"a.yaml": app("a"), "b.yaml": app("b")})
    original = os.fstat
    failures = [OSError(errno.EIO, os.strerror(errno.EIO))]

    def fstat(fd: int) -> os.stat_result:
        if failures:  # the first file read fails, as on a bad disk
            raise failures.pop()
        return original(fd)

    monkeypatch.setattr(os, "fstat", fstat)
    result = load(tmp_path)
    assert [str(e) for e in result.errors] == ["a.yaml: cannot read: Input/output error"]
    assert [a.key for a in result.apps] == ["shop/b"]


# --- expanded size -----------------------------------------------------------------------


def test_an_aliased_large_value_is_refused_while_composing(tmp_path: Path) -> None:
    # 200 KiB, used 99 times: 20 MB once expanded, from a file of 200 KiB
    big = "x" * (200 << 10)
    aliases = ", ".join(["*big"] * 99)
    text = app() + f"  env: [{{name: A, value: &big {big}}}]\nx: [{aliases}]\n"
    write(tmp_path, {"bomb.yaml": text, "ok.yaml": app("ok")})
    start = time.process_time()
    result = load(tmp_path)
    assert time.process_time() - start < 0.5
    err = only_error(result)
    # stopped at the second alias: the list is then 400 KiB
    assert (err.file, err.line, err.column) == ("bomb.yaml", 9, 11)
    assert err.message == f"a value is larger than {256 << 10} bytes once aliases are expanded"
    assert [a.key for a in result.apps] == ["shop/ok"]


def test_the_expanded_document_is_bounded(tmp_path: Path) -> None:
    # values of 200 KiB each, under the value bound; together over the document bound
    big = "x" * (200 << 10)
    keys = "".join(f"k{i}: *big\n" for i in range(99))
    text = app() + f"  env: [{{name: A, value: &big {big}}}]\n{keys}"
    write(tmp_path, {"bomb.yaml": text, "ok.yaml": app("ok")})
    start = time.process_time()
    result = load(tmp_path)
    assert time.process_time() - start < 0.5
    err = only_error(result)
    assert err.message == f"the document is larger than {1 << 20} bytes once aliases are expanded"
    # 5 x 200 KiB fit in 1 MiB, the 6th does not: env, then k0 … k4
    assert (err.file, err.line, err.column) == ("bomb.yaml", 9 + 4, 5)
    assert [a.key for a in result.apps] == ["shop/ok"]
    limits = Limits(max_document_bytes=30 << 20)
    assert "document" not in only_error(load(tmp_path, limits=limits)).message


def test_one_value_is_bounded_too(tmp_path: Path) -> None:
    small = "y" * (100 << 10)
    text = app() + f"  env: [{{name: A, value: &s {small}}}]\nx: [*s, *s, *s]\n"
    write(tmp_path, {"a.yaml": text})
    err = only_error(load(tmp_path))
    assert err.message == f"a value is larger than {256 << 10} bytes once aliases are expanded"
    assert (err.line, err.column) == (9, 13)
    # the same bound, for a value written out in full
    write(tmp_path, {"a.yaml": app().replace("nginx:1.27", "i" * (300 << 10))})
    err = only_error(load(tmp_path))
    assert err.message == f"a value is larger than {256 << 10} bytes"
    assert (err.line, err.column) == (7, 10)
    assert load(tmp_path, limits=Limits(max_value_bytes=400 << 10)).ok


def test_value_bytes_are_utf8_bytes(tmp_path: Path) -> None:
    write(tmp_path, {"a.yaml": app().replace("nginx:1.27", "e" * 600)})
    assert load(tmp_path, limits=Limits(max_value_bytes=1000)).ok
    write(tmp_path, {"a.yaml": app().replace("nginx:1.27", "é" * 600)})  # 1200 bytes
    assert (
        "larger than 1000"
        in only_error(load(tmp_path, limits=Limits(max_value_bytes=1000))).message
    )


# --- how many errors ---------------------------------------------------------------------


def test_a_1_mib_list_of_wrong_items_is_one_error(tmp_path: Path) -> None:
    n = ((1 << 20) - 200) // 2
    write(tmp_path, {"flood.yaml": app() + "  env: [" + "0," * (n - 1) + "0]\n"})
    err = only_error(load(tmp_path))
    assert err.message == f"a value is larger than {256 << 10} bytes"


def test_errors_per_file_are_capped_and_counted(tmp_path: Path) -> None:
    n = 30_000  # under the value bound: every item is a schema error
    flood = app() + "  env: [" + "0," * (n - 1) + "0]\n"
    write(tmp_path, {"flood.yaml": flood, "ok.yaml": app("ok")})
    start = time.process_time()
    result = load(tmp_path)
    assert time.process_time() - start < 3
    assert len(result.errors) == 21 and result.error_count == n
    assert [e.field for e in result.errors[:20]] == [f"spec.env[{i}]" for i in range(20)]
    assert str(result.errors[-1]) == f"flood.yaml: … and {n - 20} more errors in this file"
    assert [a.key for a in result.apps] == ["shop/ok"]


def test_errors_per_load_are_capped_and_counted(tmp_path: Path) -> None:
    files = {f"f{i:02}.yaml": app(f"a{i}") + "  env: [0, 0, 0, 0, 0]\n" for i in range(50)}
    write(tmp_path, files)
    result = load(tmp_path, limits=Limits(max_errors_per_file=3, max_errors=30))
    assert result.error_count == 250
    assert len(result.errors) == 31
    # each file: 3 shown, then "… and 2 more"; 30 lines cover 7.5 files
    assert str(result.errors[3]) == "f00.yaml: … and 2 more errors in this file"
    assert str(result.errors[-1]) == f"… and {250 - 7 * 5 - 2} more errors"
    assert not result.ok


def test_errors_of_the_walk_count_against_the_same_cap(tmp_path: Path) -> None:
    write(tmp_path, {"ok.yaml": app()})
    for i in range(300):
        (tmp_path / f"loop{i:03}.yaml").symlink_to(f"loop{i:03}.yaml")
    result = load(tmp_path)
    assert result.error_count == 300 and len(result.errors) == 201
    assert str(result.errors[-1]) == "… and 100 more errors"
    assert [a.key for a in result.apps] == ["shop/web"]


# --- every error has a line and a column -------------------------------------------------


@pytest.mark.parametrize(
    ("text", "line", "column", "fragment"),
    [
        (APP.format(name="web", namespace="shop") + "  port: 8\x00\n", 8, 10, "U+0000"),
        (APP.format(name="web", namespace="shop") + "  port: 8\x7f\n", 8, 10, "U+007F"),
        ("a: 1\n\x1b[2J: 2\n", 2, 1, "U+001B"),
        (app() + "---\n\ufeff" + app("b"), 9, 1, "byte order mark"),
        (app() + "\t port: 3\n", 8, 1, "tab"),
        (app() + "  port: !!int 1:20\n", 8, 9, "cannot read '1:20' as an integer"),
        (app() + "  port: !!float x\n", 8, 9, "cannot read 'x' as a float"),
        (app() + "  suspend: !!bool maybe\n", 8, 12, "cannot read 'maybe' as a boolean"),
        (app() + "  port: 1\n  port: 2\n", 9, 3, "duplicate key 'port'"),
        (app() + "  env: *nope\n", 8, 8, "undefined alias"),
        (app() + "  port: [1\n", 9, 1, "invalid YAML"),
    ],
)
def test_every_load_error_has_line_and_column(
    tmp_path: Path, text: str, line: int, column: int, fragment: str
) -> None:
    write(tmp_path, {"a.yaml": text, "ok.yaml": app("ok")})
    result = load(tmp_path)
    err = only_error(result)
    assert (err.file, err.line, err.column) == ("a.yaml", line, column), str(err)
    assert fragment in err.message and "\n" not in str(err)
    assert err.document is None or err.document >= 0
    assert [a.key for a in result.apps] == ["shop/ok"]


@pytest.mark.parametrize(
    ("text", "document", "line"),
    [
        ("%YAML 2.0\n---\na: 1\n", 0, 1),
        (app() + "...\n%YAML 2.0\n---\na: 1\n", 1, 9),  # before the second document
        (app() + "---\na: b: c\n", 1, 9),
    ],
)
def test_an_error_between_documents_names_the_next_one(
    tmp_path: Path, text: str, document: int, line: int
) -> None:
    write(tmp_path, {"a.yaml": text})
    err = only_error(load(tmp_path))
    assert (err.document, err.line) == (document, line), str(err)


@pytest.mark.parametrize("eol", ["\n", "\r\n", "\r", "\u2028"])
def test_lines_are_counted_as_libyaml_counts_them(tmp_path: Path, eol: str) -> None:
    for bad, column in (("  port: x", 3), ("  port: 8\x00", 10)):
        (tmp_path / "a.yaml").write_text((app() + bad + "\n").replace("\n", eol), newline="")
        err = only_error(load(tmp_path))
        assert (err.line, err.column) == (8, column), str(err)


def test_invalid_utf8_has_line_and_column(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_bytes(b"a: 1\nname: caf\xe9\n")
    err = only_error(load(tmp_path))
    assert (err.line, err.column, err.message) == (2, 10, "not valid UTF-8 (byte 14)")


# --- untrusted strings in messages -------------------------------------------------------


def test_a_newline_in_a_file_name_or_key_stays_on_one_line(tmp_path: Path) -> None:
    (tmp_path / "evil\nerror: forged.yaml").write_text(app("a") + "  port: x\n")
    (tmp_path / "key.yaml").write_text(app("b") + '  "a\\nerror: forged": 1\n')
    messages = sorted(str(e) for e in load(tmp_path).errors)
    assert messages == [
        r"'evil\nerror: forged.yaml':8:3 (document 0): spec.port: must be an integer"
        " from 1 to 65535, found string 'x'",
        r"key.yaml:8:3 (document 0): spec['a\nerror: forged']: unknown field"
        " (known: image, replicas, port, env, resources, driftPolicy, suspend,"
        " progressDeadlineSeconds, rollback, dependsOn)",
    ]


# --- --watch-namespace -------------------------------------------------------------------


def test_myapps_outside_the_watched_namespace_are_refused(tmp_path: Path) -> None:
    write(tmp_path, {"a.yaml": app("a", "shop"), "b.yaml": app("b", "blog")})
    result = load(tmp_path, watch_namespace="shop")
    err = only_error(result)
    assert (err.file, err.field, err.line) == ("b.yaml", "metadata.namespace", 5)
    assert err.message == "'blog' is outside the namespace gitsync watches (--watch-namespace shop)"
    assert [a.key for a in result.apps] == ["shop/a"]
    # the default namespace too is held to it
    meta = "apiVersion: apps.example.com/v1\nkind: MyApp\nmetadata: {name: c}\nspec: {image: x}\n"
    write(tmp_path, {"b.yaml": meta})
    assert not load(tmp_path, default_namespace="default", watch_namespace="shop").ok
    assert load(tmp_path, default_namespace="shop", watch_namespace="shop").ok


def test_a_deep_directory_fails_alone_and_the_rest_loads(tmp_path: Path) -> None:
    # git checks out a chain of 1100 directories; a recursive walk ended in RecursionError,
    # and no file of the commit was applied
    edge = "/".join(["d"] * 64)  # the deepest directory still walked
    # made and removed a level at a time: makedirs and rmtree (pytest's too) recurse
    dirs = list(itertools.accumulate(range(1100), lambda p, _: p / "d", initial=tmp_path))[1:]
    for d in dirs:
        d.mkdir()
    try:
        write(tmp_path, {"top.yaml": app("top"), f"{edge}/edge.yaml": app("edge")})
        (dirs[-1] / "deep.yaml").write_text(app("deep"))
        result = load(tmp_path)
    finally:
        for f in (dirs[63] / "edge.yaml", dirs[-1] / "deep.yaml"):
            f.unlink(missing_ok=True)
        for d in reversed(dirs):
            d.rmdir()
    assert sorted(a.key for a in result.apps) == ["shop/edge", "shop/top"]
    err = only_error(result)
    assert err.file == edge + "/d"
    assert err.message == "directory nested more than 64 levels below the path; not read"


def test_the_directory_depth_is_a_limit(tmp_path: Path) -> None:
    write(tmp_path, {"a/b/c.yaml": app("c"), "a/b.yaml": app("b")})
    result = load(tmp_path, limits=Limits(max_dir_depth=1))
    assert [a.key for a in result.apps] == ["shop/b"]
    assert (
        str(only_error(result))
        == "a/b: directory nested more than 1 levels below the path; not read"
    )


def test_the_document_is_bounded_as_the_api_server_stores_it(tmp_path: Path) -> None:
    # 200 000 control characters are 800 KB of YAML ("\x01") and 1.2 MB of JSON
    # ("\u0001"): a MyApp too large to store once gitsync adds its status
    value = "\\x01" * 200_000
    write(tmp_path, {"big.yaml": app("big") + f'  env:\n    - name: A\n      value: "{value}"\n'})
    result = load(tmp_path, limits=Limits(max_value_bytes=2 << 20))
    assert result.apps == ()
    err = only_error(result)
    assert (err.file, err.document, err.line) == ("big.yaml", 0, 1)
    assert err.message.endswith(
        "bytes as the API server stores it (JSON, control characters escaped), more than 1048576"
    )
