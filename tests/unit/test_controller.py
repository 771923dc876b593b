"""The controller's guarantees that need no API server: one reconcile of a key at a time."""

from __future__ import annotations

import threading
import time

from kubernetes import client as k8s_client

from gitsync.api import Obj
from gitsync.controller import Controller
from gitsync.kube import Kube

KEY = "ns/web"


def offline_controller() -> Controller:
    # nothing is started and nothing below reaches the (unroutable) server
    return Controller(Kube(k8s_client.Configuration(host="http://127.0.0.1:9")))


def test_reconciles_of_one_key_never_overlap_even_when_the_key_is_forgotten() -> None:
    """The sync pass calls reconcile from its own threads, beside the workers; a MyApp
    that is gone is forgotten inside the lock, which must not hand out a second one."""
    c = offline_controller()
    inside = 0
    overlaps = 0
    entries = 0
    count_lock = threading.Lock()

    def slow_get(key: str) -> Obj | None:
        # runs inside reconcile's critical section; None sends reconcile to _forget
        nonlocal inside, overlaps, entries
        with count_lock:
            inside += 1
            entries += 1
            overlaps += inside > 1
        time.sleep(0.002)
        with count_lock:
            inside -= 1
        return None

    c.myapps.get = slow_get  # type: ignore[method-assign]

    def hammer() -> None:
        for _ in range(40):
            assert c.reconcile(KEY) is None

    threads = [threading.Thread(target=hammer) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert entries == 6 * 40
    assert overlaps == 0
    # forgotten keys leave nothing behind: the lock table does not grow with churn
    assert len(c._key_locks) == 0
