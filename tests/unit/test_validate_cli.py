"""``gitsync validate`` on hostile manifests, as a user runs it: one line per error, the
exit code, no traceback, the good files still counted. No cluster needed."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

GITSYNC = str(Path(sys.executable).parent / "gitsync")

APP = """\
apiVersion: apps.example.com/v1
kind: MyApp
metadata: {{name: {name}, namespace: shop}}
spec:
  image: nginx:1.27
"""


def validate(repo: Path | str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GITSYNC_")}
    return subprocess.run(
        [GITSYNC, "validate", "--repo", str(repo), *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )


def test_newlines_in_a_file_name_and_a_key_give_one_line_each(tmp_path: Path) -> None:
    (tmp_path / "ok.yaml").write_text(APP.format(name="ok"))
    (tmp_path / "x\nerror: forged.yaml").write_text(APP.format(name="a") + "  port: x\n")
    (tmp_path / "key.yaml").write_text(APP.format(name="b") + '  "k\\nerror: forged": 1\n')
    proc = validate(tmp_path)
    assert proc.returncode == 1
    assert proc.stderr.splitlines() == [
        r"error: key.yaml:6:3 (document 0): spec['k\nerror: forged']: unknown field"
        " (known: image, replicas, port, env, resources, driftPolicy, suspend,"
        " progressDeadlineSeconds, rollback, dependsOn)",
        r"error: 'x\nerror: forged.yaml':6:3 (document 0): spec.port: must be an integer"
        " from 1 to 65535, found string 'x'",
    ]
    assert proc.stdout.splitlines() == [f"1 MyApps in 3 files under {tmp_path.resolve()}: 2 errors"]


HOSTILE = {
    "sexagesimal": "  replicas: " + ":".join(["1"] * 100_000) + "\n",
    "hex": "  replicas: 0x" + "f" * 5000 + "\n",
    "quoted": '  replicas: "' + "9" * 5000 + '"\n',
    "nul": "  port: 8\x00\n",
    "alias": "  env: [{name: A, value: &a " + "v" * (200 << 10) + "}]\nx: [*a, *a, *a]\n",
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_input_is_one_clear_error(tmp_path: Path, case: str) -> None:
    (tmp_path / "ok.yaml").write_text(APP.format(name="ok"))
    (tmp_path / "bad.yaml").write_text(APP.format(name="bad") + HOSTILE[case])
    proc = validate(tmp_path)
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and re.match(r"error: bad\.yaml:[67]:\d+[ :]", lines[0]), proc.stderr
    assert proc.stdout.splitlines() == [f"1 MyApps in 2 files under {tmp_path.resolve()}: 1 errors"]


def test_a_symlink_loop_is_one_clear_error(tmp_path: Path) -> None:
    (tmp_path / "ok.yaml").write_text(APP.format(name="ok"))
    (tmp_path / "loop.yaml").symlink_to("loop.yaml")
    proc = validate(tmp_path)
    assert (proc.returncode, proc.stderr) == (
        1,
        "error: loop.yaml: cannot read: Too many levels of symbolic links\n",
    )


def test_a_flood_of_errors_is_cut(tmp_path: Path) -> None:
    (tmp_path / "flood.yaml").write_text(APP.format(name="a") + "  env: [" + "0," * 9999 + "0]\n")
    proc = validate(tmp_path)
    assert proc.returncode == 1
    lines = proc.stderr.splitlines()
    assert len(lines) == 21
    assert lines[-1] == "error: flood.yaml: … and 9980 more errors in this file"
    assert proc.stdout.splitlines() == [
        f"0 MyApps in 1 files under {tmp_path.resolve()}: 10000 errors"
    ]


def test_watch_namespace(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(APP.format(name="a"))
    assert validate(tmp_path, "--watch-namespace", "shop").returncode == 0
    proc = validate(tmp_path, "--watch-namespace", "blog")
    assert proc.returncode == 1
    assert "'shop' is outside the namespace gitsync watches" in proc.stderr


def test_the_summary_names_the_directory_read(tmp_path: Path) -> None:
    (tmp_path / "apps").mkdir()
    (tmp_path / "apps" / "a.yaml").write_text(APP.format(name="a"))
    proc = validate(tmp_path, "--path", "apps")
    assert (proc.returncode, proc.stderr) == (0, "")
    assert proc.stdout == f"1 MyApps in 1 files under {tmp_path.resolve() / 'apps'}: valid\n"


def test_a_git_url_is_summed_up_at_its_ref_and_commit(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "a.yaml").write_text(APP.format(name="a"))
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "init", "-q", "-b", "main"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "a"], check=True)
    sha = subprocess.run(
        [*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    proc = validate(f"file://{repo}", "--cache-dir", str(tmp_path / "cache"))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"1 MyApps in 1 files at main@sha1:{sha}: valid\n"


def test_a_missing_directory_is_said_not_to_exist(tmp_path: Path) -> None:
    proc = validate(tmp_path / "nowhere")
    assert (proc.returncode, proc.stdout) == (1, "")
    assert proc.stderr == (
        f"error: repository '{tmp_path / 'nowhere'}' does not exist (no such directory, "
        "and not a Git URL)\n"
    )


def test_a_ref_the_checkout_lacks_is_one_error(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(APP.format(name="a"))
    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "init", "-q", "-b", "trunk"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "a"], check=True)
    assert validate(tmp_path, "--ref", "trunk").returncode == 0
    proc = validate(tmp_path, "--ref", "master")
    assert (proc.returncode, proc.stdout) == (1, "")
    assert proc.stderr == (
        f"error: --ref 'master': the checkout {tmp_path.resolve()} has no such branch, tag "
        "or commit (it is on trunk); leave --ref out to take its branch, or name the "
        "instance with --instance-repo or --instance-name\n"
    )
