"""The daemon's read-only drift page: ``/``, ``/apps/<ns>/<name>``, ``/api/v1/apps[/<ns>/<name>]``.

Everything comes from memory: the operator's informer caches, the Git MyApps the sync
loop holds and the sync state it last recorded; the page sends no request to the API
server at all, so it can neither write nor add load however often it is polled. The
lines of a MyApp's fields come from the sync loop's last load of the manifests, when
that load read the revision the MyApp was applied from: a request reads and parses no
file, so its cost is that of one MyApp and its Deployment, however large the file that
declares it. Commits per line need a clone with history (``gitsync blame``).
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections import deque
from collections.abc import Callable
from typing import Final

from gitsync.daemon import page
from gitsync.daemon.httpproto import Request, Response, header
from gitsync.engine.blame import GitView, blame
from gitsync.gitops.sync import Syncer
from gitsync.model.api import Obj
from gitsync.reconcile.controller import Controller
from gitsync.source.gitblame import revision_sha, source_of

_NAME: Final = r"[a-z0-9](?:[-a-z0-9.]{0,251}[a-z0-9])?"
_APP_PAGE: Final = re.compile(rf"/apps/({_NAME})/({_NAME})")
_APP_API: Final = re.compile(rf"/api/v1/apps/({_NAME})/({_NAME})")
ROUTES: Final = ("/", "/ui.js", "/ui.css", "/api/v1/apps")


HISTORY: Final = page.HISTORY


class DriftPage:
    def __init__(
        self,
        controller: Controller,
        syncer: Syncer | None,
        replica_of: Callable[[str], str] | None = None,
        replicas: Callable[[], object] = lambda: None,
    ) -> None:
        #: with sharding, who serves a MyApp (by key), as the member Leases last said
        self.replica_of = replica_of
        #: something equal as long as ``replica_of`` answers the same (the page's ETag)
        self.replicas = replicas
        self.controller = controller
        self.syncer = syncer
        #: the last passes of this replica, oldest first (``record``)
        self.history: deque[Obj] = deque(maxlen=HISTORY)
        #: /api/v1/apps as last rendered: (what it was rendered from, body, ETag); an
        #: open page asks every second, and the body is built again only when one of
        #: the caches, the sync state, the history or who serves what has changed
        self._apps: tuple[object, str, str] | None = None
        self._lock = threading.Lock()

    def record(self, entry: Obj) -> None:
        """A pass of this replica, for the history (see :func:`page.pass_entry`)."""
        with self._lock:
            self.history.append(entry)

    def handles(self, path: str) -> bool:
        return path in ROUTES or bool(_APP_PAGE.fullmatch(path) or _APP_API.fullmatch(path))

    def handle(self, request: Request) -> Response:
        if request.method != "GET":
            # read-only by construction: there is nothing to POST to
            return Response(405, "method not allowed\n", headers=(("Allow", "GET"),))
        path = request.path
        if path == "/ui.js":
            return Response(200, page.SCRIPT, "text/javascript; charset=utf-8", _headers())
        if path == "/ui.css":
            return Response(200, page.STYLE, "text/css; charset=utf-8", _headers())
        if path == "/":
            html = page.index_html(self.apps())
            return Response(200, html, "text/html; charset=utf-8", _headers())
        if path == "/api/v1/apps":
            body, etag = self._apps_json()
            return _conditional(request, body, etag)
        m = _APP_PAGE.fullmatch(path) or _APP_API.fullmatch(path)
        assert m is not None  # handles() said so
        app = self.app(m.group(1), m.group(2))
        if app is None:
            return Response(404, "no such MyApp\n", headers=_headers())
        if path.startswith("/api/"):
            body = json.dumps(app, default=str)
            return _conditional(request, body, _etag(body))
        return Response(200, page.app_html(app), "text/html; charset=utf-8", _headers())

    # --- documents ---------------------------------------------------------------------------

    def apps(self) -> Obj:
        deployments = {
            f"{d['metadata'].get('namespace', '')}/{d['metadata']['name']}": d
            for d in self.controller.deployments.items()
        }
        with self._lock:
            history = list(self.history)
        return page.apps_doc(
            self.controller.myapps.items(),
            deployments,
            self._sync_state(),
            self.replica_of,
            history,
        )

    def _apps_json(self) -> tuple[str, str]:
        with self._lock:
            basis = (
                self.controller.myapps.version,
                self.controller.deployments.version,
                json.dumps(self._sync_state(), sort_keys=True),
                len(self.history),
                self.history[-1] if self.history else None,
                self.replicas(),
            )
            if self._apps is not None and self._apps[0] == basis:
                return self._apps[1], self._apps[2]
        body = json.dumps(self.apps(), default=str)
        etag = _etag(body)
        with self._lock:
            self._apps = (basis, body, etag)
        return body, etag

    def app(self, namespace: str, name: str) -> Obj | None:
        key = f"{namespace}/{name}"
        myapp = self.controller.myapps.get(key)
        if myapp is None:
            return None
        deployment = self.controller.deployments.get(key)
        rows = blame(
            myapp,
            deployment,
            self._git_view(key, myapp),
            self_manager=self.controller.config.field_manager,
            force_managers=self.controller.config.force_managers,
        )
        replica = None if self.replica_of is None else self.replica_of(key)
        return page.blame_doc(page.app_doc(myapp, deployment, replica), rows)

    def _sync_state(self) -> dict[str, str] | None:
        if self.syncer is None:
            return None
        state = self.syncer.state.last if self.syncer.state is not None else None
        return state.data() if state is not None else {}

    def _git_view(self, key: str, myapp: Obj) -> GitView | None:
        file, revision = source_of(myapp)
        if not file:
            return None
        declared = self.syncer.declared(key, revision_sha(revision)) if self.syncer else None
        if declared is None or declared.file != file:
            # not loaded here (a standby), or Git moved on: the body applied, no lines
            return GitView(file=file, revision=revision, obj=self.controller.ledger.git(key))
        return GitView(file=file, revision=revision, obj=declared.obj, field_lines=declared.lines)


def _headers() -> tuple[tuple[str, str], ...]:
    return page.SECURITY_HEADERS


def _etag(body: str) -> str:
    return '"' + hashlib.sha256(body.encode()).hexdigest()[:32] + '"'


def _conditional(request: Request, body: str, etag: str) -> Response:
    """The JSON, or 304 and no body when the client holds it already (``If-None-Match``):
    an open page that asks every second downloads only what changed. ``no-cache``: kept,
    but asked about each time."""
    own = tuple(h for h in _headers() if h[0] != "Cache-Control")
    headers = (*own, ("ETag", etag), ("Cache-Control", "no-cache"))
    held = {t.strip() for t in header(request, "If-None-Match").split(",")}
    if etag in held or "*" in held:
        return Response(304, "", "application/json", headers)
    return Response(200, body, "application/json", headers)
