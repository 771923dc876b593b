"""``gitsync blame MyApp/ns/name``: who set each field gitsync manages, and why.

Exit codes like ``gitsync drift``: 0 when every field holds what Git says, 1 when a
field drifted (or another controller owns it), 2 on error. Read-only: two GETs.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click
import yaml

from gitsync.cli.flags import parse
from gitsync.cli.options import (
    cluster_options,
    expected_errors,
    field_manager_option,
    opt,
    output_option,
)
from gitsync.engine.blame import blame, drifted, render_text
from gitsync.errors import APINotFoundError, ConfigError
from gitsync.kube.client import Kube, path_of, resource_path
from gitsync.kube.kubeconfig import default_namespace
from gitsync.model.api import DEFAULT_FORCE_MANAGERS, KIND, Obj
from gitsync.source import gitblame


def parse_target(target: str, namespace: str | None, fallback: str = "default") -> tuple[str, str]:
    """``MyApp/ns/name``, ``ns/name`` or ``name`` (with ``-n``, else ``fallback``, the
    kubeconfig context's namespace as kubectl takes it) → (namespace, name)."""
    parts = target.split("/")
    if len(parts) in (2, 3) and parts[0].lower() in ("myapp", "myapps", "myapp.apps.example.com"):
        parts = parts[1:]
    if len(parts) == 2 and all(parts):
        if namespace and namespace != parts[0]:
            raise ConfigError(f"{target!r} names namespace {parts[0]!r}, but -n says {namespace!r}")
        return parts[0], parts[1]
    if len(parts) == 1 and parts[0]:
        return namespace or fallback, parts[0]
    raise ConfigError(f"{target!r} is not MyApp/namespace/name, namespace/name or a name")


@click.command("blame")
@click.argument("target")
@cluster_options
@opt(
    "-n",
    "--namespace",
    env="NAMESPACE",
    default=None,
    help="Namespace of a bare name (default: the context's, as kubectl).",
)
@opt(
    "--repo",
    env="BLAME_REPO",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="A local clone of the source repository, with history: adds lines and commits.",
)
@opt("--git-timeout", env="GIT_TIMEOUT", type=float, default=30.0, show_default=True)
@opt(
    "--force-managers",
    env="FORCE_MANAGERS",
    multiple=True,
    help="Field managers that are one-off tools (their changes are drift, not conflicts).",
)
@field_manager_option
@output_option
@expected_errors(2)
def blame_command(
    target: str,
    namespace: str | None,
    repo: Path | None,
    git_timeout: float,
    force_managers: tuple[str, ...],
    field_manager: str,
    output: str,
    **kw: Any,
) -> None:
    """Each field gitsync manages on a MyApp and its Deployment, with its origin: the
    Git commit and line that set it, or who changed it since. Exit 0 none drifted,
    1 drift, 2 error."""
    cluster = parse(kw)
    fallback = default_namespace(cluster.kubeconfig, cluster.context)
    ns, name = parse_target(target, namespace, fallback)
    kube = Kube.from_kubeconfig(cluster.kubeconfig, cluster.context)
    who = f"{KIND}/{ns}/{name}"
    try:
        myapp = kube.get(path_of(KIND, ns, name), subject=who)
    except APINotFoundError:
        raise ConfigError(f"{who} not found") from None
    deployment: Obj | None
    try:
        deployment = kube.get(
            resource_path("apps/v1", "deployments", ns, name), subject=f"Deployment/{ns}/{name}"
        )
    except APINotFoundError:
        deployment = None
    git = gitblame.view(myapp, repo, timeout=git_timeout)
    rows = blame(
        myapp,
        deployment,
        git,
        self_manager=field_manager,
        force_managers=force_managers or DEFAULT_FORCE_MANAGERS,
    )
    if output == "text":
        click.echo(render_text(rows), nl=False)
    else:
        file, revision = gitblame.source_of(myapp)
        doc = {
            "myapp": who,
            "revision": revision,
            "file": file,
            "drifted": drifted(rows),
            "fields": [r.to_json() for r in rows],
        }
        if output == "json":
            click.echo(json.dumps(doc, indent=2, default=str))
        else:
            click.echo(yaml.safe_dump(doc, sort_keys=False), nl=False)
    sys.exit(1 if drifted(rows) else 0)
