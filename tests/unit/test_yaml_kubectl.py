"""YAML that kubectl reads one way and PyYAML another: what gitsync does with each.

Each case is a manifest; gitsync either loads the spec kubectl would send, or refuses
the file with an error naming its line. ``kubectl`` says what ``kubectl apply
--dry-run=server`` does with it: "stores" (the spec gitsync loads, or where gitsync
refuses, a spec it is stricter about) or "refuses". tests/integration/test_yaml_kubectl.py
puts every case to kubectl and the API server; docs/operating.md (Troubleshooting) has
the table of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from gitsync.source.manifests import load

NS = "shop"


def myapp(spec: str, *, before: str = "", metadata: str = "", after: str = "") -> str:
    return (
        before
        + "apiVersion: apps.example.com/v1\nkind: MyApp\nmetadata:\n  name: web\n"
        + f"  namespace: {NS}\n{metadata}spec:\n{spec}{after}"
    )


@dataclass(frozen=True)
class Case:
    id: str
    text: str
    #: the spec gitsync loads, or None when it refuses the file
    spec: dict[str, Any] | None
    #: when refused: a fragment of the error, and its line
    error: str = ""
    line: int = 0
    #: what kubectl apply --dry-run=server does: "stores" or "refuses"
    kubectl: str = "stores"
    #: where gitsync refuses what kubectl stores: the spec kubectl stores
    kubectl_spec: dict[str, Any] | None = None


CASES = [
    Case(
        "merge-list-first-wins",
        myapp(
            "  <<: [*m1, *m2]\n",
            metadata="  labels: &m1 {image: busybox}\n  annotations: &m2 {image: nginx}\n",
        ),
        {"image": "busybox"},
    ),
    Case(
        "merge-then-given-key",
        myapp(
            "  <<: [*m1, *m2]\n  image: alpine\n",
            metadata="  labels: &m1 {image: busybox}\n  annotations: &m2 {image: nginx}\n",
        ),
        None,
        "key 'image' is both given and merged by the '<<' on line 9",
        10,
        "stores",
        {"image": "alpine"},
    ),
    Case(
        "given-key-then-merge",
        myapp("  image: nginx:1.27\n  <<: {image: busybox:1}\n"),
        None,
        "key 'image' is both given and merged by the '<<' on line 8",
        7,
        "stores",
        {"image": "busybox:1"},
    ),
    Case(
        "merge-key-twice",
        myapp("  <<: {image: busybox:1}\n  <<: {image: nginx:1}\n"),
        None,
        "key 'image' is merged by two '<<' keys (lines 7 and 8)",
        8,
        "stores",
        {"image": "nginx:1"},
    ),
    Case(
        "merge-keys-apart",
        myapp("  <<: {image: busybox:1}\n  <<: {replicas: 2}\n  port: 81\n"),
        {"image": "busybox:1", "replicas": 2, "port": 81},
    ),
    Case(
        "custom-tag",
        myapp("  image: !custom nginx\n"),
        None,
        "could not determine a constructor for the tag '!custom'",
        7,
        "stores",
        {"image": "nginx"},
    ),
    Case(
        "env-value-binary",
        myapp("  image: nginx\n  env:\n  - name: A\n    value: !!binary aGVsbG8=\n"),
        None,
        "spec.env[0].value: must be a string, found a bytes",
        10,
        "stores",
        {"image": "nginx", "env": [{"name": "A", "value": "hello"}]},
    ),
    Case(
        "env-value-timestamp",
        myapp("  image: nginx\n  env:\n  - name: A\n    value: !!timestamp 2001-12-14\n"),
        None,
        "spec.env[0].value: must be a string, found a date",
        10,
        "stores",
        {"image": "nginx", "env": [{"name": "A", "value": "2001-12-14"}]},
    ),
    Case(
        "env-omap",
        myapp("  image: nginx\n  env: !!omap\n  - name: A\n    value: b\n"),
        None,
        "expected a single mapping item, but found 2 items",
        9,
        "stores",
        {"image": "nginx", "env": [{"name": "A", "value": "b"}]},
    ),
    Case(
        "env-value-null",
        myapp("  image: nginx\n  env:\n  - name: A\n    value: ~\n"),
        None,
        "spec.env[0].value: must be a string, found null",
        10,
        "stores",
        {"image": "nginx", "env": [{"name": "A"}]},
    ),
    Case(
        "env-value-empty",
        myapp("  image: nginx\n  env:\n  - name: A\n    value:\n  replicas: 1\n"),
        None,
        "spec.env[0].value: must be a string, found null",
        10,
        "stores",
        {"image": "nginx", "env": [{"name": "A"}], "replicas": 1},
    ),
    Case(
        "port-quoted",
        myapp('  image: nginx\n  port: "80"\n'),
        None,
        "spec.port: must be an integer from 1 to 65535, found string '80'; write 80 unquoted",
        8,
        "refuses",
    ),
    Case(
        "replicas-str-tag",
        myapp("  image: nginx\n  replicas: !!str 3\n"),
        None,
        "spec.replicas: must be an integer from 0 to 2147483647, found string '3'",
        8,
        "refuses",
    ),
    Case(
        "env-value-y",
        myapp("  image: nginx\n  env:\n  - name: A\n    value: y\n"),
        None,
        "spec.env[0].value: must be a string, found boolean true",
        10,
        "refuses",
    ),
    Case(
        "env-value-n-quoted",
        myapp('  image: nginx\n  env:\n  - name: A\n    value: "n"\n'),
        {"image": "nginx", "env": [{"name": "A", "value": "n"}]},
    ),
    Case(
        "yaml-directive-1.1",
        myapp("  image: nginx\n", before="%YAML 1.1\n---\n"),
        None,
        "a %YAML or %TAG directive: kubectl cannot read a file that has one",
        1,
        "refuses",
    ),
    Case(
        "yaml-directive-1.2",
        myapp("  image: nginx\n", before="%YAML 1.2\n---\n"),
        None,
        "a %YAML or %TAG directive",
        1,
        "refuses",
    ),
    Case(
        "tag-directive",
        myapp("  image: nginx\n", before="%TAG !e! tag:example.com,2000:\n---\n"),
        None,
        "a %YAML or %TAG directive",
        1,
        "refuses",
    ),
    Case(
        "duplicate-key",
        myapp("  image: nginx:1.27\n  image: nginx:1.28\n"),
        None,
        "duplicate key 'image'",
        8,
        "stores",
        {"image": "nginx:1.28"},
    ),
    Case(
        "tilde-replicas",
        myapp("  image: nginx\n  replicas: ~\n"),
        None,
        "spec.replicas: must be an integer from 0 to 2147483647, found null",
        8,
        "stores",
        {"image": "nginx", "replicas": 1},
    ),
    Case(
        "text-after-document-end",
        myapp("  image: nginx\n", after="...\nspec:\n  image: evil\n"),
        None,
        "did not find expected <document start>",
        9,
        "stores",
        {"image": "nginx"},
    ),
]


def load_case(tmp_path: Path, case: Case) -> tuple[dict[str, Any] | None, list[Any]]:
    (tmp_path / "web.yaml").write_text(case.text)
    result = load(tmp_path, default_namespace=NS)
    spec = dict(result.apps[0].obj["spec"]) if result.apps and result.ok else None
    return spec, list(result.errors)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_gitsync_reads_or_refuses_yaml_as_documented(tmp_path: Path, case: Case) -> None:
    spec, errors = load_case(tmp_path, case)
    if case.spec is not None:
        assert not errors, [str(e) for e in errors]
        assert spec == case.spec
        return
    assert spec is None
    assert any(case.error in str(e) and e.line == case.line for e in errors), [
        str(e) for e in errors
    ]
    assert all(e.file == "web.yaml" for e in errors)
