"""``gitsync diff``: what a sync would write, planned as a sync plans it, without writing."""

from __future__ import annotations

import datetime as dt
import json
import os
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import click

from gitsync.cli import common
from gitsync.cli.flags import parse
from gitsync.cli.options import (
    NAMESPACE_DEFAULT,
    adopt_option,
    cluster_options,
    create_namespace_option,
    expected_errors,
    field_manager_option,
    ignore_windows_option,
    opt,
    output_option,
    policy_options,
    source_options,
    watch_namespace_option,
)
from gitsync.engine import differences
from gitsync.engine.changeset import (
    Change,
    ChangeSet,
    PruneGuard,
    hold_prunes,
    plan,
    plan_prune,
)
from gitsync.engine.namespace_plan import plan_namespaces, to_look_up
from gitsync.engine.planner import Settings
from gitsync.errors import APIForbiddenError, APINotFoundError, printable
from gitsync.gitops import namespaces as nslib
from gitsync.gitops.sync import myapp_body, tracked_by
from gitsync.gitops.sync_state import StateWriter, last_applied
from gitsync.kube.client import Kube, path_of, resource_path
from gitsync.model import pin as pinlib
from gitsync.model import rollout
from gitsync.model.api import (
    KIND,
    MANAGED_BY,
    MANAGED_BY_LABEL,
    Obj,
    key_of,
)
from gitsync.model.instance import refusal_of
from gitsync.reconcile.controller import foreign_deployment
from gitsync.source.manifests import ordering


def _list(kube: Kube, path: str, selector: str | None = None) -> dict[str, Obj]:
    params = {"labelSelector": selector} if selector else None
    items = kube.list(path, params=params).get("items", [])
    return {key_of(o): o for o in items}


@click.command()
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
@opt(
    "--color/--no-color",
    env="COLOR",
    default=None,
    help="Default: on a terminal, unless NO_COLOR is set (no-color.org).",
)
@watch_namespace_option
@create_namespace_option
@adopt_option
@ignore_windows_option
@opt(
    "--status-namespace",
    env="STATUS_NAMESPACE",
    default=None,
    help="Where the sync status ConfigMap lives: with --verify-commits, the commit must "
    "descend from the one it records, as for sync (default: " + NAMESPACE_DEFAULT + ").",
)
@expected_errors(2)
def diff(output: str, color: bool | None, **kw: Any) -> None:
    """Preview what a sync would write (no writes). Exit 0 nothing to write, 1 something
    to write (created, configured, pruned) or held back (suspend, a rollback, a pin, a
    dependency, a window), 2 error. Drift a sync leaves (policy report) and conflicts
    with other controllers are shown, and do not make it 1."""
    flags = parse(kw)
    kube = Kube.from_kubeconfig(flags.kubeconfig, flags.context)
    where = flags.namespaces(kube.namespace)
    after = accept = ""
    identity = common.identity(flags)
    state = StateWriter(kube, where.status, identity.name)
    verify = bool(flags.verify_commits or flags.verify)
    cm = _status(state, strict=verify)
    if verify:
        # judged as a sync judges it: against the commit the status ConfigMap records
        after, once, wanted = last_applied(cm)
        accept = "" if wanted == once else wanted
    # planned as a sync plans it: under the pins the status ConfigMap holds
    pins = pinlib.pins_of((cm or {}).get("data"))
    # the two LISTs and reading the manifests overlap: together they are the run
    with ThreadPoolExecutor(3) as pool:
        loading = pool.submit(common.load_pinned, flags, where.default, pins, after, accept)
        listing = pool.submit(_list, kube, resource_path("apps.example.com/v1", "myapps"))
        selector = f"{MANAGED_BY_LABEL}={MANAGED_BY}"
        deployments_listing = pool.submit(
            _list, kube, resource_path("apps/v1", "deployments"), selector
        )
        pinned = loading.result()
        myapps, deployments = listing.result(), deployments_listing.result()
    revision, loaded, selection = pinned.revision, pinned.loaded, pinned.selection
    for err in loaded.errors:
        click.echo(f"error: {err}", err=True)
    for problem in selection.missing.values():
        click.echo(f"error: {printable(problem)}", err=True)
    if note := common.instance_note(flags, identity):
        click.echo(note, err=True)
    label = identity.label
    # as in a sync: a MyApp whose dependsOn cannot be ordered is an error, not applied
    unordered = ordering(selection.apps.values(), lambda key: key in myapps)
    for err in unordered.values():
        click.echo(f"error: {err}", err=True)
    desired = {
        key: myapp_body(app, label) for key, app in selection.apps.items() if key not in unordered
    }
    # as in a sync: another instance's MyApp, or one made by hand and not handed over,
    # is refused, never applied over
    refused = {
        k: why
        for k in desired
        if (why := refusal_of(identity, f"{KIND}/{k}", myapps.get(k), flags.adopt))
    }
    for key in sorted(refused):
        click.echo(f"error: {refused[key].message}", err=True)
    settings = Settings(
        default_policy=flags.drift_policy,
        force_managers=flags.force_managers,
        field_manager=flags.field_manager,
        rollback=flags.rollback,
    )
    applied = {k: body for k, body in desired.items() if k not in refused}
    # as in a sync: namespaces of MyApps to be created are looked up (GETs, no writes)
    namespaces = plan_namespaces(
        applied,
        myapps,
        nslib.existing(kube, to_look_up(applied, myapps)),
        create=flags.create_namespace,
        instance=identity.name,
        allowed=flags.allowed_namespaces,
        denied=flags.denied_namespaces,
    )
    # the prune plan a sync carries out, guards and all, counting what it applies
    guard = PruneGuard(flags.prune, flags.allow_empty, flags.prune_max_fraction)
    pruning = plan_prune(
        # a pinned MyApp its commit cannot give is held, not pruned, as in a sync
        set(desired) | set(selection.missing) | set(unordered),
        tracked_by(myapps.values(), label),
        guard,
        manifests_ok=loaded.ok,
        applied=set(applied) - set(namespaces.missing),
    )
    # as in a sync: what a closed window holds back, now
    now = dt.datetime.now(dt.UTC)
    windows = flags.windows()
    pruning = hold_prunes(pruning, tracked_by(myapps.values(), label), windows, now)
    records = rollout.records_of((cm or {}).get("data"))
    changes = plan(
        applied, myapps, deployments, pruning, settings, namespaces, windows, now, records
    )
    changes.revision = revision
    _refuse_foreign_deployments(kube, changes, myapps)
    skipped = changes.prune_skipped
    # in the shape of the changes a hold keeps back (Change.to_json), without the paths:
    # the head is read to tell what it would change, not planned
    held: list[Obj] = [
        {"object": f"{KIND}/{key}", "action": "unchanged", "changes": [], "reason": pin.describe(),
         "hold": "pin"}
        for key, pin in pinned.held.items()
    ]  # fmt: skip
    if pinned.head_unread:
        held.append({"object": "", "action": "unchanged", "changes": [],
                     "reason": pinned.head_unread, "hold": "pin"})  # fmt: skip
    if output == "text":
        _print_diff(changes, use_color(color))
        # held by a pin, as by suspend: what the ref's head would change, not written
        for line in pins.lines():
            click.echo(printable(line))
        for h in held:
            what = f"held {h['object']}" if h["object"] else "held: the ref's head is unread"
            click.echo(f"{what}: {printable(h['reason'])}")
        if skipped:
            click.echo(f"prune skipped: {skipped}", err=True)
        click.echo(f"{revision}: {changes.summary()}")
    else:
        common.emit(
            {
                "revision": revision,
                "summary": changes.summary(),
                "objects": [c.to_json() for c in changes.changes if c.writes],
                "drift": [c.to_json() for c in changes.findings()],
                "held": [c.to_json() for c in changes.held()] + held,
                "pins": pins.lines(),
                "failed": [c.to_json() for c in changes.changes if c.action == "failed"],
                "pruneSkipped": skipped,
            },
            output,
        )
    # a broken manifest, a refused MyApp or an object that cannot be planned is an
    # error even when the rest is unchanged: CI must not pass it
    failed = loaded.errors or refused or changes.failed or selection.missing or unordered
    # a change held back is a difference between Git and the cluster as much as a write
    differs = changes.writes or changes.held() or held
    sys.exit(2 if failed else (1 if differs else 0))


def _status(state: StateWriter, *, strict: bool) -> Obj | None:
    """The status ConfigMap (its pins, the rollbacks in force, and with --verify-commits
    the commit applied). Without --verify-commits a diff that may not read it (a CI role
    that reads MyApps and Deployments only) still runs, and says what is not known."""
    try:
        return state.read_object()
    except APIForbiddenError as e:
        if strict:
            raise
        click.echo(
            f"warning: pins (gitsync rollback) and automatic rollbacks not known: {e}",
            err=True,
        )
        return None


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


def use_color(flag: bool | None) -> bool:
    """--color/--no-color if given; else colour on a terminal, unless ``NO_COLOR`` is set
    to anything but the empty string (no-color.org)."""
    if flag is not None:
        return flag
    return not os.environ.get("NO_COLOR") and sys.stdout.isatty()


def _print_diff(changes: ChangeSet, color: bool) -> None:
    """Writes as unified diffs; what a sync leaves (drift, conflicts, held) as lines."""
    # one error for the objects that fail for one reason (every MyApp of a namespace that
    # does not exist), naming them all
    failed: dict[str, list[str]] = {}
    for c in changes.objects():
        if c.writes:
            click.echo(differences.unified(c.subject, c.live, c.desired, color), nl=False)
        elif c.action == "failed":
            failed.setdefault(c.reason, []).append(c.subject)
    for reason, subjects in failed.items():
        click.echo(f"error: {printable(', '.join(subjects))}: {printable(reason)}", err=True)
    for c in changes.changes:
        if c.writes or c.action == "failed" or not (c.reason or c.paths):
            continue
        what = "held" if c.action == "unchanged" else c.action  # held back by suspend
        for d in c.diff:
            old, new = json.dumps(d.old, default=str), json.dumps(d.new, default=str)
            click.echo(f"{what} {c.subject} {d.path}: live {old}, git {new}")
        click.echo(f"{what} {c.subject}: {printable(c.reason)}")
