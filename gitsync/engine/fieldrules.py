"""Where a rule of the API's schema holds in an object: each table below is keyed by the
position of a field (``spec.template.spec.containers[].ports[].containerPort``), never by
its bare name, so a label, an annotation or a map key that happens to be called ``port``,
``replicas`` or ``env`` is a plain value like any other.

A position is its field names from the top of the object, dot-separated; ``[]`` after a
name stands for any item of that list, so the fields after it are the item's. The tables
cover the two kinds gitsync writes, a MyApp (``crds/myapps.apps.example.com.yaml``) and
the Deployment rendered from it (``model/render``); their positions do not overlap except
where both kinds agree (``spec.replicas``, ``status.conditions``), so one table serves
both, and an object's kind need not be known (informer list items carry none). They must
agree with the API server's schema, or paths computed from them will never match the ones
it records in managedFields.

The tables are compiled into one tree of :class:`Rule`, walked alongside an object: a
lookup is one dict ``get`` a level, which the drift fast path can afford on every object
every cycle.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

_DEPLOYMENT_CONTAINERS: Final = (
    "spec.template.spec.containers",
    "spec.template.spec.initContainers",
)

#: integer fields: compared as the integers they stand for (gitsync.model.integers)
INT_FIELDS: Final = frozenset(
    {
        "spec.replicas",  # MyApp and Deployment
        "spec.port",  # MyApp
        "spec.progressDeadlineSeconds",  # MyApp and Deployment
        *(f"{c}[].ports[].containerPort" for c in _DEPLOYMENT_CONTAINERS),
    }
)
#: keyed lists ("list-type: map"), with their key fields
LIST_KEYS: Final[Mapping[str, tuple[str, ...]]] = {
    "metadata.ownerReferences": ("uid",),
    "spec.env": ("name",),  # MyApp
    "status.conditions": ("type",),  # MyApp and Deployment
    **{c: ("name",) for c in _DEPLOYMENT_CONTAINERS},
    **{f"{c}[].env": ("name",) for c in _DEPLOYMENT_CONTAINERS},
    **{f"{c}[].ports": ("containerPort", "protocol") for c in _DEPLOYMENT_CONTAINERS},
}
#: key fields the API server defaults, so an item without them still matches
KEY_DEFAULTS: Final[Mapping[str, object]] = {
    f"{c}[].ports[].protocol": "TCP" for c in _DEPLOYMENT_CONTAINERS
}
#: fields whose whole value is one leaf in SMD (``structType=atomic`` / ``mapType=atomic``)
ATOMIC_FIELDS: Final = frozenset({"spec.selector"})
#: keyed lists whose items are atomic structs: the item path is the only leaf
ATOMIC_ITEMS: Final = frozenset({"metadata.ownerReferences"})
#: fields of a built-in kind that are a struct (not a pointer) in its Go type: the server
#: holds them even when nothing is left in them (``resources: {}`` on a container), so
#: what an apply removes below one leaves the field itself in place
KEPT_EMPTY: Final = frozenset(f"{c}[].resources" for c in _DEPLOYMENT_CONTAINERS)
#: maps of resource quantities, compared canonical (``1000m`` is ``1``)
QUANTITY_MAPS: Final = frozenset(
    {
        *(f"spec.resources.{part}" for part in ("limits", "requests")),  # MyApp
        *(
            f"{c}[].resources.{part}"
            for c in _DEPLOYMENT_CONTAINERS
            for part in ("limits", "requests")
        ),
    }
)

#: one key field of a keyed list: its name, the server's default, whether an integer
KeyField = tuple[str, Any, bool]


@dataclass(frozen=True, slots=True, eq=False)
class Rule:
    """What holds at one position, and the positions below it by field name (an item of
    a list is at the list's own position: its fields are the list's ``fields``)."""

    fields: Mapping[str, Rule] = field(default_factory=dict)
    keys: tuple[KeyField, ...] = ()  # a keyed list when not empty
    default: Any = None  # what the server sets a missing key field to
    integer: bool = False
    atomic: bool = False
    atomic_items: bool = False
    quantities: bool = False
    kept_empty: bool = False

    def child(self, name: str) -> Rule:
        return self.fields.get(name, NO_RULES)


#: every position no table names: no rule holds there, or anywhere below it
NO_RULES: Final = Rule()


def _names(position: str) -> tuple[str, ...]:
    return tuple(name.removesuffix("[]") for name in position.split("."))


_Names = tuple[str, ...]


@dataclass(frozen=True)
class _Tables:
    """The tables with each position as its tuple of names, to compile from."""

    ints: frozenset[_Names]
    keys: Mapping[_Names, tuple[str, ...]]
    defaults: Mapping[_Names, object]
    atomic: frozenset[_Names]
    atomic_items: frozenset[_Names]
    quantities: frozenset[_Names]
    kept_empty: frozenset[_Names]


_TABLES: Final = _Tables(
    ints=frozenset(map(_names, INT_FIELDS)),
    keys={_names(p): k for p, k in LIST_KEYS.items()},
    defaults={_names(p): d for p, d in KEY_DEFAULTS.items()},
    atomic=frozenset(map(_names, ATOMIC_FIELDS)),
    atomic_items=frozenset(map(_names, ATOMIC_ITEMS)),
    quantities=frozenset(map(_names, QUANTITY_MAPS)),
    kept_empty=frozenset(map(_names, KEPT_EMPTY)),
)


def _compile(at: _Names, t: _Tables) -> Rule:
    named = [
        *t.ints,
        *t.keys,
        *t.defaults,
        *t.atomic,
        *t.atomic_items,
        *t.quantities,
        *t.kept_empty,
    ]
    n = len(at)
    below = sorted({p[n] for p in named if len(p) > n and p[:n] == at})
    return Rule(
        fields={name: _compile((*at, name), t) for name in below},
        keys=tuple((k, t.defaults.get((*at, k)), (*at, k) in t.ints) for k in t.keys.get(at, ())),
        default=t.defaults.get(at),
        integer=at in t.ints,
        atomic=at in t.atomic,
        atomic_items=at in t.atomic_items,
        quantities=at in t.quantities,
        kept_empty=at in t.kept_empty,
    )


#: the top of an object
ROOT: Final = _compile((), _TABLES)


def rule_at(position: str) -> Rule:
    """The rule at a position written as in the tables (``spec.template.spec.containers``);
    ``""`` is the top."""
    rule = ROOT
    for name in _names(position) if position else ():
        rule = rule.child(name)
    return rule
