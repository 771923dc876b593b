"""In-memory stand-ins for the narrow interfaces of gitsync.kube.interfaces, for unit tests
of the reconcile steps, the controller's loop and the sync pass.

``FakeCluster`` holds objects by path and answers server-side applies the way the
steps rely on: the body's fields merged over what is stored, a uid and a new
resourceVersion on each write, nothing stored on a dry-run. It is no API server
(no managedFields, no defaulting): what it checks is the steps' decisions, and the
integration tests check the same flows against the real one.
"""

from __future__ import annotations

import copy
import itertools
import json
from typing import Any

from gitsync.errors import APINotFoundError, GitsyncError
from gitsync.kube.client import path_of
from gitsync.kube.interfaces import EventType, Params
from gitsync.model.api import Obj, key_of


def merged(live: Any, body: Any) -> Any:
    if isinstance(live, dict) and isinstance(body, dict):
        return {**live, **{k: merged(live.get(k), v) for k, v in body.items()}}
    return copy.deepcopy(body)


class FakeCache:
    """An informer's cache: what the "watch" last showed, and writes observed ahead."""

    def __init__(self) -> None:
        self.objects: dict[str, Obj] = {}
        self.relists = 0

    def get(self, key: str) -> Obj | None:
        return self.objects.get(key)

    def items(self) -> list[Obj]:
        return list(self.objects.values())

    @property
    def version(self) -> str:
        """Equal while the objects are (tests change ``objects`` directly)."""
        return json.dumps(self.objects, sort_keys=True, default=str)

    def observe(self, obj: Obj) -> None:
        self.objects[key_of(obj)] = obj


class FakeCluster:
    """Reader, Client, Writer and StatusWriter at once. ``fail`` maps a verb
    (``apply``, ``status``, ``delete``) to an error raised on its next call."""

    def __init__(self) -> None:
        self.store: dict[str, Obj] = {}
        self.writes: list[tuple[str, str]] = []  # (verb, path) of each request that writes
        self.fail: dict[str, GitsyncError] = {}
        self._rv = itertools.count(100)
        self._uid = itertools.count(1)

    # --- Reader / Client -----------------------------------------------------------

    def get(self, path: str, *, subject: str = "", params: Params = None) -> Obj:
        if path not in self.store:
            raise APINotFoundError(subject or path, "not found")
        return copy.deepcopy(self.store[path])

    def list(self, path: str, *, params: Params = None, subject: str = "") -> Obj:
        prefix = path.rstrip("/") + "/"
        return {
            "items": [
                copy.deepcopy(o)
                for p, o in self.store.items()
                if p.startswith(prefix) and "/" not in p[len(prefix) :]
            ]
        }

    def apply(self, *args: Any, **kw: Any) -> Obj:
        """``apply(obj, force=, dry_run=)`` as a Writer, or ``apply(path, body, ...)``
        as a Client."""
        if isinstance(args[0], str):
            path, body = args[0], args[1]
        else:
            body = args[0]
            meta = body["metadata"]
            path = path_of(body["kind"], meta["namespace"], meta["name"])
        return self._write("apply", path, body, dry_run=bool(kw.get("dry_run")))

    # --- Writer / StatusWriter -------------------------------------------------------

    def apply_status(self, namespace: str, name: str, status: Obj) -> Obj:
        self._raise("status")
        path = path_of("MyApp", namespace, name)
        stored = self.store[path]
        stored["status"] = copy.deepcopy(status)
        stored["metadata"]["resourceVersion"] = str(next(self._rv))
        self.writes.append(("status", path))
        return copy.deepcopy(stored)

    def delete(
        self, kind: str, namespace: str, name: str, uid: str, resource_version: str | None = None
    ) -> None:
        self._raise("delete")
        path = path_of(kind, namespace, name)
        if path not in self.store or self.store[path]["metadata"]["uid"] != uid:
            raise APINotFoundError(f"{kind}/{namespace}/{name}", "not found")
        del self.store[path]
        self.writes.append(("delete", path))

    def remove_annotation(self, kind: str, namespace: str, name: str, key: str) -> Obj:
        self._raise("patch")
        path = path_of(kind, namespace, name)
        stored = self.store[path]
        stored["metadata"].get("annotations", {}).pop(key, None)
        stored["metadata"]["resourceVersion"] = str(next(self._rv))
        self.writes.append(("patch", path))
        return copy.deepcopy(stored)

    # --- test helpers -------------------------------------------------------------

    def _write(self, verb: str, path: str, body: Obj, *, dry_run: bool) -> Obj:
        self._raise(verb)
        old = self.store.get(path)
        new: Obj = merged(old or {}, body)
        meta = new.setdefault("metadata", {})
        meta["uid"] = (old or {}).get("metadata", {}).get("uid") or f"uid-{next(self._uid)}"
        # as the API server: a write that changes the spec makes a new generation
        seen = int((old or {}).get("metadata", {}).get("generation") or 0)
        meta["generation"] = seen + 1 if not old or new.get("spec") != old.get("spec") else seen
        if dry_run:
            meta["resourceVersion"] = (old or {}).get("metadata", {}).get("resourceVersion", "")
            return new
        meta["resourceVersion"] = str(next(self._rv))
        self.store[path] = new
        self.writes.append((verb, path))
        return copy.deepcopy(new)

    def _raise(self, verb: str) -> None:
        error = self.fail.pop(verb, None)
        if error is not None:
            raise error


class FakeRecorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, str]] = []  # (type, reason, message)

    def emit(
        self, obj: Obj, type_: EventType, reason: str, message: str, details: Obj | None = None
    ) -> None:
        self.events.append((type_, reason, message))

    def reasons(self) -> list[str]:
        return [reason for _, reason, _ in self.events]
