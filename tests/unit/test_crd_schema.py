"""One source for the MyApp schema: the CRD in crds/.

gitsync/model/crd_schema.py is generated from it (``make crd-schema``), and the spec
checker is compiled from that: these tests fail when the module is not what the CRD says,
when the CRD says something the checker cannot enforce, and show that the checker follows
whatever schema it is given (a bound moved, a field added).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from gitsync.model import api, myapp_status, render, rollout, spec_schema
from gitsync.model.crd_schema import OPENAPI_V3_SCHEMA
from gitsync.model.problems import FieldPath, Problems
from gitsync.model.spec_schema import SchemaError, compile_spec
from release import crd_schema

SPEC = OPENAPI_V3_SCHEMA["properties"]["spec"]


def crd_copy(tmp_path: Path, change: Any) -> dict[str, Any]:
    """The schema a copy of crds/' CRD gives once ``change`` has edited its spec schema."""
    crd = crd_schema.read_crd()
    change(crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"])
    path = tmp_path / "crd.yaml"
    path.write_text(yaml.safe_dump(crd, sort_keys=False))
    return crd_schema.schema_of(crd_schema.read_crd(path))


def problems(schema: Any, spec: object) -> list[tuple[FieldPath, str]]:
    out = Problems()
    compile_spec(schema)(spec, ("spec",), out)
    return list(out)


def test_the_generated_module_is_the_crds_schema() -> None:
    assert crd_schema.schema_of(crd_schema.read_crd()) == OPENAPI_V3_SCHEMA
    if crd_schema.RUFF.exists():
        # byte for byte too, so that `make crd-schema` leaves a clean tree
        assert crd_schema.source(OPENAPI_V3_SCHEMA) == crd_schema.MODULE.read_text()


def test_descriptions_are_left_out_and_nothing_else() -> None:
    crd = crd_schema.read_crd()
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    assert "description" in schema["properties"]["spec"]["properties"]["image"]
    assert crd_schema.schema_of(crd)["properties"]["spec"]["properties"]["image"] == {
        "type": "string",
        "minLength": 1,
    }
    assert crd_schema.schema_of({"spec": {"versions": [{"schema": {"openAPIV3Schema": {}}}]}}) == {}
    items = {"items": [{"description": "x", "type": "string"}]}
    crd = {"spec": {"versions": [{"schema": {"openAPIV3Schema": items}}]}}
    assert crd_schema.schema_of(crd) == {"items": [{"type": "string"}]}


def test_a_moved_bound_in_the_crd_is_a_stale_module_and_moves_the_check(tmp_path: Path) -> None:
    def raise_minimum(spec: Any) -> None:
        spec["properties"]["replicas"]["minimum"] = 1

    changed = crd_copy(tmp_path, raise_minimum)
    assert changed != OPENAPI_V3_SCHEMA, "the module would not be regenerated"
    assert problems(changed, {"image": "a", "replicas": 0}) == [
        (("spec", "replicas"), "must be an integer from 1 to 2147483647, found number 0")
    ]
    assert problems(OPENAPI_V3_SCHEMA, {"image": "a", "replicas": 0}) == []


def test_a_field_added_to_the_crd_is_checked_as_the_crd_types_it(tmp_path: Path) -> None:
    def add_command(spec: Any) -> None:
        spec["properties"]["command"] = {"type": "string", "minLength": 1}
        spec["required"].append("command")

    changed = crd_copy(tmp_path, add_command)
    assert changed != OPENAPI_V3_SCHEMA
    assert problems(changed, {"image": "a", "command": "run"}) == []
    assert problems(changed, {"image": "a", "command": 3}) == [
        (("spec", "command"), "must be a non-empty string, found number 3")
    ]
    assert problems(changed, {"image": "a"}) == [(("spec", "command"), "required")]
    known = "image, replicas, port, env, resources, driftPolicy, suspend, progressDeadlineSeconds"
    known += ", rollback, dependsOn, command"
    assert problems(changed, {"image": "a", "command": "run", "x": 1}) == [
        (("spec", "x"), f"unknown field (known: {known})")
    ]
    # the checker gitsync runs has no such field until the module is regenerated
    assert problems(OPENAPI_V3_SCHEMA, {"image": "a", "command": "run"})[0][1].startswith(
        "unknown field"
    )


def with_spec(change: Any) -> Any:
    schema = copy.deepcopy(OPENAPI_V3_SCHEMA)
    change(schema["properties"]["spec"])
    return schema


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (lambda s: s["properties"]["image"].update(maxLength=10), "spec.image: maxLength"),
        (lambda s: s["properties"]["image"].update(minLength=2), "spec.image: a minLength"),
        (lambda s: s["properties"]["replicas"].update(multipleOf=2), "spec.replicas: multipleOf"),
        (lambda s: s["properties"]["suspend"].update(nullable=True), "spec.suspend: nullable"),
        (lambda s: s["properties"]["env"].update(maxItems=5), "spec.env: maxItems"),
        (
            lambda s: s["properties"]["env"]["items"]["properties"]["value"].update(pattern="x"),
            "spec.env['*'].value: pattern",
        ),
        (
            lambda s: s["properties"]["env"]["items"]["properties"]["name"].update(minLength=3),
            "spec.env['*'].name: a minLength above 1",
        ),
        (
            lambda s: s["properties"]["env"].update({"x-kubernetes-list-map-keys": ["name", "v"]}),
            "spec.env: only a list of records, keyed by one field",
        ),
        (
            lambda s: s["properties"]["env"].update(items={"type": "string"}),
            "spec.env: only a list of records",
        ),
        (lambda s: s["properties"].update(args={"type": "number"}), "spec.args: a schema of type"),
        (lambda s: s["properties"].update(args={}), "spec.args: a schema of type None"),
        (lambda s: s.update(minProperties=1), "spec: minProperties"),
        (
            lambda s: s["properties"]["resources"]["properties"]["limits"].update(maxProperties=2),
            "spec.resources.limits: maxProperties",
        ),
        (
            lambda s: s["properties"]["resources"]["properties"]["limits"][
                "additionalProperties"
            ].update(maxLength=9),
            "spec.resources.limits['*']: maxLength",
        ),
        (
            lambda s: s["properties"]["resources"]["properties"]["limits"][
                "additionalProperties"
            ].update(anyOf=[{"type": "string"}]),
            "spec.resources.limits['*']: a quantity is an integer or a string",
        ),
        (
            lambda s: s["properties"]["resources"]["properties"]["limits"][
                "additionalProperties"
            ].pop("x-kubernetes-int-or-string"),
            "a quantity is an integer or a string",
        ),
        (
            lambda s: s["properties"]["driftPolicy"].update(default="correct"),
            "spec.driftPolicy: default",
        ),
    ],
)
def test_what_the_checker_cannot_enforce_is_an_error_at_compile_time(
    change: Any, words: str
) -> None:
    # a keyword the checker skipped would let through what the API server refuses
    with pytest.raises(SchemaError) as caught:
        compile_spec(with_spec(change))
    assert words in str(caught.value)


def test_integers_without_bounds_hold_their_format() -> None:
    def unbounded(spec: Any) -> None:
        spec["properties"]["count"] = {"type": "integer", "format": "int32"}
        spec["properties"]["big"] = {"type": "integer"}

    schema = with_spec(unbounded)
    assert problems(schema, {"image": "a", "count": 2**31 - 1, "big": -(2**63)}) == []
    assert problems(schema, {"image": "a", "count": -(2**31), "big": 2**63 - 1}) == []
    assert problems(schema, {"image": "a", "count": 2**31, "big": 2**63}) == [
        (
            ("spec", "count"),
            "must be an integer from -2147483648 to 2147483647, found number 2147483648",
        ),
        (
            ("spec", "big"),
            "must be an integer from -9223372036854775808 to 9223372036854775807,"
            " found number 9223372036854775808",
        ),
    ]
    assert problems(schema, {"image": "a", "count": -(2**31) - 1})[0][1].endswith(
        "found number -2147483649"
    )


def test_records_and_lists_the_crd_adds_are_worded_from_their_fields() -> None:
    def nested(spec: Any) -> None:
        fields = {name: {"type": "string"} for name in ("path", "port", "scheme")}
        spec["properties"]["probe"] = {"type": "object", "required": ["path"], "properties": fields}
        spec["properties"]["volumes"] = {
            "type": "array",
            "items": {"type": "object", "properties": {"name": {"type": "string"}}},
        }
        spec["properties"]["mode"] = {"type": "integer", "enum": [1, 2]}

    schema = with_spec(nested)
    assert problems(schema, {"image": "a", "probe": 1, "volumes": 1, "mode": 3}) == [
        (("spec", "probe"), "must be a mapping with path, port and scheme, found number 1"),
        (("spec", "volumes"), "must be a list, found number 1"),
        (("spec", "mode"), "must be one of 1, 2, found number 3"),
    ]
    assert problems(schema, {"image": "a", "probe": {"port": "1"}}) == [
        (("spec", "probe", "path"), "required")
    ]
    # a list that is no list map has no key to repeat
    assert problems(schema, {"image": "a", "volumes": [{"name": "x"}, {"name": "x"}]}) == []
    assert problems(schema, {"image": "a", "volumes": [{}], "mode": 2}) == []


def test_checked_values_are_given_back_clean() -> None:
    spec = {
        "image": "a",
        "replicas": 3.0,
        "env": [{"name": "A", "value": "1"}],
        "resources": {"limits": {"cpu": 1e3, "memory": "1Gi"}},
        True: 1,
    }
    out = Problems()
    clean = spec_schema.SPEC(spec, ("spec",), out)
    assert clean == {
        "image": "a",
        "replicas": 3,
        "env": [{"name": "A", "value": "1"}],
        "resources": {"limits": {"cpu": 1000, "memory": "1Gi"}},
        "True": 1,
    }
    assert type(clean["replicas"]) is int and type(clean["resources"]["limits"]["cpu"]) is int
    assert list(out) == [
        (
            ("spec", "true"),
            "unknown field (known: image, replicas, port, env, resources, driftPolicy, suspend,"
            " progressDeadlineSeconds, rollback, dependsOn)",
        )
    ]


def test_the_words_and_stricter_rules_name_fields_the_crd_has() -> None:
    def node(path: FieldPath) -> Any:
        at: Any = OPENAPI_V3_SCHEMA
        for segment in path:
            at = at["properties"][segment]
        return at

    for path in (*spec_schema._WORDS, *spec_schema._STRICTER):
        assert isinstance(node(path), dict), path


def test_what_other_modules_take_from_the_crd() -> None:
    spec = SPEC["properties"]
    assert tuple(spec["driftPolicy"]["enum"]) == api.DRIFT_POLICIES
    assert render.DEFAULT_REPLICAS == spec["replicas"]["default"] == 1
    assert tuple(spec["rollback"]["enum"]) == rollout.ROLLBACK_POLICIES
    assert render._INT_SPEC_FIELDS == ("replicas", "port", "progressDeadlineSeconds")
    drift = OPENAPI_V3_SCHEMA["properties"]["status"]["properties"]["drift"]
    assert myapp_status.MAX_DRIFT_ENTRIES == drift["maxItems"] == 50
