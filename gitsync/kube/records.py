"""gitsync's own records, kept in the instance's status ConfigMap: texts by key.

What a decision needs from one pass to the next and across restarts (an automatic
rollback's healthy spec and the spec it holds back: :class:`gitsync.model.rollout.Record`)
is kept where only gitsync writes: the ConfigMap ``gitsync-status-NAME`` in gitsync's own
namespace, which the daemon's Role may already get and patch by name. A MyApp's status
is no place for it: it is a report, and ``myapps/status`` is granted more widely than a
MyApp's spec (to any controller that reports on MyApps), so state kept there would let
whoever may write it choose what gitsync deploys.

Data keys of their own, written by a JSON merge patch of those keys alone under the field
manager ``gitsync-record``: the daemon's server-side apply of the sync state (manager
``gitsync``) owns only its own keys and never removes these, and two replicas writing
the records of different MyApps never lose one another's.

The texts are held in memory, read from the ConfigMap before every sync pass
(:meth:`Records.load`, from the read the pass makes anyway for the pins) and kept up to
date by every write's reply: a reconcile reads no more than before. A read older than
the last write's reply is not taken (resource versions of one object grow).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from typing import Final

from gitsync.errors import APIConflictError, APINotFoundError
from gitsync.kube.client import Kube, resource_path
from gitsync.model.api import MANAGED_BY, MANAGED_BY_LABEL, Obj
from gitsync.model.instance import INSTANCE_LABEL

log = logging.getLogger(__name__)

#: the field manager of the records (the sync state's is ``gitsync``)
RECORD_MANAGER: Final = "gitsync-record"
#: the most the records of one ConfigMap may take: a ConfigMap is at most 1 MiB, and the
#: sync state and the pins share it
BUDGET: Final = 768 * 1024


class Records:
    """The texts of the keys starting with one of ``prefixes`` in one ConfigMap's data."""

    def __init__(
        self,
        kube: Kube,
        namespace: str,
        name: str,
        instance: str,
        prefixes: tuple[str, ...],
        *,
        budget: int = BUDGET,
    ) -> None:
        self.kube = kube
        self.namespace = namespace
        self.name = name
        self.instance = instance
        self.prefixes = prefixes
        self.budget = budget
        self._texts: dict[str, str] = {}
        self._version = -1
        self._lock = threading.Lock()

    @property
    def path(self) -> str:
        return resource_path("v1", "configmaps", self.namespace, self.name)

    def get(self, key: str) -> str | None:
        return self._texts.get(key)

    def load(self, cm: Obj | None) -> None:
        """Take the records of ``cm`` (the ConfigMap as read; None: there is none yet),
        unless it is older than what a write of ours already showed."""
        version = _version(cm)
        texts = {
            k: v
            for k, v in ((cm or {}).get("data") or {}).items()
            if k.startswith(self.prefixes) and isinstance(v, str)
        }
        with self._lock:
            if cm is not None and version < self._version:
                return
            self._texts, self._version = texts, max(version, self._version)

    def put(self, texts: Mapping[str, str]) -> bool:
        """Set each key's text at once ("" removes the key); False when they would not
        fit the budget (nothing written). Raises the API's error when the write fails."""
        with self._lock:
            changed = {k: v for k, v in texts.items() if self._texts.get(k, "") != v}
            if not changed:
                return True
            kept = {k: v for k, v in self._texts.items() if k not in changed}
        used = sum(len(k) + len(v) for k, v in (kept | changed).items() if v)
        if any(changed.values()) and used > self.budget:
            return False
        data: Obj = {k: v or None for k, v in changed.items()}
        cm = patch_keys(self.kube, self.namespace, self.name, self.instance, data, RECORD_MANAGER)
        if cm:  # (none: only removals, from a ConfigMap that is not there)
            self.load(cm)
        with self._lock:
            # the reply holds every key; should another write have answered first with
            # an older copy, these keys are as written all the same
            for k, v in changed.items():
                if v:
                    self._texts[k] = v
                else:
                    self._texts.pop(k, None)
        return True


def status_configmap(namespace: str, name: str, instance: str, data: Obj) -> Obj:
    """The body of instance ``instance``'s status ConfigMap holding ``data``."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {MANAGED_BY_LABEL: MANAGED_BY, INSTANCE_LABEL: instance},
        },
        "data": data,
    }


def patch_keys(
    kube: Kube, namespace: str, name: str, instance: str, data: Obj, field_manager: str
) -> Obj:
    """Set (or, for None, remove) the ``data`` keys of the status ConfigMap by a merge
    patch of those keys alone, creating the ConfigMap when no sync has made it yet; the
    ConfigMap as the reply holds it."""
    path = resource_path("v1", "configmaps", namespace, name)
    subject = f"ConfigMap/{namespace}/{name}"
    patch: Obj = {"data": data}
    try:
        return kube.merge_patch(path, patch, field_manager=field_manager, subject=subject)
    except APINotFoundError:
        if all(v is None for v in data.values()):
            return {}  # nothing to remove from a ConfigMap that is not there
    body = status_configmap(namespace, name, instance, data)
    collection = resource_path("v1", "configmaps", namespace)
    try:
        return kube.create(collection, body, subject=subject, field_manager=field_manager)
    except APIConflictError:  # made meanwhile (a first sync): set the keys in it
        return kube.merge_patch(path, patch, field_manager=field_manager, subject=subject)


def _version(cm: Obj | None) -> int:
    text = str(((cm or {}).get("metadata") or {}).get("resourceVersion") or "")
    return int(text) if text.isdigit() else -1


class MemoryRecords:
    """Records held in memory alone, for a reconciler given no ConfigMap (unit tests,
    and the operator without a repository, which has no Git to roll back within)."""

    def __init__(self) -> None:
        self._texts: dict[str, str] = {}

    def get(self, key: str) -> str | None:
        return self._texts.get(key)

    def put(self, texts: Mapping[str, str]) -> bool:
        for k, v in texts.items():
            if v:
                self._texts[k] = v
            else:
                self._texts.pop(k, None)
        return True
