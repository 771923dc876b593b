"""Where an SMD path (``("f:spec", "f:env", 'k:{"name":"LEVEL"}')``, as managedFields
writes them) stands: the leaf paths an apply body sets in its own order, the value at a path
in a plain object, and the manifest line that sets it in a YAML node. Pure."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

import yaml

from gitsync.engine import drift as driftlib
from gitsync.engine.managedfields import KEY_DEFAULTS, Path, fields_of, item_key, key_element
from gitsync.model.api import Obj

_MISSING: Final[Any] = object()


def leaves(body: Obj) -> list[Path]:
    """The paths an apply body sets, leaves only, in the body's own order."""
    paths = fields_of(driftlib.comparable(body))
    leaves = [p for p in paths if not any(len(q) > len(p) and q[: len(p)] == p for q in paths)]
    order = {p: i for i, p in enumerate(_ordered(body))}
    return sorted(leaves, key=lambda p: (order.get(p, len(order)), p))


def _ordered(body: Obj) -> list[Path]:
    # fields_of returns a set; the body's own order reads like the manifest
    out: list[Path] = []

    def walk(node: Any, prefix: Path, key: str) -> None:
        out.append(prefix)
        if isinstance(node, dict):
            for k, v in node.items():
                walk(v, (*prefix, f"f:{k}"), k)
        elif isinstance(node, list):
            for item in node:
                k = item_key(key, item)
                if k is not None:
                    walk(item, (*prefix, key_element(k)), key)

    walk(driftlib.comparable(body), (), "")
    return out


def value_at(obj: Any, path: Path) -> Any:
    """The value at an SMD path in a plain object, or None when it is not there."""
    node = obj
    for element in path:
        kind, _, body = element.partition(":")
        if kind == "f" and isinstance(node, dict):
            node = node.get(body, _MISSING)
        elif kind == "k" and isinstance(node, list):
            key = json.loads(body)
            node = next((i for i in node if _matches(i, key)), _MISSING)
        else:
            node = _MISSING
        if node is _MISSING:
            return None
    return node


def _matches(item: Any, key: Mapping[str, Any]) -> bool:
    if not isinstance(item, dict):
        return False
    # "80" and 80 name the same port
    return all(str(item.get(k, KEY_DEFAULTS.get(k))) == str(v) for k, v in key.items())


def line_of(node: yaml.Node, path: Path) -> int | None:
    """The line of the manifest that sets ``path`` (its key's line), or None."""
    line: int | None = None
    for element in path:
        kind, _, body = element.partition(":")
        if kind == "f" and isinstance(node, yaml.MappingNode):
            found = next(
                (
                    (k, v)
                    for k, v in node.value
                    if isinstance(k, yaml.ScalarNode) and k.value == body
                ),
                None,
            )
            if found is None:
                return None
            line, node = found[0].start_mark.line + 1, found[1]
        elif kind == "k" and isinstance(node, yaml.SequenceNode):
            key = json.loads(body)
            item = next((i for i in node.value if _node_matches(i, key)), None)
            if item is None:
                return None
            line, node = item.start_mark.line + 1, item
        else:
            return None
    return line


def _node_matches(node: yaml.Node, key: Mapping[str, Any]) -> bool:
    if not isinstance(node, yaml.MappingNode):
        return False
    values = {k.value: v.value for k, v in node.value if isinstance(k, yaml.ScalarNode)}
    return all(str(values.get(k, KEY_DEFAULTS.get(k))) == str(v) for k, v in key.items())
