"""``gitsync sync``: one complete pass, printed."""

from __future__ import annotations

import sys
from typing import Any

import click

from gitsync.cli import common
from gitsync.cli.flags import parse
from gitsync.cli.options import (
    cluster_options,
    dependency_timeout_option,
    expected_errors,
    fail,
    field_manager_option,
    ignore_windows_option,
    output_option,
    source_options,
    sync_options,
)
from gitsync.errors import printable


@click.command()
@cluster_options
@source_options(required=True)
@sync_options
@field_manager_option
@ignore_windows_option
@dependency_timeout_option
@output_option
@expected_errors(1)
def sync(output: str, **kw: Any) -> None:
    """One complete pass: MyApps, their Deployments, status, prune. Exit 0 done (held
    only on purpose: suspend, a rollback, a pin, a window), 1 failed or a change still
    waiting for a dependency, 2 the commit refused by --verify-commits."""
    flags = parse(kw)
    # a bad --instance-name is reported before anything starts
    identity = common.identity(flags)
    kube = common.connect(flags)
    namespaces = flags.namespaces(kube.namespace)
    controller = common.controller(flags, kube)
    controller.myapps.start()
    controller.deployments.start()
    if not controller.wait_synced(60):
        fail("could not list MyApps and Deployments (is the CRD installed?)", 1)
    syncer = common.syncer(
        flags, namespaces, controller, identity, await_dependencies=flags.dependency_timeout
    )
    result = syncer.run()
    pins = syncer.pins.lines() if syncer.pins is not None else []
    if output == "text":
        for line in pins:
            click.echo(printable(line))
        for c in result.changes:
            if c.action != "unchanged":
                click.echo(f"{c.subject} {c.action}" + (f": {c.reason}" if c.reason else ""))
        # what waits (a dependency, a window), or a rollback holds: said with why
        for c in result.held():
            click.echo(printable(f"held {c.subject}: {c.reason}"))
        for e in result.errors:
            click.echo(f"error: {e}", err=True)
        if result.prune_skipped:
            click.echo(f"prune skipped: {result.prune_skipped}", err=True)
        click.echo(f"revision {result.revision or '-'}: {result.summary()}")
    else:
        doc = {
            "revision": result.revision,
            "ok": result.ok,
            "summary": result.summary(),
            "counts": dict(sorted(result.counts().items())),
            "objects": [
                {"subject": c.subject, "action": c.action, "message": c.reason}
                | ({"hold": c.hold} if c.hold else {})
                for c in result.changes
            ],
            "errors": result.errors,
            "pruneSkipped": result.prune_skipped,
            "pins": pins,
        }
        common.emit(doc, output)
    controller.events.close()  # the pass's Events, queued, are written before exiting
    # an untrusted commit is an error of the source, as diff reports it: 2; a change
    # still waiting for a dependency is a sync not done (a hold on purpose is done)
    sys.exit(2 if result.rejection else 0 if result.ok and not result.waiting() else 1)
