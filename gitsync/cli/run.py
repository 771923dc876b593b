"""``gitsync run``: the daemon's flags, wired into :class:`~gitsync.daemon.daemon.Daemon`."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from gitsync import threads
from gitsync.cli import common
from gitsync.cli.flags import RunFlags, parse_run
from gitsync.cli.options import (
    F,
    cluster_options,
    expected_errors,
    field_manager_option,
    opt,
    source_options,
    sync_options,
    watch_namespace_option,
)
from gitsync.daemon import metrics as metricslib
from gitsync.daemon.hosts import AllowedHosts
from gitsync.daemon.notification import FORMATS
from gitsync.daemon.notify import Notifier, target_of
from gitsync.errors import ConfigError


def limits(**flags: tuple[float | int, str]) -> Callable[[F], F]:
    """Limits that must be positive, each ``name=(default, help)``: ``webhook_rate`` is
    ``--webhook-rate`` (and ``GITSYNC_WEBHOOK_RATE``). A float default makes a number over
    0, an int default a whole number from 1."""

    def wrap(f: F) -> F:
        for name, (default, text) in reversed(flags.items()):
            kind: click.FloatRange | click.IntRange = (
                click.FloatRange(min=0, min_open=True)
                if isinstance(default, float)
                else click.IntRange(min=1)
            )
            flag = "--" + name.replace("_", "-")
            f = opt(
                flag, env=name.upper(), type=kind, default=default, show_default=True, help=text
            )(f)
        return f

    return wrap


def _usage(check: Callable[[tuple[str, ...]], object]) -> Any:
    """A click callback: ``check``'s ConfigError becomes a usage error (exit 2)."""

    def callback(_ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> Any:
        try:
            check(values)
        except ConfigError as e:
            # click names the flag itself
            flag = param.opts[0] if param.opts else ""
            raise click.BadParameter(str(e).removeprefix(flag).lstrip(": ")) from None
        return values

    return callback


@click.command()
@cluster_options
@source_options(required=False)
@sync_options
@field_manager_option
@opt(
    "--listen",
    env="LISTEN",
    default="0.0.0.0:8080",
    show_default=True,
    help="Address of /healthz, /readyz, /metrics, /hooks/git and the drift page.",
)
@opt(
    "--interval",
    env="INTERVAL",
    type=float,
    default=60.0,
    show_default=True,
    help="Seconds between polls of the repository.",
)
@opt(
    "--jitter",
    env="JITTER",
    type=float,
    default=5.0,
    show_default=True,
    help="Random seconds added to each interval.",
)
@opt(
    "--leader-elect/--no-leader-elect",
    env="LEADER_ELECT",
    default=True,
    show_default=True,
    help="Hold a Lease so only one replica writes.",
)
@opt(
    "--sharding/--no-sharding",
    env="SHARDING",
    default=False,
    show_default=True,
    help="Share the MyApps among all replicas (each serves some buckets of them, agreed "
    "through a member Lease each); without, the leader alone writes.",
)
@opt(
    "--webhook-secret-file",
    env="WEBHOOK_SECRET_FILE",
    type=click.Path(path_type=Path),
    help="File with the push webhook secret (GitHub HMAC or GitLab token).",
)
@limits(
    webhook_rate=(1.0, "Webhook-triggered syncs per second, after a burst of --webhook-burst."),
    webhook_burst=(3, "Webhook-triggered syncs allowed at once."),
    http_request_timeout=(
        10.0,
        "Seconds a client has to send a whole HTTP request (headers and body).",
    ),
    http_max_connections=(
        256,
        "Open HTTP connections at most; beyond, the oldest unfinished request is dropped.",
    ),
)
@opt(
    "--workers",
    env="WORKERS",
    type=int,
    default=4,
    show_default=True,
    help="Reconcile workers of the operator.",
)
@watch_namespace_option
@opt(
    "--notify-url",
    env="NOTIFY_URL",
    multiple=True,
    callback=_usage(lambda urls: [target_of(u) for u in urls]),
    help="POST drift, conflict, sync and prune notifications here (repeatable; "
    "slack+https:// or teams+https:// for those formats).",
)
@opt(
    "--notify-secret-file",
    env="NOTIFY_SECRET_FILE",
    type=click.Path(path_type=Path),
    help="Key of the notifications' X-Hub-Signature-256 (HMAC-SHA256 of the body).",
)
@opt(
    "--notify-format",
    env="NOTIFY_FORMAT",
    type=click.Choice(FORMATS),
    default="auto",
    show_default=True,
    help="Payload of every --notify-url: auto goes by the URL.",
)
@opt(
    "--ui/--no-ui",
    env="UI",
    default=True,
    show_default=True,
    help="Serve the read-only drift page at / (and /api/v1/apps) on --listen.",
)
@opt(
    "--ui-allowed-hosts",
    env="UI_ALLOWED_HOSTS",
    multiple=True,
    callback=_usage(AllowedHosts),
    help="Host names the drift page answers besides localhost, 127.0.0.1, [::1] and the "
    "address it was reached at (the Pod IP); repeatable. Others get 421 (DNS rebinding).",
)
@expected_errors(1)
def run(**kw: Any) -> None:
    """The daemon: the operator, and the Git sync loop when --repo is given."""
    from gitsync.daemon.daemon import THREAD_JOIN_TIMEOUT, Daemon, DaemonOptions
    from gitsync.daemon.heap import one_arena

    one_arena()  # before any thread is started
    flags, own = parse_run(kw)
    # before any connection: a bad --instance-name is a usage error
    identity = common.identity(flags)
    kube = common.connect(flags, own.workers)
    namespaces = flags.namespaces(kube.namespace)
    controller = common.controller(
        flags, kube, workers=own.workers, namespace=flags.watch_namespace
    )
    syncer = (
        common.syncer(flags, namespaces, controller, identity, full_every=own.interval)
        if flags.repo
        else None
    )
    metrics = metricslib.standard()
    notifier = _notifier(own, metrics)
    if notifier is not None:
        controller.events.listeners.append(notifier.on_event)
        notifier.start()
    options = DaemonOptions(
        listen=own.listen,
        interval=own.interval,
        jitter=own.jitter,
        leader_elect=own.leader_elect,
        lease_namespace=namespaces.status,
        lease_name=identity.lease_name,
        watch_namespace=flags.watch_namespace or "",
        webhook_secret=own.webhook_secret,
        webhook_rate=own.webhook_rate,
        webhook_burst=own.webhook_burst,
        http_request_timeout=own.http_request_timeout,
        http_max_connections=own.http_max_connections,
        ui=own.ui,
        ui_allowed_hosts=own.ui_allowed_hosts,
        sharding=own.sharding,
    )
    daemon = Daemon(controller, syncer, options, metrics)
    if notifier is not None and syncer is not None:
        daemon.pass_listeners.append(notifier.on_pass(identity.name, syncer.source))
    code = daemon.run()
    if notifier is not None:
        notifier.stop()
    # every thread was told to end by its component's stop: the last are waited for
    threads.THREADS.join(THREAD_JOIN_TIMEOUT)
    sys.exit(code)


def _notifier(own: RunFlags, metrics: metricslib.Metrics) -> Notifier | None:
    if not own.notify_url:
        return None
    return Notifier.from_flags(own.notify_url, own.notify_secret_file, own.notify_format, metrics)
