"""The side-by-side benchmark (gitsync next to Flux) runs end to end at N=5.

A smoke run that keeps the harness working (``make bench`` is the real run): every
scenario for both tools against the control plane the tests use, then the
results written as JSON, Markdown and a plot.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import curve as curvelib
from bench import floor as floorlib
from bench import memory as memorylib
from bench import order as orderlib
from bench import report, versus
from bench import rollback as rollbacklib
from gitsync.kube.client import Kube, path_of
from tests.support import SHARDED

# the benchmark's daemons run as it configures them (its part "sharding" runs sharded ones)
pytestmark = pytest.mark.skipif(SHARDED, reason="the benchmark configures its own daemons")


def test_gitsync_and_flux_side_by_side_at_n5(kube: Kube, crd: str, tmp_path: Path) -> None:
    settings = versus.Settings(
        n=5, runs=1, interval=5.0, steady_intervals=1, timeout=90.0, kustomizations=2
    )
    out = versus.versus(kube, tmp_path / "work", settings)

    assert set(out["runs_by_tool"]) == {"gitsync", "flux", "flux-tuned"}
    for tool, runs in out["runs_by_tool"].items():
        (r,) = runs
        assert r["cold_sync_s"] > 0, tool
        assert r["push_to_applied_s"]["objects"] == 1, tool
        assert r["drift"]["objects"] == 4, tool  # the fifth has driftPolicy: report
        assert r["drift"]["reverted_s"]["max"] < 90, tool
        assert r["prune_s"]["objects"] == 1, tool
        assert r["steady"]["rss_mib"] > 10, tool  # a live process was measured
        assert r["diff"]["exit"] == 0, (tool, r["diff"])  # nothing changed
    flux_steady = out["runs_by_tool"]["flux"][0]["steady"]
    gitsync_steady = out["runs_by_tool"]["gitsync"][0]["steady"]
    # Flux re-reads its objects every interval; gitsync's steady state is watches only
    assert flux_steady["client_requests_per_interval_total"] > 0
    writes = {"POST", "PUT", "PATCH", "DELETE", "APPLY"}
    assert not {v for v in gitsync_steady["client_requests_per_interval"] if v in writes}
    # gitsync shows drift it was told to leave in status; Flux has no such place
    assert out["runs_by_tool"]["gitsync"][0]["drift"]["in_status_objects"] == 1
    assert out["runs_by_tool"]["flux"][0]["drift"]["in_status_s"] is None
    # the floor: the bare client's writes and the rollout they start, once a run
    assert out["floor_rolled_out_s"]["min"] > 0
    # the tuned Flux diffs each of its Kustomizations
    assert out["runs_by_tool"]["flux-tuned"][0]["diff"]["commands"] == 2

    written = report.write({"n": 5, "smoke": True, "versus": out}, tmp_path / "results", "smoke")
    assert json.loads((tmp_path / "results" / "smoke.json").read_text())["versus"]["n"] == 5
    table = (tmp_path / "results" / "smoke.md").read_text()
    assert "| cold_sync_s |" in table and "Smoke run" in table and "Flux tuned" in table
    assert any(p.suffix == ".png" and p.stat().st_size > 0 for p in written)


def test_a_broken_commit_gitsync_rolls_back_and_flux_stays_down(
    kube: Kube, crd: str, tmp_path: Path
) -> None:
    settings = rollbacklib.Settings(n=3, broken=2, deadline=5, wait=5.0, timeout=120.0)
    out = rollbacklib.rollback(kube, tmp_path / "work", settings)

    g, f = out["gitsync"], out["flux"]
    assert (g["broken"], g["deadline_s"]) == (2, 5)
    # measured from the watch: the deadline first, then gitsync's answer, then Available
    assert 0 <= g["added_s"]["p50"] <= g["added_s"]["max"]
    assert g["deadline_after_push_s"]["p50"] >= 5  # the deployment controller's deadline
    assert g["to_available_s"]["max"] >= g["deadline_after_push_s"]["p50"]
    assert f["still_degraded"] == 2 and f["watched_past_deadline_s"] >= 5
    text = report.markdown({"n": 3, "smoke": True, "rollback": out})
    assert "A commit breaks 2 of 3 MyApps" in text and "Flux: 2 of 2 still not" in text


def test_a_chain_changed_by_one_commit_is_applied_link_after_link(
    kube: Kube, crd: str, tmp_path: Path
) -> None:
    out = orderlib.chain(kube, tmp_path / "work", orderlib.Settings(n=3, timeout=120.0))
    assert out["n"] == 3 and out["in_order"] is True
    assert 0 <= out["per_link_s"]["p50"] <= out["per_link_s"]["max"]
    assert out["to_last_available_s"] >= out["to_last_applied_s"] > 0
    text = report.markdown({"n": 3, "smoke": True, "order": out})
    assert "A chain of 3 MyApps" in text and "in order: yes" in text


def test_the_floor_and_the_daemons_memory_are_measured(
    kube: Kube, crd: str, tmp_path: Path
) -> None:
    floor = floorlib.compare(kube, tmp_path, [5])
    r = floor["5"]
    assert set(r["floor"]["by_workers"]) == set(floorlib.WORKERS)
    # the floor's writes are what a cold sync leaves: each MyApp with a status and an
    # owned Deployment
    apps = kube.list(path_of("MyApp", "bench-floor"))["items"]
    deployments = kube.list(path_of("Deployment", "bench-floor"))["items"]
    assert len(apps) == 5 and all(a["status"]["observedGeneration"] == 1 for a in apps)
    owners = {d["metadata"]["ownerReferences"][0]["uid"] for d in deployments}
    assert owners == {a["metadata"]["uid"] for a in apps}
    assert r["gitsync"]["s"] >= r["gitsync"]["pass_s"] > 0 and r["ratio"] > 0
    assert r["gitsync"]["requests"].get("APPLY", 0) >= 5  # a MyApp apply each at least
    memory = memorylib.memory(kube, tmp_path, [5])
    assert memory["idle_rss_mib"] > 10 and memory["sizes"]["5"]["rss_mib"] > 10
    text = report.markdown({"n": 5, "smoke": True, "floor": floor, "memory": memory})
    assert "| 5 |" in text and "API server's floor" in text and "Daemon memory" in text


def test_the_curve_measures_every_figure_at_one_size(kube: Kube, crd: str, tmp_path: Path) -> None:
    """One size of the curve, on the tests' control plane (``make bench`` starts a fresh
    one for each step): a push changing one MyApp of 10 reaches its Deployment, and so
    does the same change's floor, written by a bare client once the daemon is gone."""
    r = curvelib.at(tmp_path, 10, 50.0, fresh=lambda: kube)
    assert r["cold"]["written_s"] >= r["cold"]["pass_s"] > 0 and r["floor"]["s"] > 0
    assert r["cold"]["summary"].startswith("10 created")
    assert r["noop"]["summary"].startswith("0 created, 0 configured, 10 unchanged")
    assert r["diff"]["exit"] == 0 and r["daemon"]["push_changed"] == 1
    assert r["daemon"]["webhook_push_to_applied_s"]["p50"] > 0
    assert r["daemon"]["start_to_ready_s"] > 0 and r["daemon"]["rss_mib"] > 10
    # ready is the first pass done: the pass, and its fetch, are a part of it
    d = r["daemon"]
    # (rounded to 10 ms: a fetch of 10 files may round to 0)
    assert d["start_to_ready_s"] >= d["first_pass_s"] >= d["first_fetch_s"] >= 0
    assert d["first_pass_s"] > 0
    assert r["noop"]["passes"] == curvelib.NOOP_PASSES
    lo, hi = r["noop"]["cpu_s_range"]
    assert lo <= r["noop"]["cpu_s"] <= hi
    # a pass over 10 MyApps calls hundreds of functions per MyApp (plus its fixed cost)
    assert r["noop"]["calls_per_myapp"] > 100
    push_floor = r["daemon"]["push_floor_s"]
    assert push_floor["p50"] > 0
    assert r["daemon"]["push_ratio_to_floor"] == round(
        r["daemon"]["webhook_push_to_applied_s"]["p50"] / push_floor["p50"], 2
    )
    # the floor's last change is what the server holds, written by the floor's manager
    # (the daemon stopped first: it would have taken the MyApp back to Git)
    myapp = kube.get(path_of("MyApp", "curve", "app-0000"))
    deployment = kube.get(path_of("Deployment", "curve", "app-0000"))
    image = f"nginx:1.{140 + curvelib.PUSHES - 1}"
    assert myapp["spec"]["image"] == image
    assert deployment["spec"]["template"]["spec"]["containers"][0]["image"] == image
    owners = {
        m["manager"]
        for m in myapp["metadata"]["managedFields"]
        if "f:spec" in m.get("fieldsV1", {})
    }
    assert floorlib.MANAGER in owners
    text = report.markdown({"n": 10, "smoke": True, "curve": {"idle_rss_mib": 50.0, "10": r}})
    assert "The curve" in text and "| 10 | 1 |" in text
