"""Events of a cold sync: written in the background, similar ones folded, so a pass
of many new MyApps spends its API server requests on the MyApps rather than on Events."""

from __future__ import annotations

from pathlib import Path

from gitsync.kube.client import Kube, resource_path
from gitsync.kube.event_correlator import AGGREGATE_PREFIX, SIMILAR_MAX
from gitsync.reconcile.controller import Controller
from tests.gitserver import Upstream
from tests.integration.test_sync import syncer
from tests.support import app_yaml

N = 50


def test_a_cold_sync_of_many_myapps_folds_its_created_events(
    kube: Kube, namespace: str, controller: Controller, upstream: Upstream, cache_dir: Path
) -> None:
    upstream.commit(
        {f"apps/app-{i:02d}.yaml": app_yaml(namespace, f"app-{i:02d}") for i in range(N)}
    )
    s = syncer(controller, upstream.file_url, cache_dir, namespace)
    result = s.run()
    assert result.ok, result.errors
    assert controller.events.flush(10), "Events still queued"

    items = kube.list(resource_path("v1", "events", namespace))["items"]
    created = [
        e for e in items if e["reason"] == "Created" and e["involvedObject"]["kind"] == "MyApp"
    ]
    single = [e for e in created if not e["message"].startswith(AGGREGATE_PREFIX)]
    [aggregate] = [e for e in created if e["message"].startswith(AGGREGATE_PREFIX)]
    assert len(single) == SIMILAR_MAX, [e["message"] for e in single]
    assert all(e["count"] == 1 for e in single)
    # every MyApp's "Created" is on the server: ten on their own, the rest counted
    assert aggregate["count"] == N - SIMILAR_MAX
    named = {e["involvedObject"]["name"] for e in single}
    assert aggregate["involvedObject"]["name"] not in named
    assert aggregate["message"].removeprefix(AGGREGATE_PREFIX).startswith("Deployment app-")
    # one Event object (one POST) per new MyApp before; now eleven for the whole pass
    # (the API server's request counters are not used here: they count every client's
    # Events, the controller-manager's and other tests')
    assert len(created) == SIMILAR_MAX + 1
    assert sum(e["count"] for e in created) == N
