"""The benchmark's summaries and tables, from hand-made results (no cluster)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench import report, versus


def _run(cold: float, requests: float, rss: float, reverted: float) -> dict[str, Any]:
    return {
        "cold_sync_s": cold,
        "steady": {
            "client_requests_per_interval_total": requests,
            "cpu_s_per_interval": 0.5,
            "rss_mib": rss,
        },
        "push_to_applied_s": {"objects": 1, "all": 1.0},
        "drift": {"objects": 4, "reverted_s": {"p50": reverted, "p99": reverted, "max": reverted}},
        "prune_s": {"objects": 1, "all": 2.0},
        "diff": {"s": 1.5, "exit": 0},
    }


def test_summary_is_median_and_spread_over_runs() -> None:
    s = versus.summarize([_run(3, 0, 80, 0.1), _run(1, 0, 90, 0.2), _run(2, 0, 70, 0.3)])
    assert s["cold_sync_s"] == {"median": 2, "min": 1, "max": 3}
    assert s["rss_mib"] == {"median": 80, "min": 70, "max": 90}
    assert s["drift_reverted_p50_s"]["median"] == 0.2


def test_runs_alternate_which_tool_goes_first() -> None:
    order = list(versus._runs(versus.Settings(n=5, runs=3)))
    assert order == [
        (0, "gitsync"),
        (0, "flux"),
        (0, "flux-tuned"),
        (1, "flux-tuned"),
        (1, "flux"),
        (1, "gitsync"),
        (2, "gitsync"),
        (2, "flux"),
        (2, "flux-tuned"),
    ]


def test_table_states_each_target_against_the_stronger_flux_and_whether_it_was_met() -> None:
    vs = {
        "n": 1000,
        "runs": 1,
        "interval_s": 60.0,
        "summary": {
            "gitsync": versus.summarize([_run(10, 5, 120, 0.1)]),
            "flux": versus.summarize([_run(40, 2000, 100, 30)]),
            # tuned: faster, more requests, more memory; each figure's stronger one counts
            "flux-tuned": versus.summarize([_run(20, 4000, 300, 30)]),
        },
    }
    rows = {r.split(" | ")[0].strip("| "): r for r in report.versus_table(vs)}
    assert "| 0.5 |" in rows["cold_sync_s"] and rows["cold_sync_s"].endswith("| yes |")
    assert "| 0.003 |" in rows["requests_per_interval"]
    assert rows["requests_per_interval"].endswith("| yes |")
    assert "| 1.2 |" in rows["rss_mib"] and rows["rss_mib"].endswith("| no |")
    assert rows["drift_reverted_p50_s"].endswith("| yes |")


def test_a_table_without_the_tuned_flux_still_compares_with_flux() -> None:
    vs = {
        "n": 1000,
        "runs": 1,
        "interval_s": 60.0,
        "summary": {
            "gitsync": versus.summarize([_run(10, 5, 120, 2)]),
            "flux": versus.summarize([_run(40, 2000, 100, 30)]),
        },
    }
    rows = {r.split(" | ")[0].strip("| "): r for r in report.versus_table(vs)}
    assert "| 0.25 |" in rows["cold_sync_s"]
    assert rows["drift_reverted_p50_s"].endswith("| no |")


def test_the_table_sets_the_cold_syncs_beside_the_floor_and_its_rollout() -> None:
    summary = {
        "gitsync": versus.summarize([_run(28, 5, 80, 0.2)]),
        "flux": versus.summarize([_run(80, 2000, 160, 90)]),
        "flux-tuned": versus.summarize([_run(34, 2000, 165, 60)]),
    }
    vs = {"n": 1000, "runs": 1, "interval_s": 60.0, "summary": summary}
    assert not any("floor" in r for r in report.versus_table(vs))  # an older run: none
    measured = {**vs, "floor_rolled_out_s": {"median": 25.0, "min": 24.0, "max": 26.0}}
    (line,) = [r for r in report.versus_table(measured) if "floor" in r]
    # gitsync 28 / 25; half the tuned Flux's 34 (the stronger), 17 / 25
    assert "25 (24-26) s; gitsync 1.12 x it" in line
    assert "Half the stronger Flux's cold sync is 17 s, 0.68 x it." in line


def test_the_floor_and_memory_tables_give_ratios_and_per_myapp_figures() -> None:
    floor = {
        "1000": {
            "floor": {"s": 8.0, "workers": 32, "by_workers": {}},
            "gitsync": {"s": 11.0, "requests": {"APPLY": 2000, "LIST": 3}, "writes_per_myapp": 3},
            "ratio": 1.38,
        }
    }
    row = report.floor_table(floor)[-1]
    assert row.startswith("| 1000 | 8.0 | 32 | 11.0 | 1.38 | ≤ 1.25 | no |")
    assert "APPLY 2000, LIST 3" in row
    memory = {"idle_rss_mib": 60.0, "sizes": {"1000": {"rss_mib": 75.0, "kib_per_myapp": 15.4}}}
    assert report.memory_table(memory)[-1] == "| 1000 | 75.0 | 15.4 | ≤ 16 | yes |"


def test_scale_table_gives_the_cost_per_object() -> None:
    scale = {
        "100": {"sync": {"cold_s": 2.0, "warm_gitsync_requests": {}}},
        "1000": {"sync": {"cold_s": 30.0, "warm_gitsync_requests": {"GET": 2}}},
    }
    rows = report.scale_table(scale)
    assert rows[2].startswith("| 100 |") and "| 20 |" in rows[2]
    assert rows[3].startswith("| 1000 |") and "| 30 |" in rows[3] and "| 2 |" in rows[3]


def test_a_smoke_run_is_labelled_as_such() -> None:
    assert "Smoke run" in report.markdown({"n": 5, "smoke": True})
    assert "Smoke run" not in report.markdown({"n": 1000})


def _facts(date: str) -> dict[str, Any]:
    machine = {"cpus": 2, "cpu": "x", "memory_gib": 1, "load_average": [0.5, 0.5, 0.5]}
    return {"date": date, "machine": machine, "versions": {}}


def test_parts_a_run_left_out_are_carried_over_with_their_own_facts() -> None:
    previous = {"n": 1000, "facts": _facts("d1"), "versus": {"n": 1000}, "scale": {"5": {}}}
    core = {
        "sync": {"cold_s": 9},
        "kubectl_apply_server_side_s": 30,
        "cold_sync_vs_kubectl_apply": 0.3,
    }
    out = {"n": 1000, "facts": _facts("d2"), **core, "scale": {"100": {}}}
    merged = report.carry_over(out, previous, {"core", "scale"})
    assert merged["versus"] == {"n": 1000}  # not measured now: the earlier figures
    assert merged["scale"] == {"100": {}}  # measured now: this run's, nothing mixed in
    assert merged["sync"] == {"cold_s": 9} and merged["facts"]["date"] == "d2"
    assert merged["carried"] == {"versus": previous["facts"]}
    table = report.markdown(report.carry_over({**out, "scale": None}, previous, {"core", "versus"}))
    assert "| 5 |" in table and "earlier run, d1" in table  # the scale curve, labelled
    assert "earlier run" not in report.markdown({**merged, "versus": None})
    # a later run of the versus part alone keeps core and scale, and forgets the label
    again = report.carry_over({"n": 1000, "facts": _facts("d3"), "versus": {}}, merged, {"versus"})
    assert again["sync"] == {"cold_s": 9} and again["scale"] == {"100": {}}
    assert set(again["carried"]) == {"core", "scale"}
    assert again["carried"]["core"]["date"] == "d2"


def test_nothing_is_carried_from_or_into_a_smoke_run() -> None:
    smoke = {"n": 5, "smoke": True, "versus": {"n": 5}}
    real = {"n": 1000, "facts": _facts("d1"), "sync": {"cold_s": 9}}
    assert "versus" not in report.carry_over(real, smoke, {"core"})
    assert "sync" not in report.carry_over(smoke, real, {"versus"})


def test_the_table_says_how_busy_each_tool_kept_the_control_plane() -> None:
    busy = {"total": 40.0, "cores_busy": 1.8, "by_component": {"kube-apiserver": 30.0}}
    idle = {"total": 30.0, "cores_busy": 0.5, "by_component": {"kube-apiserver": 20.0}}
    out = {
        "n": 1000,
        "facts": _facts("d1"),
        "sync": {"cold_s": 22.0, "cold_control_plane_cpu": busy},
        "kubectl_apply_server_side_s": 60.0,
        "kubectl_apply_control_plane_cpu": idle,
        "cold_sync_vs_kubectl_apply": 0.37,
    }
    table = report.markdown(out)
    assert "kubectl 30.0 s (0.5 of 2 cores busy), gitsync 40.0 s (1.8 of 2 cores busy)" in table


def test_a_profiled_run_is_labelled_and_never_becomes_latest(tmp_path: Path) -> None:
    out = {"n": 1000, "profiled": True}
    written = report.write(out, tmp_path, "profiled-d1", latest=False)
    assert {p.name for p in written} >= {"profiled-d1.json", "profiled-d1.md"}
    assert not list(tmp_path.glob("latest.*"))
    assert "Profiled run" in (tmp_path / "profiled-d1.md").read_text()


def test_the_repository_is_split_so_that_every_tenth_touches_every_directory(
    tmp_path: Path,
) -> None:
    apps = [f"app-{i:04d}" for i in range(1000)]
    repo = versus.Repo(tmp_path / "b.git", tmp_path, "url", "ns", apps, shards=10)
    dirs = {a: repo.file(a).parent.name for a in apps}
    assert sorted(set(dirs.values())) == [f"s{k}" for k in range(10)]
    for offset in (0, 5):  # the change's tenth and the prune's
        tenth = versus._tenth(repo, offset)
        assert {dirs[a] for a in tenth} == set(dirs.values())  # each directory keeps the rest
    assert all(sum(1 for d in dirs.values() if d == f"s{k}") == 100 for k in range(10))


def _size(push_floor: dict[str, Any] | None) -> dict[str, Any]:
    daemon: dict[str, Any] = {
        "start_to_ready_s": 1.5,
        "rss_mib": 80.0,
        "push_changed": 10,
        "webhook_push_to_applied_s": {"p50": 0.6, "p99": 0.7, "max": 0.7},
    }
    if push_floor is not None:
        daemon |= {"push_floor_s": push_floor, "push_ratio_to_floor": 1.5}
    return {
        "replicas": 1,
        "floor": {"s": 8.0},
        "cold": {"written_s": 11.0, "rolled_out_s": 20.0},
        "ratio_to_floor": 1.38,
        "noop": {"s": 0.2, "server_requests": {"LIST": 1, "APPLY": 0}},
        "diff": {"s": 1.3},
        "drift_in_status_s": {"p50": 0.03},
        "daemon": daemon,
        "per_myapp": {"cold_cpu_ms": 4.0, "noop_cpu_ms": 0.2, "rss_kib": 20.0},
    }


def test_the_curve_sets_each_push_beside_its_floor_and_says_when_a_size_has_none() -> None:
    curve = {
        "idle_rss_mib": 57.0,
        "1000": _size({"p50": 0.4, "p99": 0.5, "max": 0.5}),
        "5000": _size(None),  # measured before the push's floor was part of the curve
    }
    rows = report.curve_table(curve)
    assert rows[2].count("|") == rows[4].count("|") == rows[3].count("|")
    assert "| 0.6 (10 MyApps) | 0.4 | 1.5 | 0.03 |" in rows[4]
    assert "| 0.6 (10 MyApps) | ? | ? | 0.03 |" in rows[5]


def test_the_curve_gives_the_no_op_cpu_with_its_range_and_start_to_ready_with_its_pass() -> None:
    several = _size(None)
    several["noop"] |= {"passes": 5, "cpu_s": 0.4, "cpu_s_range": [0.3, 0.6]}
    several["per_myapp"]["noop_cpu_ms"] = 0.2
    several["daemon"] |= {"first_pass_s": 0.9, "first_fetch_s": 0.1}
    curve = {"idle_rss_mib": 57.0, "1000": _size(None), "2000": several}
    rows = report.curve_table(curve)
    assert "| 0.2 | 0 |" in rows[4]  # one pass, measured before: no range
    assert "| 0.2 (0.15-0.3) | 0 |" in rows[5]  # per MyApp: 0.3 s and 0.6 s over 2000
    assert "| 1.5 | 80.0 |" in rows[4] and "| 1.5 (0.9) | 80.0 |" in rows[5]
    several["noop"]["calls_per_myapp"] = 581.2
    assert "| 0.2 (0.15-0.3); 581.2 calls | 0 |" in report.curve_table(curve)[5]


def test_a_curve_of_some_sizes_keeps_the_others_each_labelled_with_its_run() -> None:
    previous = {
        "n": 1000,
        "facts": _facts("d1"),
        "curve": {"idle_rss_mib": 57.0, "1000": _size(None), "20000": _size(None)},
    }
    now = _size({"p50": 2.0, "p99": 2.1, "max": 2.1})
    out = {"n": 1000, "facts": _facts("d2"), "curve": {"idle_rss_mib": 58.0, "20000": now}}
    merged = report.carry_over(out, previous, {"curve"})
    curve = merged["curve"]
    assert curve["20000"] is now and curve["idle_rss_mib"] == 58.0  # this run's
    assert curve["1000"]["earlier"] == previous["facts"]  # the earlier run's, labelled
    assert "curve" not in merged.get("carried", {})
    text = "\n".join(report.curve_table(curve))
    assert "(N = 1000 measured in an earlier run, d1" in text and "N = 20000 measured" not in text
    # measured earlier still, a run later: the label stays that of the run that measured it
    again = report.carry_over(
        {"n": 1000, "facts": _facts("d3"), "curve": {"100": _size(None)}}, merged, {"curve"}
    )
    assert again["curve"]["1000"]["earlier"]["date"] == "d1"
    assert again["curve"]["20000"]["earlier"]["date"] == "d2"


def _vs(n: int, cold: float) -> dict[str, Any]:
    summary = {
        "gitsync": versus.summarize([_run(cold, 1, 80, 0.2)]),
        "flux": versus.summarize([_run(4 * cold, 2000, 160, 90)]),
        "flux-tuned": versus.summarize([_run(2 * cold, 2000, 165, 60)]),
    }
    return {"n": n, "runs": 1, "interval_s": 60.0, "summary": summary}


def test_a_side_by_side_at_another_size_keeps_the_earlier_one_labelled_with_its_run(
    tmp_path: Path,
) -> None:
    previous = {"n": 1000, "facts": _facts("d1"), "versus": _vs(1000, 50)}
    out = {"n": 1000, "facts": _facts("d2"), "versus": _vs(5000, 250)}
    merged = report.carry_over(out, previous, {"versus"})
    assert merged["versus"]["n"] == 5000  # this run's
    assert merged["versus_earlier"]["1000"]["earlier"]["date"] == "d1"
    text = report.markdown(merged)
    # both tables, smaller N first, only the earlier one labelled with its run
    assert text.index("gitsync vs Flux, N=1000") < text.index("gitsync vs Flux, N=5000")
    assert "(N = 1000 measured in an earlier run, d1" in text and "N = 5000 measured" not in text
    # a run of other parts keeps both, with the label
    later = report.carry_over({"n": 1000, "facts": _facts("d3"), "scale": {}}, merged, {"scale"})
    assert later["versus"]["n"] == 5000 and later["carried"]["versus"]["date"] == "d2"
    assert later["versus_earlier"]["1000"]["earlier"]["date"] == "d1"
    # the same size again replaces its own earlier run; the other size becomes earlier
    again = report.carry_over(
        {"n": 1000, "facts": _facts("d4"), "versus": _vs(1000, 40)}, later, {"versus"}
    )
    assert again["versus"]["n"] == 1000 and set(again["versus_earlier"]) == {"5000"}
    assert again["versus_earlier"]["5000"]["earlier"]["date"] == "d2"
    # the plots take every size's points
    assert report.plot(again, tmp_path / "s.png") == tmp_path / "s.png"
    assert report.plot_curve({**again, "curve": {"1000": _size(None)}}, tmp_path / "c.png")
