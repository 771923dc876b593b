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
from gitsync.kube.kubeconfig import default_namespace


@click.command()
@source_options(required=True)
@watch_namespace_option
@expected_errors(1)
def validate(**kw: Any) -> None:
    """Check the manifests offline. Exit 0 when valid, 1 with the errors listed."""
    flags = parse(kw)
    revision, loaded = common.load(flags, flags.namespaces(default_namespace()).default)
    for err in loaded.errors:
        click.echo(f"error: {err}", err=True)
    click.echo(
        f"{len(loaded.apps)} MyApps in {loaded.files} files at {revision}: "
        f"{'valid' if loaded.ok else f'{loaded.error_count} errors'}"
    )
    sys.exit(0 if loaded.ok else 1)
