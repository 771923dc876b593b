"""fieldrules: the tables name real positions of a MyApp (its CRD) and of the Deployment
rendered from it, agree with the CRD's schema, and compile to the rules walked by drift,
managedfields, planner, differences and fieldpaths."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from gitsync.engine.fieldrules import (
    ATOMIC_FIELDS,
    ATOMIC_ITEMS,
    INT_FIELDS,
    KEPT_EMPTY,
    KEY_DEFAULTS,
    LIST_KEYS,
    NO_RULES,
    QUANTITY_MAPS,
    ROOT,
    rule_at,
)
from gitsync.model.render import render
from tests.unit.drift_samples import MYAPP

CRD = Path(__file__).resolve().parents[2] / "crds" / "myapps.apps.example.com.yaml"
CONTAINERS = "spec.template.spec.containers"


def crd_schema() -> dict[str, Any]:
    crd = yaml.safe_load(CRD.read_text())
    schema: dict[str, Any] = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


def schema_positions(schema: dict[str, Any], at: str = "") -> dict[str, dict[str, Any]]:
    """Every position of the schema (as the tables write them) with its schema."""
    out: dict[str, dict[str, Any]] = {}
    for name, sub in (schema.get("properties") or {}).items():
        here = f"{at}.{name}" if at else name
        out[here] = sub
        if sub.get("type") == "array":
            out.update(schema_positions(sub.get("items") or {}, f"{here}[]"))
        else:
            out.update(schema_positions(sub, here))
    return out


def object_positions(value: Any, at: str = "") -> set[str]:
    out: set[str] = set()
    if isinstance(value, dict):
        for name, sub in value.items():
            here = f"{at}.{name}" if at else name
            out |= {here} | object_positions(sub, here)
    elif isinstance(value, list):
        for item in value:
            out |= object_positions(item, f"{at}[]")
    return out


def deployment_positions() -> set[str]:
    full = {
        **MYAPP,
        "spec": {**MYAPP["spec"], "resources": {"requests": {"cpu": "1"}, "limits": {"cpu": "1"}}},
    }
    rendered = object_positions(render(full))
    # gitsync renders no init containers, but a live Deployment has them where it has
    # its containers, with the same schema
    inits = {p.replace(CONTAINERS, "spec.template.spec.initContainers") for p in rendered}
    # the Deployment's own status conditions, keyed by type like a MyApp's
    return rendered | inits | {"status.conditions", "status.conditions[].type"}


ALL_POSITIONS = sorted(
    {
        *INT_FIELDS,
        *LIST_KEYS,
        *KEY_DEFAULTS,
        *ATOMIC_FIELDS,
        *ATOMIC_ITEMS,
        *QUANTITY_MAPS,
        *KEPT_EMPTY,
    }
)


@pytest.mark.parametrize("position", ALL_POSITIONS)
def test_every_position_is_one_of_a_myapp_or_its_deployment(position: str) -> None:
    assert position in set(schema_positions(crd_schema())) | deployment_positions()


@pytest.mark.parametrize("position", ALL_POSITIONS)
def test_a_list_item_is_written_after_a_keyed_list_and_only_there(position: str) -> None:
    parts = position.split(".")
    for i, part in enumerate(parts[:-1]):
        keyed = ".".join([*parts[:i], part.removesuffix("[]")]) in LIST_KEYS
        assert part.endswith("[]") == keyed, position
    # the table's own key is the list, not its items
    assert not position.endswith("[]")


def test_the_myapp_integers_and_keyed_lists_are_the_crds() -> None:
    positions = schema_positions(crd_schema())
    ints = {p for p, s in positions.items() if s.get("type") == "integer" and p.startswith("spec.")}
    keyed = {
        p: tuple(s["x-kubernetes-list-map-keys"])
        for p, s in positions.items()
        if s.get("x-kubernetes-list-type") == "map"
    }
    # status is never compared (drift drops it), so its integers need no rule
    assert ints == {p for p in INT_FIELDS if p in positions}
    assert keyed == {p: k for p, k in LIST_KEYS.items() if p in positions}
    assert keyed == {"spec.env": ("name",), "status.conditions": ("type",)}


@pytest.mark.parametrize(
    ("position", "keys"),
    [
        (CONTAINERS, (("name", None, False),)),
        ("spec.template.spec.initContainers", (("name", None, False),)),
        (f"{CONTAINERS}[].env", (("name", None, False),)),
        (f"{CONTAINERS}[].ports", (("containerPort", None, True), ("protocol", "TCP", False))),
        ("spec.env", (("name", None, False),)),
        ("metadata.ownerReferences", (("uid", None, False),)),
        ("status.conditions", (("type", None, False),)),
        ("spec.template.spec.env", ()),
        ("metadata.labels", ()),
        ("env", ()),
    ],
)
def test_the_keys_of_a_keyed_list(position: str, keys: tuple[Any, ...]) -> None:
    assert rule_at(position).keys == keys


@pytest.mark.parametrize(
    ("position", "integer", "default", "atomic", "atomic_items", "quantities"),
    [
        ("spec.replicas", True, None, False, False, False),
        ("spec.port", True, None, False, False, False),
        (f"{CONTAINERS}[].ports[].containerPort", True, None, False, False, False),
        (f"{CONTAINERS}[].ports[].protocol", False, "TCP", False, False, False),
        ("spec.selector", False, None, True, False, False),
        ("metadata.ownerReferences", False, None, False, True, False),
        ("spec.resources.limits", False, None, False, False, True),
        (f"{CONTAINERS}[].resources.requests", False, None, False, False, True),
        ("metadata.labels.replicas", False, None, False, False, False),
        ("metadata.annotations.port", False, None, False, False, False),
        ("spec.template.spec.selector", False, None, False, False, False),
        ("spec.template.spec.resources.limits", False, None, False, False, False),
        ("replicas", False, None, False, False, False),
    ],
)
def test_what_holds_at_a_position(
    position: str,
    integer: bool,
    default: object,
    atomic: bool,
    atomic_items: bool,
    quantities: bool,
) -> None:
    rule = rule_at(position)
    got = (rule.integer, rule.default, rule.atomic, rule.atomic_items, rule.quantities)
    assert got == (integer, default, atomic, atomic_items, quantities)


def test_a_containers_resources_is_kept_when_empty_and_nothing_else_is() -> None:
    kept = [p for p in ALL_POSITIONS if rule_at(p).kept_empty]
    assert kept == [f"{c}[].resources" for c in (CONTAINERS, "spec.template.spec.initContainers")]
    # a MyApp's resources is a map of the CRD: emptied, it goes
    assert not rule_at("spec.resources").kept_empty


def test_the_top_and_below_every_rule() -> None:
    assert rule_at("") is ROOT
    assert set(ROOT.fields) == {"metadata", "spec", "status"}
    assert rule_at("spec.template.spec.containers[]") is rule_at(CONTAINERS)
    # a position no table names, and all below it, is the one empty rule
    assert rule_at("metadata.labels") is NO_RULES
    assert rule_at("spec.strategy.rollingUpdate") is NO_RULES
    assert NO_RULES.child("x") is NO_RULES and not NO_RULES.fields and not NO_RULES.keys
    # only the ancestors of the tables' positions are in the tree
    assert set(rule_at("metadata").fields) == {"ownerReferences"}
    assert set(rule_at(f"{CONTAINERS}[].ports").fields) == {"containerPort", "protocol"}
