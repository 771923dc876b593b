"""``gitsync drift``: the drift report read from MyApp status, and the last syncs."""

from __future__ import annotations

import datetime as dt
import sys
from typing import Any

import click

from gitsync.cli import common
from gitsync.cli.flags import parse
from gitsync.cli.options import (
    NAMESPACE_DEFAULT,
    cluster_options,
    expected_errors,
    opt,
)
from gitsync.cli.report import drift_rows, render_details, render_table
from gitsync.errors import APIForbiddenError, APINotFoundError, one_line, printable
from gitsync.gitops.sync_state import StateWriter
from gitsync.kube.client import Kube, path_of, resource_path
from gitsync.kube.members import MEMBER_OF_LABEL, member_of, serving_now
from gitsync.model.api import KIND
from gitsync.model.pin import pins_of
from gitsync.model.shards import BUCKETS


def replicas(kube: Kube, status_namespace: str, lease_name: str | None) -> dict[int, str] | None:
    """With sharding, which replica serves each bucket (the live member Leases of the
    instance named, or of the one instance of the namespace); None without sharding,
    or when the Leases cannot be read (listing them is the sharding component's right)."""
    selector = (
        MEMBER_OF_LABEL if lease_name is None else f"{MEMBER_OF_LABEL}={member_of(lease_name)}"
    )
    try:
        path = resource_path("coordination.k8s.io/v1", "leases", status_namespace)
        leases = kube.list(path, params={"labelSelector": selector}).get("items", [])
    except (APIForbiddenError, APINotFoundError):
        return None
    groups = {(x.get("metadata") or {}).get("labels", {}).get(MEMBER_OF_LABEL) for x in leases}
    if not leases or len(groups) > 1:
        return None  # not sharded, or several sharded instances and none named
    return serving_now(leases, BUCKETS, dt.datetime.now(dt.UTC), lease_name)


@click.command()
@cluster_options
@opt("-n", "--namespace", env="NAMESPACE", default=None, help="Only this namespace.")
@click.option(
    "-A",
    "--all-namespaces",
    is_flag=True,
    help="Every namespace (the default without -n; as kubectl spells it).",
)
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
@opt(
    "-o",
    "--output",
    env="OUTPUT",
    type=click.Choice(["text", "wide", "json", "yaml"]),
    default="text",
    show_default=True,
    help="wide: the table with READY, REVISION and IMAGE too.",
)
@expected_errors(2)
def drift(output: str, all_namespaces: bool, **kw: Any) -> None:
    """The cluster drift report, read from MyApp status. Exit 0 none, 1 drift, 2 error.

    The last sync is shown for the instance the flags name (as for sync), or for every
    instance in --status-namespace when they name none."""
    if all_namespaces:
        given = click.get_current_context().get_parameter_source("namespace")
        if given is click.core.ParameterSource.COMMANDLINE:
            raise click.UsageError("-A/--all-namespaces and -n/--namespace exclude each other")
        kw["namespace"] = None  # over GITSYNC_NAMESPACE, as -A is over kubectl's context
    flags = parse(kw)
    namespace = flags.namespace
    named = bool(flags.instance_name or flags.instance_repo or flags.repo)
    identity = common.identity(flags)
    kube = Kube.from_kubeconfig(flags.kubeconfig, flags.context)
    status_namespace = flags.status_namespace or kube.namespace
    apps = kube.list(path_of(KIND, namespace or "")).get("items", [])
    rows = drift_rows(
        apps, replicas(kube, status_namespace, identity.lease_name if named else None)
    )
    if named:
        found = StateWriter(kube, status_namespace, identity.name).read()
        states = {identity.name: found} if found else {}
    else:
        states = StateWriter.read_all(kube, status_namespace)
    drifted = any(r["drifted"] for r in rows)
    if output in ("text", "wide"):
        if rows:
            click.echo(render_table(rows, wide=output == "wide"), nl=False)
            if drifted or any(r["held"] for r in rows):
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
            # the pins as set (gitsync rollback), whether or not a pass honoured them yet
            for line in pins_of(state).lines():
                click.echo(printable(line))
    else:
        # "sync": the one instance's state, as before instances had names
        only = next(iter(states.values())) if len(states) == 1 else {}
        pins = {name: pins_of(state).lines() for name, state in states.items()}
        doc = {"sync": only, "instances": states, "pins": pins, "apps": rows}
        common.emit(doc, output)
    sys.exit(1 if drifted else 0)
