"""Pins in the cluster: read before every sync pass, written by ``gitsync rollback`` and
removed by ``gitsync resume`` (the record itself is :mod:`gitsync.model.pin`).

Where a pin lives: in the instance's status ConfigMap (``gitsync-status-NAME``), one
``data`` key per pin, not in an object of its own, because that ConfigMap is already
the instance's one record in the cluster that every replica, a restarted daemon,
``gitsync sync`` in CI and ``gitsync diff`` read (the commit applied last is kept there,
and the accept annotation that moves it on purpose); the daemon's Role may already get
and patch it by name, so no install needs new RBAC; and ``kubectl get configmap
gitsync-status-NAME`` shows the pin next to the revision and the result it caused.

The daemon writes its own record there with server-side apply (field manager
``gitsync``), which owns only the keys it applies: a pin, written by a merge patch of
its one key under the field manager ``gitsync-pin``, is never removed by the daemon's
apply, and pinning or resuming one MyApp never touches another's pin.
"""

from __future__ import annotations

import datetime as dt
import getpass
import logging
import os
from dataclasses import dataclass

from gitsync.errors import APIConflictError, APIError, ConfigError
from gitsync.gitops.sync_state import StateWriter
from gitsync.kube import kubeconfig
from gitsync.kube.client import Kube, resource_path
from gitsync.kube.leader import LeaderElector
from gitsync.kube.records import patch_keys
from gitsync.model import pin as pinlib
from gitsync.model.api import Obj

log = logging.getLogger(__name__)

#: the field manager of pins (the daemon's own record is ``gitsync``'s)
PIN_MANAGER = "gitsync-pin"
#: removals tried when the ConfigMap changed between the read and the write
_ATTEMPTS = 5


def read(state: StateWriter) -> pinlib.Pins:
    """The pins of ``state``'s instance (none when there is no ConfigMap yet); an
    :class:`APIError` when it cannot be read, which a caller must never take for "not
    pinned": a pass would then go back to the head for as long as the API server fails."""
    cm = state.read_object()
    return pinlib.pins_of((cm or {}).get("data"))


def now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def who(kube: Kube, kubeconfig_path: str | None, context: str | None, by: str) -> str:
    """Who pins: ``by`` when given; else the user the API server authenticated (a
    SelfSubjectReview, which any authenticated user may make), else the kubeconfig
    context's user, else the OS user."""
    if by.strip():
        return pinlib.clip(by)
    body = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
    path = resource_path("authentication.k8s.io/v1", "selfsubjectreviews")
    try:
        review = kube.create(path, body, subject="SelfSubjectReview")
        name = str(((review.get("status") or {}).get("userInfo") or {}).get("username") or "")
    except APIError as e:  # an older server, or a proxy that refuses it
        log.debug("SelfSubjectReview failed: %s", e)
        name = ""
    if not name:
        name = kubeconfig.context_user(kubeconfig_path, context)
    if not name:
        try:
            name = getpass.getuser()
        except (OSError, KeyError):
            name = str(os.getuid())
    return pinlib.clip(name)


@dataclass(frozen=True)
class Written:
    pin: pinlib.Pin
    #: the pin it replaced, if there was one
    replaced: pinlib.Pin | None


def write(kube: Kube, state: StateWriter, pin: pinlib.Pin) -> Written:
    """Set ``pin`` (replacing the same MyApp's or the instance's), creating the ConfigMap
    when no sync has made it yet."""
    before = read(state)
    replaced = before.apps.get(pin.app) if pin.app else before.instance
    data: Obj = {pin.key: pin.value()}
    patch_keys(kube, state.namespace, state.name, state.instance, data, PIN_MANAGER)
    return Written(pin, replaced)


def remove(kube: Kube, state: StateWriter, app: str) -> pinlib.Pin | None:
    """Lift the pin of MyApp ``app`` (``namespace/name``), or the instance's (""); the pin
    lifted, or None when there was none. The removal is conditional on the version read,
    so a pin set again meanwhile (by someone else) is not lifted unseen."""
    key = pinlib.data_key(app)
    subject = f"ConfigMap/{state.namespace}/{state.name}"
    for _ in range(_ATTEMPTS):
        cm = state.read_object()
        data = (cm or {}).get("data") or {}
        if cm is None or key not in data:
            return None
        try:
            lifted: pinlib.Pin | None = pinlib.parse(key, data[key])
        except ConfigError:  # an unreadable record is lifted all the same
            lifted = pinlib.Pin("(unreadable)", "", "", "", app)
        patch: Obj = {
            "metadata": {"resourceVersion": cm["metadata"]["resourceVersion"]},
            "data": {key: None},
        }
        try:
            kube.merge_patch(state.path, patch, field_manager=PIN_MANAGER, subject=subject)
        except APIConflictError:
            continue  # the daemon recorded a pass in between: read again
        return lifted
    raise APIConflictError(subject, "changed on every attempt to lift the pin; try again", [])


def request_sync(kube: Kube, namespace: str, lease_name: str) -> bool:
    """Ask the instance's leader for a sync now (the Lease's sync request, as a standby
    asks), so a pin takes effect within seconds, not at the next poll; whether asked.
    Without a daemon (no Lease) the next ``gitsync sync`` honours the pin."""
    elector = LeaderElector(kube, namespace, lease_name, "gitsync-cli")
    try:
        kube.get(elector.path, subject=f"Lease/{namespace}/{lease_name}")
    except APIError:
        return False
    return elector.request_sync()
