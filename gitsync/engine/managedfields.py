"""Field ownership from ``metadata.managedFields`` (structured-merge-diff ``FieldsV1``).

A path is a tuple of SMD path elements, as they appear as keys in ``fieldsV1``:
``f:<field>``, ``k:<json key of a list item>``, ``v:<json set member>``, ``i:<index>``.
For example ``("f:spec", "f:template", "f:spec", "f:containers", 'k:{"name":"app"}',
"f:image")``.

Which lists are keyed, by what, and which fields are atomic is
:mod:`gitsync.engine.fieldrules`'s, by the position of a field in the object.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from gitsync.engine.fieldrules import NO_RULES, ROOT, Rule
from gitsync.errors import plain_or_quote
from gitsync.model.api import FIELD_MANAGER, Obj

Path = tuple[str, ...]

#: never in a managed set: the API server strips them (identity and server-owned fields)
_UNMANAGED_TOP: Final = frozenset({"apiVersion", "kind"})
_UNMANAGED_META: Final = frozenset(
    {
        "name",
        "namespace",
        "uid",
        "resourceVersion",
        "generation",
        "creationTimestamp",
        "managedFields",
        "selfLink",
    }
)


@dataclass(frozen=True, slots=True)
class Owner:
    """One managedFields entry, without its field set."""

    manager: str
    operation: str
    time: str | None
    subresource: str = ""


def leaf_paths(fields_v1: Obj) -> set[Path]:
    """Every path in a ``fieldsV1`` set.

    ``{}`` is a leaf; a ``.`` key marks its parent (a list item or map) as a member too.
    """
    out: set[Path] = set()
    _collect(fields_v1, (), out)
    return out


def _collect(node: Obj, prefix: Path, out: set[Path]) -> None:
    for key, child in node.items():
        if key == ".":
            if prefix:
                out.add(prefix)
            continue
        path = (*prefix, key)
        if isinstance(child, dict) and child:
            _collect(child, path, out)
        else:
            out.add(path)


def item_key(rule: Rule, item: Any) -> dict[str, Any] | None:
    """The key of an item of the list at ``rule`` (``{"name": "app"}``), or None if that
    list is not keyed (or the item lacks a key field the server does not default)."""
    if not rule.keys or not isinstance(item, dict):
        return None
    key = {name: item.get(name, default) for name, default, _ in rule.keys}
    return None if any(v is None for v in key.values()) else key


def key_element(key: Mapping[str, Any]) -> str:
    """The SMD element of a list item: ``k:`` and JSON with sorted keys, no spaces,
    escaped exactly as the API server escapes it (see ``key_json``)."""
    return "k:" + key_json(key)


#: how the API server escapes a string in a list key: quote, backslash and ``\\n \\r
#: \\t`` short, every other control character and the HTML-sensitive ``& < >`` and
#: U+2028/U+2029 as ``\\u00xx``-style escapes (lower-case hex; ``\\b`` and ``\\f`` too,
#: unlike Python's ``json``); everything else, non-ASCII included, raw
_KEY_ESCAPES: Final = str.maketrans(
    {
        **{c: f"\\u{c:04x}" for c in range(0x20)},
        **{ord(c): f"\\u{ord(c):04x}" for c in "&<>\u2028\u2029"},
        ord('"'): '\\"',
        ord("\\"): "\\\\",
        ord("\n"): "\\n",
        ord("\r"): "\\r",
        ord("\t"): "\\t",
    }
)


def key_json(value: Any) -> str:
    """Compact JSON with sorted keys, byte for byte as the API server writes the key
    of a list item into ``fieldsV1`` (checked against kube-apiserver's own output).

    Python's ``json`` differs on exactly the characters above (it writes non-ASCII as
    ``\\uXXXX``, ``& < >`` raw, ``\\b``/``\\f`` short), and a key spelled any other way
    names no entry in managedFields: the owner of such a field would be missed.
    """
    if isinstance(value, str):
        return '"' + value.translate(_KEY_ESCAPES) + '"'
    if isinstance(value, dict):
        items = sorted(value.items())
        return "{" + ",".join(f"{key_json(str(k))}:{key_json(v)}" for k, v in items) + "}"
    if isinstance(value, list):
        return "[" + ",".join(key_json(v) for v in value) + "]"
    return json.dumps(value)  # numbers, booleans, null: no escaping to differ on


def fields_of(obj: Obj) -> set[Path]:
    """The paths an apply body sets, as the API server would record them for gitsync.

    Like SMD: scalars, empty maps, atomic fields and non-keyed lists are leaves; an item
    of a keyed list is a member itself (the ``.`` entry) besides its fields. Identity
    (apiVersion, kind, metadata.name/namespace) and server fields are never recorded.
    """
    out: set[Path] = set()
    for key, value in obj.items():
        if key in _UNMANAGED_TOP:
            continue
        rule = ROOT.child(key)
        if key == "metadata" and isinstance(value, dict):
            meta = {k: v for k, v in value.items() if k not in _UNMANAGED_META}
            if meta:
                _fields(meta, ("f:metadata",), rule, out)
        else:
            _value_fields(rule, value, (f"f:{key}",), out)
    return out


def _fields(node: Obj, prefix: Path, rule: Rule, out: set[Path]) -> None:
    if not node:
        out.add(prefix)
    fields = rule.fields
    for key, value in node.items():
        _value_fields(fields.get(key, NO_RULES), value, (*prefix, f"f:{key}"), out)


def _value_fields(rule: Rule, value: Any, path: Path, out: set[Path]) -> None:
    if rule.atomic:
        out.add(path)
    elif isinstance(value, dict):
        _fields(value, path, rule, out)
    elif isinstance(value, list) and rule.keys:
        _keyed_fields(rule, value, path, out)
    else:
        out.add(path)  # scalars and atomic lists


def _keyed_fields(rule: Rule, items: list[Any], path: Path, out: set[Path]) -> None:
    for item in items:
        k = item_key(rule, item)
        if k is None:
            continue  # not a valid item of this list: the server would refuse it
        item_path = (*path, key_element(k))
        out.add(item_path)
        if not rule.atomic_items:
            _fields(item, item_path, rule, out)


def owner_sets(managed_fields: Iterable[Obj]) -> list[tuple[Owner, set[Path]]]:
    """Each managedFields entry with its leaf set, to look up many paths at once."""
    out: list[tuple[Owner, set[Path]]] = []
    for entry in managed_fields:
        owner = Owner(
            manager=str(entry.get("manager", "")),
            operation=str(entry.get("operation", "")),
            time=entry.get("time"),
            subresource=str(entry.get("subresource", "")),
        )
        fields = entry.get("fieldsV1")
        out.append((owner, leaf_paths(fields) if isinstance(fields, dict) else set()))
    return out


def owners_of(sets: Iterable[tuple[Owner, set[Path]]], path: Path) -> list[Owner]:
    """The entries owning ``path``, or else its nearest owned ancestor.

    The ancestor covers two cases: an atomic field (``f:selector``) owns all below it,
    and a removed list item is owned by nobody, so whoever owns the item or map around
    it is the best answer there is. Only the nearest level counts: the owner of a
    whole annotations map did not change one annotation another manager owns.
    """
    pairs = list(sets)
    for n in range(len(path), 0, -1):
        owners = [owner for owner, leaves in pairs if path[:n] in leaves]
        if owners:
            return owners
    return []


def owner_of(
    managed_fields: list[Obj], path: Path, *, self_manager: str = FIELD_MANAGER
) -> Owner | None:
    """The manager that owns the live value at ``path`` (or its nearest owned
    ancestor, see ``owners_of``), or None.

    An Update takes the fields it changes away from every other manager, so the entry
    holding a path is its current owner. Several entries hold it only when appliers
    share it; then the other one is named, since gitsync is rarely the news.
    """
    return pick_owner(owners_of(owner_sets(managed_fields), path), self_manager)


def pick_owner(owners: list[Owner], self_manager: str = FIELD_MANAGER) -> Owner | None:
    """Prefer another manager over ``self_manager``, then the most recent entry."""
    if not owners:
        return None
    others = [o for o in owners if o.manager != self_manager] or owners
    return max(others, key=lambda o: o.time or "")


def human_path(path: Path) -> str:
    """``spec.template.spec.containers[name=app].ports[containerPort=80,protocol=TCP]``."""
    out = ""
    for element in path:
        kind, _, body = element.partition(":")
        if element == ".":
            continue
        if kind == "f":
            out += _field_text(body, first=not out)
        elif kind == "k":
            fields = json.loads(body)
            out += "[" + ",".join(f"{k}={_scalar(v)}" for k, v in fields.items()) + "]"
        elif kind == "v":
            out += f"[={_scalar(json.loads(body))}]"
        elif kind == "i":
            out += f"[{body}]"
        else:
            out += f"[{element}]"
    return out


def _field_text(name: str, *, first: bool) -> str:
    # map keys such as label names contain dots: bracket them to keep the path readable;
    # anything stranger (a space, a newline from a hostile key) is quoted
    if "." in name or "/" in name or name != plain_or_quote(name):
        return f"[{plain_or_quote(name)}]"
    return name if first else f".{name}"


def _scalar(value: Any) -> str:
    # list keys (env names) come from users: quoted unless plain, so a path is one line
    return plain_or_quote(value) if isinstance(value, str) else json.dumps(value)
