"""The manifest loader on arbitrary input: a gitsync error or a valid MyApp, nothing else.

Bytes, text and YAML-ish documents built from the scalars and structures that trip YAML
readers (YAML 1.1 numbers, tags, anchors, merges, look-alike names). Every error must be a
:class:`ManifestError` of the file, on one line, at a line the file has; every MyApp loaded
must pass the schema again unchanged.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from hypothesis import example, given
from hypothesis import strategies as st

from gitsync.errors import GitsyncError, ManifestError
from gitsync.model.schema import Checker, Problems, is_dns_label
from gitsync.source.manifests import LoadResult, load

NAMESPACE = "fuzz"

# scalars as written in a file: each one a trap for some YAML reader
SCALARS = [
    "1:30",
    "0o10",
    "08",
    "010",
    "0x1F",
    "0b102",
    "1_000",
    "-0",
    "+1",
    "9" * 30,
    "0x" + "f" * 40,
    "yes",
    "no",
    "on",
    "off",
    "y",
    "n",
    "true",
    "True",
    "~",
    "null",
    "",
    "1e3",
    "1e2000",
    ".inf",
    "-.nan",
    ".5",
    "1.",
    "2001-12-14",
    "2001-12-14 21:59:43.10 -5",
    "'quoted'",
    '"\\x00"',
    '"\\ud800"',
    '"\\U0010FFFF"',
    '"a\\nb"',
    "&a x",
    "*a",
    "&b [1, 2]",
    "!!int 1:20",
    "!!int 0x1",
    "!!timestamp 99999-01-01",
    "!!timestamp 2001-99-99",
    "!!binary aGk=",
    "!!binary '!'",
    "!!float x",
    "!!bool maybe",
    "!!null x",
    "!!str",
    "!!set {a, b}",
    "!!omap [a: 1]",
    "!!pairs [a: 1]",
    "!!python/name:os.system",
    "!foo x",
    "!<tag:yaml.org,2002:str> x",
    "[a, b]",
    "{a: 1}",
    "[*a, *a]",
    "{<<: *b}",
    "[",
    "{",
    "]",
    "- a",
    "? [a]",
    "|\n  x",
    ">-\n  y",
    "1.5Gi",
    "500m",
    "-1",
    "1.5.5",
    "nginx:1.27",
    "w\u0435b",
    "we\u200bb",
    "\u202eweb",
    "\ufeffx",
    "web-1",
    "kube-system",
    "a" * 64,
]
KEYS = [
    "apiVersion",
    "kind",
    "metadata",
    "name",
    "namespace",
    "labels",
    "annotations",
    "spec",
    "image",
    "replicas",
    "port",
    "env",
    "value",
    "resources",
    "limits",
    "requests",
    "cpu",
    "memory",
    "driftPolicy",
    "suspend",
    "status",
    "<<",
    "~",
    "1",
    "on",
    "0x1",
    "? [k]",
    '"image"',
    "&k image",
    "*a",
    "a.b/c",
    "sp\u0435c",
]
VALID = {
    "apiVersion": "apps.example.com/v1",
    "kind": "MyApp",
    "metadata": {"name": "web", "namespace": NAMESPACE, "labels": {"tier": "web"}},
    "spec": {
        "image": "nginx:1.27",
        "replicas": 2,
        "port": 8080,
        "env": [{"name": "A", "value": "1"}],
        "resources": {"limits": {"cpu": "500m", "memory": "128Mi"}},
        "driftPolicy": "correct",
        "suspend": False,
    },
}


def load_text(data: bytes) -> LoadResult:
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "f.yaml").write_bytes(data)
        try:
            return load(Path(tmp), default_namespace=NAMESPACE)
        except GitsyncError as e:  # allowed; but load raises these only for its arguments
            raise AssertionError(f"a file's content raised {e!r}") from e


def check(result: LoadResult, text: str | None) -> None:
    lines = len(text.splitlines()) + 1 if text is not None else None
    for e in result.errors:
        assert isinstance(e, ManifestError)
        assert e.file in ("f.yaml", "")  # "" is the "… and N more" of the whole load
        message = str(e)
        assert "\n" not in message and "\r" not in message, message
        if e.line is not None:
            assert e.line >= 1, message
            if lines is not None:
                assert e.line <= lines, message
        if e.column is not None:
            assert e.column >= 1, message
    for app in result.apps:
        obj = app.obj
        assert is_dns_label(obj["metadata"]["name"]) and is_dns_label(obj["metadata"]["namespace"])
        # a plain JSON tree, which the schema accepts again as it is
        assert json.loads(json.dumps(obj)) == obj
        problems = Problems()
        assert Checker(NAMESPACE, None).check(obj, problems) == obj, problems
        assert not problems


@given(st.binary(max_size=2000))
@example(b"\xff\xfe" + "kind: MyApp".encode("utf-16-le"))
@example(b"a: !!timestamp 99999-01-01\n")
def test_any_bytes(data: bytes) -> None:
    check(load_text(data), None)


@given(st.text(max_size=2000))
@example("\ufeffapiVersion: x\n")
@example("a:\n  ~: 1\n")
def test_any_text(text: str) -> None:
    data = text.encode("utf-8", "surrogatepass")
    check(load_text(data), text)


@st.composite
def block(draw: st.DrawFn, depth: int = 0) -> list[str]:
    lines: list[str] = []
    indent = "  " * depth
    for _ in range(draw(st.integers(0, 4))):
        key = draw(st.sampled_from(KEYS))
        shape = draw(st.integers(0, 3))
        if shape == 0 and depth < 5:
            lines.append(f"{indent}{key}:")
            lines += draw(block(depth + 1))
        elif shape == 1:
            lines.append(f"{indent}- {draw(st.sampled_from(SCALARS))}")
        else:
            lines.append(f"{indent}{key}: {draw(st.sampled_from(SCALARS))}")
    return lines


@given(st.lists(block(), min_size=1, max_size=3), st.sampled_from(["\n", "\r\n", "\r"]))
def test_yaml_shaped_documents(documents: list[list[str]], eol: str) -> None:
    text = ("---" + eol).join(eol.join(lines) + eol for lines in documents)
    check(load_text(text.encode("utf-8", "surrogatepass")), text)


class Raw(str):
    """A scalar written into the file as it is, unquoted."""


def _scalar(value: object) -> str:
    return str(value) if isinstance(value, Raw) else json.dumps(value)


def render(value: object, depth: int = 0) -> list[str]:
    indent = "  " * depth
    if isinstance(value, dict):
        out: list[str] = []
        for k, v in value.items():
            if isinstance(v, dict | list) and v:
                out += [f"{indent}{k}:", *render(v, depth + 1)]
            else:
                out.append(f"{indent}{k}: {_scalar(v)}")
        return out
    if isinstance(value, list):
        out = []
        for item in value:
            if isinstance(item, dict | list) and not item:
                out.append(f"{indent}- {json.dumps(item)}")  # an emptied env item: {}
                continue
            inner = render(item, depth + 1)
            out.append(f"{indent}- {inner[0].strip()}")
            out += inner[1:]
        return out
    return [f"{indent}{_scalar(value)}"]


def _paths(value: object, prefix: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
    out = [prefix]
    if isinstance(value, dict):
        for k, v in value.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _paths(v, (*prefix, i))
    return out


@st.composite
def mutated_myapp(draw: st.DrawFn) -> str:
    """A valid MyApp with a few of its values replaced by hostile scalars, or removed."""
    doc = json.loads(json.dumps(VALID))
    for _ in range(draw(st.integers(0, 3))):
        path = draw(st.sampled_from(_paths(doc)[1:]))
        parent: object = doc
        for seg in path[:-1]:
            parent = parent[seg]  # type: ignore[index]
        if draw(st.booleans()) and isinstance(parent, dict):
            del parent[path[-1]]
        else:
            parent[path[-1]] = Raw(draw(st.sampled_from(SCALARS)))  # type: ignore[index]
        if not isinstance(doc, dict) or not doc:
            break
    return "\n".join(render(doc)) + "\n"


@given(mutated_myapp())
@example("\n".join(render(VALID)) + "\n")
# found by make fuzz: an env item emptied by the mutations (the renderer of this test)
@example('kind: "MyApp"\nspec:\n  image: "nginx:1.27"\n  env:\n    - {}\n')
# found by make fuzz: a list as an env name was a TypeError (a traceback) in the schema
@example(
    'kind: "MyApp"\nspec:\n  image: "nginx:1.27"\n  env:\n    - name: [a, b]\n      value: "1"\n'
)
def test_mutated_myapps(text: str) -> None:
    result = load_text(text.encode("utf-8", "surrogatepass"))
    check(result, text)
    # one document: either it loads, or it says why
    assert bool(result.apps) != bool(result.errors), (result.apps, result.errors)


def test_the_valid_myapp_loads() -> None:
    """The base of the mutations is valid: the property above is not vacuous."""
    result = load_text(("\n".join(render(VALID)) + "\n").encode())
    assert [a.key for a in result.apps] == [f"{NAMESPACE}/web"] and not result.errors
