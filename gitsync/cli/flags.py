"""A command's flags as one typed value, built once from click's keyword arguments.

click hands a command ``**kwargs`` of ``Any``; :func:`parse` turns them into a frozen
:class:`Flags` (and ``gitsync run``'s own into :class:`RunFlags`) so that mypy checks every
field from here on. The flags themselves, their ``GITSYNC_*`` variables and defaults are
defined once, in :mod:`gitsync.cli.options`: a field's default here only stands for a flag
the command does not take.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import click

from gitsync.errors import ConfigError
from gitsync.kube import kubeconfig
from gitsync.model import window as windowlib
from gitsync.model.api import DEFAULT_FORCE_MANAGERS, DriftPolicy
from gitsync.model.rollout import RollbackPolicy


@dataclass(frozen=True)
class Flags:
    """The flags the commands share (cluster, source, sync, policy)."""

    kubeconfig: str | None = None
    context: str | None = None
    repo: str = ""
    instance_repo: str = ""
    instance_name: str = ""
    ref: str = "main"
    #: whether --ref was given (as a flag or its variable), not left at its default
    ref_given: bool = False
    path: str = "."
    namespace: str | None = None
    #: --allowed-namespaces as a set; None: any not denied
    allowed_namespaces: frozenset[str] | None = None
    #: --denied-namespaces' patterns, and in a Pod its own namespace
    denied_namespaces: tuple[str, ...] = ()
    watch_namespace: str | None = None
    status_namespace: str | None = None
    cache_dir: Path | None = None
    token_file: Path | None = None
    git_username: str = "git"
    ssh_key_file: Path | None = None
    known_hosts_file: Path | None = None
    git_ca_file: Path | None = None
    git_timeout: float = 60.0
    allow_insecure_git: bool = False
    verify_commits: bool = False
    verify: str | None = None
    trusted_keys: Path | None = None
    tip_keys: Path | None = None
    allow_non_fast_forward: bool = False
    create_namespace: bool = False
    adopt: bool = False
    prune: bool = True
    allow_empty: bool = False
    prune_max_fraction: float = 0.5
    concurrency: int = 64
    drift_policy: DriftPolicy = "correct"
    #: --rollback: for MyApps without spec.rollback
    rollback: RollbackPolicy = "off"
    #: --force-managers, else the default ones
    force_managers: tuple[str, ...] = DEFAULT_FORCE_MANAGERS
    #: --sync-window, parsed
    sync_window: tuple[windowlib.Window, ...] = ()
    windows_block_corrections: bool = False
    #: gitsync sync --ignore-windows (and diff's, to preview it)
    ignore_windows: bool = False
    #: gitsync sync --dependency-timeout: seconds it waits in all for dependencies
    dependency_timeout: float = 300.0
    field_manager: str = "gitsync"

    def namespaces(self, fallback: str) -> Namespaces:
        """kubectl's rule for namespaces not given as flags: ``fallback``, the kubeconfig
        context's (in a Pod, its own), else ``default``."""
        return Namespaces(self.namespace or fallback, self.status_namespace or fallback)

    def windows(self) -> windowlib.Windows:
        return windowlib.Windows(
            self.sync_window, self.windows_block_corrections, self.ignore_windows
        )

    def verification(self) -> dict[str, object]:
        """The flags :func:`gitsync.source.keyring.verifier_of` reads."""
        return {
            "verify_commits": self.verify_commits,
            "verify": self.verify,
            "trusted_keys": self.trusted_keys,
            "tip_keys": self.tip_keys,
            "allow_non_fast_forward": self.allow_non_fast_forward,
            "git_timeout": self.git_timeout,
        }


@dataclass(frozen=True)
class Namespaces:
    #: of MyApps that name none (-n)
    default: str
    #: of the sync status ConfigMap and the Lease (--status-namespace)
    status: str


@dataclass(frozen=True)
class RunFlags:
    """``gitsync run``'s own flags: the daemon's."""

    listen: str
    interval: float
    jitter: float
    leader_elect: bool
    sharding: bool
    #: read from --webhook-secret-file; empty without one
    webhook_secret: bytes
    webhook_rate: float
    webhook_burst: int
    http_request_timeout: float
    http_max_connections: int
    workers: int
    notify_url: tuple[str, ...]
    notify_secret_file: Path | None
    notify_format: str
    ui: bool
    ui_allowed_hosts: tuple[str, ...]


#: flags whose field is not the flag's value as click gives it
_PARSED = frozenset(
    {
        "allowed_namespaces",
        "denied_namespaces",
        "force_managers",
        "drift_policy",
        "rollback",
        "sync_window",
        "ref_given",
    }
)
_RUN_READ = frozenset({"webhook_secret_file"})


def parse(kw: Mapping[str, Any]) -> Flags:
    """The shared flags of a command. A key that is no field is a flag added to the
    commands and not here: an error, not a flag silently ignored."""
    names = {f.name for f in fields(Flags)}
    unknown = set(kw) - names
    if unknown:
        raise TypeError(f"flags without a field in Flags: {', '.join(sorted(unknown))}")
    plain = {k: v for k, v in kw.items() if k not in _PARSED}
    if "repo" in plain:
        plain["repo"] = plain["repo"] or ""  # run's is optional: None when not given
    if "force_managers" in kw:
        plain["force_managers"] = tuple(kw["force_managers"] or DEFAULT_FORCE_MANAGERS)
    if "drift_policy" in kw:
        plain["drift_policy"] = _policy(kw["drift_policy"])
    if "rollback" in kw:
        plain["rollback"] = _rollback(kw["rollback"])
    if "sync_window" in kw:
        plain["sync_window"] = windowlib.parse_all(kw["sync_window"] or ())
    return Flags(
        **plain,
        ref_given=_given(kw, "ref"),
        allowed_namespaces=allowed(kw.get("allowed_namespaces") or ""),
        denied_namespaces=denied(kw.get("denied_namespaces") or ""),
    )


def parse_run(kw: Mapping[str, Any]) -> tuple[Flags, RunFlags]:
    """``gitsync run``'s flags: the shared ones, and the daemon's with the webhook secret
    read (a file that cannot be read is the first error reported)."""
    own = {f.name for f in fields(RunFlags)} | _RUN_READ
    secret = b""
    if kw.get("webhook_secret_file"):
        try:
            secret = Path(kw["webhook_secret_file"]).read_bytes().strip()
        except OSError as e:
            raise ConfigError(f"cannot read --webhook-secret-file: {e.strerror}") from e
    daemon = {k: v for k, v in kw.items() if k in own and k not in _RUN_READ}
    daemon["notify_url"] = tuple(daemon["notify_url"])
    daemon["ui_allowed_hosts"] = tuple(daemon["ui_allowed_hosts"])
    run = RunFlags(**daemon, webhook_secret=secret)
    return parse({k: v for k, v in kw.items() if k not in own}), run


def allowed(text: str) -> frozenset[str] | None:
    names = [n.strip() for n in text.split(",") if n.strip()]
    return frozenset(names) or None


def denied(text: str) -> tuple[str, ...]:
    patterns = [p.strip() for p in text.split(",") if p.strip()]
    # in a Pod, its own namespace holds gitsync's Secrets and ServiceAccount: a MyApp
    # there could mount them
    own = kubeconfig.own_namespace()
    return tuple(dict.fromkeys([*patterns, *([own] if own else [])]))


def _policy(value: object) -> DriftPolicy:
    # click's Choice let only these through; spelled out so that mypy sees the Literal
    if value == "correct":
        return "correct"
    if value == "report":
        return "report"
    raise ConfigError(f"--drift-policy {value!r} is neither correct nor report")


def _rollback(value: object) -> RollbackPolicy:
    # click's Choice let only these through; spelled out so that mypy sees the Literal
    if value == "auto":
        return "auto"
    if value == "off":
        return "off"
    raise ConfigError(f"--rollback {value!r} is neither auto nor off")


def _given(kw: Mapping[str, Any], param: str) -> bool:
    """Whether ``--<param>`` was given (as a flag or its variable), not left at its
    default."""
    ctx = click.get_current_context(silent=True)
    if ctx is None:
        return kw.get(param) not in (None, "", "main")
    source = ctx.get_parameter_source(param)
    return source not in (None, click.core.ParameterSource.DEFAULT)
