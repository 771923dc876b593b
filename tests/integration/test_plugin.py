"""``kubectl gitsync`` with the real kubectl: found by ``kubectl plugin list``, run with
the arguments kubectl passes, completed through ``kubectl_complete-gitsync``; and
``gitsync completion bash`` completing in a real bash."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from gitsync import __version__
from tests.support import app_yaml

BIN = Path(sys.executable).parent


def run(kubectl_bin: str, *args: str, check: bool = False) -> subprocess.CompletedProcess[str]:
    """kubectl with only gitsync's scripts and kubectl itself on PATH (and what git needs)."""
    path = os.pathsep.join([str(BIN), str(Path(kubectl_bin).parent), "/usr/bin", "/bin"])
    env = {k: v for k, v in os.environ.items() if not k.startswith("GITSYNC_")} | {"PATH": path}
    return subprocess.run(
        [kubectl_bin, *args], env=env, capture_output=True, text=True, timeout=60, check=check
    )


def test_kubectl_lists_the_plugin_and_runs_it_as_kubectl_gitsync(kubectl_bin: str) -> None:
    listed = run(kubectl_bin, "plugin", "list")
    assert listed.returncode == 0, listed.stderr
    assert str(BIN / "kubectl-gitsync") in listed.stdout
    assert "warning" not in listed.stdout.lower()  # no name shadowing a kubectl command
    assert run(kubectl_bin, "gitsync", "version").stdout == f"gitsync {__version__}\n"
    helped = run(kubectl_bin, "gitsync", "drift", "--help")
    assert helped.returncode == 0 and helped.stdout.startswith("Usage: kubectl gitsync drift")


def test_kubectl_gitsync_is_gitsync_with_kubectls_flags_passed_on(
    kubectl_bin: str, kubeconfig: str, namespace: str, tmp_path: Path
) -> None:
    repo = tmp_path / "apps"
    repo.mkdir()
    (repo / "a.yaml").write_text(app_yaml(namespace, "a"))
    flags = ("--kubeconfig", kubeconfig, "-n", namespace)
    # what `diff` plans against the cluster, through kubectl and straight, alike
    via = run(kubectl_bin, "gitsync", "diff", "--repo", str(repo), *flags, "--no-color")
    direct = subprocess.run(
        [str(BIN / "gitsync"), "diff", "--repo", str(repo), *flags, "--no-color"],
        capture_output=True,
        text=True,
        timeout=60,
        env={k: v for k, v in os.environ.items() if not k.startswith("GITSYNC_")},
    )
    assert (via.returncode, via.stdout) == (direct.returncode, direct.stdout), via.stderr
    assert via.returncode == 1 and f"MyApp/{namespace}/a" in via.stdout
    # an error is gitsync's, named as the plugin
    bad = run(kubectl_bin, "gitsync", "drift", "--output", "xml", *flags)
    assert bad.returncode == 2 and "Usage: kubectl gitsync drift" in bad.stderr


def completions(kubectl_bin: str, *words: str) -> tuple[list[str], str]:
    done = run(kubectl_bin, "__complete", "gitsync", *words, check=True)
    lines = done.stdout.splitlines()
    return [line.split("\t")[0] for line in lines[:-1]], lines[-1]


def test_kubectl_completes_commands_flags_and_values_through_the_plugin(kubectl_bin: str) -> None:
    commands, directive = completions(kubectl_bin, "dr")
    assert commands == ["drift"] and directive == ":4"  # no file names offered
    assert "diff" in completions(kubectl_bin, "")[0]
    assert completions(kubectl_bin, "drift", "--out")[0] == ["--output"]
    assert completions(kubectl_bin, "drift", "-o", "")[0] == ["text", "wide", "json", "yaml"]
    # a path: left to the shell to complete (Cobra's default directive)
    assert completions(kubectl_bin, "sync", "--cache-dir", "") == ([], ":0")


def test_bash_completes_with_the_script_gitsync_prints(tmp_path: Path) -> None:
    script = subprocess.run(
        [str(BIN / "gitsync"), "completion", "bash"],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    ).stdout
    (tmp_path / "gitsync.bash").write_text(script)
    probe = (
        f"source {tmp_path / 'gitsync.bash'}\n"
        "COMP_WORDS=(gitsync dr); COMP_CWORD=1; _gitsync_completion gitsync\n"
        'echo "${COMPREPLY[@]}"\n'
        "COMPREPLY=()\n"
        "COMP_WORDS=(gitsync drift -o j); COMP_CWORD=3; _gitsync_completion gitsync\n"
        'echo "${COMPREPLY[@]}"\n'
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("GITSYNC_")}
    env["PATH"] = os.pathsep.join([str(BIN), "/usr/bin", "/bin"])
    done = subprocess.run(
        ["bash", "-c", probe], capture_output=True, text=True, timeout=30, env=env, check=True
    )
    assert done.stdout.splitlines() == ["drift", "json"], done.stdout + done.stderr
    for shell in ("zsh", "fish"):
        text = subprocess.run(
            [str(BIN / "gitsync"), "completion", shell],
            capture_output=True,
            text=True,
            check=True,
            timeout=30,
        ).stdout
        assert "_GITSYNC_COMPLETE" in text and f"{shell}_complete" in text
