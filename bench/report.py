"""The benchmark's results: machine facts and versions, JSON, a Markdown table, PNG plots."""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

from bench import flux
from bench.common import ROOT, WRITES, sh
from gitsync.kube.client import Kube
from testenv import build, peers

Results = dict[str, Any]

#: design §12 and issue targets for the side-by-side figures, gitsync / Flux
#: against the stronger Flux configuration of the run (the lower figure of the two)
TARGETS = {
    "cold_sync_s": ("≤ 0.5 x Flux", 0.5),
    "requests_per_interval": ("≤ 1/100 of Flux", 0.01),
    "rss_mib": ("≤ 0.5 x Flux's two controllers", 0.5),
}
#: Flux's configurations in a versus run, and how the report names them
FLUXES = {"flux": "Flux", "flux-tuned": "Flux tuned"}


def facts(kube: Kube) -> Results:
    """What the figures were measured on, and with which versions."""
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
        mem_kib = int(Path("/proc/meminfo").read_text().split()[1])
    except (OSError, ValueError, IndexError):
        mem_kib = 0
    kubectl = sh(
        str(Path(kube_bin()) / "kubectl"), "version", "--client", "-o", "json", check=False
    )
    try:
        kubectl_version = json.loads(kubectl.stdout)["clientVersion"]["gitVersion"]
    except (ValueError, KeyError):
        kubectl_version = "unknown"
    commit = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    return {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": {
            "cpus": os.cpu_count(),
            "cpu": cpu,
            "memory_gib": round(mem_kib / 2**20, 1),
            "kernel": platform.release(),
            "python": platform.python_version(),
            "load_average": [round(x, 2) for x in os.getloadavg()],
        },
        "versions": {
            "gitsync": f"{metadata.version('gitsync')} ({commit or 'no commit'})",
            "kubernetes": kube.get("/version").get("gitVersion", "unknown"),
            "kubectl": kubectl_version,
            "flux": peers.FLUX_VERSION,
            "source-controller": flux.version("github.com/fluxcd/source-controller"),
            "kustomize-controller": flux.version("github.com/fluxcd/kustomize-controller"),
        },
    }


#: keys of the results that belong to no part
_RUN_KEYS = frozenset({"n", "facts", "smoke", "profiled", "carried", "versus_earlier"})
#: the parts whose results sit under a key of their own name; core's are the rest
_KEYED_PARTS = (
    "scale", "floor", "memory", "versus", "rollback", "order", "curve", "sharding"
)  # fmt: skip


def carry_over(out: Results, previous: Results, parts: set[str]) -> Results:
    """``out`` with the parts it did not measure taken from ``previous`` (the last
    results), so a run of some parts keeps the others in ``latest.*``. Each carried
    part is named in ``carried`` with the facts of the run that measured it; nothing
    is carried from a smoke run or into one."""
    if out.get("smoke") or previous.get("smoke"):
        return out
    merged, carried = dict(out), dict(previous.get("carried") or {})
    for part in ("core", *_KEYED_PARTS):
        if part in parts:
            carried.pop(part, None)
            if part == "curve" and out.get("curve") and previous.get("curve"):
                merged["curve"] = _curve_over(out["curve"], previous)
            if part == "versus" and out.get("versus"):
                merged.pop("versus_earlier", None)
                if earlier := _versus_over(out["versus"], previous):
                    merged["versus_earlier"] = earlier
            continue
        if part == "core":
            keys = [k for k in previous if k not in _RUN_KEYS and k not in _KEYED_PARTS]
        else:
            keys = [part] if part in previous else []
            if part == "versus" and "versus_earlier" in previous:
                keys.append("versus_earlier")
        if not keys:
            continue
        merged.update({k: previous[k] for k in keys})
        if part == "core":
            merged["n"] = previous.get("n", merged.get("n"))
        carried.setdefault(part, previous.get("facts") or {})
    if carried:
        merged["carried"] = carried
    return merged


def _curve_over(curve: Results, previous: Results) -> Results:
    """``curve`` with the sizes it did not measure taken from ``previous``'s curve,
    each with the facts of the run that measured it (``earlier``)."""
    before = previous["curve"]
    facts = (previous.get("carried") or {}).get("curve") or previous.get("facts") or {}
    out = dict(curve)
    for n, r in _sizes_of(before):
        if n not in curve:
            out[n] = {**r, "earlier": r.get("earlier") or facts}
    return out


def _versus_over(vs: Results, previous: Results) -> Results:
    """The side-by-side runs at other sizes than ``vs``'s, by N, each with the facts of
    the run that measured it (``earlier``): a run at 5000 keeps the one at 1000."""
    out = {n: r for n, r in (previous.get("versus_earlier") or {}).items() if n != str(vs["n"])}
    before = previous.get("versus")
    if before and before.get("n") != vs["n"]:
        facts = (previous.get("carried") or {}).get("versus") or previous.get("facts") or {}
        out[str(before["n"])] = {**before, "earlier": facts}
    return out


def _versus_runs(out: Results) -> list[Results]:
    """Every side-by-side run in ``out``, this run's first, then earlier ones by N."""
    earlier = sorted((out.get("versus_earlier") or {}).items(), key=lambda kv: int(kv[0]))
    return [r for r in (out.get("versus"), *(r for _, r in earlier)) if r]


def _busy(out: Results) -> list[str]:
    """How busy each tool kept the control plane (kube-apiserver, etcd, controllers,
    kwok) while it ran: the share of the machine the server had left to give."""
    them, us = (
        out.get("kubectl_apply_control_plane_cpu"),
        _get(out, "sync", "cold_control_plane_cpu"),
    )
    if not them or not us:
        return []
    cores = _get(out, "facts", "machine", "cpus") or "?"
    return [
        f"Control plane CPU while each ran: kubectl {them['total']} s "
        f"({them['cores_busy']} of {cores} cores busy), gitsync {us['total']} s "
        f"({us['cores_busy']} of {cores} cores busy)."
    ]


def _measured(out: Results, part: str) -> list[str]:
    f = (out.get("carried") or {}).get(part)
    if not f:
        return []
    return [f"(Measured {_which_run(f)}.)", ""]


def _which_run(facts: Results) -> str:
    """Which earlier run measured a figure, by its facts."""
    load = _get(facts, "machine", "load_average")
    return f"in an earlier run, {facts.get('date', 'undated')}, load {load}"


def kube_bin() -> str:
    from testenv import cluster

    return str(cluster.STATE / "bin") if (cluster.STATE / "bin").exists() else str(build.bin_dir())


def _fmt(x: Any) -> str:
    return "-" if x is None else f"{x:g}" if isinstance(x, float | int) else str(x)


def _get(d: Any, *path: str) -> Any:
    for p in path:
        if not isinstance(d, dict) or p not in d:
            return None
        d = d[p]
    return d


def versus_table(vs: Results) -> list[str]:
    s = vs["summary"]
    fluxes = [f for f in FLUXES if f in s]
    tuned = (
        f"; Flux tuned: {vs.get('kustomizations', '?')} Kustomizations, "
        f"{vs.get('flux_tuned_flags', '?')}; the ratio is to the stronger Flux (the lower figure)"
        if "flux-tuned" in s
        else ""
    )
    rows = [
        f"gitsync vs Flux, N={vs['n']}, {vs['runs']} alternating runs, "
        f"interval {vs['interval_s']:g} s (median, min-max){tuned}:",
        "",
        "| figure | gitsync | "
        + " | ".join(FLUXES[f] for f in fluxes)
        + " | ratio | target | met |",
        "|---|---|" + "---|" * len(fluxes) + "---|---|---|",
    ]
    for name in s["gitsync"]:
        g = s["gitsync"][name]
        best = min(s[f][name]["median"] for f in fluxes)
        ratio = round(g["median"] / best, 3) if best else None
        target, limit = TARGETS.get(name, ("", None))
        met = "" if limit is None or ratio is None else ("yes" if ratio <= limit else "no")
        if name == "drift_reverted_p50_s":
            target, met = "< 1 s (Flux: interval)", "yes" if g["median"] < 1 else "no"
        cells = [_spread_cell(s[t][name]) for t in ("gitsync", *fluxes)]
        rows.append(f"| {name} | " + " | ".join(cells) + f" | {_fmt(ratio)} | {target} | {met} |")
    rows.append("")
    rows.append(
        "Drift visible in status: gitsync writes status.drift; Flux reports drift nowhere "
        "(it re-applies at its next interval)."
    )
    floor = vs.get("floor_rolled_out_s")
    if floor and fluxes:
        ours = round(s["gitsync"]["cold_sync_s"]["median"] / floor["median"], 2)
        half = round(min(s[f]["cold_sync_s"]["median"] for f in fluxes) / 2, 3)
        rows += [
            "",
            "cold_sync_s beside the floor's writes (the fewest a cold sync needs, from a bare "
            "client) and the rollout they start, to every Deployment Available: "
            f"{_spread_cell(floor)} s; gitsync {_fmt(ours)} x it. Half the stronger Flux's "
            f"cold sync is {_fmt(half)} s, {_fmt(round(half / floor['median'], 2))} x it.",
        ]
    return rows


def _spread_cell(f: Results) -> str:
    return f"{_fmt(f['median'])} ({_fmt(f['min'])}-{_fmt(f['max'])})"


def scale_table(scale: Results) -> list[str]:
    rows = [
        "| N | kubectl apply (s) | gitsync cold sync (s) | ratio | per object (ms) "
        "| no-op resync requests | no-op CPU (s) | gitsync diff (s) | kubectl diff (s) "
        "| daemon RSS (MiB) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for n, r in sorted(scale.items(), key=lambda kv: int(kv[0])):
        cold = _get(r, "sync", "cold_s")
        per = round(1000 * cold / int(n), 2) if cold else None
        warm = _get(r, "sync", "warm_gitsync_requests") or {}
        rows.append(
            f"| {n} | {_fmt(r.get('kubectl_apply_server_side_s'))} | {_fmt(cold)} "
            f"| {_fmt(r.get('cold_sync_vs_kubectl_apply'))} | {_fmt(per)} "
            f"| {sum(warm.values())} | {_fmt(_get(r, 'sync', 'warm_cpu_s'))} "
            f"| {_fmt(_get(r, 'diff', 'gitsync_diff_s'))} "
            f"| {_fmt(_get(r, 'diff', 'kubectl_diff_server_side_s'))} "
            f"| {_fmt(_get(r, 'daemon', 'rss_mib_at_n'))} |"
        )
    return rows


def markdown(out: Results) -> str:
    lines = [f"# gitsync benchmark, {_get(out, 'facts', 'date') or 'undated'}", ""]
    if out.get("smoke"):
        lines += ["**Smoke run** (tiny N, checks the harness; not a measurement).", ""]
    if out.get("profiled"):
        lines += [
            "**Profiled run** (py-spy sampled every thread of each cold sync, taking CPU "
            "from the control plane it shares the cores with): times are slower than "
            "unprofiled ones; for where time goes, not for figures.",
            "",
        ]
    f = out.get("facts") or {}
    if f:
        m, v = f["machine"], f["versions"]
        lines += [
            f"Machine: {m['cpus']} CPUs ({m['cpu']}), {m['memory_gib']} GiB, "
            f"load {m['load_average']}.",
            "Versions: " + ", ".join(f"{k} {val}" for k, val in v.items()) + ".",
            "",
        ]
    if "sync" in out:
        lines += [
            f"Core, N={out['n']}: cold sync {out['sync']['cold_s']} s vs kubectl apply "
            f"--server-side {out['kubectl_apply_server_side_s']} s "
            f"(ratio {out['cold_sync_vs_kubectl_apply']}, target ≤ 0.5).",
            *_busy(out),
            "",
            *_measured(out, "core"),
        ]
    if out.get("scale"):
        lines += ["Scale curve (gitsync vs kubectl):", "", *scale_table(out["scale"]), ""]
        lines += _measured(out, "scale")
    if out.get("floor"):
        lines += [*floor_table(out["floor"]), "", *_measured(out, "floor")]
    if out.get("memory"):
        lines += [*memory_table(out["memory"]), "", *_measured(out, "memory")]
    for vs in sorted(_versus_runs(out), key=lambda vs: int(vs["n"])):
        when = (
            [f"(N = {vs['n']} measured {_which_run(vs['earlier'])}.)", ""]
            if "earlier" in vs
            else _measured(out, "versus")
        )
        lines += [*versus_table(vs), "", *when]
    if out.get("rollback"):
        lines += [*rollback_lines(out["rollback"]), "", *_measured(out, "rollback")]
    if out.get("order"):
        lines += [*order_lines(out["order"]), "", *_measured(out, "order")]
    if out.get("sharding"):
        lines += [*sharding_lines(out["sharding"]), "", *_measured(out, "sharding")]
    if out.get("curve"):
        lines += [*curve_table(out["curve"]), "", *_measured(out, "curve")]
    return "\n".join(lines)


def _sizes_of(curve: Results) -> list[tuple[str, Results]]:
    return [(n, r) for n, r in curve.items() if n.isdigit()]


def curve_table(curve: Results) -> list[str]:
    """gitsync alone at each N, each on a fresh control plane (bench/curve.py)."""
    rows = [
        "The curve (gitsync alone, each size on a fresh control plane; replicas as listed; "
        f"RSS per MyApp above an idle daemon's {curve.get('idle_rss_mib')} MiB, target ≤ 16):",
        "",
        "| N | replicas | floor (s) | cold, every write accepted (s) | ratio (≤ 1.25) "
        "| rolled out (s) | cold CPU per MyApp (ms) | no-op resync (s) "
        "| its CPU per MyApp (ms; median, range of the passes; Python calls per MyApp) "
        "| its writes | diff (s) | push → applied, 1 % changed, p50 (s) (< 1) "
        "| its floor p50 (s) | ratio "
        "| drift in status p50 (s) | start to ready (s; the first pass's share) "
        "| RSS (MiB) | RSS per MyApp (KiB) |",
        "|" + "---|" * 18,
    ]
    for n, r in sorted(_sizes_of(curve), key=lambda kv: int(kv[0])):
        noop_writes = sum(
            v for k, v in r["noop"]["server_requests"].items() if k.split("/")[0] in WRITES
        )
        d, per = r["daemon"], r["per_myapp"]
        noop_cpu = str(per["noop_cpu_ms"])
        if lo_hi := r["noop"].get("cpu_s_range"):
            # (sizes measured before the curve took several passes have one)
            lo, hi = (round(v * 1000 / int(n), 3) for v in lo_hi)
            noop_cpu += f" ({lo}-{hi})"
        if calls := r["noop"].get("calls_per_myapp"):
            # (sizes measured before the curve counted calls have none)
            noop_cpu += f"; {calls} calls"
        # (sizes measured before the curve read the first pass's time have none)
        first_pass = f" ({d['first_pass_s']})" if "first_pass_s" in d else ""
        push = d["webhook_push_to_applied_s"]
        # (sizes measured before the push's floor was part of the curve have none)
        push_floor = (d.get("push_floor_s") or {}).get("p50", "?")
        rows.append(
            f"| {n} | {r['replicas']} | {r['floor']['s']} | {r['cold']['written_s']} "
            f"| {r['ratio_to_floor']} | {r['cold']['rolled_out_s']} | {per['cold_cpu_ms']} "
            f"| {r['noop']['s']} | {noop_cpu} | {noop_writes} | {r['diff']['s']} "
            f"| {push['p50']} ({d['push_changed']} MyApps) "
            f"| {push_floor} | {d.get('push_ratio_to_floor', '?')} "
            f"| {r['drift_in_status_s']['p50']} "
            f"| {d['start_to_ready_s']}{first_pass} | {d['rss_mib']} | {per['rss_kib']} |"
        )
    earlier = [
        f"(N = {n} measured {_which_run(f)}.)"
        for n, r in sorted(_sizes_of(curve), key=lambda kv: int(kv[0]))
        if (f := r.get("earlier"))
    ]
    return [*rows, "", *earlier] if earlier else rows


def floor_table(fl: Results) -> list[str]:
    """gitsync's cold sync next to the API server's floor (bench/floor.py)."""
    rows = [
        "Cold sync against the API server's floor (a bare client's 3 writes per MyApp, "
        "its fastest pool), both timed to every write accepted:",
        "",
        "| N | floor (s) | its workers | gitsync (s) | ratio | target | met "
        "| gitsync's requests by verb | writes per MyApp |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for n, r in sorted(fl.items(), key=lambda kv: int(kv[0])):
        g = r["gitsync"]
        verbs = ", ".join(f"{v} {c}" for v, c in sorted(g["requests"].items()))
        met = "yes" if r["ratio"] <= 1.25 else "no"
        rows.append(
            f"| {n} | {r['floor']['s']} | {r['floor']['workers']} | {g['s']} | {r['ratio']} "
            f"| ≤ 1.25 | {met} | {verbs} | {g['writes_per_myapp']} |"
        )
    return rows


def memory_table(m: Results) -> list[str]:
    """The daemon's RSS per MyApp above its idle RSS (bench/memory.py)."""
    rows = [
        f"Daemon memory (RSS), idle {m['idle_rss_mib']} MiB:",
        "",
        "| N | RSS (MiB) | per MyApp above idle (KiB) | target | met |",
        "|---|---|---|---|---|",
    ]
    for n, r in sorted(m["sizes"].items(), key=lambda kv: int(kv[0])):
        met = "yes" if r["kib_per_myapp"] <= 16 else "no"
        rows.append(f"| {n} | {r['rss_mib']} | {r['kib_per_myapp']} | ≤ 16 | {met} |")
    return rows


def sharding_lines(s: Results) -> list[str]:
    """Sharding (bench/sharding.py): cold sync and RSS per replica, moves, failover."""
    rows = [
        f"Sharding: {s['n']} MyApps in {s['buckets']} buckets, replicas as local processes"
        " (the cold sync is bound by the one API server here):",
        "",
        "| replicas | every MyApp Available (s) | RSS per replica (MiB) | MyApps per replica |",
        "|---|---|---|---|",
    ]
    for k, r in sorted(s.get("cold", {}).items(), key=lambda kv: int(kv[0])):
        served = ", ".join(str(int(x or 0)) for x in r.get("myapps_served") or [])
        rss = ", ".join(str(x) for x in r["rss_mib"])
        rows.append(f"| {k} | {r['all_available_s']} | {rss} | {served} |")
    c = s.get("churn") or {}
    if c:
        b = s["buckets"]
        f = c.get("failover_s") or {}
        rows += [
            "",
            f"At {c['n']} MyApps: a 4th replica joining 3 moved {c.get('moved_3_to_4')} of {b}"
            f" buckets (goal ≤ {round(b / 4 + b * 0.1)}), one of 4 killed moved"
            f" {c.get('moved_4_to_3')} (goal ≤ {round(b / 3 + b * 0.1)}); a killed replica's"
            f" drifted MyApp corrected by another after p50 {f.get('p50')} s, max"
            f" {f.get('max')} s over {len(f.get('runs') or [])} kills (goal ≤"
            f" {c.get('failover_goal_s')} s).",
        ]
    return rows


def order_lines(o: Results) -> list[str]:
    """The dependsOn chain (bench/order.py) in words."""
    return [
        f"A chain of {o.get('n', '?')} MyApps (each dependsOn the one before) changed by one "
        f"commit: push to the last link applied {o.get('to_last_applied_s', '?')} s, to it "
        f"Available {o.get('to_last_available_s', '?')} s; gitsync's own delay per link "
        f"(dependency Available to the next link's new template, one watch) p50 "
        f"{_get(o, 'per_link_s', 'p50')} s, max {_get(o, 'per_link_s', 'max')} s (target < 1 s); "
        f"each link's rollout p50 {_get(o, 'rollout_per_link_s', 'p50')} s; in order: "
        f"{'yes' if o.get('in_order') else 'NO'}."
    ]


def rollback_lines(rb: Results) -> list[str]:
    """The rollback scenario (bench/rollback.py) in words."""
    g, f = rb.get("gitsync") or {}, rb.get("flux") or {}
    lines = [
        f"A commit breaks {g.get('broken', '?')} of {g.get('n', '?')} MyApps "
        f"(progressDeadlineSeconds {g.get('deadline_s', '?')}):",
        "",
    ]
    if g:
        lines.append(
            "- gitsync, --rollback auto: push to Available again on the old spec "
            f"p50 {_get(g, 'to_available_s', 'p50')} s, max {_get(g, 'to_available_s', 'max')} s;"
            f" gitsync's own time past the deadline p50 {_get(g, 'added_s', 'p50')} s, "
            f"max {_get(g, 'added_s', 'max')} s (target < 2 s)."
        )
    if f:
        lines.append(
            f"- Flux: {f.get('still_degraded', '?')} of {f.get('broken', '?')} still not "
            f"Available {f.get('watched_past_deadline_s', '?')} s past the last deadline "
            "(no rollback: they stay down until a fix is pushed)."
        )
    return lines


def plot(out: Results, path: Path) -> Path | None:
    """Time vs N (gitsync, kubectl, Flux) and requests per interval vs N."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("bench: matplotlib is not installed (pip install -e '.[bench]'); no plot")
        return None
    scale = sorted(((int(n), r) for n, r in (out.get("scale") or {}).items()), key=lambda x: x[0])
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    if scale:
        ns = [n for n, _ in scale]
        ax1.plot(ns, [_get(r, "sync", "cold_s") for _, r in scale], "o-", label="gitsync cold sync")
        ax1.plot(
            ns,
            [r.get("kubectl_apply_server_side_s") for _, r in scale],
            "s-",
            label="kubectl apply",
        )
        ax1.plot(
            ns, [_get(r, "diff", "gitsync_diff_s") for _, r in scale], "o--", label="gitsync diff"
        )
        ax1.plot(
            ns,
            [_get(r, "diff", "kubectl_diff_server_side_s") for _, r in scale],
            "s--",
            label="kubectl diff",
        )
        ax2.plot(
            ns,
            [sum((_get(r, "sync", "warm_gitsync_requests") or {}).values()) for _, r in scale],
            "o-",
            label="gitsync no-op resync",
        )
    runs = _versus_runs(out)
    for tool, marker in (("gitsync", "o"), ("flux", "^"), ("flux-tuned", "v")):
        at = [(vs["n"], vs["summary"][tool]) for vs in runs if tool in vs["summary"]]
        if not at:
            continue
        cold = [s["cold_sync_s"] for _, s in at]
        ax1.errorbar(
            [n for n, _ in at],
            [c["median"] for c in cold],
            yerr=[[c["median"] - c["min"] for c in cold], [c["max"] - c["median"] for c in cold]],
            fmt=marker,
            capsize=4,
            label=f"{tool} cold sync (vs run)",
        )
        ax2.plot(
            [n for n, _ in at],
            [s["requests_per_interval"]["median"] for _, s in at],
            marker,
            label=f"{tool} per {runs[0]['interval_s']:g} s interval",
        )
    for ax, title, ylabel, yscale in (
        (ax1, "time vs N", "seconds", "log"),
        (ax2, "API requests in steady state vs N", "requests", "symlog"),
    ):
        ax.set_xscale("log")
        ax.set_yscale(yscale)
        if yscale == "symlog":
            ax.set_ylim(bottom=0)  # counts: no negative ticks below the zero line
        ax.set_xlabel("MyApps (N)")
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_curve(out: Results, path: Path) -> Path | None:
    """The curve: time vs N with the floor as its own line, and RSS vs N for gitsync and
    both Flux configurations (their side-by-side runs)."""
    curve = sorted(((int(n), r) for n, r in _sizes_of(out.get("curve") or {})), key=lambda x: x[0])
    if not curve:
        return None
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    ns = [n for n, _ in curve]
    lines: list[tuple[str, tuple[str, ...], str]] = [
        ("floor (bare client, 3 writes per MyApp)", ("floor", "s"), "k--"),
        ("gitsync cold sync, every write accepted", ("cold", "written_s"), "o-"),
        ("gitsync diff", ("diff", "s"), "o:"),
        ("gitsync start to ready", ("daemon", "start_to_ready_s"), "^-"),
        ("push → applied, 1 % changed (p50)", ("daemon", "webhook_push_to_applied_s", "p50"), "v-"),
        ("no-op resync", ("noop", "s"), "s-"),
    ]
    for label, where, style in lines:
        ax1.plot(ns, [_get(r, *where) for _, r in curve], style, label=label)
    ax2.plot(ns, [r["daemon"]["rss_mib"] for _, r in curve], "o-", label="gitsync")
    runs = _versus_runs(out)
    for tool, marker in (("gitsync", "o"), ("flux", "^"), ("flux-tuned", "v")):
        at = [(vs["n"], _get(vs, "summary", tool, "rss_mib", "median")) for vs in runs]
        at = [(n, rss) for n, rss in at if rss is not None]
        if at:
            sizes = ", ".join(str(n) for n, _ in at)
            ax2.plot(
                [n for n, _ in at],
                [rss for _, rss in at],
                marker,
                label=f"{tool} side by side (N={sizes})",
            )
    for ax, title, ylabel in ((ax1, "time vs N", "seconds"), (ax2, "RSS vs N", "MiB")):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("MyApps (N)")
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def write(
    out: Results, results: Path, stem: str | None = None, *, latest: bool = True
) -> list[Path]:
    """``<date>.json``, ``.md`` and ``.png`` under ``results``, and the same as
    ``latest.*`` (what the README shows) unless ``latest`` is false."""
    results.mkdir(parents=True, exist_ok=True)
    stem = stem or dt.date.today().isoformat()
    text, table = json.dumps(out, indent=2), markdown(out) + "\n"
    paths: list[Path] = []
    for name in dict.fromkeys((stem, *(["latest"] if latest else []))):
        (results / f"{name}.json").write_text(text)
        (results / f"{name}.md").write_text(table)
        png = plot(out, results / f"{name}.png")
        curve_png = plot_curve(out, results / f"{name}-curve.png")
        paths += [results / f"{name}.json", results / f"{name}.md"]
        paths += [p for p in (png, curve_png) if p]
    return paths
