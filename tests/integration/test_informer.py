"""The informer against the real API server: a write's reply observed after the
watch deleted the object does not bring it back."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from gitsync.kube.client import Kube, resource_path
from gitsync.kube.informer import Informer
from gitsync.model.api import Obj
from tests.support import wait_until


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
