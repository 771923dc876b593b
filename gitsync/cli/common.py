"""What several commands build from their flags: the Git source, the namespace rules,
this instance's identity, the controller and the syncer; and the JSON/YAML output."""

from __future__ import annotations

import json
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
from gitsync.source import manifests
from gitsync.source.cache import default_cache_dir
from gitsync.source.checkout import open_source
from gitsync.source.gitenv import Credentials
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
    return instancelib.resolve(
        kw.get("instance_name") or "",
        kw.get("instance_repo") or kw.get("repo") or "",
        kw.get("path") or ".",
        kw.get("ref") or "main",
    )


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
