"""The daemon's HTTP routes: probes, /metrics, the push webhook and the drift page.

Pure request-to-response: the server (:mod:`gitsync.daemon.httpserver`) reads and writes
the bytes, and what a route needs of the daemon is the narrow :class:`Host` below, so the
routes are tested with a stand-in daemon and no socket.
"""

from __future__ import annotations

from typing import Literal, Protocol

from gitsync.daemon import metrics as metricslib
from gitsync.daemon import webhook
from gitsync.daemon.hosts import AllowedHosts
from gitsync.daemon.httpproto import Request, Response
from gitsync.daemon.ui import DriftPage

#: what asking for a sync came to: run here, passed to the leader, or not passed on
SyncRequest = Literal["accepted", "forwarded", "failed"]
PROBES = ("/healthz", "/readyz")


class Host(Protocol):
    """What the routes ask of the daemon."""

    @property
    def metrics(self) -> metricslib.Metrics: ...

    def alive(self) -> bool:
        """Whether /healthz is ok: no thread crashed beyond its restarts."""
        ...

    def ready(self) -> bool:
        """Whether /readyz is ok: caches synced and, when leading, the first pass done."""
        ...

    def request_sync(self, delivery: str = "") -> SyncRequest:
        """A sync now: on the leader, or passed to it by a standby (``delivery``: the
        push's id, as the Git host sent it, for the pass's notification)."""
        ...

    def request_sync_later(self, delay: float, delivery: str = "") -> None:
        """The same, ``delay`` seconds from now (a push over the webhook rate limit)."""
        ...


class Routes:
    def __init__(
        self,
        host: Host,
        receiver: webhook.Receiver,
        page: DriftPage | None,
        allowed_hosts: AllowedHosts | None = None,
    ) -> None:
        self.host = host
        self.receiver = receiver
        #: the read-only drift page; None with --no-ui
        self.page = page
        #: the Host names the page answers (probes, /metrics and the webhook answer any)
        self.allowed_hosts = allowed_hosts or AllowedHosts()

    @staticmethod
    def inline(request: Request) -> bool:
        """Probes never queue behind a webhook a standby is passing to the leader."""
        return request.method == "GET" and request.path in PROBES

    @staticmethod
    def urgent(request: Request) -> bool:
        """A push is never queued behind the drift page, however hard that is polled."""
        return request.path == "/hooks/git"

    def handle(self, request: Request) -> Response:
        if request.path == "/hooks/git":
            if request.method != "POST":
                return Response(405, "method not allowed\n", headers=(("Allow", "POST"),))
            return self._webhook(request)
        if self.page is not None and self.page.handles(request.path):
            if not self.allowed_hosts.allows(request.headers, request.local):
                # DNS rebinding (see hosts). 421, not 403: not "you may not", but "this
                # server does not serve that name", which is what a rebound name is
                return Response(421, "misdirected request: this Host is not served here\n")
            return self.page.handle(request)
        if request.path not in (*PROBES, "/metrics"):
            return Response(404, "not found\n")
        if request.method != "GET":
            return Response(405, "method not allowed\n", headers=(("Allow", "GET"),))
        if request.path == "/healthz":
            ok = self.host.alive()
            return Response(200 if ok else 503, "ok\n" if ok else "a thread crashed\n")
        if request.path == "/readyz":
            ok = self.host.ready()
            return Response(200 if ok else 503, "ok\n" if ok else "not ready\n")
        return Response(200, self.host.metrics.render(), metricslib.CONTENT_TYPE)

    def _webhook(self, request: Request) -> Response:
        decision = self.receiver.receive(request.headers, request.body)
        verdict = decision.verdict

        def answer(result: str, code: int, text: str) -> Response:
            self.host.metrics.inc("gitsync_webhook_requests_total", result=result)
            return Response(code, text + "\n")

        if verdict == "unauthorized":
            return answer("unauthorized", 401, "unauthorized")
        if verdict == "duplicate":
            # 2xx: the Git host must not see a retry of a handled delivery as a failure
            return answer("duplicate", 200, "duplicate delivery: already handled")
        if verdict == "pending":
            return answer("limited", 202, "a sync is already due (rate limit); it includes this")
        delivery = webhook.delivery_id(decision.keys)
        if verdict == "later":
            self.host.request_sync_later(decision.delay, delivery)
            return answer("limited", 202, f"sync in {decision.delay:.1f}s (rate limit)")
        result = self.host.request_sync(delivery)
        if result == "failed":
            self.receiver.forget(decision)  # so that the Git host's retry is not a duplicate
            return answer(result, 503, "could not reach the leader")
        text = "sync triggered" if result == "accepted" else "sync requested from the leader"
        return answer(result, 202, text)
