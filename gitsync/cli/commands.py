"""The ``gitsync`` command line, shaped like kubectl. Thin: it wires flags to the loop.

Exit codes: ``diff`` and ``drift`` exit 0 when nothing differs, 1 when
something does, 2 on error; ``sync`` and ``validate`` exit 0 on success and 1
on failure (``sync``: 2 when --verify-commits refuses the commit); usage errors
exit 2. Expected errors print one line, never a traceback.

The option groups several commands share, and the error-to-exit-code wrapper, are in
:mod:`gitsync.cli.options`; this module holds ``main`` (the console script) and the
commands.
"""

from __future__ import annotations

import json
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import click
import yaml

from gitsync import __version__
from gitsync.cli import logs
from gitsync.cli.blame import blame_command
from gitsync.cli.options import (
    NAMESPACE_DEFAULT,
    cluster_options,
    create_namespace_option,
    expected_errors,
    fail,
    field_manager_option,
    opt,
    output_option,
    policy_options,
    source_options,
    sync_options,
)
from gitsync.cli.report import drift_rows, render_details, render_table
from gitsync.daemon import metrics as metricslib
from gitsync.daemon.notification import FORMATS
from gitsync.daemon.notify import Notifier
from gitsync.engine import differences
from gitsync.engine.changeset import Change, ChangeSet, PruneGuard, plan, plan_prune
from gitsync.engine.namespace_plan import plan_namespaces, to_look_up
from gitsync.engine.planner import Settings
from gitsync.errors import APINotFoundError, ConfigError, one_line, printable
from gitsync.gitops import namespaces as nslib
from gitsync.gitops.sync import Syncer, SyncOptions, myapp_body, refusal, tracked_by
from gitsync.gitops.sync_state import StateWriter
from gitsync.kube import kubeconfig
from gitsync.kube.client import Kube, path_of, resource_path
from gitsync.kube.kubeconfig import default_namespace
from gitsync.model import instance as instancelib
from gitsync.model.api import (
    DEFAULT_FORCE_MANAGERS,
    KIND,
    MANAGED_BY,
    MANAGED_BY_LABEL,
    Obj,
    key_of,
)
from gitsync.reconcile.controller import Controller, ControllerConfig, foreign_deployment
from gitsync.source import manifests
from gitsync.source.cache import default_cache_dir
from gitsync.source.checkout import Credentials, open_source
from gitsync.source.keyring import verifier_of


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@opt(
    "--log-format",
    env="LOG_FORMAT",
    type=click.Choice(["auto", "text", "json"]),
    default="auto",
    help="auto: text on a terminal, JSON otherwise.",
)
@opt(
    "--log-level",
    env="LOG_LEVEL",
    type=click.Choice(["debug", "info", "warning", "error"]),
    default="info",
)
def main(log_format: str, log_level: str) -> None:
    """gitsync keeps MyApp resources on Kubernetes exactly as Git says."""
    logs.setup(log_format, log_level)


main.add_command(blame_command)


@main.command()
def version() -> None:
    """Print the gitsync version."""
    click.echo(f"gitsync {__version__}")


def _source(kw: dict[str, Any]) -> Any:
    cache = kw.get("cache_dir") or default_cache_dir()
    creds = Credentials(
        token_file=kw.get("token_file"),
        username=kw.get("git_username") or "git",
        ssh_key_file=kw.get("ssh_key_file"),
        known_hosts_file=kw.get("known_hosts_file"),
        ca_file=kw.get("git_ca_file"),
    )
    return open_source(
        kw["repo"],
        kw["ref"],
        cache,
        credentials=creds,
        timeout=kw["git_timeout"],
        allow_insecure=kw["allow_insecure_git"],
        verifier=verifier_of(kw),
    )


def _allowed(kw: dict[str, Any]) -> frozenset[str] | None:
    names = [n.strip() for n in (kw.get("allowed_namespaces") or "").split(",") if n.strip()]
    return frozenset(names) or None


#: where the kubelet mounts the Pod's namespace next to its ServiceAccount token
def _denied(kw: dict[str, Any]) -> tuple[str, ...]:
    patterns = [p.strip() for p in (kw.get("denied_namespaces") or "").split(",") if p.strip()]
    # in a Pod, its own namespace holds gitsync's Secrets and ServiceAccount: a MyApp
    # there could mount them
    own = kubeconfig.own_namespace()
    return tuple(dict.fromkeys([*patterns, *([own] if own else [])]))


def _identity(kw: dict[str, Any]) -> instancelib.Instance:
    return instancelib.resolve(
        kw.get("instance_name") or "",
        kw.get("instance_repo") or kw.get("repo") or "",
        kw.get("path") or ".",
        kw.get("ref") or "main",
    )


def watch_namespace_option(f: Any) -> Any:
    return opt(
        "--watch-namespace",
        env="WATCH_NAMESPACE",
        default=None,
        help="The only namespace the operator watches (default: all); MyApps that Git "
        "puts elsewhere are refused.",
    )(f)


def _namespaces(kw: dict[str, Any], kube: Kube | None) -> None:
    """kubectl's rule for namespaces not given as flags: the kubeconfig context's (in a
    Pod, its own), else ``default``."""
    fallback = kube.namespace if kube is not None else default_namespace()
    for key in ("namespace", "status_namespace"):
        if key in kw and not kw[key]:
            kw[key] = fallback


def _load(kw: dict[str, Any]) -> tuple[str, manifests.LoadResult]:
    rev = _source(kw).fetch()
    loaded = manifests.load(
        rev.dir,
        kw["path"],
        default_namespace=kw["namespace"],
        allowed_namespaces=_allowed(kw),
        denied_namespaces=_denied(kw),
        watch_namespace=kw.get("watch_namespace"),
    )
    return str(rev), loaded


# --- validate ---------------------------------------------------------------------


@main.command()
@source_options(required=True)
@watch_namespace_option
@expected_errors(1)
def validate(**kw: Any) -> None:
    """Check the manifests offline. Exit 0 when valid, 1 with the errors listed."""
    _namespaces(kw, None)
    revision, loaded = _load(kw)
    for err in loaded.errors:
        click.echo(f"error: {err}", err=True)
    click.echo(
        f"{len(loaded.apps)} MyApps in {loaded.files} files at {revision}: "
        f"{'valid' if loaded.ok else f'{loaded.error_count} errors'}"
    )
    sys.exit(0 if loaded.ok else 1)


# --- sync / run -------------------------------------------------------------------


def _controller(kw: dict[str, Any], **extra: Any) -> Controller:
    kube = Kube.from_kubeconfig(kw.get("kubeconfig"), kw.get("context"))
    # a wrong CA or a refused token ends the command here, with the reason, rather than
    # in informers that would retry it until a timeout
    kube.check()
    _namespaces(kw, kube)
    config = ControllerConfig(
        field_manager=kw["field_manager"],
        default_policy=kw.get("drift_policy", "correct"),
        force_managers=tuple(kw.get("force_managers") or DEFAULT_FORCE_MANAGERS),
        **extra,
    )
    return Controller(kube, config)


def _syncer(kw: dict[str, Any], controller: Controller) -> Syncer:
    opts = SyncOptions(
        repo=kw["repo"],
        instance=kw["instance_repo"],
        instance_name=kw["instance_name"],
        path=kw["path"],
        ref=kw["ref"],
        default_namespace=kw["namespace"],
        allowed_namespaces=_allowed(kw),
        denied_namespaces=_denied(kw),
        watch_namespace=kw.get("watch_namespace"),
        create_namespace=kw["create_namespace"],
        prune=kw["prune"],
        allow_empty=kw["allow_empty"],
        prune_max_fraction=kw["prune_max_fraction"],
        concurrency=kw["concurrency"],
    )
    state = StateWriter(
        controller.kube,
        kw["status_namespace"],
        _identity(kw).name,
        events=controller.events,
        field_manager=kw["field_manager"],
    )
    return Syncer(controller, _source(kw), opts, state)


@main.command()
@cluster_options
@source_options(required=True)
@sync_options
@field_manager_option
@output_option
@expected_errors(1)
def sync(output: str, **kw: Any) -> None:
    """One complete pass: MyApps, their Deployments, status, prune. Exit 0 or 1."""
    _identity(kw)  # a bad --instance-name is reported before anything starts
    controller = _controller(kw)
    controller.myapps.start()
    controller.deployments.start()
    if not controller.wait_synced(60):
        fail("could not list MyApps and Deployments (is the CRD installed?)", 1)
    result = _syncer(kw, controller).run()
    if output == "text":
        for c in result.changes:
            if c.action != "unchanged":
                click.echo(f"{c.subject} {c.action}" + (f": {c.reason}" if c.reason else ""))
        for e in result.errors:
            click.echo(f"error: {e}", err=True)
        if result.prune_skipped:
            click.echo(f"prune skipped: {result.prune_skipped}", err=True)
        click.echo(f"revision {result.revision or '-'}: {result.summary()}")
    else:
        doc = {
            "revision": result.revision,
            "ok": result.ok,
            "objects": [
                {"subject": c.subject, "action": c.action, "message": c.reason}
                for c in result.changes
            ],
            "errors": result.errors,
            "pruneSkipped": result.prune_skipped,
        }
        _emit(doc, output)
    controller.events.close()  # the pass's Events, queued, are written before exiting
    # an untrusted commit is an error of the source, as diff reports it: 2
    sys.exit(2 if result.rejection else 0 if result.ok else 1)


@main.command()
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
    "--webhook-secret-file",
    env="WEBHOOK_SECRET_FILE",
    type=click.Path(path_type=Path),
    help="File with the push webhook secret (GitHub HMAC or GitLab token).",
)
@opt(
    "--webhook-rate",
    env="WEBHOOK_RATE",
    type=click.FloatRange(min=0, min_open=True),
    default=1.0,
    show_default=True,
    help="Webhook-triggered syncs per second, after a burst of --webhook-burst.",
)
@opt(
    "--webhook-burst",
    env="WEBHOOK_BURST",
    type=click.IntRange(min=1),
    default=3,
    show_default=True,
    help="Webhook-triggered syncs allowed at once.",
)
@opt(
    "--http-request-timeout",
    env="HTTP_REQUEST_TIMEOUT",
    type=click.FloatRange(min=0, min_open=True),
    default=10.0,
    show_default=True,
    help="Seconds a client has to send a whole HTTP request (headers and body).",
)
@opt(
    "--http-max-connections",
    env="HTTP_MAX_CONNECTIONS",
    type=click.IntRange(min=1),
    default=256,
    show_default=True,
    help="Open HTTP connections at most; beyond, the oldest unfinished request is dropped.",
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
@expected_errors(1)
def run(**kw: Any) -> None:
    """The daemon: the operator, and the Git sync loop when --repo is given."""
    from gitsync.daemon.daemon import Daemon, DaemonOptions

    secret = b""
    if kw.get("webhook_secret_file"):
        try:
            secret = Path(kw["webhook_secret_file"]).read_bytes().strip()
        except OSError as e:
            raise ConfigError(f"cannot read --webhook-secret-file: {e.strerror}") from e
    identity = _identity(kw)  # before any connection: a bad --instance-name is a usage error
    controller = _controller(kw, workers=kw["workers"], namespace=kw.get("watch_namespace"))
    syncer = _syncer(kw, controller) if kw.get("repo") else None
    metrics = metricslib.standard()
    notifier = _notifier(kw, metrics)
    if notifier is not None:
        controller.events.listeners.append(notifier.on_event)
        notifier.start()
    options = DaemonOptions(
        listen=kw["listen"],
        interval=kw["interval"],
        jitter=kw["jitter"],
        leader_elect=kw["leader_elect"],
        lease_namespace=kw["status_namespace"],
        lease_name=identity.lease_name,
        webhook_secret=secret,
        webhook_rate=kw["webhook_rate"],
        webhook_burst=kw["webhook_burst"],
        http_request_timeout=kw["http_request_timeout"],
        http_max_connections=kw["http_max_connections"],
        ui=kw["ui"],
    )
    code = Daemon(controller, syncer, options, metrics).run()
    if notifier is not None:
        notifier.stop()
    sys.exit(code)


def _notifier(kw: dict[str, Any], metrics: metricslib.Metrics) -> Notifier | None:
    if not kw.get("notify_url"):
        return None
    return Notifier.from_flags(
        kw["notify_url"], kw.get("notify_secret_file"), kw["notify_format"], metrics
    )


# --- diff / drift ---------------------------------------------------------------------


def _list(kube: Kube, path: str, selector: str | None = None) -> dict[str, Obj]:
    params = {"labelSelector": selector} if selector else None
    items = kube.list(path, params=params).get("items", [])
    return {key_of(o): o for o in items}


@main.command()
@cluster_options
@source_options(required=True)
@output_option
@opt("--prune/--no-prune", env="PRUNE", default=True, show_default=True)
@opt("--allow-empty", env="ALLOW_EMPTY", is_flag=True, help="As for sync.")
@opt(
    "--prune-max-fraction",
    env="PRUNE_MAX_FRACTION",
    type=click.FloatRange(0, 1),
    default=0.5,
    show_default=True,
)
@policy_options
@field_manager_option
@opt("--color/--no-color", env="COLOR", default=None, help="Default: on a terminal.")
@watch_namespace_option
@create_namespace_option
@expected_errors(2)
def diff(output: str, color: bool | None, **kw: Any) -> None:
    """Preview what a sync would write (no writes). Exit 0 nothing to write, 1 something
    to write (created, configured, pruned), 2 error. Drift a sync leaves (policy report,
    suspend) and conflicts with other controllers are shown, and do not make it 1."""
    kube = Kube.from_kubeconfig(kw.get("kubeconfig"), kw.get("context"))
    _namespaces(kw, kube)
    # the two LISTs and reading the manifests overlap: together they are the run
    with ThreadPoolExecutor(3) as pool:
        loading = pool.submit(_load, kw)
        listing = pool.submit(_list, kube, resource_path("apps.example.com/v1", "myapps"))
        selector = f"{MANAGED_BY_LABEL}={MANAGED_BY}"
        deployments_listing = pool.submit(
            _list, kube, resource_path("apps/v1", "deployments"), selector
        )
        revision, loaded = loading.result()
        myapps, deployments = listing.result(), deployments_listing.result()
    for err in loaded.errors:
        click.echo(f"error: {err}", err=True)
    identity = _identity(kw)
    label = identity.label
    desired = {app.key: myapp_body(app, label) for app in loaded.apps}
    # as in a sync: another instance's MyApp is refused, never applied over
    refused = {k: other for k in desired if (other := identity.owner_of(myapps.get(k)))}
    for key, other in sorted(refused.items()):
        click.echo(f"error: {refusal(f'{KIND}/{key}', other, identity.name)}", err=True)
    # the prune plan a sync carries out, guards and all
    guard = PruneGuard(kw["prune"], kw["allow_empty"], kw["prune_max_fraction"])
    pruning = plan_prune(desired, tracked_by(myapps.values(), label), guard, manifests_ok=loaded.ok)
    settings = Settings(
        default_policy=kw["drift_policy"],
        force_managers=tuple(kw.get("force_managers") or DEFAULT_FORCE_MANAGERS),
        field_manager=kw["field_manager"],
    )
    applied = {k: body for k, body in desired.items() if k not in refused}
    # as in a sync: namespaces of MyApps to be created are looked up (GETs, no writes)
    namespaces = plan_namespaces(
        applied,
        myapps,
        nslib.existing(kube, to_look_up(applied, myapps)),
        create=kw["create_namespace"],
        instance=identity.name,
        allowed=_allowed(kw),
        denied=_denied(kw),
    )
    changes = plan(applied, myapps, deployments, pruning, settings, namespaces)
    changes.revision = revision
    _refuse_foreign_deployments(kube, changes, myapps)
    skipped = changes.prune_skipped
    if output == "text":
        _print_diff(changes, sys.stdout.isatty() if color is None else color)
        if skipped:
            click.echo(f"prune skipped: {skipped}", err=True)
        click.echo(f"{revision}: {changes.summary()}")
    else:
        _emit(
            {
                "revision": revision,
                "summary": changes.summary(),
                "objects": [c.to_json() for c in changes.changes if c.writes],
                "drift": [c.to_json() for c in changes.findings()],
                "held": [c.to_json() for c in changes.held()],
                "failed": [c.to_json() for c in changes.changes if c.action == "failed"],
                "pruneSkipped": skipped,
            },
            output,
        )
    # a broken manifest, a refused MyApp or an object that cannot be planned is an
    # error even when the rest is unchanged: CI must not pass it
    sys.exit(2 if loaded.errors or refused or changes.failed else (1 if changes.writes else 0))


def _refuse_foreign_deployments(kube: Kube, changes: ChangeSet, myapps: dict[str, Any]) -> None:
    """A Deployment to create that exists already, unlabelled (so not in the LIST), and
    is not the MyApp's: a sync refuses to take it over, so diff shows it failed too. One
    GET per Deployment about to be created, as a sync does."""
    for i, c in enumerate(changes.changes):
        kind, _, key = c.subject.partition("/")
        if kind != "Deployment" or c.action != "created":
            continue
        ns, name = key.split("/", 1)
        try:
            found = kube.get(path_of("Deployment", ns, name), subject=c.subject)
        except APINotFoundError:
            continue
        if problem := foreign_deployment(key, found, myapps.get(key)):
            changes.changes[i] = Change(c.subject, "failed", reason=problem)


def _print_diff(changes: ChangeSet, color: bool) -> None:
    """Writes as unified diffs; what a sync leaves (drift, conflicts, held) as lines."""
    for c in changes.objects():
        if c.writes:
            click.echo(differences.unified(c.subject, c.live, c.desired, color), nl=False)
        elif c.action == "failed":
            click.echo(f"error: {c.subject}: {printable(c.reason)}", err=True)
    for c in changes.changes:
        if c.writes or c.action == "failed" or not (c.reason or c.paths):
            continue
        what = "held" if c.action == "unchanged" else c.action  # held back by suspend
        for d in c.diff:
            old, new = json.dumps(d.old, default=str), json.dumps(d.new, default=str)
            click.echo(f"{what} {c.subject} {d.path}: live {old}, git {new}")
        click.echo(f"{what} {c.subject}: {printable(c.reason)}")


@main.command()
@cluster_options
@opt("-n", "--namespace", env="NAMESPACE", default=None, help="Only this namespace.")
@opt(
    "--status-namespace",
    env="STATUS_NAMESPACE",
    default=None,
    help=f"Where the sync status ConfigMap lives (default: {NAMESPACE_DEFAULT}).",
)
@opt("--instance-name", env="INSTANCE_NAME", default="", help="The instance whose sync to show.")
@opt("--repo", env="REPO", default="", help="With --ref and --path: names the instance as sync.")
@opt("--instance-repo", env="INSTANCE_REPO", default="", help="As for sync.")
@opt("--ref", env="REF", default="main", show_default=True, help="As for sync.")
@opt("--path", env="PATH_IN_REPO", default=".", show_default=True, help="As for sync.")
@output_option
@expected_errors(2)
def drift(output: str, namespace: str | None, status_namespace: str | None, **kw: Any) -> None:
    """The cluster drift report, read from MyApp status. Exit 0 none, 1 drift, 2 error.

    The last sync is shown for the instance the flags name (as for sync), or for every
    instance in --status-namespace when they name none."""
    named = bool(kw["instance_name"] or kw["instance_repo"] or kw["repo"])
    identity = _identity(kw)
    kube = Kube.from_kubeconfig(kw.get("kubeconfig"), kw.get("context"))
    status_namespace = status_namespace or kube.namespace
    apps = kube.list(path_of(KIND, namespace or "")).get("items", [])
    rows = drift_rows(apps)
    if named:
        found = StateWriter(kube, status_namespace, identity.name).read()
        states = {identity.name: found} if found else {}
    else:
        states = StateWriter.read_all(kube, status_namespace)
    drifted = any(r["drifted"] for r in rows)
    if output == "text":
        if rows:
            click.echo(render_table(rows), nl=False)
            if drifted:
                click.echo("\n" + render_details(rows), nl=False)
        else:  # as kubectl says it: an empty table would read as a failure to list
            where = f" in namespace {namespace}" if namespace else ""
            click.echo(f"No MyApps found{where}.", err=True)
        for name, state in sorted(states.items()):
            click.echo(
                f"\nsync of {name}: revision {state.get('revision') or '-'}, "
                f"result {state.get('result') or '-'}, "
                f"last error: {one_line(state.get('lastError') or 'none', 2000)}"
            )
    else:
        # "sync": the one instance's state, as before instances had names
        only = next(iter(states.values())) if len(states) == 1 else {}
        _emit({"sync": only, "instances": states, "apps": rows}, output)
    sys.exit(1 if drifted else 0)


def _emit(doc: Any, output: str) -> None:
    if output == "json":
        click.echo(json.dumps(doc, indent=2, default=str))
    else:
        click.echo(yaml.safe_dump(doc, sort_keys=False), nl=False)
