"""Where the API server is and how to reach it, as kubectl finds out: the kubeconfig (or,
in a Pod, the service account), its TLS settings and proxy, and the namespace a command
uses when no flag names one. Also which transport failures mean that this configuration,
not the network, is wrong.
"""

from __future__ import annotations

import copy
import importlib.util
import os
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal
from urllib.parse import unquote, urlsplit

import urllib3
import yaml
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config
from kubernetes.client.rest import RESTClientObject, should_bypass_proxies
from kubernetes.config.config_exception import ConfigException

from gitsync.errors import ConfigError, one_line

#: where kubelet puts the Pod's own namespace (a module attribute: tests point it elsewhere)
SERVICEACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


@dataclass(frozen=True)
class Source:
    """Where the configuration comes from, and how a message names it: as the user gave
    it (``--kubeconfig /x``, ``$KUBECONFIG=/x``), so an error says which one was tried."""

    kind: Literal["flag", "env", "home", "in-cluster"]
    path: str = ""

    @property
    def label(self) -> str:
        return {
            "flag": f"--kubeconfig {self.path}",
            "env": f"$KUBECONFIG={self.path}",
            "home": f"kubeconfig {self.path}",
            "in-cluster": "in-cluster configuration (no kubeconfig found)",
        }[self.kind]


def choose_source(kubeconfig: str | None, environ: Mapping[str, str], home_config: Path) -> Source:
    """kubectl's order: ``--kubeconfig``, else ``$KUBECONFIG`` (a list of files, as
    kubectl merges), else ``~/.kube/config``; a ``$KUBECONFIG`` or home file that does
    not exist gives way to the in-cluster configuration when in a Pod."""
    if kubeconfig:
        return Source("flag", kubeconfig)
    in_pod = bool(environ.get("KUBERNETES_SERVICE_HOST"))
    env = environ.get("KUBECONFIG", "")
    if env:
        if in_pod and not any(Path(p).expanduser().is_file() for p in _paths(env)):
            return Source("in-cluster")
        return Source("env", env)
    if in_pod and not home_config.is_file():
        return Source("in-cluster")
    return Source("home", str(home_config))


def _paths(value: str) -> list[str]:
    return [p for p in value.split(os.pathsep) if p]


def load_configuration(
    kubeconfig: str | None = None, context: str | None = None
) -> k8s_client.Configuration:
    """The configuration from the source :func:`choose_source` picks; an error names that
    source as the user gave it, and the context when one was asked for."""
    source = choose_source(kubeconfig, os.environ, Path("~/.kube/config").expanduser())
    cfg = k8s_client.Configuration()
    if source.kind == "in-cluster":
        if context:
            raise ConfigError(
                f"--context {context}: no kubeconfig to take it from ({source.label})"
            )
        try:
            # refresh_token=True: bound service-account tokens expire; the hook
            # rereads the projected token file before it does
            k8s_config.load_incluster_config(cfg, try_refresh_token=True)  # type: ignore[no-untyped-call]
        except (ConfigException, OSError) as e:
            raise ConfigError(f"cannot load the {source.label}: {e}") from e
        return cfg
    missing = [p for p in _paths(source.path) if not Path(p).expanduser().is_file()]
    if missing and len(missing) == len(_paths(source.path)):
        hint = "" if source.kind != "home" else " (and not in a Pod: no in-cluster configuration)"
        raise ConfigError(f"{source.label}: no such file{hint}")
    try:
        contexts, _ = k8s_config.list_kube_config_contexts(source.path)  # type: ignore[no-untyped-call]
        names = [str(c.get("name")) for c in contexts or []]
        if context and context not in names:
            known = ", ".join(names) or "none"
            raise ConfigError(f"--context {context}: no such context in {source.label} ({known})")
        k8s_config.load_kube_config(source.path, context, client_configuration=cfg)  # type: ignore[no-untyped-call]
    except (ConfigException, OSError, ValueError, KeyError, TypeError, yaml.YAMLError) as e:
        where = source.label + (f", context {context}" if context else "")
        # (a YAML error quotes the file's text where it failed: one line, cut)
        raise ConfigError(
            f"cannot load Kubernetes configuration from {where}: {one_line(str(e))}"
        ) from e
    return cfg


def default_namespace(kubeconfig: str | None = None, context: str | None = None) -> str:
    """kubectl's namespace when no ``-n`` is given: the kubeconfig context's, else, in a
    Pod (no kubeconfig), the Pod's own (``POD_NAMESPACE``, then the service account's
    namespace file, as client-go reads them), else ``default``.

    The same kubeconfig-then-in-cluster order as :func:`load_configuration`; a kubeconfig
    that cannot be read gives ``default`` here (loading it says why).
    """
    try:
        contexts, current = k8s_config.list_kube_config_contexts(kubeconfig)  # type: ignore[no-untyped-call]
    except (ConfigException, OSError, ValueError, KeyError, TypeError):
        if kubeconfig or context:
            return "default"
        return _in_cluster_namespace()
    if context:
        current = next((c for c in contexts or [] if c.get("name") == context), None)
    namespace = ((current or {}).get("context") or {}).get("namespace")
    return str(namespace) if namespace else "default"


def context_user(kubeconfig: str | None = None, context: str | None = None) -> str:
    """The user the kubeconfig context names (its nickname in the file, as ``kubectl
    config view`` shows it), or "" when there is none (in a Pod, or no kubeconfig)."""
    try:
        contexts, current = k8s_config.list_kube_config_contexts(kubeconfig)  # type: ignore[no-untyped-call]
    except (ConfigException, OSError, ValueError, KeyError, TypeError):
        return ""
    if context:
        current = next((c for c in contexts or [] if c.get("name") == context), None)
    user = ((current or {}).get("context") or {}).get("user")
    return str(user) if user else ""


def _in_cluster_namespace() -> str:
    return own_namespace() or "default"


def own_namespace() -> str | None:
    """The namespace of the Pod gitsync runs in (``POD_NAMESPACE``, then the service
    account's namespace file, as client-go reads them), or None outside a Pod."""
    if os.environ.get("POD_NAMESPACE"):
        return os.environ["POD_NAMESPACE"]
    try:
        return SERVICEACCOUNT_NAMESPACE.read_text().strip() or None
    except OSError:
        return None


def rest_client(config: k8s_client.Configuration, pool_size: int) -> RESTClientObject:
    """The ``kubernetes`` package's own connection pool (``RESTClientObject``): it applies
    the configuration's TLS settings (CA file or data, client certificate, tls-server-name
    as SNI) and proxy (the kubeconfig's ``proxy-url``, else ``HTTPS_PROXY`` ..., unless
    ``no_proxy`` names the server) as the client that loaded the configuration does.

    On a copy of the configuration, gitsync's choices: ``pool_size`` connections; no
    retries below ours (urllib3 would repeat a timed-out GET, so a call would outlast its
    timeout; the callers retry: the 429 throttle, the informers' relists, the work
    queue); credentials in the proxy URL sent as ``Proxy-Authorization``, as curl and
    kubectl send them (the package leaves them out); and a proxy it cannot use is a
    :class:`ConfigError` naming it, not an ImportError at the first request.
    """
    cfg = copy.copy(config)
    cfg.connection_pool_maxsize = pool_size
    cfg.retries = False
    proxy = cfg.proxy
    if proxy and not should_bypass_proxies(cfg.host, no_proxy=cfg.no_proxy or ""):
        parts = urlsplit(proxy)
        where = f"{parts.hostname}:{parts.port}" if parts.port else str(parts.hostname)
        scheme = parts.scheme.lower()
        if scheme.startswith("socks"):
            # (urllib3's SOCKS pool takes the credentials from the URL itself)
            if importlib.util.find_spec("socks") is None:
                raise ConfigError(
                    f"proxy {where}: a SOCKS proxy needs the PySocks package installed"
                )
        elif scheme not in ("http", "https") or not parts.hostname:
            raise ConfigError(f"proxy {where}: only http, https and socks proxies are supported")
        elif parts.username is not None:
            auth = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
            cfg.proxy_headers = dict(cfg.proxy_headers or {}) | urllib3.make_headers(
                proxy_basic_auth=auth
            )
    return RESTClientObject(cfg)


def tls_problem(e: BaseException) -> str:
    """What is wrong with the TLS configuration, if ``e`` (or what it wraps) says so."""
    seen: list[BaseException] = []
    todo: list[BaseException] = [e]
    while todo:
        cur = todo.pop()
        if cur in seen:
            continue
        seen.append(cur)
        todo += [a for a in cur.args if isinstance(a, BaseException)]
        todo += [x for x in (cur.__cause__, cur.__context__) if x is not None]
    for cur in seen:
        if isinstance(cur, ssl.SSLCertVerificationError):
            return f"the server's certificate is not trusted ({cur.verify_message})"
        if isinstance(cur, ssl.SSLError) and "ALERT" in str(cur.reason or ""):
            # the server ended the handshake on purpose: no network trouble, a refusal
            return (
                f"the server refused the handshake ({cur.reason}): a client certificate it"
                " does not accept, or TLS settings it does not support"
            )
        if isinstance(cur, OSError) and not isinstance(cur, ssl.SSLError) and cur.filename:
            return f"cannot read {cur.filename}: {cur.strerror}"
        if isinstance(cur, (FileNotFoundError, PermissionError)):
            return f"cannot read a certificate or key file: {cur.strerror}"
        if isinstance(cur, ssl.SSLError) and cur.library == "PEM":
            return f"a certificate or key file is not valid PEM ({cur.reason})"
    return ""
