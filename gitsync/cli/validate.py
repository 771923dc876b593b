"""``gitsync validate``: the manifests checked offline."""

from __future__ import annotations

import sys
from typing import Any

import click

from gitsync.cli import common
from gitsync.cli.flags import parse
from gitsync.cli.options import (
    expected_errors,
    source_options,
    watch_namespace_option,
)
from gitsync.errors import printable
from gitsync.kube.kubeconfig import default_namespace
from gitsync.model.api import KIND
from gitsync.model.order import dependencies
from gitsync.source.checkout import Revision
from gitsync.source.manifests import ordering


@click.command()
@source_options(required=True)
@watch_namespace_option
@expected_errors(1)
def validate(**kw: Any) -> None:
    """Check the manifests offline. Exit 0 when valid, 1 with the errors listed."""
    flags = parse(kw)
    # the files are the directory's whatever --ref says, but a --ref its checkout lacks
    # is the error diff and sync give
    common.identity(flags)
    rev = common.source(flags).fetch()
    loaded = common.read_manifests(flags, rev, flags.namespaces(default_namespace()).default)
    in_git = {app.key for app in loaded.apps}
    # offline, a dependency Git does not declare may still be in the cluster: said, and
    # judged by diff and sync, which can look; a cycle or a self-reference is an error
    outside = sorted(
        {dep for app in loaded.apps for dep in dependencies(app.obj) if dep not in in_git}
    )
    unordered = ordering(loaded.apps, lambda _key: True)
    errors = [*loaded.errors, *unordered.values()]
    for err in errors:
        click.echo(f"error: {err}", err=True)
    for dep in outside:
        click.echo(
            printable(
                f"note: {KIND}/{dep} is depended on and not in Git: it must be in the cluster"
            )
        )
    count = loaded.error_count + len(unordered)
    click.echo(
        f"{len(loaded.apps)} MyApps in {loaded.files} files {_where(rev, flags.path)}: "
        f"{'valid' if not errors else f'{count} errors'}"
    )
    sys.exit(0 if not errors else 1)


def _where(rev: Revision, path: str) -> str:
    """Where the files were read: a directory's (its files as they are, uncommitted ones
    too, so no revision), else the ref and commit."""
    if rev.sha:
        return f"at {rev}"
    return f"under {printable(str(rev.dir / path))}"
