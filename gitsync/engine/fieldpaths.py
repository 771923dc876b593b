"""Where an SMD path (``("f:spec", "f:env", 'k:{"name":"LEVEL"}')``, as managedFields
writes them) stands: the leaf paths an apply body sets in its own order, the value at a path
in a plain object, and the manifest line that sets it in a YAML node. Pure."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from typing import Any, Final

import yaml

from gitsync.engine import drift as driftlib
from gitsync.engine.fieldrules import ROOT, Rule
from gitsync.engine.managedfields import Path, fields_of, item_key, key_element
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

    def walk(node: Any, prefix: Path, at: Rule) -> None:
        out.append(prefix)
        if isinstance(node, dict):
            for k, v in node.items():
                walk(v, (*prefix, f"f:{k}"), at.child(k))
        elif isinstance(node, list):
            for item in node:
                k = item_key(at, item)
                if k is not None:
                    walk(item, (*prefix, key_element(k)), at)

    walk(driftlib.comparable(body), (), ROOT)
    return out


def value_at(obj: Any, path: Path) -> Any:
    """The value at an SMD path in a plain object, or None when it is not there."""
    node = obj
    at = ROOT
    for element in path:
        kind, _, body = element.partition(":")
        if kind == "f" and isinstance(node, dict):
            node = node.get(body, _MISSING)
            at = at.child(body)
        elif kind == "k" and isinstance(node, list):
            key = json.loads(body)
            node = next((i for i in node if _matches(i, key, at)), _MISSING)
        else:
            node = _MISSING
        if node is _MISSING:
            return None
    return node


def _matches(item: Any, key: Mapping[str, Any], at: Rule) -> bool:
    if not isinstance(item, dict):
        return False
    # "80" and 80 name the same port
    return all(str(item.get(k, at.child(k).default)) == str(v) for k, v in key.items())


def line_of(node: yaml.Node, path: Path) -> int | None:
    """The line of the manifest that sets ``path`` (its key's line), or None."""
    line: int | None = None
    at = ROOT
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
            line, node, at = found[0].start_mark.line + 1, found[1], at.child(body)
        elif kind == "k" and isinstance(node, yaml.SequenceNode):
            key = json.loads(body)
            item = next((i for i in node.value if _node_matches(i, key, at)), None)
            if item is None:
                return None
            line, node = item.start_mark.line + 1, item
        else:
            return None
    return line


#: where each key and list item of one manifest document stands, as the loader keeps it
#: of the YAML nodes (which it does not keep), so that lines are found without the nodes
#: or the file: the drift page parses nothing. A mapping is ``(key, line, lines, key,
#: line, lines, …)``, a list ``(line, lines, line, lines, …)``, a scalar None: flat
#: tuples, a few dozen bytes a field, for every MyApp the sync loop holds
Lines = tuple[Any, ...] | None

#: every Lines tuple held, once: a fleet's files are written alike (one template, one
#: layout), so most documents' Lines, and most of their parts, are equal; held here,
#: each is one tuple however many documents have it (about 0.9 KiB a MyApp otherwise).
#: Key and value are the same tuple. Forgotten once nothing else holds it (``_sweep``).
_LINES: dict[tuple[Any, ...], tuple[Any, ...]] = {}
#: the table is swept when it holds this many (and then at twice what a sweep left)
_SWEEP_AT_LEAST: Final = 10_000
_sweep_at = _SWEEP_AT_LEAST
#: references to a table entry while ``_sweep`` looks at it: the table's key and value,
#: the list's, the loop variable's, ``getrefcount``'s argument
_TABLE_ONLY: Final = 5


def lines_of(node: yaml.Node) -> Lines:
    """The :data:`Lines` of a composed document, shared with every equal one held (and
    its parts likewise). Linear in its nodes: an aliased node is walked once, where its
    anchor is."""
    global _sweep_at
    seen: set[int] = set()

    def walk(n: yaml.Node) -> Lines:
        if id(n) in seen:
            return None
        seen.add(id(n))
        out: list[Any] = []
        if isinstance(n, yaml.MappingNode):
            for k, v in n.value:
                if isinstance(k, yaml.ScalarNode):
                    # interned: every document has the same few field names, held once
                    out += (sys.intern(k.value), k.start_mark.line + 1, walk(v))
        elif isinstance(n, yaml.SequenceNode):
            for item in n.value:
                out += (item.start_mark.line + 1, walk(item))
        else:
            return None
        lines = tuple(out)
        return _LINES.setdefault(lines, lines)

    lines = walk(node)
    if len(_LINES) >= _sweep_at:
        _sweep()
        _sweep_at = max(_SWEEP_AT_LEAST, 2 * len(_LINES))
    return lines


def _sweep() -> int:
    """Forget the Lines nothing but the table holds (a part after the whole that held
    it); how many were forgotten. Safe beside a thread that adds: one it adds is held by
    that thread's walk until a document holds it."""
    gone = 0
    while True:
        free = [t for t in list(_LINES) if sys.getrefcount(t) <= _TABLE_ONLY]
        if not free:
            return gone
        for t in free:
            _LINES.pop(t, None)
        gone += len(free)
        del free, t  # held by neither, the parts of the ones forgotten are free next round


def line_in(lines: Lines, obj: Any, path: Path) -> int | None:
    """:func:`line_of` over :func:`lines_of` and the document's value ``obj``: the value
    says which list item a key names, the lines where it stands."""
    line: int | None = None
    rule = ROOT
    for element in path:
        if lines is None:
            return None
        kind, _, body = element.partition(":")
        if kind == "f" and isinstance(obj, dict) and body in obj:
            at = next((i for i in range(0, len(lines) - 2, 3) if lines[i] == body), None)
            if at is None:
                return None
            line, lines, obj = lines[at + 1], lines[at + 2], obj[body]
            rule = rule.child(body)
        elif kind == "k" and isinstance(obj, list):
            key = json.loads(body)
            index = next((i for i, item in enumerate(obj) if _matches(item, key, rule)), None)
            if index is None or 2 * index + 1 >= len(lines):
                return None
            line, lines, obj = lines[2 * index], lines[2 * index + 1], obj[index]
        else:
            return None
    return line if isinstance(line, int) else None


def _node_matches(node: yaml.Node, key: Mapping[str, Any], at: Rule) -> bool:
    if not isinstance(node, yaml.MappingNode):
        return False
    values = {k.value: v.value for k, v in node.value if isinstance(k, yaml.ScalarNode)}
    return all(str(values.get(k, at.child(k).default)) == str(v) for k, v in key.items())
