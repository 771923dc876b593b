"""``python -m testenv.mutation [MODULE ...]``: see the package's docstring.

Exit codes: 0 the report was written; 1 a module scored under ``--fail-under``; 2 bad
input (an unknown module, a bad allow-list line, tests that fail on the module unmutated).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from testenv.mutation.mutants import mutants
from testenv.mutation.run import (
    ModuleReport,
    MutationError,
    Result,
    copies,
    format_report,
    load_allowed,
    run_module,
    tree_hash,
)

ROOT = Path(__file__).resolve().parents[2]
ALLOWED = Path(__file__).resolve().parent / "equivalent.txt"
#: gitignored; the report of the last run
RESULTS = ROOT / ".mutation"

_U, _F = "tests/unit/", "tests/fuzz/"
#: the unit and property tests that exercise each module, directly or through the module
#: that calls it; the most specific first, so most mutants are killed by the first file
TESTS: dict[str, tuple[str, ...]] = {
    "gitsync/engine/blame.py": (
        *(f"{_U}{t}" for t in ("test_blame_rows.py", "test_blame.py", "test_page.py")),
    ),
    "gitsync/engine/changeset.py": (
        *(f"{_U}{t}" for t in ("test_changeset.py", "test_plan.py", "test_namespaces.py")),
        *(f"{_U}{t}" for t in ("test_sync_fakes.py", "test_sync_prune.py", "test_diff.py")),
        f"{_U}test_plan_order.py",
    ),
    "gitsync/engine/differences.py": (
        f"{_U}test_differences.py",
        *(f"{_U}{t}" for t in ("test_diff.py", "test_plan.py", "test_changeset.py")),
        f"{_U}test_field_positions.py",
    ),
    "gitsync/engine/drift.py": (
        *(f"{_U}{t}" for t in ("test_drift.py", "test_drift_attribution.py", "test_plan.py")),
        f"{_F}test_fields.py",
        f"{_U}test_changeset.py",
        f"{_U}test_reconcile.py",
    ),
    "gitsync/engine/fieldrules.py": (
        *(f"{_U}{t}" for t in ("test_fieldrules.py", "test_drift.py", "test_managedfields.py")),
        *(f"{_U}{t}" for t in ("test_plan.py", "test_diff.py", "test_blame.py")),
        f"{_F}test_fields.py",
    ),
    "gitsync/engine/fieldpaths.py": (
        *(f"{_U}{t}" for t in ("test_fieldpaths.py", "test_blame.py", "test_blame_rows.py")),
        *(f"{_U}{t}" for t in ("test_manifests.py", "test_field_positions.py")),
    ),
    "gitsync/engine/managedfields.py": (
        *(f"{_U}{t}" for t in ("test_managedfields.py", "test_errors.py", "test_plan.py")),
        f"{_F}test_fields.py",
        *(f"{_U}{t}" for t in ("test_drift.py", "test_drift_attribution.py")),
        *(f"{_U}{t}" for t in ("test_blame.py", "test_redact.py")),
    ),
    "gitsync/engine/namespace_plan.py": (f"{_U}test_namespaces.py", f"{_U}test_changeset.py"),
    "gitsync/engine/planner.py": (
        *(f"{_U}{t}" for t in ("test_plan.py", "test_keyed_merge.py", "test_changeset.py")),
        *(f"{_U}{t}" for t in ("test_diff.py", "test_plan_order.py", "test_reconcile.py")),
    ),
    "gitsync/engine/prune.py": (
        *(f"{_U}{t}" for t in ("test_prune.py", "test_changeset.py", "test_plan.py")),
        *(f"{_U}{t}" for t in ("test_sync_prune.py", "test_sync_fakes.py")),
    ),
    "gitsync/engine/redact.py": (
        *(f"{_U}{t}" for t in ("test_redact.py", "test_page.py", "test_notify.py")),
    ),
    "gitsync/model/api.py": (
        f"{_U}test_api.py",
        *(f"{_U}{t}" for t in ("test_instance.py", "test_render.py", "test_changeset.py")),
        f"{_U}test_plan.py",
    ),
    "gitsync/model/compact.py": (f"{_U}test_compact.py",),
    "gitsync/model/crd_schema.py": (f"{_U}test_crd_schema.py",),
    "gitsync/model/instance.py": (
        *(f"{_U}{t}" for t in ("test_instance.py", "test_namespaces.py")),
        f"{_U}test_denied_namespaces.py",
    ),
    "gitsync/model/integers.py": (
        f"{_U}test_integers.py",
        *(f"{_U}{t}" for t in ("test_render.py", "test_drift.py", "test_instance.py")),
        *(f"{_F}{t}" for t in ("test_loader.py", "test_quantity.py")),
        *(f"{_U}{t}" for t in ("test_manifests.py", "test_quantity.py")),
    ),
    "gitsync/model/myapp_status.py": (
        *(f"{_U}{t}" for t in ("test_status.py", "test_status_rollout.py", "test_reconcile.py")),
        f"{_U}test_controller.py",
    ),
    "gitsync/model/quantity.py": (
        f"{_U}test_quantity_forms.py",
        f"{_U}test_quantity.py",
        f"{_F}test_quantity.py",
        f"{_U}test_render.py",
        f"{_U}test_drift.py",
    ),
    "gitsync/model/render.py": (
        *(f"{_U}{t}" for t in ("test_render.py", "test_blame.py", "test_diff.py")),
        *(f"{_U}{t}" for t in ("test_drift.py", "test_drift_attribution.py")),
        *(f"{_U}{t}" for t in ("test_managedfields.py", "test_plan.py")),
    ),
    "gitsync/model/order.py": (
        *(f"{_U}{t}" for t in ("test_order.py", "test_plan_order.py", "test_reconcile_order.py")),
        *(f"{_U}{t}" for t in ("test_report.py", "test_page.py")),
    ),
    "gitsync/model/pin.py": (f"{_U}test_pin.py", f"{_U}test_sync_pin.py"),
    "gitsync/model/problems.py": (
        *(f"{_U}{t}" for t in ("test_manifests.py", "test_crd_schema.py")),
        f"{_F}test_loader.py",
        f"{_U}test_validate_cli.py",
    ),
    "gitsync/model/rollout.py": (
        *(f"{_U}{t}" for t in ("test_rollout.py", "test_status.py", "test_reconcile.py")),
        *(f"{_U}{t}" for t in ("test_plan.py", "test_report.py", "test_page.py")),
    ),
    "gitsync/model/window.py": (
        *(f"{_U}{t}" for t in ("test_window.py", "test_plan_order.py", "test_reconcile_order.py")),
    ),
    "gitsync/model/schema.py": (
        *(f"{_U}{t}" for t in ("test_instance.py", "test_denied_namespaces.py")),
        f"{_F}test_loader.py",
        *(f"{_U}{t}" for t in ("test_manifests.py", "test_validate_cli.py")),
    ),
    "gitsync/model/spec_schema.py": (
        *(f"{_U}{t}" for t in ("test_crd_schema.py", "test_manifests.py")),
        f"{_F}test_loader.py",
        f"{_U}test_validate_cli.py",
    ),
    "gitsync/model/shards.py": (f"{_U}test_shards.py", f"{_U}test_members.py"),
    "gitsync/model/fleet.py": (f"{_U}test_fleet.py",),
    "gitsync/model/release.py": (f"{_U}test_release.py",),
    "gitsync/model/stored.py": (f"{_U}test_status.py", f"{_U}test_manifests.py"),
    "gitsync/reconcile/workqueue.py": (f"{_U}test_workqueue.py", f"{_U}test_controller.py"),
    "gitsync/gitops/increment.py": (f"{_U}test_increment.py",),
    "gitsync/source/sparse.py": (f"{_U}test_sparse.py", f"{_F}test_listing.py"),
    "gitsync/threads.py": (f"{_U}test_threads.py", f"{_U}test_daemon_http.py"),
}


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m testenv.mutation",
        description="Mutation testing of gitsync's pure core against its unit and fuzz tests.",
    )
    parser.add_argument(
        "modules", nargs="*", metavar="MODULE", help="paths such as gitsync/engine/prune.py"
    )
    parser.add_argument(
        "--tests", nargs="+", metavar="TEST", help="test files to run instead of the table's"
    )
    parser.add_argument("--jobs", type=int, default=2, help="workers, 1 or 2 (default 2)")
    parser.add_argument("--timeout", type=float, help="seconds per mutant (default: from the run)")
    parser.add_argument("--list", action="store_true", help="print the mutants, run nothing")
    parser.add_argument("--fail-under", type=float, metavar="PCT", help="exit 1 under this score")
    parser.add_argument("--root", type=Path, default=ROOT, help=argparse.SUPPRESS)
    parser.add_argument("--allowed", type=Path, default=ALLOWED, help=argparse.SUPPRESS)
    parser.add_argument("--results", type=Path, default=RESULTS, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.jobs not in (1, 2):
        # the machines this runs on have two cores; a third worker only slows the others
        parser.error("--jobs must be 1 or 2")
    return args


_ELSEWHERE = (
    "gitsync/reconcile/workqueue.py",
    "gitsync/gitops/increment.py",
    "gitsync/source/sparse.py",
    "gitsync/threads.py",
)


def core(root: Path) -> list[str]:
    """What ``make mutation`` covers by default: every module of engine/ and model/ (a new
    one without a row in TESTS is an error, not a module left out), and the pure modules
    elsewhere: the work queue, which MyApps a pass applies, the sparse checkout's plan,
    the threads' owner."""
    found = [*root.glob("gitsync/engine/*.py"), *root.glob("gitsync/model/*.py")]
    modules = sorted(p.relative_to(root).as_posix() for p in found if p.name != "__init__.py")
    return [*modules, *_ELSEWHERE]


def _modules(args: argparse.Namespace) -> list[tuple[str, tuple[str, ...]]]:
    modules = args.modules or core(args.root)
    out = []
    for module in modules:
        module = Path(module).as_posix().removeprefix("./")
        if not (args.root / module).is_file():
            raise MutationError(f"{module}: no such module under {args.root}")
        tests = tuple(args.tests) if args.tests else TESTS.get(module)
        if not tests:
            raise MutationError(f"{module}: no tests for it in testenv/mutation's table (--tests)")
        out.append((module, tests))
    return out


def _progress(result: Result) -> None:
    mark = {"killed": ".", "timeout": "T", "survived": "S"}[result.outcome]
    print(mark, end="", flush=True)


def main(argv: list[str] | None = None) -> int:
    args = _arguments(argv)
    try:
        allowed = load_allowed(args.allowed)
        modules = _modules(args)
        found = {m: mutants((args.root / m).read_text(), m) for m, _ in modules}
    except (MutationError, SyntaxError) as e:
        print(f"mutation: {e}", file=sys.stderr)
        return 2
    if args.list:
        for module, ms in found.items():
            print(f"{module}: {len(ms)} mutants")
            for m in ms:
                print(f"  {m.path}:{m.line} [{m.operator}] in {m.scope}: {m.change}")
        return 0
    before = {m: tree_hash(args.root, m) for m, _ in modules}
    reports: list[ModuleReport] = []
    try:
        with copies(args.root, args.jobs) as trees:
            for module, tests in modules:
                start = time.monotonic()
                print(f"{module}: {len(found[module])} mutants ", end="", flush=True)
                reports.append(
                    run_module(
                        trees,
                        module,
                        tests,
                        found[module],
                        allowed,
                        timeout=args.timeout,
                        progress=_progress,
                    )
                )
                print(f" {time.monotonic() - start:.0f}s", flush=True)
    except MutationError as e:
        print(f"\nmutation: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\nmutation: interrupted; no report written", file=sys.stderr)
        return 130
    finally:
        # mutants run in copies only; this says so, every time
        changed = [m for m, h in before.items() if tree_hash(args.root, m) != h]
        if changed:
            print(f"mutation: modules changed during the run: {changed}", file=sys.stderr)
    text = format_report(reports, allowed)
    print()
    print(text, end="")
    _write(args.results, reports, text)
    if args.fail_under is not None and any(r.score < args.fail_under for r in reports):
        return 1
    return 0


def _write(results: Path, reports: list[ModuleReport], text: str) -> None:
    results.mkdir(parents=True, exist_ok=True)
    (results / "report.txt").write_text(text)
    data = [
        {
            "module": r.path,
            "tests": list(r.tests),
            "seconds": round(r.seconds),
            "score": round(r.score, 1),
            "mutants": [
                {
                    "line": res.mutant.line,
                    "scope": res.mutant.scope,
                    "operator": res.mutant.operator,
                    "change": res.mutant.change,
                    "outcome": res.outcome,
                    "equivalent": res.equivalent,
                }
                for res in r.results
            ],
        }
        for r in reports
    ]
    (results / "report.json").write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n")
    print(f"report: {results / 'report.txt'}")


if __name__ == "__main__":
    sys.exit(main())
