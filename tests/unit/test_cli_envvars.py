"""``GITSYNC_*`` variables gitsync does not read are warned of, with the setting meant;
gitsync's own (tests, benchmark, child processes) are not. The command line is run as a
user runs it, in a subprocess."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from gitsync.cli import main
from gitsync.cli.envvars import settings, unknown

GITSYNC = str(Path(sys.executable).parent / "gitsync")
ROOT = Path(__file__).resolve().parents[2]
APP = """\
apiVersion: apps.example.com/v1
kind: MyApp
metadata: {name: web, namespace: shop}
spec:
  image: nginx:1.27
"""
#: GITSYNC_ names in the repository that are no variable gitsync reads: a Python constant,
#: and the README's example of a misnamed one
NOT_VARIABLES = {"GITSYNC_FIELDS", "GITSYNC_PATH"}


def validate(repo: Path, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("GITSYNC_")}
    return subprocess.run(
        [GITSYNC, "validate", "--repo", str(repo)],
        capture_output=True,
        text=True,
        timeout=60,
        env=clean | env,
    )


def test_a_misnamed_setting_is_one_warning_naming_the_right_one(tmp_path: Path) -> None:
    (tmp_path / "web.yaml").write_text(APP)
    proc = validate(tmp_path, GITSYNC_PATH="apps")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.splitlines() == [
        "warning: GITSYNC_PATH is not a gitsync setting and is ignored "
        "(did you mean GITSYNC_PATH_IN_REPO?)"
    ]


def test_gitsync_own_variables_and_settings_are_not_warned_of(tmp_path: Path) -> None:
    (tmp_path / "apps").mkdir()
    (tmp_path / "apps" / "web.yaml").write_text(APP)
    own = {
        "GITSYNC_TESTENV_DIR": "/x",
        "GITSYNC_TEST_SHARDING": "1",
        "GITSYNC_FAULTS": "long",
        "GITSYNC_FUZZ": "long",
        "GITSYNC_BENCH_N": "3",
        "GITSYNC_SOAK_MINUTES": "1",
        "GITSYNC_TRACEMALLOC_DIR": str(tmp_path),
        "GITSYNC_PATH_IN_REPO": "apps",
        "GITSYNC_INTERVAL": "30",  # run's, set for every command in the Pod
    }
    proc = validate(tmp_path, **own)
    assert (proc.returncode, proc.stderr) == (0, "")
    assert proc.stdout.startswith("1 MyApps in 1 files "), proc.stdout


@pytest.mark.parametrize(
    ("var", "meant"),
    [
        ("GITSYNC_PATH", "GITSYNC_PATH_IN_REPO"),
        ("GITSYNC_INTERVALL", "GITSYNC_INTERVAL"),
        ("GITSYNC_DRIFTPOLICY", "GITSYNC_DRIFT_POLICY"),
        ("GITSYNC_WEBHOOK_SECRET", "GITSYNC_WEBHOOK_SECRET_FILE"),
        ("GITSYNC_FOO", None),
    ],
)
def test_the_setting_meant_when_one_is_close(var: str, meant: str | None) -> None:
    [warning] = unknown({var: "x", "HOME": "/", "PATH_IN_REPO": "x"}, settings(main))
    hint = f" (did you mean {meant}?)" if meant else ""
    assert warning == f"warning: {var} is not a gitsync setting and is ignored{hint}"


def test_every_gitsync_variable_the_repository_names_is_a_setting_or_gitsync_own() -> None:
    """A variable added to the Makefile, the tests, deploy/ or the chart that neither is a
    flag's nor listed as gitsync's own would be warned of: listed here first."""
    tracked = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.decode()
    names: set[str] = set()
    for rel in tracked.split("\0"):
        path = ROOT / rel
        # this file names wrong ones on purpose
        if not rel or not path.is_file() or path == Path(__file__).resolve():
            continue
        try:
            text = path.read_text()
        except (UnicodeDecodeError, OSError):
            continue
        # a name, not a family the docs spell GITSYNC_BENCH_* or GITSYNC_FAULTS*
        names |= set(re.findall(r"(?<![\w])GITSYNC_[A-Z0-9_]*[A-Z0-9](?![\w*])", text))
    assert {"GITSYNC_TESTENV_DIR", "GITSYNC_FAULTS", "GITSYNC_PATH_IN_REPO"} <= names
    variables = dict.fromkeys(sorted(names - NOT_VARIABLES), "x")
    assert unknown(variables, settings(main)) == []
