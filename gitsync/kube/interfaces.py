"""The narrow interfaces the loop depends on, instead of the concrete client.

The controller, the reconcile steps and the sync pass each take exactly what they
use: a ``Cache`` to read (an :class:`~gitsync.kube.informer.Informer`), a ``Reader``
for the rare uncached read, a ``Writer`` and a ``StatusWriter`` to change the
cluster (an :class:`~gitsync.kube.apply.Applier`), a ``Recorder`` for Events. The
informer's transport (``ListWatcher``) and the leader's (``LeaseClient``) are
seams of their own, so each can be driven by a scripted fake in unit tests, while
:class:`~gitsync.kube.client.Kube` satisfies them all in production.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Literal, Protocol

from gitsync.model.api import Obj

if TYPE_CHECKING:
    from gitsync.kube.client import Hangup

EventType = Literal["Normal", "Warning"]

Params = Mapping[str, Any] | None


class Cache(Protocol):
    """Objects by ``namespace/name``, as a watch last showed them."""

    #: how many times the cache was listed whole (a relist may follow events missed)
    relists: int

    def get(self, key: str) -> Obj | None: ...

    def items(self) -> list[Obj]: ...

    def observe(self, obj: Obj) -> None:
        """Put a write's reply in the cache ahead of its watch event."""


class Reader(Protocol):
    """Uncached reads of the API server."""

    def get(self, path: str, *, subject: str = "", params: Params = None) -> Obj: ...

    def list(self, path: str, *, params: Params = None, subject: str = "") -> Obj: ...


class Client(Reader, Protocol):
    """Reads and server-side apply by path: for objects no cache holds (namespaces,
    the sync state ConfigMap)."""

    def apply(
        self,
        path: str,
        body: Obj,
        *,
        field_manager: str,
        force: bool = False,
        dry_run: bool = False,
        subject: str = "",
    ) -> Obj: ...


class Writer(Protocol):
    """Server-side apply and guarded delete of objects."""

    def apply(self, obj: Obj, *, force: bool = False, dry_run: bool = False) -> Obj: ...

    def delete(
        self, kind: str, namespace: str, name: str, uid: str, resource_version: str | None = None
    ) -> None: ...

    def remove_annotation(self, kind: str, namespace: str, name: str, key: str) -> Obj: ...


class RecordStore(Protocol):
    """gitsync's own records by key, where only gitsync writes
    (:class:`~gitsync.kube.records.Records`): what a decision may rest on, unlike a
    status anyone with ``myapps/status`` may write."""

    def get(self, key: str) -> str | None: ...

    def put(self, texts: Mapping[str, str]) -> bool:
        """Set each key's text at once ("" removes the key); False when they do not fit."""


class StatusWriter(Protocol):
    """Server-side apply of a MyApp's status subresource."""

    def apply_status(self, namespace: str, name: str, status: Obj) -> Obj: ...


class Recorder(Protocol):
    """Kubernetes Events about an object."""

    def emit(
        self,
        obj: Obj,
        type_: EventType,
        reason: str,
        message: str,
        details: Obj | None = None,
    ) -> None: ...


class ListWatcher(Protocol):
    """What an informer needs of the API server: a paged LIST, its items handed over one
    at a time, and a watch stream."""

    def list_each(
        self,
        path: str,
        each: Callable[[Obj, Obj], None],
        *,
        params: Params = None,
        subject: str = "",
    ) -> Obj: ...

    def stream(
        self,
        path: str,
        *,
        params: Params = None,
        subject: str = "",
        read_timeout: float = ...,
        hangup: Hangup | None = ...,
    ) -> Iterator[Obj]: ...


class LeaseClient(Protocol):
    """What leader election needs of the API server: one bounded request at a time."""

    def request(
        self,
        method: str,
        path: str,
        *,
        body: Obj | None = None,
        params: Params = None,
        subject: str = "",
        timeout: float | None = None,
    ) -> Obj: ...
