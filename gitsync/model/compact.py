"""Objects held for long, held once: what is identical is shared.

A fleet's objects are alike: every Deployment gitsync renders has the same
managedFields field sets, the same container defaults, the same probes and
resources; MyApps differ in a name and an image. Decoded from JSON each is a tree
of its own (about 30 KiB per MyApp and its Deployment). ``Compactor.compact``
returns a tree equal to the one given, built of nodes shared with every other
tree it was given: a dict or list below an object's top level (below ``metadata``,
``spec``, ``status``) that equals one seen before is that one (hash-consing), and
short strings are interned. A cache of 1000 MyApps and Deployments then takes
about 9 KiB per pair instead of 30.

**Shared nodes must not be changed.** A caller that changes a nested value of a
compacted tree changes it in every tree that shares it. Nothing in gitsync changes
an object it read from a cache (it builds new dicts: ``{**live, ...}``,
``copy.deepcopy``); ``changed`` finds a shared node that was changed anyway, and the
tests run it after each test that holds caches.

The table of shared nodes forgets a node once nothing but the table holds it
(``sweep``, run whenever the table has doubled, and by the daemon after each sync pass
that added nodes: :mod:`gitsync.daemon.heap`), so a year of churn does not grow it.
Thread-safe without a lock: each step is one dict operation; two threads compacting
equal nodes at once at worst share one of them less.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from typing import Any, Final

from gitsync.model.api import LAST_APPLIED_ANNOTATION, Obj

#: strings up to this long are interned: names, keys, reasons, timestamps repeat
#: across a fleet; longer ones (messages, annotations) rarely do
INTERN_UP_TO: Final = 64
#: never interned: they are unique per object, so interning them only costs
_UNIQUE: Final = frozenset({"uid", "resourceVersion"})
#: a dict or list this near the top of an object is its own (the object, its
#: metadata, spec and status hold its name): sharing it would never pay
_OWN_DEPTH: Final = 2
_SWEEP_AT_LEAST: Final = 10_000
#: the table is this many dicts, a node in the one its signature's low bits name. One
#: dict of tens of thousands of nodes is one allocation of megabytes, which doubles (or
#: halves) when churn makes it resize: a step of RSS, which the C library's heap does
#: not easily give back. Each of 256 is a few KiB, and as they resize at different times
#: the memory one frees is what another takes.
_SHARDS: Final = 256
_SHARD_BITS: Final = _SHARDS - 1
#: references to a table node while ``sweep`` looks at it: the table's, the loop
#: variable's, ``getrefcount``'s argument; one more means someone else holds it
_TABLE_ONLY: Final = 3
#: references to a table node's child while ``sweep`` looks at it: the node's, the
#: table's, the loop variable's, ``getrefcount``'s argument
_CHILD_ONLY: Final = 4

_Scalar = (str, int, float, bool, type(None))
_EMPTY: Final[dict[str, Any]] = {}


class Compactor:
    """Shares identical nodes among the trees it compacts (see the module's text)."""

    def __init__(self, signature: Callable[[Iterable[Any]], int] | None = None) -> None:
        #: signature hash → the node shared under it (a node with the same hash
        #: but other content is simply not shared), in ``_SHARDS`` dicts by the hash's
        #: low bits (see ``_SHARDS``)
        self._tables: tuple[dict[int, Any], ...] = tuple({} for _ in range(_SHARDS))
        self._size = 0
        self._signature = signature or _signature
        self._sweep_at = _SWEEP_AT_LEAST
        #: ``_size`` right after the last sweep: more means nodes were added since
        self._swept = 0
        #: sweeps so far
        self.sweeps = 0

    def __len__(self) -> int:
        return sum(len(table) for table in self._tables)

    def compact(self, obj: Obj, like: Obj | None = None) -> Obj:
        """A copy of ``obj``, equal to it, sharing nodes with earlier copies.

        ``like``: a compacted earlier version of the same object (the one a watch
        event replaces); each part of ``obj`` equal to its part is taken from it
        whole, so that an event costs what it changed (one ``==`` in C per unchanged
        part, not a walk in Python). Equal is Python's ``==``, under which ``true``
        and ``1`` are equal and key order does not count: the API server writes each
        field of an object with the one JSON type its schema gives it, and an object's
        fields in one order (its schema's, a map's sorted), so two versions of one
        object never differ only in those."""
        out: Obj = self._node(obj, 0, "", like)
        if self._size > self._sweep_at:
            self.sweep()
        return out

    def _node(self, node: Any, depth: int, key: str, like: Any = None) -> Any:
        if isinstance(node, dict):
            if isinstance(like, dict):
                if node == like:
                    return like
                old = like
            else:
                old = _EMPTY
            d = {sys.intern(k): self._node(v, depth + 1, k, old.get(k)) for k, v in node.items()}
            return d if depth < _OWN_DEPTH else self._shared(d, self._signature(d.items()))
        if isinstance(node, list):
            if isinstance(like, list):
                if node == like:
                    return like
                olds = like
            else:
                olds = []
            items = [
                self._node(v, depth + 1, key, olds[i] if i < len(olds) else None)
                for i, v in enumerate(node)
            ]
            return items if depth < _OWN_DEPTH else self._shared(items, self._signature(items))
        if type(node) is str and len(node) <= INTERN_UP_TO and key not in _UNIQUE:
            return sys.intern(node)
        return node

    def _shared(self, node: Any, signature: int) -> Any:
        table = self._tables[signature & _SHARD_BITS]
        old = table.get(signature)
        if old is None:
            table[signature] = node
            self._size += 1  # from several threads: a count a few off only moves a sweep
            return node
        return old if _same(old, node) else node

    def sweep(self) -> int:
        """Forget the nodes nothing else holds; how many were forgotten.

        A node forgotten lets its children go: those that were shared are looked at
        again once it is, in the same sweep."""
        gone = 0
        children: list[Any] = []
        for table in self._tables:
            for signature in list(table):
                gone += self._forget(table, signature, children)
        while children:
            child = children.pop()
            signature = self._signature(child.items() if isinstance(child, dict) else child)
            table = self._tables[signature & _SHARD_BITS]
            if table.get(signature) is child:
                del child  # held now by the table (and by ``children``, if listed twice)
                gone += self._forget(table, signature, children)
        self.sweeps += 1
        self._size = self._swept = len(self)
        self._sweep_at = max(_SWEEP_AT_LEAST, 2 * self._size)
        return gone

    def tidy(self) -> int:
        """``sweep`` if a node was added since the last sweep, else nothing (0): run after
        each sync pass (:mod:`gitsync.daemon.heap`), so that the table never holds more
        than one pass's churn of nodes nothing else holds, and an idle fleet costs no
        sweep at all."""
        return self.sweep() if self._size > self._swept else 0

    def _forget(self, table: dict[int, Any], signature: int, children: list[Any]) -> int:
        """Forgets the node under ``signature`` if only the table holds it (1), adding
        its nested nodes to ``children``; else 0."""
        node = table.get(signature)
        if node is None or sys.getrefcount(node) > _TABLE_ONLY:
            return 0
        values = node.values() if isinstance(node, dict) else node
        # a child held by the table and this node only (and the loop variable, and
        # getrefcount's argument) is the table's alone once this node goes
        children.extend(
            v for v in values if isinstance(v, dict | list) and sys.getrefcount(v) <= _CHILD_ONLY
        )
        # popped, not deleted: two sweeps may run at once (a settle's, and the one a
        # doubled table starts in a thread that compacts), and forget one node both
        table.pop(signature, None)
        return 1

    def changed(self) -> list[Any]:
        """The shared nodes whose content no longer matches the signature they were
        shared under: something changed a compacted tree in place."""
        return [
            node
            for table in self._tables
            for signature, node in list(table.items())
            if self._signature(node.items() if isinstance(node, dict) else node) != signature
        ]


def _signature(items: Iterable[Any]) -> int:
    # children are compacted already: a nested node is named by its identity (the
    # table keeps it alive, so the identity is not reused), a scalar by its value
    # and type (True == 1 == 1.0, but they are not the same JSON)
    return hash(tuple(_part(item) for item in items))


def _part(item: Any) -> Any:
    if isinstance(item, tuple):  # a dict's (key, value)
        key, value = item
        return key, _part(value)
    if isinstance(item, _Scalar):
        return type(item), item
    return id(item)


def _same(a: Any, b: Any) -> bool:
    """Whether two compacted nodes are equal: nested nodes by identity, scalars by
    value and type."""
    if type(a) is not type(b) or len(a) != len(b):
        return False
    if isinstance(a, dict):
        pairs = zip(a.items(), b.items(), strict=True)
        return all(ka == kb and _same_child(va, vb) for (ka, va), (kb, vb) in pairs)
    return all(_same_child(x, y) for x, y in zip(a, b, strict=True))


def _same_child(x: Any, y: Any) -> bool:
    if x is y:
        return True
    return isinstance(y, _Scalar) and type(x) is type(y) and x == y


def cached(obj: Obj, like: Obj | None = None) -> Obj:
    """What an informer cache keeps of an object (controller-runtime's cache
    transform): all of it but kubectl's last-applied annotation (a copy of a whole
    object, unique to it, that nothing in gitsync reads: drift never compares it),
    compacted in ``SHARED`` (``like``: the version it replaces in the cache)."""
    meta = obj.get("metadata")
    annotations = meta.get("annotations") if isinstance(meta, dict) else None
    if (
        isinstance(meta, dict)
        and isinstance(annotations, dict)
        and LAST_APPLIED_ANNOTATION in annotations
    ):
        rest = {k: v for k, v in annotations.items() if k != LAST_APPLIED_ANNOTATION}
        obj = {**obj, "metadata": {**meta, "annotations": rest}}
    return SHARED.compact(obj, like)


#: the one table the caches and memos of a process share: a Deployment rendered from
#: Git and the same Deployment read from the server share their nodes
SHARED: Final = Compactor()
