"""The namespaces of a sync pass on the API server: one GET per namespace of a MyApp not
live yet, and, when asked, their creation. What to look up and create is decided by the
pure plan in :mod:`gitsync.engine.namespace_plan`.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Container, Iterable

from gitsync.engine.namespace_plan import namespace_of, plan_namespaces, to_look_up
from gitsync.errors import APINotFoundError, GitsyncError
from gitsync.kube.interfaces import Client
from gitsync.model.api import FIELD_MANAGER, Obj

log = logging.getLogger(__name__)


def path_of(name: str) -> str:
    return f"/api/v1/namespaces/{name}"  # a DNS-1123 label: nothing to quote


def existing(kube: Client, names: Iterable[str]) -> set[str]:
    """The namespaces among ``names`` that exist: one GET each (RBAC: get namespaces)."""
    found: set[str] = set()
    for name in names:
        try:
            kube.get(path_of(name), subject=f"Namespace/{name}")
        except APINotFoundError:
            continue
        found.add(name)
    return found


def create_namespace(kube: Client, body: Obj, field_manager: str = FIELD_MANAGER) -> Obj:
    """Create a namespace with server-side apply (RBAC: create and patch namespaces)."""
    name = body["metadata"]["name"]
    return kube.apply(path_of(name), body, field_manager=field_manager, subject=f"Namespace/{name}")


def ensure(
    kube: Client,
    desired: Collection[str],
    live: Container[str],
    *,
    create: bool,
    instance: str,
    allowed: frozenset[str] | None,
    denied: tuple[str, ...],
    field_manager: str = FIELD_MANAGER,
) -> tuple[dict[str, str], list[str]]:
    """A sync pass's part: looks up, and creates when asked, the namespaces of the
    ``desired`` MyApps not ``live`` yet. Returns why each MyApp that cannot be applied
    is not (by key), and the namespaces created."""
    found: set[str] = set()
    errors: dict[str, str] = {}
    for ns in to_look_up(desired, live):
        try:
            found |= existing(kube, [ns])
        except GitsyncError as e:  # cannot tell (forbidden…): its MyApps wait
            errors[ns] = str(e)
    plan = plan_namespaces(
        desired,
        live,
        found | set(errors),
        create=create,
        instance=instance,
        allowed=allowed,
        denied=denied,
    )
    created: list[str] = []
    for body in plan.bodies():
        ns = body["metadata"]["name"]
        try:
            create_namespace(kube, body, field_manager)
        except GitsyncError as e:
            log.error("could not create namespace %s: %s", ns, e)
            errors[ns] = f"could not create namespace {ns!r}: {e}"
        else:
            log.info("created namespace %s", ns)
            created.append(ns)
    missing = dict(plan.missing)
    for key in desired:
        if key not in live and namespace_of(key) in errors:
            missing[key] = errors[namespace_of(key)]
    return missing, created
