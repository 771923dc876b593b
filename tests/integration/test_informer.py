"""The informer against the real API server: a write's reply observed after the
watch deleted the object does not bring it back."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from gitsync.kube.client import Kube, path_of, resource_path
from gitsync.kube.informer import Informer
from gitsync.model.api import Obj
from tests.support import myapp, wait_until


@pytest.fixture
def configmaps(kube: Kube, namespace: str) -> Iterator[tuple[Informer, list[tuple[str, Obj]]]]:
    inf = Informer(kube, resource_path("v1", "configmaps", namespace), name="configmaps")
    seen: list[tuple[str, Obj]] = []
    lock = threading.Lock()

    def record(kind: str, obj: Obj) -> None:
        with lock:
            seen.append((kind, obj))

    inf.add_handler(record)
    inf.start()
    assert inf.wait_synced(30)
    yield inf, seen
    inf.stop()


def test_a_reply_observed_after_the_deletion_does_not_resurrect_the_object(
    kube: Kube, namespace: str, configmaps: tuple[Informer, list[tuple[str, Obj]]]
) -> None:
    inf, seen = configmaps
    path = resource_path("v1", "configmaps", namespace)
    created = kube.create(path, {"metadata": {"name": "web"}, "data": {"a": "1"}})
    updated = kube.request("PUT", f"{path}/web", body=created | {"data": {"a": "2"}})
    kube.delete(f"{path}/web")

    deleted = wait_until(
        lambda: next(
            (o for k, o in seen if k == "DELETED" and o["metadata"]["name"] == "web"), None
        ),
        what="the watch's DELETED event",
    )
    # what the fix relies on, as this API server does it: the DELETED event carries
    # the same uid and a resourceVersion later than every write before the deletion
    rv = int(deleted["metadata"]["resourceVersion"])
    assert deleted["metadata"]["uid"] == updated["metadata"]["uid"]
    assert rv > int(updated["metadata"]["resourceVersion"])

    inf.observe(updated)  # the PUT's reply, arriving late
    inf.observe(created)
    assert inf.get(f"{namespace}/web") is None

    # a new object of the same name is another object: its reply is taken at once
    again = kube.create(path, {"metadata": {"name": "web"}, "data": {"a": "3"}})
    inf.observe(again)
    cached = inf.get(f"{namespace}/web")
    assert cached is not None and cached["metadata"]["uid"] == again["metadata"]["uid"]


def test_a_new_label_selector_ends_the_open_watch_at_once(kube: Kube, namespace: str) -> None:
    path = resource_path("v1", "configmaps", namespace)
    for name, shard in (("a", "1"), ("b", "2")):
        kube.create(path, {"metadata": {"name": name, "labels": {"shard": shard}}})
    inf = Informer(kube, path, label_selector="shard=1", name="configmaps")
    inf.start()
    try:
        assert inf.wait_synced(30)
        wait_until(lambda: kube.requests["WATCH"] >= 1, timeout=10, what="the watch to open")
        assert [o["metadata"]["name"] for o in inf.items()] == ["a"]
        watches = kube.requests["WATCH"]
        started = time.monotonic()
        inf.reselect("shard=2")
        assert inf.wait_synced(10)
        # the server's stream was shut, not left to its four-minute timeout
        assert time.monotonic() - started < 5
        assert [o["metadata"]["name"] for o in inf.items()] == ["b"]
        wait_until(lambda: kube.requests["WATCH"] > watches, timeout=10, what="a new watch")
        # the new watch is the new selection's: a change in shard 2 arrives, shard 1's not
        kube.create(path, {"metadata": {"name": "c", "labels": {"shard": "2"}}})
        kube.create(path, {"metadata": {"name": "d", "labels": {"shard": "1"}}})
        wait_until(lambda: inf.get(f"{namespace}/c"), timeout=10, what="c in the cache")
        assert inf.get(f"{namespace}/d") is None
    finally:
        inf.stop()


@pytest.mark.parametrize("resource", ["configmaps", "myapps"])
def test_a_list_read_item_by_item_is_the_list_the_server_sends(
    kube: Kube, crd: str, namespace: str, resource: str
) -> None:
    # a built-in list (Go's struct order, items without apiVersion and kind) and a
    # custom resource's (an unstructured map: items between apiVersion and kind), over
    # two pages: each item handed over, and the list's metadata, as json.loads reads them
    # only the test's own objects: the controller-manager puts kube-root-ca.crt in a new
    # namespace when it gets to it, which may be between two of the lists below
    mine = {"labelSelector": "test=list-each"}
    labels = {"test": "list-each"}
    if resource == "configmaps":
        path = resource_path("v1", "configmaps", namespace)
        for n in range(3):
            meta = {"name": f"c{n}", "labels": labels}
            kube.create(path, {"metadata": meta, "data": {"n": "ü" * n}})
    else:
        path = path_of("MyApp", namespace)
        for n in range(3):
            app = myapp(namespace, f"m{n}", image=f"img:{n}")
            app["metadata"]["labels"] = labels
            kube.create(path, app)
    items: list[Obj] = []
    head = kube.list_each(path, lambda item, _: items.append(item), params={"limit": 2, **mine})
    # the same list read whole at the same resource version: any write in the cluster
    # between two reads moves the version a list reports, and its continue token
    version = head["metadata"]["resourceVersion"]
    at = {"resourceVersion": version, "resourceVersionMatch": "Exact"}
    whole = kube.list(path, params={"limit": 2, **mine, **at})
    assert items == whole["items"] and len(items) == 2
    assert head == {k: v for k, v in whole.items() if k != "items"}
    assert head["metadata"]["continue"]
    rest: list[Obj] = []
    last = kube.list_each(
        path,
        lambda item, _: rest.append(item),
        params={"limit": 2, "continue": head["metadata"]["continue"], **mine},
    )
    assert [o["metadata"]["name"] for o in items + rest] == [
        o["metadata"]["name"] for o in kube.list(path, params=mine)["items"]
    ]
    assert not last["metadata"].get("continue")  # a custom resource's list says ""
