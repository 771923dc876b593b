"""What several commands build from their flags: the Git source, the namespace rules,
this instance's identity, the controller and the syncer; and the JSON/YAML output."""

from __future__ import annotations

import json
import posixpath
from pathlib import Path
from typing import Any

import click
import yaml

from gitsync.gitops.sync import Syncer, SyncOptions
from gitsync.gitops.sync_state import StateWriter
from gitsync.kube import kubeconfig
from gitsync.kube.client import Kube
from gitsync.kube.kubeconfig import default_namespace
from gitsync.model import instance as instancelib
from gitsync.model.api import DEFAULT_FORCE_MANAGERS
from gitsync.reconcile.controller import Controller, ControllerConfig
from gitsync.source import localcheckout, manifests
from gitsync.source.cache import default_cache_dir
from gitsync.source.checkout import open_source
from gitsync.source.gitenv import Credentials
from gitsync.source.giturl import redact_url
from gitsync.source.keyring import verifier_of


def source(kw: dict[str, Any]) -> Any:
    cache = kw.get("cache_dir") or default_cache_dir()
    creds = Credentials(
        token_file=kw.get("token_file"),
        username=kw.get("git_username") or "git",
        ssh_key_file=kw.get("ssh_key_file"),
        known_hosts_file=kw.get("known_hosts_file"),
        ca_file=kw.get("git_ca_file"),
    )
    return open_source(
        kw["repo"],
        kw["ref"],
        cache,
        credentials=creds,
        timeout=kw["git_timeout"],
        allow_insecure=kw["allow_insecure_git"],
        verifier=verifier_of(kw),
        path=kw.get("path") or ".",
    )


def allowed(kw: dict[str, Any]) -> frozenset[str] | None:
    names = [n.strip() for n in (kw.get("allowed_namespaces") or "").split(",") if n.strip()]
    return frozenset(names) or None


def denied(kw: dict[str, Any]) -> tuple[str, ...]:
    patterns = [p.strip() for p in (kw.get("denied_namespaces") or "").split(",") if p.strip()]
    # in a Pod, its own namespace holds gitsync's Secrets and ServiceAccount: a MyApp
    # there could mount them
    own = kubeconfig.own_namespace()
    return tuple(dict.fromkeys([*patterns, *([own] if own else [])]))


def identity(kw: dict[str, Any]) -> instancelib.Instance:
    """This instance: by ``--instance-name``, else named after ``--instance-repo`` or
    ``--repo``, ``--path`` and ``--ref``; a local checkout as ``--repo`` stands for the
    repository it is a checkout of (:func:`named_after`)."""
    if "_identity" not in kw:
        name = kw.get("instance_name") or ""
        repo, path, ref = kw.get("repo") or "", kw.get("path") or ".", kw.get("ref") or "main"
        named = named_after(kw) if not name else None
        if named is None:
            kw["_identity"] = instancelib.resolve(name, kw.get("instance_repo") or repo, path, ref)
        else:
            # what this command line named before: its MyApps are adopted, not refused
            before = instancelib.resolve("", repo, path, ref)
            url, ipath, iref, how = named
            kw["_identity"] = instancelib.resolve("", url, ipath, iref).adopting(
                {before.name, *before.legacy_labels}
            )
            if how:  # a plain directory: its file:// URL, as sync --repo file://… names it
                kw["_named_after"] = (
                    f"instance {kw['_identity'].name}: named after {how}, ref {iref}, path "
                    f"{ipath} (--instance-repo or --instance-name names another)"
                )
    instance: instancelib.Instance = kw["_identity"]
    return instance


def instance_note(kw: dict[str, Any]) -> str:
    """Which instance a local directory as ``--repo`` was taken for, and why; or ""."""
    identity(kw)
    return str(kw.get("_named_after") or "")


def named_after(kw: dict[str, Any]) -> tuple[str, str, str, str] | None:
    """(repository URL, path, ref, how a checkout told them or "") that name the
    instance when ``--repo`` is a local directory and no ``--instance-repo`` says what it
    stands for; else None.

    A checkout is named as the daemon syncing its remote is: the remote's URL, the branch
    it follows, and ``--path`` from the top of the work tree; a directory with no remote,
    by its own ``file://`` URL. An explicit ``--ref`` still wins over the branch."""
    repo = kw.get("repo") or ""
    directory = Path(repo).expanduser() if repo else None
    if kw.get("instance_repo") or directory is None or not directory.is_dir():
        return None
    path, ref = kw.get("path") or ".", kw.get("ref") or "main"
    checkout = localcheckout.describe(directory.resolve())
    if checkout is None:
        return f"file://{directory.resolve()}", path, ref, ""
    path = posixpath.normpath(posixpath.join(checkout.prefix, path))
    if checkout.branch and not _given(kw, "ref"):
        ref = checkout.branch
    if checkout.remote:
        how = f"the checkout's remote {checkout.remote} {redact_url(checkout.url)}"
        return checkout.url, path, ref, how
    return f"file://{checkout.top}", path, ref, "the checkout, which has no remote"


def _given(kw: dict[str, Any], param: str) -> bool:
    """Whether ``--<param>`` was given (as a flag or its variable), not left at its
    default."""
    ctx = click.get_current_context(silent=True)
    if ctx is None:
        return kw.get(param) not in (None, "", "main")
    source = ctx.get_parameter_source(param)
    return source not in (None, click.core.ParameterSource.DEFAULT)


def namespaces(kw: dict[str, Any], kube: Kube | None) -> None:
    """kubectl's rule for namespaces not given as flags: the kubeconfig context's (in a
    Pod, its own), else ``default``."""
    fallback = kube.namespace if kube is not None else default_namespace()
    for key in ("namespace", "status_namespace"):
        if key in kw and not kw[key]:
            kw[key] = fallback


def load(kw: dict[str, Any], after: str = "", accept: str = "") -> tuple[str, manifests.LoadResult]:
    rev = source(kw).fetch(after=after, accept=accept)
    loaded = manifests.load(
        rev.dir,
        kw["path"],
        default_namespace=kw["namespace"],
        allowed_namespaces=allowed(kw),
        denied_namespaces=denied(kw),
        watch_namespace=kw.get("watch_namespace"),
        omitted=rev.omitted,
    )
    return str(rev), loaded


def controller(kw: dict[str, Any], **extra: Any) -> Controller:
    kube = Kube.from_kubeconfig(kw.get("kubeconfig"), kw.get("context"))
    # a wrong CA or a refused token ends the command here, with the reason, rather than
    # in informers that would retry it until a timeout
    kube.check()
    namespaces(kw, kube)
    config = ControllerConfig(
        field_manager=kw["field_manager"],
        default_policy=kw.get("drift_policy", "correct"),
        force_managers=tuple(kw.get("force_managers") or DEFAULT_FORCE_MANAGERS),
        **extra,
    )
    return Controller(kube, config)


def syncer(kw: dict[str, Any], controller: Controller) -> Syncer:
    opts = SyncOptions(
        repo=kw["repo"],
        instance=kw["instance_repo"],
        instance_name=kw["instance_name"],
        path=kw["path"],
        ref=kw["ref"],
        default_namespace=kw["namespace"],
        allowed_namespaces=allowed(kw),
        denied_namespaces=denied(kw),
        watch_namespace=kw.get("watch_namespace"),
        create_namespace=kw["create_namespace"],
        adopt=kw["adopt"],
        prune=kw["prune"],
        allow_empty=kw["allow_empty"],
        prune_max_fraction=kw["prune_max_fraction"],
        concurrency=kw["concurrency"],
        identity=identity(kw),
    )
    state = StateWriter(
        controller.kube,
        kw["status_namespace"],
        identity(kw).name,
        events=controller.events,
        field_manager=kw["field_manager"],
    )
    return Syncer(controller, source(kw), opts, state)


def emit(doc: Any, output: str) -> None:
    if output == "json":
        click.echo(json.dumps(doc, indent=2, default=str))
    else:
        click.echo(yaml.safe_dump(doc, sort_keys=False), nl=False)
