"""The ``gitsync`` command line, shaped like kubectl. Thin: it wires flags to the loop.

Exit codes: ``diff`` and ``drift`` exit 0 when nothing differs, 1 when
something does, 2 on error; ``sync`` and ``validate`` exit 0 on success and 1
on failure (``sync``: 2 when --verify-commits refuses the commit); ``rollback`` and
``resume`` exit 0 on success and 1 on failure (``rollback``: 2 when --verify-commits
refuses the revision); usage errors exit 2. Expected errors print one line, never a traceback.

The option groups several commands share, and the error-to-exit-code wrapper, are in
:mod:`gitsync.cli.options`, the flags as one typed value in :mod:`gitsync.cli.flags`,
what several commands build from them in :mod:`gitsync.cli.common`; this module holds
``main`` (the console script), and each command has a module of its own.
"""

from __future__ import annotations

import os
import sys

import click

from gitsync import __version__
from gitsync.cli import envvars, logs
from gitsync.cli.blame import blame_command
from gitsync.cli.diff import diff
from gitsync.cli.drift import drift
from gitsync.cli.options import opt
from gitsync.cli.plugin import PLUGIN, complete, completion
from gitsync.cli.rollback import resume, rollback
from gitsync.cli.run import run
from gitsync.cli.sync import sync
from gitsync.cli.uninstall import uninstall
from gitsync.cli.validate import validate


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", message="gitsync %(version)s")
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
@click.pass_context
def main(ctx: click.Context, log_format: str, log_level: str) -> None:
    """gitsync keeps MyApp resources on Kubernetes exactly as Git says."""
    logs.setup(log_format, log_level)
    for warning in envvars.unknown(os.environ, envvars.settings(ctx.command)):
        click.echo(warning, err=True)


@main.command()
def version() -> None:
    """Print the gitsync version."""
    click.echo(f"gitsync {__version__}")


for command in (
    validate,
    sync,
    diff,
    drift,
    run,
    blame_command,
    rollback,
    resume,
    uninstall,
    completion,
):
    main.add_command(command)


def kubectl_main() -> None:
    """The ``kubectl-gitsync`` console script: gitsync, named as kubectl users call it."""
    main.main(prog_name=PLUGIN)


def kubectl_complete() -> None:
    """The ``kubectl_complete-gitsync`` console script (see :mod:`gitsync.cli.plugin`)."""
    complete(main, sys.argv[1:])
