"""``gitsync uninstall``: remove gitsync and keep the applications serving.

In this order, each step only once the one before it is done: stop the daemon (its
Deployment scaled to 0, its Pods gone, so nothing takes the Deployments back), make sure
no other daemon runs (none renews a Lease: :mod:`gitsync.kube.holders`; one outside that
Deployment would take the Deployments back, and the CRD's deletion would then take the
applications), release every Deployment from its MyApp (:mod:`gitsync.model.release`: no
rollout) and see that the release holds for a settle period, and only then, if asked,
delete the MyApps and the CRD (the MyApps with orphan propagation, so that even a
Deployment released since by someone else's hand is never collected).
Kept by default: the CRD and the MyApps, so that a gitsync installed again adopts
every Deployment back without a rollout.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import time
from collections.abc import Callable
from typing import Any

import click

from gitsync.cli import common
from gitsync.cli.flags import Flags, parse
from gitsync.cli.options import cluster_options, expected_errors, opt
from gitsync.errors import APIConflictError, APINotFoundError, GitsyncError
from gitsync.kube import holders
from gitsync.kube.client import Kube, path_of, resource_path
from gitsync.model import release
from gitsync.model.api import GROUP, KIND, MANAGED_BY, MANAGED_BY_LABEL, PLURAL, Obj

FIELD_MANAGER = "gitsync-uninstall"
CRD_NAME = f"{PLURAL}.{GROUP}"
CRD_PATH = resource_path("apiextensions.k8s.io/v1", "customresourcedefinitions", name=CRD_NAME)
#: tries of one Deployment's release when it changes between its read and its patch
RELEASE_TRIES = 5
#: how long the Leases are watched at least: a live daemon renews every retry period
#: (2 s), and a standby takes a released leader Lease within one
WATCH_LEASES = 5.0
#: seconds between two looks at the Leases and the released Deployments
LOOK_EVERY = 0.5


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
@click.option(
    "--settle",
    type=click.FloatRange(min=0),
    default=10.0,
    show_default=True,
    help="Seconds to watch that no released Deployment is taken back before going on.",
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
    settle: float,
    timeout: float,
    **kw: Any,
) -> None:
    """Remove gitsync and keep every application's Deployment serving.

    Stops gitsync (its Deployment in NAMESPACE scaled to 0 and its Pods gone), refuses
    while any other gitsync daemon still renews a Lease (one outside that Deployment
    would take the Deployments back), then releases each MyApp's Deployment from its
    MyApp and watches for --settle seconds that none is taken back, so that deleting the
    MyApps or the CRD (or `kubectl delete -k deploy/`) no longer deletes the Deployments.
    Nothing is rolled out: only metadata changes. The MyApps and the CRD are kept unless
    --delete-myapps or --delete-crd; installed again, gitsync adopts the Deployments
    back, again without a rollout. Exit 0 done, 1 a step failed or a daemon still runs
    (the steps after it were not taken), 2 usage."""
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
    watch = None if dry_run else _no_daemon(kube, scope, timeout, say)
    released = _release(kube, scope, dry_run, say)
    if watch is not None:
        _settle(kube, watch, released, settle, say)
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


def _release(kube: Kube, scope: str | None, dry_run: bool, say: Callable[[str], None]) -> list[str]:
    """Release every Deployment of ``scope`` from its MyApp; those released (by name)."""
    deployments = kube.list_items(
        path_of("Deployment", scope or ""),
        params={"labelSelector": f"{MANAGED_BY_LABEL}={MANAGED_BY}"},
    )
    released = []
    for dep in deployments:
        meta = dep["metadata"]
        who = f"Deployment/{meta['namespace']}/{meta['name']}"
        if release.release_patch(dep) is None:
            continue
        if not dry_run:
            _release_one(kube, dep, who)
        released.append(who)
    verb = "would release" if dry_run else "released"
    say(
        f"{verb} {_count(len(released), 'Deployment')} from their {KIND}s "
        "(no rollout: their Pod templates are unchanged)"
    )
    return released


def _look(kube: Kube, watch: holders.Watch, then: str) -> None:
    """Look at the Leases once more; refused when a daemon was seen renewing one."""
    leases = kube.list_items(holders.LEASES, params=holders.LEASE_PARAMS, subject="Leases")
    watch.observe(leases, time.monotonic(), dt.datetime.now(dt.UTC))
    alive = watch.alive()
    if alive:
        raise UninstallError(
            f"gitsync still runs, renewing {_count(len(alive), 'Lease')}: "
            f"{', '.join(map(str, alive))}; {then}: {holders.HOW_TO_STOP}, then run "
            "uninstall again"
        )


def _no_daemon(
    kube: Kube, scope: str | None, timeout: float, say: Callable[[str], None]
) -> holders.Watch:
    """Wait until no gitsync Lease is held by a daemon that may still write in ``scope``:
    refused at once when one is seen renewing; a Lease left by a daemon that did not
    give it up (killed) is waited out. The watch goes on through the settle period."""
    watch = holders.Watch(scope)
    start = time.monotonic()
    while True:
        _look(kube, watch, "nothing was released")
        now = time.monotonic()
        if now - start >= WATCH_LEASES and not watch.pending:
            break
        if now - start > timeout:
            lease = min(watch.pending, key=watch.pending.__getitem__)
            raise UninstallError(
                f"{lease}: still held after {timeout:.0f}s, though not renewed; the steps "
                "after it were not taken (run uninstall again)"
            )
        time.sleep(LOOK_EVERY)
    say(f"no other gitsync runs: none renewed a Lease in {now - start:.0f}s")
    return watch


def _settle(
    kube: Kube,
    watch: holders.Watch,
    released: list[str],
    seconds: float,
    say: Callable[[str], None],
) -> None:
    """See for ``seconds`` that no released Deployment is taken back (and that no daemon
    starts renewing meanwhile): only then is the release said to hold."""
    end = time.monotonic() + seconds
    while True:
        _look(kube, watch, "it would take the released Deployments back")
        back = [who for who in released if _owned(kube, who)]
        if back:
            more = f" (and {len(back) - 1} more)" if len(back) > 1 else ""
            raise UninstallError(
                f"{back[0]}{more} is owned by its {KIND} again since its release: something still "
                "applies the MyApps without a Lease (a `gitsync sync` in CI, or `gitsync run "
                "--no-leader-elect`); stop it, then run uninstall again"
            )
        if time.monotonic() >= end:
            break
        time.sleep(LOOK_EVERY)
    say(f"the release held: no Deployment taken back in {seconds:.0f}s")


def _owned(kube: Kube, who: str) -> bool:
    _, namespace, name = who.split("/")
    try:
        dep = kube.get(path_of("Deployment", namespace, name), subject=who)
    except APINotFoundError:
        return False  # deleted meanwhile: nothing to keep
    return release.release_patch(dep) is not None


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
