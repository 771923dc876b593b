"""``gitsync rollback --to REV`` and ``gitsync resume``: pin the instance (or one MyApp)
to a revision by hand, and lift the pin (:mod:`gitsync.model.pin`, kept in the cluster
by :mod:`gitsync.gitops.pins`).

A pin is checked before it is written, so that a pin the daemon could not honour is
never set: the revision must exist in the repository, be verified (with
--verify-commits) and be readable, and a MyApp pinned alone must be declared at it.
Nothing is written to the cluster otherwise.
"""

from __future__ import annotations

import sys
from typing import Any

import click

from gitsync.cli import common
from gitsync.cli.flags import Flags, parse
from gitsync.cli.options import (
    NAMESPACE_DEFAULT,
    cluster_options,
    expected_errors,
    fail,
    opt,
    source_options,
)
from gitsync.errors import ConfigError, VerificationError, printable
from gitsync.gitops import pins as pinstore
from gitsync.gitops.sync_state import StateWriter
from gitsync.kube.client import Kube
from gitsync.model import pin as pinlib
from gitsync.model.api import KIND
from gitsync.model.instance import Instance
from gitsync.source.checkout import GitSource

_APP = click.argument("myapp", required=False, metavar="[MyApp/NAMESPACE/NAME]")
_STATUS_NAMESPACE = opt(
    "--status-namespace",
    env="STATUS_NAMESPACE",
    default=None,
    help=f"Where the instance's status ConfigMap lives (default: {NAMESPACE_DEFAULT}).",
)


def _app(text: str | None) -> str:
    try:
        return pinlib.app_key(text) if text else ""
    except ConfigError as e:
        raise click.BadParameter(str(e), param_hint="MYAPP") from None


def _connect(flags: Flags) -> tuple[Kube, Instance, StateWriter]:
    identity = common.identity(flags)
    kube = common.connect(flags)
    where = flags.namespaces(kube.namespace)
    return kube, identity, StateWriter(kube, where.status, identity.name)


@click.command()
@_APP
@click.option(
    "--to",
    "to",
    required=True,
    metavar="REV",
    help="The commit to pin to: a full sha, or a tag or branch (its commit now is pinned).",
)
@click.option("--reason", default="", help="Why: shown with the pin everywhere.")
@click.option("--by", default="", help="Who pins (default: the user the API server knows).")
@cluster_options
@source_options(required=True)
@_STATUS_NAMESPACE
@expected_errors(1)
def rollback(myapp: str | None, to: str, reason: str, by: str, **kw: Any) -> None:
    """Pin the instance (or one MyApp) to revision REV until `gitsync resume`.

    The daemon and `gitsync sync` then sync REV instead of the ref's head (for one MyApp:
    that MyApp's manifest from REV, every other from the head), applying, correcting drift
    and pruning as at REV. With --verify-commits, REV must be signed by a trusted key,
    but need not descend from the commit last applied. Exit 0 pinned, 1 error (REV or
    the MyApp not found; nothing written), 2 usage, or REV refused by --verify-commits."""
    app = _app(myapp)
    flags = parse(kw)
    kube, identity, state = _connect(flags)
    source = common.source(flags)
    if not isinstance(source, GitSource):
        raise ConfigError(f"a pin needs a Git URL as --repo, not the directory {flags.repo}")
    sha = source.resolve(to)
    try:
        rev = source.fetch_commit(sha)
    except VerificationError as e:
        fail(str(e), 2)  # as sync: an untrusted commit is refused, exit 2
    loaded = common.read_manifests(flags, rev, flags.namespaces(kube.namespace).default)
    declared = {a.key for a in loaded.apps}
    if app and app not in declared:
        # its file may be there and broken: say so, it is the likelier mistake to fix
        errors = loaded.errors
        more = f", and {len(errors) - 1} more" if len(errors) > 1 else ""
        broken = f" (invalid manifests there: {errors[0]}{more})" if errors else ""
        raise ConfigError(f"{KIND}/{app} is not declared at revision {sha}{broken}: nothing pinned")
    if not app and loaded.errors:
        # the daemon would apply the rest and never prune while pinned there
        first = "; ".join(str(e) for e in loaded.errors[:3])
        raise ConfigError(f"revision {sha} has invalid manifests ({first}): nothing pinned")
    who = pinstore.who(kube, flags.kubeconfig, flags.context, by)
    pin = pinlib.Pin(sha, who, pinstore.now(), pinlib.clip(reason), app)
    written = pinstore.write(kube, state, pin)
    what = f"{KIND}/{app}" if app else f"instance {identity.name}"
    click.echo(printable(f"{what} {pin.describe()}"))
    if written.replaced is not None and written.replaced != pin:
        click.echo(printable(f"(it was {written.replaced.describe()})"))
    _announce(kube, state, identity)


@click.command()
@_APP
@cluster_options
# the flags of rollback (and of the daemon, whose GITSYNC_* variables a Pod has): they name
# the instance; resume reads nothing from Git
@source_options(required=False)
@_STATUS_NAMESPACE
@expected_errors(1)
def resume(myapp: str | None, **kw: Any) -> None:
    """Lift the pin of the instance (or of one MyApp): sync the ref's head again.

    The instance is named as for sync (--instance-name, or --repo, --ref and --path). With
    --verify-commits the head must then descend from the head applied before the pin, as
    ever. Exit 0 (also when nothing was pinned), 1 error, 2 usage."""
    app = _app(myapp)
    flags = parse(kw)
    if not (flags.instance_name or flags.repo or flags.instance_repo):
        raise click.UsageError("name the instance: --instance-name, or --repo (--ref, --path)")
    kube, identity, state = _connect(flags)
    lifted = pinstore.remove(kube, state, app)
    what = f"{KIND}/{app}" if app else f"instance {identity.name}"
    if lifted is None:
        click.echo(f"{what} is not pinned: nothing to resume")
        sys.exit(0)
    click.echo(printable(f"{what} resumed (it was {lifted.describe()})"))
    _announce(kube, state, identity)


def _announce(kube: Kube, state: StateWriter, identity: Instance) -> None:
    if pinstore.request_sync(kube, state.namespace, identity.lease_name):
        click.echo("asked the leading daemon to sync now")
    else:
        click.echo(f"no daemon leads instance {identity.name}: the next sync applies it")
