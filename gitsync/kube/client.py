"""The one seam to the Kubernetes API server: plain JSON over the kubernetes client's pool.

The ``kubernetes`` package loads the configuration (:mod:`gitsync.kube.kubeconfig`:
kubeconfig, contexts, exec plugins, in-cluster service-account tokens with their
refresh hook), and its ``RESTClientObject`` holds the connections (TLS settings,
tls-server-name, proxy and no_proxy, as that client applies them). Only its generated
``ApiClient`` is left out: it would deserialize every reply into typed models, which
cost ~14x more than ``json.loads`` into plain dicts and are never needed on our paths
(design §4). So paths, query strings and bodies are built here, and replies decoded here.

Every request has a timeout; every failure is mapped into gitsync's exception
tree here (``APINotFoundError``, ``APIConflictError`` ...) and nowhere else. A
server that cannot be trusted or that refuses the credentials is a permanent
``APIConfigError``: waiting does not fix a wrong CA or token.
"""

from __future__ import annotations

import builtins
import collections
import contextlib
import json
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Final
from urllib.parse import quote, urlencode

import urllib3
from kubernetes import client as k8s_client
from kubernetes.client.exceptions import ApiException
from kubernetes.client.rest import RESTResponse

from gitsync import __version__
from gitsync.errors import (
    MAX_BODY,
    APIClientError,
    APIConfigError,
    APIConflictError,
    APIError,
    APIForbiddenError,
    APIInvalidError,
    APINotFoundError,
    APIServerError,
    APITimeoutError,
    APITooManyRequestsError,
)
from gitsync.kube.kubeconfig import default_namespace, rest_client, tls_problem
from gitsync.kube.kubeconfig import load_configuration as load_configuration  # where callers look
from gitsync.kube.listreply import read_list
from gitsync.model.api import API_VERSION, KIND, PLURAL, Obj

APPLY_PATCH = "application/apply-patch+yaml"  # JSON is YAML: SSA bodies are sent as JSON
Params = Mapping[str, str | int | bool] | None


def resource_path(
    api_version: str,
    plural: str,
    namespace: str | None = None,
    name: str | None = None,
    subresource: str | None = None,
) -> str:
    """``/apis/apps/v1/namespaces/ns/deployments/web/status`` and friends."""
    base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
    parts = [base]
    if namespace:
        parts.append(f"namespaces/{quote(namespace, safe='')}")
    parts.append(plural)
    if name:
        parts.append(quote(name, safe=""))
    if subresource:
        parts.append(subresource)
    return "/".join(parts)


#: the kinds gitsync reads and writes, by kind: (apiVersion, plural)
PLURALS: Final = {KIND: (API_VERSION, PLURAL), "Deployment": ("apps/v1", "deployments")}


def path_of(kind: str, namespace: str, name: str | None = None, sub: str | None = None) -> str:
    """The API path of a MyApp or a Deployment (``kind`` is one of :data:`PLURALS`)."""
    api_version, plural = PLURALS[kind]
    return resource_path(api_version, plural, namespace, name, sub)


class Hangup:
    """Ends a watch from another thread (its informer's label selector changed): the
    stream open now is shut down, and none opens until :meth:`reset`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._response: Any = None
        self.hung = False

    def __call__(self) -> None:
        # under the lock: the reading thread detaches (under it) before it closes the
        # response, so a response attached here is not closed while it is shut down
        with self._lock:
            self.hung = True
            if self._response is None:
                return
            # a stream that ended by itself an instant ago has nothing left to end:
            # urllib3 closed its socket (OSError, ValueError) or gave its connection
            # back to the pool (RuntimeError) before the reading thread could detach
            with contextlib.suppress(OSError, RuntimeError, ValueError):
                self._response.shutdown()  # the reading thread sees the stream end

    def reset(self) -> None:
        with self._lock:
            self.hung = False

    def attach(self, response: Any) -> bool:
        """Whether a stream may be read on ``response`` (False: hung up already)."""
        with self._lock:
            if not self.hung:
                self._response = response
            return not self.hung

    def detach(self) -> None:
        with self._lock:
            self._response = None


class Kube:
    """A small JSON client. Thread-safe (its urllib3 pools are)."""

    def __init__(
        self,
        config: k8s_client.Configuration,
        *,
        timeout: float = 30.0,
        pool_size: int = 64,  # enough for the sync pass's and the workers' threads
        namespace: str = "default",
    ) -> None:
        self.config = config
        self.host = config.host.rstrip("/")
        self.timeout = timeout
        #: the namespace of commands given no -n: the context's or the Pod's (kubectl's rule)
        self.namespace = namespace
        self._rest = rest_client(config, pool_size)
        self._lock = threading.Lock()
        #: requests sent, by verb (GET, LIST, WATCH, APPLY, PATCH, ...): for metrics and benchmarks
        self.requests: collections.Counter[str] = collections.Counter()
        #: the daemon adds its replica's identity: the API server's audit log then says
        #: which replica sent each request
        self.user_agent = f"gitsync/{__version__}"

    @classmethod
    def from_kubeconfig(
        cls, kubeconfig: str | None = None, context: str | None = None, **kw: Any
    ) -> Kube:
        config = load_configuration(kubeconfig, context)
        return cls(config, namespace=default_namespace(kubeconfig, context), **kw)

    # --- requests ----------------------------------------------------------

    def _headers(self, content_type: str | None) -> dict[str, str]:
        headers = {"Accept": "application/json", "User-Agent": self.user_agent}
        if content_type:
            headers["Content-Type"] = content_type
        # asked every time: the configuration's hook refreshes expiring tokens
        token = self.config.get_api_key_with_prefix("BearerToken", alias="authorization")
        if token:
            headers["Authorization"] = token
        return headers

    def _count(self, verb: str) -> None:
        with self._lock:
            self.requests[verb] += 1

    def request(
        self,
        method: str,
        path: str,
        *,
        params: Params = None,
        body: Obj | None = None,
        content_type: str | None = None,
        subject: str = "",
        timeout: float | None = None,
        verb: str | None = None,
    ) -> Obj:
        reply = self._exchange(
            method,
            path,
            params=params,
            body=body,
            content_type=content_type,
            subject=subject,
            timeout=timeout,
            verb=verb,
        )
        if not reply:
            return {}
        try:
            result: Obj = json.loads(reply)
        except ValueError as e:
            raise APIServerError(subject or path, "the API server sent invalid JSON") from e
        return result

    def _exchange(
        self,
        method: str,
        path: str,
        *,
        params: Params,
        body: Obj | None,
        content_type: str | None,
        subject: str,
        timeout: float | None,
        verb: str | None,
    ) -> bytes:
        """One request; the reply's body, or the error its status means."""
        url = self.host + path
        if params:
            url += "?" + urlencode({k: _param(v) for k, v in params.items()})
        if body is not None and content_type is None:
            content_type = "application/json"
        # an apply body goes as bytes, exactly as encode_body writes it (the server reads
        # it as YAML); the client serializes a JSON body itself (json.dumps: the same
        # values, escaped as ASCII, which JSON reads alike)
        data: Obj | bytes | None = body
        if body is not None and content_type == APPLY_PATCH:
            data = encode_body(body)
        self._count(verb or method)
        try:
            resp: RESTResponse = self._rest.request(  # type: ignore[no-untyped-call]
                method,
                url,
                headers=self._headers(content_type),
                body=data,
                _request_timeout=timeout or self.timeout,
            )
        except (urllib3.exceptions.HTTPError, ApiException) as e:
            raise self._transport_error(subject or path, f"{method} failed", e) from e
        try:
            reply: bytes = resp.read()  # type: ignore[no-untyped-call]
        except urllib3.exceptions.HTTPError as e:
            raise self._transport_error(subject or path, f"{method} failed", e) from e
        finally:
            resp.response.release_conn()
        if resp.status == 401:
            raise self._unauthorized(subject or path)
        if resp.status >= 400:
            raise map_error(subject or path, resp.status, reply, resp.headers)
        return reply

    def stream(
        self,
        path: str,
        *,
        params: Params = None,
        subject: str = "",
        read_timeout: float = 60.0,
        hangup: Hangup | None = None,
    ) -> Iterator[Obj]:
        """A watch: yields each event, one JSON object per line.

        The read timeout bounds how long the stream may stay silent; with
        bookmarks and ``timeoutSeconds`` below it, silence means the connection
        is half-open, and the caller's list+watch loop starts over. ``hangup`` ends
        it from another thread (the stream then ends, or raises if cut mid-line).
        """
        url = self.host + path
        if params:
            url += "?" + urlencode({k: _param(v) for k, v in params.items()})
        self._count("WATCH")
        try:
            reply: RESTResponse = self._rest.request(  # type: ignore[no-untyped-call]
                "GET", url, headers=self._headers(None), _request_timeout=(10.0, read_timeout)
            )
        except (urllib3.exceptions.HTTPError, ApiException) as e:
            raise self._transport_error(subject or path, "watch failed", e) from e
        resp = reply.response
        drained = False
        try:
            if hangup is not None and not hangup.attach(resp):
                return
            if resp.status == 401:
                raise self._unauthorized(subject or path)
            if resp.status >= 400:
                raise map_error(subject or path, resp.status, resp.read(), resp.headers)
            buf = b""
            for chunk in resp.stream(64 * 1024, decode_content=True):
                buf += chunk
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    if line.strip():
                        yield json.loads(line)
            drained = True
        except urllib3.exceptions.HTTPError as e:
            raise APITimeoutError(subject or path, f"watch interrupted: {_short(e)}") from e
        finally:
            if hangup is not None:
                hangup.detach()
            if not drained:
                # left unread (hung up, abandoned, broken): its connection must not go
                # back to the pool, where the next request would read the rest of a watch
                resp.close()
            resp.release_conn()
            resp.close()

    def check(self) -> None:
        """One cheap request (``/version``, readable by anyone authenticated), so that a
        command fails at once, with the reason, when the server cannot be used at all."""
        self.get("/version")

    def _transport_error(self, subject: str, what: str, e: Exception) -> APIError:
        """No reply. Temporary (a timeout, a refused connection), unless TLS says the
        configuration is wrong: the server's certificate is not trusted, ours is refused,
        or a certificate file cannot be read. Those are permanent and say so. (The
        client wraps a TLS failure in an ``ApiException``; the cause is kept.)"""
        problem = tls_problem(e)
        if problem:
            return APIConfigError(
                subject,
                f"TLS with the API server {self.host} failed: {problem}; check the "
                "kubeconfig's certificate-authority, client certificate and key, and "
                "tls-server-name",
            )
        return APITimeoutError(subject, f"{what}: {_short(e)}")

    def _unauthorized(self, subject: str) -> APIConfigError:
        return APIConfigError(
            subject,
            f"the API server {self.host} did not accept the credentials (401 Unauthorized);"
            " check the kubeconfig's user (token, client certificate) or renew it",
            status=401,
            reason="Unauthorized",
        )

    # --- verbs -------------------------------------------------------------

    def get(self, path: str, *, subject: str = "", params: Params = None) -> Obj:
        return self.request("GET", path, subject=subject, params=params)

    def list(self, path: str, *, params: Params = None, subject: str = "") -> Obj:
        return self.request("GET", path, params=params, subject=subject, verb="LIST")

    def list_each(
        self,
        path: str,
        each: Callable[[Obj, Obj], None],
        *,
        params: Params = None,
        subject: str = "",
    ) -> Obj:
        """A LIST whose items are given to ``each`` one at a time, as they are decoded,
        with the list's members read before them (see :mod:`gitsync.kube.listreply`);
        the list without its items. What ``each`` raises is raised as it is."""
        reply = self._exchange(
            "GET",
            path,
            params=params,
            body=None,
            content_type=None,
            subject=subject,
            timeout=None,
            verb="LIST",
        )
        try:
            return read_list(reply, each)
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise APIServerError(subject or path, "the API server sent invalid JSON") from e

    def list_items(
        self, path: str, *, params: Params = None, subject: str = "", page: int = 500
    ) -> builtins.list[Obj]:
        """Every item of a list, read ``page`` items at a time (``limit`` and
        ``continue``): thousands of objects are never one reply, held whole by the server
        and here."""
        query: dict[str, str | int | bool] = {**(params or {}), "limit": page}
        items: builtins.list[Obj] = []
        while True:
            reply = self.list(path, params=query, subject=subject)
            items += reply.get("items") or []
            cont = (reply.get("metadata") or {}).get("continue")
            if not cont:
                return items
            query["continue"] = cont

    def apply(
        self,
        path: str,
        body: Obj,
        *,
        field_manager: str,
        force: bool = False,
        dry_run: bool = False,
        subject: str = "",
    ) -> Obj:
        """Server-side apply. ``path`` names the object (or its /status)."""
        params: dict[str, str | int | bool] = {"fieldManager": field_manager}
        if force:
            params["force"] = True
        if dry_run:
            params["dryRun"] = "All"
        return self.request(
            "PATCH",
            path,
            params=params,
            body=body,
            content_type=APPLY_PATCH,
            subject=subject,
            verb="DRYRUN" if dry_run else "APPLY",
        )

    def create(self, path: str, body: Obj, *, subject: str = "", field_manager: str = "") -> Obj:
        params = {"fieldManager": field_manager} if field_manager else None
        return self.request("POST", path, body=body, subject=subject, params=params)

    def merge_patch(self, path: str, body: Obj, *, field_manager: str, subject: str = "") -> Obj:
        """A JSON merge patch (RFC 7386): the keys given are set, those given as None
        removed, the rest left as they are, whoever owns them."""
        return self.request(
            "PATCH",
            path,
            params={"fieldManager": field_manager},
            body=body,
            content_type="application/merge-patch+json",
            subject=subject,
        )

    def delete(self, path: str, *, subject: str = "", body: Obj | None = None) -> Obj:
        return self.request("DELETE", path, subject=subject, body=body)

    def close(self) -> None:
        self._rest.close()


def _param(v: str | int | bool) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


#: characters written as ``\\uXXXX`` although JSON allows them raw: the API server reads
#: an apply body as YAML, which refuses C1 controls (and DEL) raw, reads NEL, U+2028
#: and U+2029 as line breaks, and a BOM as a stream mark; lone surrogates cannot be
#: sent raw at all
_YAML_UNSAFE: Final = str.maketrans(
    {c: f"\\u{c:04x}" for c in (*range(0x7F, 0xA0), 0x2028, 0x2029, 0xFEFF, *range(0xD800, 0xE000))}
)


def encode_body(body: Obj) -> bytes:
    """A request body as JSON that reads the same as JSON and as YAML.

    Not ``ensure_ascii``: it writes a character beyond U+FFFF (an emoji) as a pair of
    surrogate escapes, which the server's YAML reader refuses, so no MyApp with one
    could be applied. Such characters go raw (UTF-8); only those above are escaped.
    """
    text = json.dumps(body, separators=(",", ":"), ensure_ascii=False)
    return text.translate(_YAML_UNSAFE).encode()


def _short(e: Exception) -> str:
    return str(e)[:MAX_BODY]


def map_error(
    subject: str, status: int, data: bytes, headers: Mapping[str, str] | None = None
) -> APIError:
    """Turn an API server reply into the matching gitsync error."""
    try:
        st: Obj = json.loads(data) if data else {}
    except ValueError:
        st = {}
    if not isinstance(st, dict):
        st = {}
    message = str(st.get("message") or data[:MAX_BODY].decode(errors="replace") or status)
    reason = str(st.get("reason", ""))
    causes = [
        f"{c.get('field', '')}: {c.get('message', '')}".lstrip(": ")
        for c in (st.get("details") or {}).get("causes", [])
    ]
    kw: dict[str, Any] = {"status": status, "reason": reason}
    if status == 404:
        return APINotFoundError(subject, message, **kw)
    if status == 403:
        return APIForbiddenError(subject, message, **kw)
    if status == 409:
        return APIConflictError(subject, message, causes, **kw)
    if status == 422:
        return APIInvalidError(subject, message, causes, **kw)
    if status == 429:
        retry = (headers or {}).get("Retry-After", "1")
        try:
            after = float(retry)
        except ValueError:
            after = 1.0
        return APITooManyRequestsError(subject, message, after, **kw)
    if status >= 500:
        return APIServerError(subject, message, **kw)
    return APIClientError(subject, message, **kw)
