"""What several commands build from their flags (:class:`~gitsync.cli.flags.Flags`): the
Git source, this instance's identity, the connection, the controller and the syncer; and
the JSON/YAML output."""

from __future__ import annotations

import json
import posixpath
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Final

import click
import yaml

from gitsync.cli.flags import Flags, Namespaces
from gitsync.errors import ConfigError, GitsyncError, printable
from gitsync.gitops.pinned import PinnedRevisions
from gitsync.gitops.sync import Syncer, SyncOptions
from gitsync.gitops.sync_state import StateWriter
from gitsync.kube.client import Kube
from gitsync.kube.records import Records
from gitsync.model import instance as instancelib
from gitsync.model import pin as pinlib
from gitsync.model import rollout
from gitsync.reconcile.controller import Controller, ControllerConfig
from gitsync.source import localcheckout, manifests
from gitsync.source.cache import default_cache_dir
from gitsync.source.checkout import GitSource, LocalSource, Revision, open_source
from gitsync.source.gitenv import Credentials
from gitsync.source.giturl import redact_url
from gitsync.source.keyring import verifier_of

#: connections beyond the sync pass's threads and the workers': the two watches hold one
#: each for as long as they run; the Lease, the Events and the pins take one now and then
POOL_EXTRA: Final = 8


def source(flags: Flags) -> GitSource | LocalSource:
    cache = flags.cache_dir or default_cache_dir()
    creds = Credentials(
        token_file=flags.token_file,
        username=flags.git_username or "git",
        ssh_key_file=flags.ssh_key_file,
        known_hosts_file=flags.known_hosts_file,
        ca_file=flags.git_ca_file,
    )
    return open_source(
        flags.repo,
        flags.ref,
        cache,
        credentials=creds,
        timeout=flags.git_timeout,
        allow_insecure=flags.allow_insecure_git,
        verifier=verifier_of(flags.verification()),
        path=flags.path or ".",
    )


def identity(flags: Flags) -> instancelib.Instance:
    """This instance: by ``--instance-name``, else named after ``--instance-repo`` or
    ``--repo``, ``--path`` and ``--ref``; a local checkout as ``--repo`` stands for the
    repository it is a checkout of (:func:`named_after`)."""
    name = flags.instance_name
    repo, path, ref = flags.repo, flags.path or ".", flags.ref or "main"
    named = named_after(flags) if not name else None
    if named is None:
        return instancelib.resolve(name, flags.instance_repo or repo, path, ref)
    # what this command line named before: its MyApps are adopted, not refused
    before = instancelib.resolve("", repo, path, ref)
    url, ipath, iref, _how = named
    return instancelib.resolve("", url, ipath, iref).adopting({before.name, *before.legacy_labels})


def instance_note(flags: Flags, instance: instancelib.Instance) -> str:
    """Which instance (``instance``, :func:`identity`'s) a local directory as ``--repo``
    was taken for, and why; or ""."""
    named = named_after(flags) if not flags.instance_name else None
    # a plain directory (no "how") is its file:// URL, as sync --repo file://… names it
    if named is None or not named[3]:
        return ""
    _url, ipath, iref, how = named
    return (
        f"instance {instance.name}: named after {how}, ref {iref}, path "
        f"{ipath} (--instance-repo or --instance-name names another)"
    )


def named_after(flags: Flags) -> tuple[str, str, str, str] | None:
    """(repository URL, path, ref, how a checkout told them or "") that name the
    instance when ``--repo`` is a local directory and no ``--instance-repo`` says what it
    stands for; else None.

    A checkout is named as the daemon syncing its remote is: the remote's URL, the branch
    it follows, and ``--path`` from the top of the work tree; a directory with no remote,
    by its own ``file://`` URL. An explicit ``--ref`` still wins over the branch."""
    repo = flags.repo
    directory = Path(repo).expanduser() if repo else None
    if flags.instance_repo or directory is None or not directory.is_dir():
        return None
    path, ref = flags.path or ".", flags.ref or "main"
    checkout = localcheckout.describe(directory.resolve())
    if checkout is None:
        return f"file://{directory.resolve()}", path, ref, ""
    path = posixpath.normpath(posixpath.join(checkout.prefix, path))
    if flags.ref_given and not localcheckout.has_ref(checkout, ref):
        # it would name an instance that applied none of these MyApps, and each would be
        # refused as another's: one error says what is wrong
        on = f" (it is on {checkout.branch})" if checkout.branch else ""
        raise ConfigError(
            f"--ref {ref!r}: the checkout {printable(str(checkout.top))} has no such branch, "
            f"tag or commit{on}; leave --ref out to take its branch, or name the instance "
            "with --instance-repo or --instance-name"
        )
    if checkout.branch and not flags.ref_given:
        ref = checkout.branch
    if checkout.remote:
        how = f"the checkout's remote {checkout.remote} {redact_url(checkout.url)}"
        return checkout.url, path, ref, how
    return f"file://{checkout.top}", path, ref, "the checkout, which has no remote"


def read_manifests(flags: Flags, rev: Revision, namespace: str) -> manifests.LoadResult:
    """The manifests of a checked-out revision; ``namespace`` for MyApps that name none."""
    return manifests.load(
        rev.dir,
        flags.path,
        default_namespace=namespace,
        allowed_namespaces=flags.allowed_namespaces,
        denied_namespaces=flags.denied_namespaces,
        watch_namespace=flags.watch_namespace,
        omitted=rev.omitted,
        listing=rev.listing,
    )


def connect(flags: Flags, workers: int = ControllerConfig.workers) -> Kube:
    # a connection for each thread that may send at once (a pool smaller than that
    # throws connections away, and each one opened again costs a TLS handshake)
    pool = max(1, flags.concurrency) + workers + POOL_EXTRA
    kube = Kube.from_kubeconfig(flags.kubeconfig, flags.context, pool_size=pool)
    # a wrong CA or a refused token ends the command here, with the reason, rather than
    # in informers that would retry it until a timeout
    kube.check()
    return kube


def controller(
    flags: Flags, kube: Kube, workers: int | None = None, namespace: str | None = None
) -> Controller:
    """The operator of ``flags`` over ``kube`` (:func:`connect`); ``namespace``: the only
    one it watches (None: all)."""
    config = ControllerConfig(
        field_manager=flags.field_manager,
        default_policy=flags.drift_policy,
        force_managers=flags.force_managers,
        rollback=flags.rollback,
        namespace=namespace,
    )
    if workers is not None:
        config = replace(config, workers=workers)
    c = Controller(kube, config)
    c.reconciler.gate.windows = flags.windows()
    return c


def syncer(
    flags: Flags,
    namespaces: Namespaces,
    controller: Controller,
    instance: instancelib.Instance,
    full_every: float = 0.0,
    await_dependencies: float = 0.0,
) -> Syncer:
    """The syncer of ``flags`` as ``instance`` (:func:`identity`); ``full_every``: see
    :attr:`SyncOptions.full_every` (a daemon's interval; a single sync is always full),
    ``await_dependencies`` :attr:`SyncOptions.await_dependencies` (a single sync's)."""
    opts = SyncOptions(
        repo=flags.repo,
        instance=flags.instance_repo,
        instance_name=flags.instance_name,
        path=flags.path,
        ref=flags.ref,
        default_namespace=namespaces.default,
        allowed_namespaces=flags.allowed_namespaces,
        denied_namespaces=flags.denied_namespaces,
        watch_namespace=flags.watch_namespace,
        create_namespace=flags.create_namespace,
        adopt=flags.adopt,
        prune=flags.prune,
        allow_empty=flags.allow_empty,
        prune_max_fraction=flags.prune_max_fraction,
        concurrency=flags.concurrency,
        identity=instance,
        full_every=full_every,
        await_dependencies=await_dependencies,
    )
    state = StateWriter(
        controller.kube,
        namespaces.status,
        instance.name,
        events=controller.events,
        field_manager=flags.field_manager,
    )
    records = Records(
        controller.kube, state.namespace, state.name, instance.name, rollout.RECORD_PREFIXES
    )
    return Syncer(controller, source(flags), opts, state, records)


def emit(doc: Any, output: str) -> None:
    if output == "json":
        click.echo(json.dumps(doc, indent=2, default=str))
    else:
        click.echo(yaml.safe_dump(doc, sort_keys=False), nl=False)


@dataclass(frozen=True)
class PinnedLoad:
    """The manifests a sync would use under the pins, for ``gitsync diff``."""

    #: the revision of the MyApps without a pin of their own (the instance's pin, or
    #: the ref's head)
    revision: str
    loaded: manifests.LoadResult
    selection: pinlib.Selection[manifests.DesiredApp]
    #: by key: the MyApps a pin holds back from the head, with the pin
    held: dict[str, pinlib.Pin]
    #: why the head could not be read to tell what is held ("" when it was)
    head_unread: str = ""


def load_pinned(
    flags: Flags, namespace: str, pins: pinlib.Pins, after: str = "", accept: str = ""
) -> PinnedLoad:
    """Fetch and load the manifests as a sync pass would under ``pins``: the instance's
    pin, else the head; each pinned MyApp from its commit; and what they hold back."""
    src = source(flags)
    base_sha = pinlib.base_revision(pins)
    rev = src.fetch_commit(base_sha) if base_sha else src.fetch(after=after, accept=accept)
    loaded = read_manifests(flags, rev, namespace)
    base = {app.key: app for app in loaded.apps}
    selection = PinnedRevisions(src, lambda r: read_manifests(flags, r, namespace)).select(
        base, pins
    )
    if not pins:
        return PinnedLoad(str(rev), loaded, selection, {})
    head, unread = base, ""
    if base_sha:
        try:
            head_rev = src.fetch(after=after, accept=accept)
            head = {app.key: app for app in read_manifests(flags, head_rev, namespace).apps}
        except GitsyncError as e:  # held all the same; only what it holds is not known
            head, unread = {}, str(e)
    objs = {k: a.obj for k, a in selection.apps.items()}
    at_head = {k: a.obj for k, a in head.items() if k not in selection.missing}
    held = pinlib.held(at_head, objs, pins) if not unread else {}
    return PinnedLoad(str(rev), loaded, selection, held, unread)
