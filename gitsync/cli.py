"""The ``gitsync`` command line, shaped like kubectl. Thin: it wires flags to the loop."""

from __future__ import annotations

import click

from gitsync import __version__


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def main() -> None:
    """gitsync keeps MyApp resources on Kubernetes exactly as Git says."""


@main.command()
def version() -> None:
    """Print the gitsync version."""
    click.echo(f"gitsync {__version__}")
