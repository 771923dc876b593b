"""The API server's floor for a cold sync, and gitsync's cold sync timed to the same end.

The floor is the fewest requests a cold sync of N MyApps needs, sent by a bare client
and nothing else: per MyApp one server-side apply that creates it, one that creates its
Deployment (owned by it, so it waits for the MyApp's uid) and one status write. Each
worker sends one MyApp's three in order; the pool's size that is fastest at N (of
``WORKERS``) is the floor.

gitsync's cold sync (one pass, the operator in-process with 8 workers; ``gitsync run``
has 4 by default, ``--workers``) is timed to the same end point: every MyApp and
Deployment created and every MyApp's status written (``status.observedGeneration``
present), as its own caches see it. Rollout (Pods, Available) is not in either; the
status write gitsync holds back for the deployment controller's first word is, and is
listed with every request gitsync sends beyond the floor's 3 per MyApp.

A pushed change has a floor too (:func:`push_once`): per changed MyApp, the apply of its
new spec and then of its Deployment, from 64 threads, timed as the curve times gitsync's
webhook push (:func:`until_applied`: every changed Deployment seen with the new image).
The deployment controller's answers to the new templates (a ReplicaSet each, status
writes) load the server in both.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import yaml

from bench.common import (
    app_yaml,
    delta,
    git_repo,
    image_of,
    namespace,
    server_requests,
    wait,
)
from gitsync.gitops.sync import Syncer, SyncOptions
from gitsync.kube.client import Kube, path_of
from gitsync.model.render import render
from gitsync.reconcile.controller import Controller, ControllerConfig
from gitsync.source.checkout import open_source

WORKERS = (16, 32, 64)
MANAGER = "floor"
Results = dict[str, Any]


def _myapp_then_deployment(kube: Kube, ns: str, name: str, manifest: str) -> dict[str, Any]:
    """The MyApp of ``manifest`` applied, then its Deployment (owned by it, so it waits
    for the MyApp's uid); the MyApp as the server holds it."""
    body = yaml.safe_load(manifest)
    applied = kube.apply(path_of("MyApp", ns, name), body, field_manager=MANAGER, force=True)
    deployment = render(applied)
    kube.apply(path_of("Deployment", ns, name), deployment, field_manager=MANAGER, force=True)
    return applied


def _one(kube: Kube, ns: str, name: str, replicas: int = 1) -> None:
    created = _myapp_then_deployment(kube, ns, name, app_yaml(ns, name, replicas=replicas))
    status = {
        "apiVersion": created["apiVersion"],
        "kind": created["kind"],
        "metadata": {"name": name, "namespace": ns},
        "status": {"observedGeneration": created["metadata"].get("generation", 1)},
    }
    kube.apply(path_of("MyApp", ns, name, "status"), status, field_manager=MANAGER, force=True)


def write(kube: Kube, ns: str, names: list[str], workers: int, replicas: int = 1) -> None:
    """The floor's 3 writes of each MyApp named, by ``workers`` threads."""
    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(lambda name: _one(kube, ns, name, replicas), names))


def floor_once(kube: Kube, n: int, workers: int, replicas: int = 1) -> float:
    """Seconds for ``workers`` threads to send the 3 writes of each of n MyApps."""
    ns = namespace(kube, "bench-floor")
    names = [f"app-{i:04d}" for i in range(n)]
    start = time.perf_counter()
    write(kube, ns, names, workers, replicas)
    return time.perf_counter() - start


def floor(kube: Kube, n: int) -> Results:
    """The floor at n: each pool size once, the fastest kept."""
    by_workers = {w: round(floor_once(kube, n, w), 2) for w in WORKERS}
    best = min(by_workers, key=lambda w: by_workers[w])
    return {"s": by_workers[best], "workers": best, "by_workers": by_workers}


def until_applied(
    kube: Kube,
    ns: str,
    names: list[str],
    image: str,
    send: Callable[[], None],
    timeout: float = 600.0,
) -> float:
    """Seconds from ``send()`` until every Deployment ``names`` in ``ns`` has ``image``:
    watched from the server's version before it, not polled (threads of GETs would load
    the API server the figure measures).

    A watch the server ends early (it may, under load: an ERROR event, or the stream
    closed) is resumed from the last version seen; one whose version is gone (410) is
    begun anew from the server's version now, and the Deployments still awaited read
    once (what they held before that version no event will bring)."""
    deps = path_of("Deployment", ns)
    rv = _version(kube, deps)
    start = time.perf_counter()
    deadline = start + timeout
    send()
    left = set(names)
    ended: list[str] = []
    while (remaining := deadline - time.perf_counter()) > 0:
        params: dict[str, str | int] = {
            "watch": "true",
            "resourceVersion": rv,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": max(1, int(remaining)),
        }
        why = "the server closed the watch"
        for event in kube.stream(deps, params=params, read_timeout=remaining + 60):
            obj = event.get("object") or {}
            if event.get("type") == "ERROR":
                why = f"{obj.get('code')} {obj.get('message')}"
                break
            rv = obj["metadata"]["resourceVersion"]
            name = obj["metadata"].get("name")
            if name in left and image_of(obj) == image:
                left.discard(name)
                if not left:
                    return time.perf_counter() - start
        if time.perf_counter() >= deadline:
            break
        ended.append(why)
        print(f"bench: the watch of {deps} ended early ({why}); resumed", flush=True)
        if why.startswith("410 "):
            rv = _version(kube, deps)
            left -= {n for n in left if image_of(kube.get(f"{deps}/{n}")) == image}
            if not left:
                return time.perf_counter() - start
        else:
            time.sleep(0.5)  # not at once: a server that closes watches at once
    early = f"; the watch ended early {len(ended)} times, last: {ended[-1]}" if ended else ""
    raise TimeoutError(
        f"{len(left)} of {len(names)} Deployments without {image} in {timeout:.0f} s{early}"
    )


def _version(kube: Kube, path: str) -> str:
    """The server's resource version now (a list of one item: read from etcd)."""
    return str(kube.list(path, params={"limit": 1})["metadata"]["resourceVersion"])


def push_once(
    kube: Kube, ns: str, names: list[str], image: str, workers: int, replicas: int = 1
) -> float:
    """The floor of a pushed change of the MyApps ``names`` (already in ``ns``) to
    ``image``: seconds until every one's Deployment has it, ``workers`` threads each
    sending one MyApp's two applies in order."""
    with ThreadPoolExecutor(workers) as pool:
        sent: list[Future[dict[str, Any]]] = []

        def send() -> None:
            sent.extend(
                pool.submit(
                    _myapp_then_deployment,
                    kube,
                    ns,
                    name,
                    app_yaml(ns, name, image, replicas=replicas),
                )
                for name in names
            )

        took = until_applied(kube, ns, names, image, send)
        for f in sent:
            f.result()  # a refused write is an error, not a fast floor
    return took


def written(c: Controller, n: int) -> Callable[[], bool]:
    def done() -> bool:
        apps = c.myapps.items()
        return (
            len(apps) >= n
            and len(c.deployments.items()) >= n
            and all("observedGeneration" in (a.get("status") or {}) for a in apps)
        )

    return done


def gitsync_cold(kube: Kube, tmp: Path, n: int) -> Results:
    """gitsync's cold sync of n MyApps (one pass, in-process operator), timed to every
    write accepted; its requests by verb."""
    ns = namespace(kube, "bench-floor-gitsync")
    bare, _work = git_repo(tmp, f"floor-{n}", ns, n)
    url = f"file://{bare}"
    c = Controller(kube, ControllerConfig(namespace=ns, workers=8))
    c.start()
    c.wait_synced(60)
    s = Syncer(
        c, open_source(url, "main", tmp / f"floor-{n}-cache"), SyncOptions(repo=url, path="apps")
    )
    ours0, server0 = dict(kube.requests), server_requests(kube)
    start = time.perf_counter()
    s.run()
    pass_s = time.perf_counter() - start
    wait("every write accepted", written(c, n), every=0.02)
    written_s = time.perf_counter() - start
    ours = {k: v - ours0.get(k, 0) for k, v in kube.requests.items() if v - ours0.get(k, 0)}
    server = delta(server_requests(kube), server0)
    c.stop()
    return {
        "s": round(written_s, 2),
        "pass_s": round(pass_s, 2),
        "requests": ours,
        "writes_per_myapp": round(
            sum(v for k, v in ours.items() if k.split("/")[0] in ("APPLY", "PATCH", "POST")) / n,
            2,
        ),
        # the server's count for MyApps and Deployments, the deployment controller's
        # writes (PUT/status) and the floor's and bench's own reads included
        "server_requests": server,
    }


def compare(kube: Kube, tmp: Path, sizes: list[int]) -> Results:
    """At each n: the floor, gitsync's cold sync to the same end, and their ratio."""
    out: Results = {}
    for n in sizes:
        fl = floor(kube, n)
        gs = gitsync_cold(kube, tmp, n)
        out[str(n)] = {"floor": fl, "gitsync": gs, "ratio": round(gs["s"] / fl["s"], 2)}
    return out
