"""The GitHub Actions workflows pass actionlint, and CI runs what the README says."""

from __future__ import annotations

import subprocess
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = ROOT / ".github" / "workflows"


def actionlint_run(actionlint: str, *files: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [actionlint, "-no-color", *map(str, files)],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
        timeout=120,
    )


def test_actionlint_passes(actionlint: str) -> None:
    files = sorted(WORKFLOWS.glob("*.yml"))
    assert {f.name for f in files} >= {"ci.yml", "release.yml"}
    proc = actionlint_run(actionlint, *files)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_actionlint_finds_a_broken_workflow(actionlint: str, tmp_path: Path) -> None:
    broken = (WORKFLOWS / "ci.yml").read_text().replace("runs-on: ubuntu-latest", "runs_on: x")
    (tmp_path / ".github" / "workflows").mkdir(parents=True)
    path = tmp_path / ".github" / "workflows" / "ci.yml"
    path.write_text(broken)
    proc = actionlint_run(actionlint, path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "runs_on" in proc.stdout


def test_ci_runs_make_test_with_the_binary_cache_keyed_on_the_pins() -> None:
    ci = yaml.safe_load((WORKFLOWS / "ci.yml").read_text())
    steps = ci["jobs"]["test"]["steps"]
    assert any(s.get("run") == "make test" for s in steps)
    assert "make test" in (ROOT / "README.md").read_text()
    [cache] = [s for s in steps if str(s.get("uses", "")).startswith("actions/cache@")]
    assert cache["with"]["path"] == "~/.cache/gitsync-testenv"
    assert "testenv/**/go.sum" in cache["with"]["key"]
