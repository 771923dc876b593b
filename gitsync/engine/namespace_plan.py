"""The namespaces a pass puts MyApps in, as a plan: which must exist first, and which
gitsync may create. Pure: the lookups and the creation are :mod:`gitsync.gitops.namespaces`.

Without a check, a MyApp in a namespace that does not exist fails at its apply with the
API server's ``namespaces "shop" not found``, which ``gitsync diff`` (no writes) could not
foresee. The plan here is shared by ``sync`` and ``diff`` (diff == sync).

Only namespaces of MyApps that are not live yet are looked up: a live MyApp proves its
namespace exists, so a steady-state pass reads nothing. A namespace gitsync creates
(``--create-namespace``, off by default, as Argo CD's ``CreateNamespace=true``) is
labelled as gitsync's and never deleted: it may hold objects gitsync knows nothing of.
"""

from __future__ import annotations

from collections.abc import Container, Iterable
from dataclasses import dataclass, field
from typing import Final

from gitsync.model.api import MANAGED_BY, MANAGED_BY_LABEL, Obj
from gitsync.model.instance import INSTANCE_LABEL
from gitsync.model.schema import denied_by

FLAG: Final = "--create-namespace"


@dataclass(frozen=True)
class NamespacePlan:
    """``create``: namespaces to create before the MyApps; ``missing``: why each MyApp
    (by key) whose namespace does not exist, and will not be created, is not applied."""

    create: tuple[str, ...] = ()
    missing: dict[str, str] = field(default_factory=dict)
    #: the instance whose label the created namespaces carry
    instance: str = ""

    def bodies(self) -> list[Obj]:
        return [namespace_body(ns, self.instance) for ns in self.create]


def namespace_of(key: str) -> str:
    return key.split("/", 1)[0]


def to_look_up(desired: Iterable[str], live: Container[str]) -> list[str]:
    """The namespaces to look up: those of desired MyApps not live yet, sorted."""
    return sorted({namespace_of(k) for k in desired if k not in live})


def missing_message(namespace: str, reason: str = "") -> str:
    why = f" ({reason})" if reason else ""
    return (
        f'namespace "{namespace}" does not exist{why}: create it first, '
        f"or pass {FLAG} to have gitsync create it"
    )


def plan_namespaces(
    desired: Iterable[str],
    live: Container[str],
    existing: Container[str],
    *,
    create: bool = False,
    instance: str = "",
    allowed: frozenset[str] | None = None,
    denied: tuple[str, ...] = (),
) -> NamespacePlan:
    """What a pass does about the namespaces of the ``desired`` MyApp keys, given the
    ``live`` MyApp keys and the namespaces looked up that exist.

    A namespace is created only when asked and allowed by --allowed-namespaces and
    --denied-namespaces (the loader already refuses such MyApps; checked again here
    because creating a namespace is a cluster-wide write)."""
    wanted = set(to_look_up(desired, live))
    absent = sorted(ns for ns in wanted if ns not in existing)
    creatable = {ns for ns in absent if create and _allowed(ns, allowed, denied)}
    missing: dict[str, str] = {}
    for key in sorted(desired):
        ns = namespace_of(key)
        if key in live or ns not in absent or ns in creatable:
            continue
        reason = "" if not create else "not allowed by --allowed-namespaces/--denied-namespaces"
        missing[key] = missing_message(ns, reason)
    return NamespacePlan(tuple(sorted(creatable)), missing, instance)


def _allowed(namespace: str, allowed: frozenset[str] | None, denied: tuple[str, ...]) -> bool:
    if allowed is not None and namespace not in allowed:
        return False
    return denied_by(namespace, denied, allowed) is None


def namespace_body(name: str, instance: str) -> Obj:
    """The apply body of a namespace gitsync creates: its name and gitsync's labels."""
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": name,
            "labels": {MANAGED_BY_LABEL: MANAGED_BY, INSTANCE_LABEL: instance},
        },
    }
