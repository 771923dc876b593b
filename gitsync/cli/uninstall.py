"""``gitsync uninstall``: remove gitsync and keep the applications serving.

In this order, each step only once the one before it is done: stop the daemon (its
Deployment scaled to 0, its Pods gone, so nothing takes the Deployments back), release
every Deployment from its MyApp (:mod:`gitsync.model.release`: no rollout), and only
then, if asked, delete the MyApps and the CRD (the MyApps with orphan propagation, so
that even a Deployment released since by someone else's hand is never collected).
Kept by default: the CRD and the MyApps, so that a gitsync installed again adopts
every Deployment back without a rollout.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import Any

import click

from gitsync.cli import common
from gitsync.cli.flags import Flags, parse
from gitsync.cli.options import cluster_options, expected_errors, opt
from gitsync.errors import APIConflictError, APINotFoundError, GitsyncError
from gitsync.kube.client import Kube, path_of, resource_path
from gitsync.model import release
from gitsync.model.api import GROUP, KIND, MANAGED_BY, MANAGED_BY_LABEL, PLURAL, Obj

FIELD_MANAGER = "gitsync-uninstall"
CRD_NAME = f"{PLURAL}.{GROUP}"
CRD_PATH = resource_path("apiextensions.k8s.io/v1", "customresourcedefinitions", name=CRD_NAME)
#: tries of one Deployment's release when it changes between its read and its patch
RELEASE_TRIES = 5


class UninstallError(GitsyncError):
    """A step did not finish: the steps after it were not taken."""


@click.command()
@cluster_options
@click.option(
    "-n",
    "--namespace",
    default="gitsync-system",
    show_default=True,
    help="Where gitsync's own Deployment runs.",
)
@click.option(
    "--selector",
    default="app.kubernetes.io/name=gitsync",
    show_default=True,
    help="The label selector of gitsync's own Deployment(s) there.",
)
@opt(
    "--watch-namespace",
    env="WATCH_NAMESPACE",
    default="",
    help="Release the Deployments of the MyApps in this namespace only (default: all).",
)
@click.option(
    "--delete-myapps",
    is_flag=True,
    help="Then delete every MyApp (their Deployments stay, released).",
)
@click.option(
    "--keep-crd/--delete-crd",
    default=True,
    show_default=True,
    help="--delete-crd: then delete the MyApp CRD too (and with it every MyApp).",
)
@click.option("--dry-run", is_flag=True, help="Say what would be done; change nothing.")
@click.option(
    "--timeout",
    type=click.FloatRange(min=1),
    default=120.0,
    show_default=True,
    help="Seconds to wait for each step (gitsync's Pods to end, MyApps to go).",
)
@expected_errors(1)
def uninstall(
    namespace: str,
    selector: str,
    delete_myapps: bool,
    keep_crd: bool,
    dry_run: bool,
    timeout: float,
    **kw: Any,
) -> None:
    """Remove gitsync and keep every application's Deployment serving.

    Stops gitsync (its Deployment in NAMESPACE scaled to 0 and its Pods gone), then
    releases each MyApp's Deployment from its MyApp, so that deleting the MyApps or the
    CRD (or `kubectl delete -k deploy/`) no longer deletes the Deployments. Nothing is
    rolled out: only metadata changes. The MyApps and the CRD are kept unless
    --delete-myapps or --delete-crd; installed again, gitsync adopts the Deployments
    back, again without a rollout. Exit 0 done, 1 a step failed (the steps after it
    were not taken), 2 usage."""
    flags: Flags = parse(kw)
    if not keep_crd and flags.watch_namespace:
        raise click.UsageError(
            "--delete-crd deletes every MyApp in the cluster, not only those in "
            "--watch-namespace: release them all (no --watch-namespace), or keep the CRD"
        )
    kube = common.connect(flags)

    def say(line: str) -> None:
        click.echo(f"(dry run) {line}" if dry_run else line)

    _stop_daemon(kube, namespace, selector, timeout, dry_run, say)
    scope = flags.watch_namespace or None
    _release(kube, scope, dry_run, say)
    if delete_myapps or not keep_crd:
        _delete_myapps(kube, scope, timeout, dry_run, say)
    else:
        myapps = len(_myapps(kube, scope))
        say(f"kept {myapps} {KIND}s and the CustomResourceDefinition {CRD_NAME}")
    if not keep_crd:
        if dry_run:
            say(f"would delete the CustomResourceDefinition {CRD_NAME}")
        else:
            kube.delete(CRD_PATH, subject=f"CustomResourceDefinition/{CRD_NAME}")
            _wait(lambda: _gone(kube, CRD_PATH), timeout, f"CustomResourceDefinition/{CRD_NAME}")
            say(f"deleted the CustomResourceDefinition {CRD_NAME}")


def _stop_daemon(
    kube: Kube,
    namespace: str,
    selector: str,
    timeout: float,
    dry_run: bool,
    say: Callable[[str], None],
) -> None:
    found = kube.list_items(
        resource_path("apps/v1", "deployments", namespace), params={"labelSelector": selector}
    )
    if not found:
        say(f"no gitsync Deployment in {namespace} ({selector}): nothing to stop")
        return
    for dep in found:
        name = dep["metadata"]["name"]
        replicas = dep.get("spec", {}).get("replicas", 1)
        if dry_run:
            say(f"would scale {namespace}/{name} from {_count(replicas, 'replica')} to 0")
            continue
        kube.merge_patch(
            resource_path("apps/v1", "deployments", namespace, name),
            {"spec": {"replicas": 0}},
            field_manager=FIELD_MANAGER,
            subject=f"Deployment/{namespace}/{name}",
        )
        pods = release.label_selector(dep.get("spec", {}).get("selector") or {})
        path = resource_path("apps/v1", "deployments", namespace, name)
        _wait(
            lambda: _stopped(kube, path, namespace, pods),  # noqa: B023 - waited for here
            timeout,
            f"the Pods of Deployment/{namespace}/{name}",
        )
        say(f"stopped {namespace}/{name} ({_count(replicas, 'replica')}, now 0; its Pods are gone)")


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _stopped(kube: Kube, path: str, namespace: str, selector: str | None) -> bool:
    """No Pod of the Deployment is left: none its selector finds, and none its status
    counts (the only word when the selector cannot be said as a query)."""
    status = kube.get(path).get("status") or {}
    if status.get("replicas"):
        return False
    if selector is None:
        return True
    pods = kube.list_items(
        resource_path("v1", "pods", namespace), params={"labelSelector": selector}
    )
    return not pods


def _release(kube: Kube, scope: str | None, dry_run: bool, say: Callable[[str], None]) -> None:
    deployments = kube.list_items(
        path_of("Deployment", scope or ""),
        params={"labelSelector": f"{MANAGED_BY_LABEL}={MANAGED_BY}"},
    )
    released = 0
    for dep in deployments:
        meta = dep["metadata"]
        who = f"Deployment/{meta['namespace']}/{meta['name']}"
        if release.release_patch(dep) is None:
            continue
        if not dry_run:
            _release_one(kube, dep, who)
        released += 1
    verb = "would release" if dry_run else "released"
    say(
        f"{verb} {_count(released, 'Deployment')} from their {KIND}s "
        "(no rollout: their Pod templates are unchanged)"
    )


def _release_one(kube: Kube, dep: Obj, who: str) -> None:
    meta = dep["metadata"]
    path = path_of("Deployment", meta["namespace"], meta["name"])
    for _ in range(RELEASE_TRIES):
        patch = release.release_patch(dep)
        if patch is None:
            return  # released since (another run of uninstall)
        try:
            kube.merge_patch(path, patch, field_manager=FIELD_MANAGER, subject=who)
            return
        except APIConflictError:
            dep = kube.get(path, subject=who)  # changed since it was read: read it again
        except APINotFoundError:
            return  # deleted meanwhile: nothing to keep
    raise UninstallError(f"{who} kept changing; it was not released: run uninstall again")


def _myapps(kube: Kube, scope: str | None) -> list[Obj]:
    try:
        return kube.list_items(path_of(KIND, scope or ""))
    except APINotFoundError:
        return []  # no CRD: no MyApp


def _delete_myapps(
    kube: Kube, scope: str | None, timeout: float, dry_run: bool, say: Callable[[str], None]
) -> None:
    myapps = _myapps(kube, scope)
    if dry_run:
        say(f"would delete {len(myapps)} {KIND}s (their Deployments stay)")
        return
    orphan = {"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": "Orphan"}
    for app in myapps:
        meta = app["metadata"]
        path = path_of(KIND, meta["namespace"], meta["name"])
        with contextlib.suppress(APINotFoundError):  # deleted meanwhile
            kube.delete(path, subject=f"{KIND}/{meta['namespace']}/{meta['name']}", body=orphan)
    _wait(lambda: not _myapps(kube, scope), timeout, f"the {KIND}s to be deleted")
    say(f"deleted {len(myapps)} {KIND}s (their Deployments stay)")


def _gone(kube: Kube, path: str) -> bool:
    try:
        kube.get(path)
    except APINotFoundError:
        return True
    return False


def _wait(done: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            raise UninstallError(
                f"{what}: not done after {timeout:.0f}s; the steps after it were not taken "
                "(run uninstall again)"
            )
        time.sleep(1.0)
