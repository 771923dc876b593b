"""Formatting real differences: the changes of one object, and a unified YAML diff.

Only called for objects that are known to differ (the fast path in ``drift`` filters
the rest): a deepdiff call costs milliseconds per object, too much for every object
every cycle. deepdiff is imported on the first such call, not with this module: its
import takes a fifth of a second, which a ``gitsync diff`` or ``sync`` that finds
nothing changed, and every daemon start, would otherwise pay for nothing.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any, Final

import yaml

from gitsync.engine.drift import canonicalise, comparable, project
from gitsync.engine.fieldrules import ROOT, Rule
from gitsync.engine.managedfields import human_path, item_key, key_element
from gitsync.model.api import Obj

_SERVER_METADATA: Final = (
    "managedFields",
    "resourceVersion",
    "generation",
    "uid",
    "creationTimestamp",
    "selfLink",
)
_ADDED: Final = ("dictionary_item_added", "iterable_item_added")
_REMOVED: Final = ("dictionary_item_removed", "iterable_item_removed")
_CHANGED: Final = ("values_changed", "type_changes")

_RED: Final = "\x1b[31m"
_GREEN: Final = "\x1b[32m"
_CYAN: Final = "\x1b[36m"
_BOLD: Final = "\x1b[1m"
_RESET: Final = "\x1b[0m"


@dataclass(frozen=True, slots=True)
class Change:
    """One changed value: ``old`` is None when added, ``new`` is None when removed."""

    path: str
    old: Any
    new: Any


def changes(live: Obj | None, desired: Obj) -> list[Change]:
    """What applying ``desired`` would change in ``live`` (None: not there yet).

    Compares canonical forms of the fields gitsync sets, so a server default or an
    equal quantity is no change. Sorted by path.
    """
    from deepdiff import DeepDiff  # imported here: see the docstring

    want = canonicalise(comparable(desired))
    have = {} if live is None else canonicalise(project(live, want))
    tree = DeepDiff(
        have,
        want,
        threshold_to_diff_deeper=0,
        ignore_order=False,
        iterable_compare_func=_same_item,
        verbose_level=2,
        view="tree",
    )
    out: list[Change] = []
    for report, levels in tree.items():
        for level in levels:
            change = _change(report, level)
            if change is not None:
                out.append(change)
    return sorted(out, key=lambda c: c.path)


def _change(report: str, level: Any) -> Change | None:
    if report in _ADDED:
        return Change(_level_path(level), None, level.t2)
    if report in _REMOVED:
        return Change(_level_path(level), level.t1, None)
    if report in _CHANGED:
        return Change(_level_path(level), level.t1, level.t2)
    return None  # moves: the order of keyed items is not a change


def _same_item(x: Any, y: Any, level: Any = None) -> bool:
    """Match the items of a keyed list by their key (``fieldrules.LIST_KEYS``: the
    table the API server's field ownership uses too), not by index. ``level`` is the
    list's; its position in the object says which key."""
    from deepdiff.helper import CannotCompare  # imported by changes() already

    at = _rule_of(level)
    key_x, key_y = item_key(at, x), item_key(at, y)
    if key_x is None or key_y is None:
        raise CannotCompare()  # deepdiff then compares by index
    return key_x == key_y


def _rule_of(level: Any) -> Rule:
    """The rule at a deepdiff level's position: the field names on the way up from it,
    list indices skipped (an item is at its list's position)."""
    from deepdiff.helper import notpresent  # imported by changes() already

    names: list[str] = []
    node = level
    while getattr(node, "up", None) is not None:
        up = node.up
        if not isinstance(up.t2 if up.t2 is not notpresent else up.t1, list):
            rel = up.t2_child_rel or up.t1_child_rel
            names.append(str(rel.param))
        node = up
    at = ROOT
    for name in reversed(names):
        at = at.child(name)
    return at


def _level_path(level: Any) -> str:
    """The human path of a deepdiff level, naming keyed list items by their key.

    Walks the level chain from the root rather than using ``level.path()``: with an
    ``iterable_compare_func`` its indices can name the wrong side's position.
    """
    from deepdiff.helper import notpresent  # imported by changes() already

    out: list[str] = []
    at = ROOT
    node = level.all_up
    while node.down is not None:
        child = node.down
        rel = node.t2_child_rel or node.t1_child_rel
        if isinstance(node.t2 if node.t2 is not notpresent else node.t1, list):
            item = child.t2 if child.t2 is not notpresent else child.t1
            key = item_key(at, item)
            out.append(key_element(key) if key is not None else f"i:{rel.param}")
        else:
            field = str(rel.param)
            at = at.child(field)
            out.append(f"f:{field}")
        node = child
    return human_path(tuple(out))


def unified(subject: str, live: Obj | None, desired: Obj | None, color: bool) -> str:
    """A unified diff of YAML dumps, ``--- live/<subject>`` to ``+++ git/<subject>``.

    ``live`` None means the object is created, ``desired`` None that it is pruned.
    Returns "" when both dump the same.
    """
    old = _dump(live)
    new = _dump(desired)
    lines = difflib.unified_diff(
        old, new, fromfile=f"live/{subject}", tofile=f"git/{subject}", lineterm=""
    )
    text = [_paint(line) if color else line for line in lines]
    return "\n".join(text) + "\n" if text else ""


def _dump(obj: Obj | None) -> list[str]:
    if obj is None:
        return []
    text = yaml.safe_dump(
        obj, sort_keys=True, default_flow_style=False, allow_unicode=True, width=1 << 16
    )
    return text.splitlines()


def _paint(line: str) -> str:
    if line.startswith(("---", "+++")):
        return f"{_BOLD}{line}{_RESET}"
    if line.startswith("@@"):
        return f"{_CYAN}{line}{_RESET}"
    if line.startswith("-"):
        return f"{_RED}{line}{_RESET}"
    if line.startswith("+"):
        return f"{_GREEN}{line}{_RESET}"
    return line


def strip_server_fields(obj: Obj) -> Obj:
    """``obj`` without status and the metadata the server writes (managedFields,
    resourceVersion, generation, uid, creationTimestamp, selfLink): what is left is
    what an apply can change. A new top level and metadata; nested values are shared.
    """
    out = {k: v for k, v in obj.items() if k != "status"}
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        out["metadata"] = {k: v for k, v in meta.items() if k not in _SERVER_METADATA}
    return out
