"""Drift: where a live object no longer holds what gitsync set, and who changed it.

Pure functions over plain dicts. The fast path (``fast_equal``) runs on every object
every cycle, so it only projects and compares with ``==``; the item-by-item report
(``drift_items``) runs only for objects that differ.

Not drift, by design: fields gitsync does not set (server defaults, other
controllers' fields, labels others add) and values equal after canonicalisation
(``1000m`` vs ``1``, ``"80"`` vs ``80``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any, Final

from gitsync.engine.fieldrules import NO_RULES, ROOT, Rule
from gitsync.engine.managedfields import (
    Owner,
    Path,
    human_path,
    item_key,
    key_element,
    owner_sets,
    owners_of,
    pick_owner,
)
from gitsync.model.api import (
    DEFAULT_FORCE_MANAGERS,
    FIELD_MANAGER,
    LAST_APPLIED_ANNOTATION,
    Obj,
)
from gitsync.model.integers import as_integer
from gitsync.model.quantity import resource_quantity

#: the metadata gitsync sets and compares; the rest is identity or the server's
COMPARED_METADATA: Final = ("labels", "annotations", "ownerReferences")
_IGNORED_TOP: Final = frozenset({"apiVersion", "kind", "metadata", "status"})
_ABSENT: Final[Any] = object()  # a live value that is not there (None is a value)


@dataclass(frozen=True)
class DriftItem:
    """One drifted leaf of one object; ``live`` is None when the live object lacks it."""

    object: str
    path: str
    smd_path: Path
    desired: Any
    live: Any = None
    manager: str | None = None
    operation: str | None = None
    time: str | None = None
    conflict: bool = False


def comparable(desired: Obj) -> Obj:
    """The part of an apply body that can drift: no apiVersion/kind/status, and of
    metadata only labels, annotations and ownerReferences (informer list items carry
    no apiVersion/kind, and name/namespace are the object's identity)."""
    out = {k: v for k, v in desired.items() if k not in _IGNORED_TOP}
    meta = desired.get("metadata") or {}
    kept = {k: meta[k] for k in COMPARED_METADATA if k in meta}
    annotations = kept.get("annotations")
    if isinstance(annotations, dict) and LAST_APPLIED_ANNOTATION in annotations:
        # kubectl's bookkeeping, which caches do not keep (model/compact.cached)
        kept["annotations"] = {k: v for k, v in annotations.items() if k != LAST_APPLIED_ANNOTATION}
    if kept:
        out["metadata"] = kept
    return out


def project(live: Obj, desired: Obj, at: Rule = ROOT) -> Obj:
    """``live`` restricted to the structure of ``desired``; both are at position ``at``
    of an object (:mod:`gitsync.engine.fieldrules`), by default its top.

    Dicts by key; keyed lists item by item by their key; other lists whole. What live
    lacks is absent. Values are shared with ``live``, not copied.
    """
    out: Obj = {}
    fields = at.fields
    for key, want in desired.items():
        if key in live:
            out[key] = _project_value(fields.get(key, NO_RULES), live[key], want)
    return out


def _project_value(rule: Rule, have: Any, want: Any) -> Any:
    if isinstance(want, dict) and isinstance(have, dict):
        return project(have, want, rule)
    if isinstance(want, list) and isinstance(have, list) and rule.keys:
        return _project_items(rule, have, want)
    return have


def _project_items(rule: Rule, have: list[Any], want: list[Any]) -> list[Any]:
    index = {_key_tuple(rule, item): item for item in have if isinstance(item, dict)}
    out: list[Any] = []
    for item in want:
        match = index.get(_key_tuple(rule, item)) if isinstance(item, dict) else None
        if match is not None:
            out.append(project(match, item, rule))
    return out


def _key_tuple(rule: Rule, item: Obj) -> tuple[Any, ...]:
    # a tuple, not the JSON key element: this runs for every item every cycle;
    # "80" and 80 name the same port
    return tuple(
        _integer(item.get(name, default)) if integer else item.get(name, default)
        for name, default, integer in rule.keys
    )


def _integer(value: Any) -> Any:
    converted = as_integer(value)
    return value if converted is None else converted


def canonicalise(value: Any, at: Rule = ROOT) -> Any:
    """A copy with the quantities of resource maps canonical and values at integer
    fields as the ints they stand for; ``value`` is at position ``at`` of an object, by
    default its top (:mod:`gitsync.engine.fieldrules`). Invalid values stay as they are
    (they differ, visibly)."""
    if isinstance(value, dict):
        if at.quantities:
            return _quantities(value)
        fields = at.fields
        return {k: canonicalise(v, fields.get(k, NO_RULES)) for k, v in value.items()}
    if isinstance(value, list):
        return [canonicalise(v, at) for v in value]
    return _integer(value) if at.integer else value


def _quantities(quantities: Obj) -> Obj:
    out: Obj = {}
    for name, q in quantities.items():
        try:
            out[name] = resource_quantity(q)
        except ValueError:
            out[name] = q
    return out


def fast_equal(desired: Obj, live: Obj) -> bool:
    """Whether ``live`` holds everything ``desired`` sets: projection and ``==`` only."""
    want = comparable(desired)
    if project(live, want) == want:
        return True  # the common case, with no canonicalisation at all
    canonical = canonicalise(want)
    return bool(canonicalise(project(live, canonical)) == canonical)


def drift_items(object_label: str, desired: Obj, live: Obj) -> list[DriftItem]:
    """The leaves where canonical ``desired`` and canonical projected ``live`` differ.

    ``object_label`` names the object in the report (``Deployment/web``).
    """
    want = canonicalise(comparable(desired))
    have = canonicalise(project(live, want))
    out: list[DriftItem] = []
    _walk(object_label, want, have, (), ROOT, out)
    return out


def _walk(label: str, want: Obj, have: Obj, prefix: Path, at: Rule, out: list[DriftItem]) -> None:
    for key, value in want.items():
        path = (*prefix, f"f:{key}")
        _compare(label, at.child(key), value, have.get(key, _ABSENT), path, out)


def _compare(
    label: str, rule: Rule, want: Any, have: Any, path: Path, out: list[DriftItem]
) -> None:
    if isinstance(want, dict) and (have is _ABSENT or isinstance(have, dict)):
        # a map live lacks entirely is reported leaf by leaf, like any other
        _walk(label, want, {} if have is _ABSENT else have, path, rule, out)
    elif isinstance(want, list) and rule.keys and (have is _ABSENT or isinstance(have, list)):
        _compare_items(label, rule, want, [] if have is _ABSENT else have, path, out)
    elif have is _ABSENT or want != have:
        out.append(_item(label, path, want, None if have is _ABSENT else have))


def _compare_items(
    label: str, rule: Rule, want: list[Any], have: list[Any], path: Path, out: list[DriftItem]
) -> None:
    index = {key_element(k): item for item in have if (k := item_key(rule, item)) is not None}
    for item in want:
        k = item_key(rule, item)
        if k is None:
            continue  # not an item of this list at all: the server refuses such a body
        item_path = (*path, key_element(k))
        match = index.get(item_path[-1])
        if match is None:
            out.append(_item(label, item_path, item, None))
        elif rule.atomic_items:
            if match != item:  # atomic: replaced as a whole, so reported as a whole
                out.append(_item(label, item_path, item, match))
        else:
            _walk(label, item, match, item_path, rule, out)


def _item(label: str, path: Path, desired: Any, live: Any) -> DriftItem:
    return DriftItem(object=label, path=human_path(path), smd_path=path, desired=desired, live=live)


def attribute(
    items: Iterable[DriftItem],
    managed_fields: list[Obj],
    *,
    self_manager: str = FIELD_MANAGER,
    force_managers: tuple[str, ...] = DEFAULT_FORCE_MANAGERS,
) -> list[DriftItem]:
    """Fill in who owns each drifted value, and whether taking it back is a conflict.

    A conflict is a value owned by another controller (an HPA, another operator):
    gitsync reports it and never fights over it. One-off tools (``kubectl*``,
    ``before-first-apply``, the ``force_managers``) are not conflicts: their changes
    are taken back with force.
    """
    sets = owner_sets(managed_fields)
    out: list[DriftItem] = []
    for item in items:
        owners = owners_of(sets, item.smd_path)
        rivals = [o for o in owners if not _may_force(o, self_manager, force_managers)]
        owner = pick_owner(rivals or owners, self_manager)
        out.append(_attributed(item, owner, conflict=bool(rivals)))
    return out


def _may_force(owner: Owner, self_manager: str, force_managers: tuple[str, ...]) -> bool:
    # "kubectl" covers its per-command managers too: kubectl-edit, kubectl-set, ...
    name = owner.manager
    return name == self_manager or any(
        name == m or name.startswith(f"{m}-") for m in force_managers
    )


def _attributed(item: DriftItem, owner: Owner | None, *, conflict: bool) -> DriftItem:
    if owner is None:
        return replace(item, conflict=False)
    return replace(
        item,
        manager=owner.manager,
        operation=owner.operation,
        time=owner.time,
        conflict=conflict,
    )


def status_entries(items: Iterable[DriftItem]) -> list[Obj]:
    """``status.drift[]`` entries, sorted by object and path.

    Unknown values (no live value, no owner) are left out rather than written as
    null, which the CRD's structural schema would prune or refuse.
    """
    entries: list[Obj] = []
    for item in sorted(items, key=lambda i: (i.object, i.path)):
        entry: Obj = {"object": item.object, "path": item.path, "desired": item.desired}
        optional = {
            "live": item.live,
            "manager": item.manager,
            "operation": item.operation,
            "time": item.time,
        }
        entry.update({k: v for k, v in optional.items() if v is not None})
        entry["conflict"] = item.conflict
        entries.append(entry)
    return entries


def drift_signature(items: Iterable[DriftItem]) -> frozenset[tuple[str, str]]:
    """The set of drifted (object, path): write status and emit events only when it changes."""
    return frozenset((item.object, item.path) for item in items)
