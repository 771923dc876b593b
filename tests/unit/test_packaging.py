"""What surrounds the image: the Dockerfile cannot be built here (no Docker engine),
so check everything it relies on instead.

- every path the Dockerfile COPYs exists, and .dockerignore does not hide it;
- those files alone form an installable package with the ``gitsync`` console script;
- requirements.lock pins exactly gitsync's runtime dependencies as installed in .venv,
  and requirements-dev.lock everything else .venv holds (the test, lint and bench tools);
- every flag and GITSYNC_* variable deploy/ gives the container is one gitsync knows;
- the image's ENTRYPOINT + CMD (``gitsync run``) starts.

Regenerate the locks after changing dependencies:
``.venv/bin/python -m tests.unit.test_packaging > requirements.lock`` and
``.venv/bin/python -m tests.unit.test_packaging dev > requirements-dev.lock``.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
import zipfile
from collections.abc import Iterable
from importlib.metadata import PackageNotFoundError, distribution, distributions
from pathlib import Path
from typing import Any

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from gitsync.daemon import metrics

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "Dockerfile"
LOCK = ROOT / "requirements.lock"
DEV_LOCK = ROOT / "requirements-dev.lock"
DEPLOY = ROOT / "deploy"
GITSYNC = str(Path(sys.executable).parent / "gitsync")
LOCK_HEADER = """\
# Pinned runtime dependencies of gitsync (no test or lint tools), installed in the image.
# Generated from .venv: .venv/bin/python -m tests.unit.test_packaging > requirements.lock
"""
DEV_LOCK_HEADER = """\
# Pinned test, lint and bench tools of make's .venv, with what they need beyond
# requirements.lock: a fresh machine checks the code with the tools it was checked with.
# Generated from .venv: .venv/bin/python -m tests.unit.test_packaging dev > requirements-dev.lock
"""
#: installed in every venv by itself, or gitsync itself (editable)
NOT_LOCKED = {"gitsync", "pip", "setuptools", "wheel"}


# --- the Dockerfile ------------------------------------------------------------------


def instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    out: list[tuple[str, str]] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line, pending = pending + line, ""
        word, _, rest = line.partition(" ")
        out.append((word.upper(), rest.strip()))
    return out


def copy_sources() -> list[str]:
    """The build-context paths of every COPY (not COPY --from=stage)."""
    sources: list[str] = []
    for word, args in instructions(DOCKERFILE.read_text()):
        words = shlex.split(args)
        if word != "COPY" or any(w.startswith("--from") for w in words):
            continue
        sources += [w for w in words if not w.startswith("--")][:-1]  # the last is the target
    return sources


def test_every_copied_path_exists_and_is_not_dockerignored() -> None:
    sources = copy_sources()
    assert {"pyproject.toml", "gitsync/", "requirements.lock"} <= set(sources)
    ignored = [
        p.strip()
        for p in (ROOT / ".dockerignore").read_text().splitlines()
        if p.strip() and not p.startswith("#")
    ]
    for src in sources:
        assert (ROOT / src).exists(), f"Dockerfile copies {src}, which does not exist"
        hits = [p for p in ignored if fnmatch.fnmatch(src.rstrip("/"), p.rstrip("/"))]
        assert not hits, f"{src} is copied but .dockerignore excludes it ({hits})"
    for local_state in (".venv", ".testenv", ".git", "tests", "bench"):
        assert local_state in ignored, f".dockerignore should exclude {local_state}"


def test_image_runs_gitsync_as_non_root_with_the_daemon_by_default() -> None:
    steps = instructions(DOCKERFILE.read_text())
    last = dict(steps[max(i for i, (w, _) in enumerate(steps) if w == "FROM") :])
    assert json.loads(last["ENTRYPOINT"]) == ["gitsync"]
    assert json.loads(last["CMD"]) == ["run"]
    assert last["USER"].split(":")[0] == "65532"
    text = DOCKERFILE.read_text()
    assert "--no-install-recommends git openssh-client" in text
    for env in ("PYTHONDONTWRITEBYTECODE=1", "GITSYNC_CACHE_DIR=/var/cache/gitsync"):
        assert env in text


def test_copied_files_build_a_wheel_with_the_console_script(tmp_path: Path) -> None:
    context = tmp_path / "context"
    context.mkdir()
    for src in copy_sources():
        path = ROOT / src
        if path.is_dir():
            shutil.copytree(path, context / src, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(path, context / src)
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", str(tmp_path / "dist"), "."],
        cwd=context,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if proc.returncode and "No matching distribution found for setuptools" in proc.stderr:
        pytest.skip("the build backend (setuptools) cannot be downloaded here")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # the build backend has nothing to warn of (pyproject.toml in the form it wants): a
    # warning is printed again by every build, make's .venv included
    warnings = re.findall(r"\w+Warning: .*", proc.stdout + proc.stderr)
    assert not warnings, warnings
    [wheel] = (tmp_path / "dist").glob("gitsync-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        assert "gitsync/cli/app.py" in names and "gitsync/py.typed" in names
        [entry_points] = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
        text = zf.read(entry_points).decode()
    assert re.search(r"^\[console_scripts\]\s*^gitsync = gitsync\.cli:main$", text, re.M), text


# --- the lock ------------------------------------------------------------------------


def runtime_requirements() -> dict[str, tuple[str, str]]:
    """gitsync's runtime dependency closure as installed: {canonical name: (name, version)}.

    Extras (test, lint) are left out; environment markers are evaluated for this
    interpreter, which is the image's (CPython 3.11 on Linux).
    """
    found: dict[str, tuple[str, str]] = {}
    todo = ["gitsync"]
    while todo:
        for spec in distribution(todo.pop()).requires or []:
            req = Requirement(spec)
            if req.marker is not None and not req.marker.evaluate({"extra": ""}):
                continue
            key = canonicalize_name(req.name)
            if key in found:
                continue
            try:
                dist = distribution(req.name)
            except PackageNotFoundError:
                pytest.fail(f"{req.name} (needed by gitsync) is not installed in .venv")
            found[key] = (dist.metadata["Name"], dist.version)
            todo.append(req.name)
    return found


def _render(header: str, pins: Iterable[tuple[str, str]]) -> str:
    """A lock: ``header``, then ``name==version`` lines in canonical-name order."""
    ordered = sorted(pins, key=lambda nv: canonicalize_name(nv[0]))
    return header + "".join(f"{name}=={version}\n" for name, version in ordered)


def render_lock() -> str:
    return _render(LOCK_HEADER, runtime_requirements().values())


def render_dev_lock() -> str:
    runtime = set(runtime_requirements())
    pins = {
        canonicalize_name(d.metadata["Name"]): (d.metadata["Name"], d.version)
        for d in distributions()
    }
    kept = [nv for key, nv in pins.items() if key not in runtime and key not in NOT_LOCKED]
    return _render(DEV_LOCK_HEADER, kept)


def test_dev_lock_pins_exactly_the_other_packages_installed_in_the_venv() -> None:
    assert DEV_LOCK.read_text() == render_dev_lock(), (
        "requirements-dev.lock is stale: .venv/bin/python -m tests.unit.test_packaging dev"
        " > requirements-dev.lock"
    )
    pinned = {canonicalize_name(line.split("==")[0]) for line in _lock_lines(DEV_LOCK)}
    assert {"pytest", "ruff", "mypy", "hypothesis", "playwright"} <= pinned


def test_lock_pins_exactly_the_runtime_dependencies_installed_in_the_venv() -> None:
    assert LOCK.read_text() == render_lock(), (
        "requirements.lock is stale: .venv/bin/python -m tests.unit.test_packaging"
        " > requirements.lock"
    )
    pinned = {canonicalize_name(line.split("==")[0]) for line in _lock_lines()}
    for tool in ("pytest", "ruff", "mypy", "types-pyyaml", "gitsync"):
        assert tool not in pinned


def test_the_lock_pins_every_dependency_pyproject_declares_within_its_range() -> None:
    """``pip install -c requirements.lock .`` takes each dependency at its pin: one that
    the lock did not pin, or pinned outside the range, would be resolved anew."""
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    pins = {
        canonicalize_name(name): version
        for name, _, version in (line.partition("==") for line in _lock_lines())
    }
    assert len(declared) >= 7
    for spec in map(Requirement, declared):
        pinned = pins.get(canonicalize_name(spec.name))
        assert pinned is not None, f"requirements.lock does not pin {spec.name}"
        assert spec.specifier.contains(pinned), f"{spec.name}=={pinned} is outside {spec}"


def test_the_readme_installs_with_the_lock() -> None:
    """Each ``pip install`` the README gives as a command constrains it by the lock."""
    readme = (ROOT / "README.md").read_text()
    blocks = re.findall(r"^```\w*\n(.*?)^```", readme, re.M | re.S)
    commands = [ln for b in blocks for ln in b.splitlines() if re.match(r"\s*pip install", ln)]
    assert commands, "the README gives no pip install command"
    for line in commands:
        words = shlex.split(line, comments=True)
        assert "-c" in words or "--constraint" in words, line
        flag = words.index("-c") if "-c" in words else words.index("--constraint")
        assert words[flag + 1] == "requirements.lock", line


def _lock_lines(lock: Path = LOCK) -> list[str]:
    return [ln for ln in lock.read_text().splitlines() if ln and not ln.startswith("#")]


# --- deploy/ against the CLI ---------------------------------------------------------


def _help(*args: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GITSYNC_")}
    proc = subprocess.run(
        [GITSYNC, *args, "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env | {"COLUMNS": "200"},
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def deploy_objects(kind: str) -> list[dict[str, Any]]:
    docs = (d for f in sorted(DEPLOY.glob("*.yaml")) for d in yaml.safe_load_all(f.read_text()))
    return [d for d in docs if d and d.get("kind") == kind]


def deployment_container() -> dict[str, Any]:
    [deployment] = deploy_objects("Deployment")
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    return dict(container)


def test_every_flag_and_variable_deploy_passes_is_known_to_gitsync_run() -> None:
    container = deployment_container()
    run_help = _help("run")
    known_flags = set(re.findall(r"(?<![\w-])--?[a-z][\w-]*", run_help))
    known_env = set(re.findall(r"GITSYNC_[A-Z0-9_]+", run_help + _help()))

    args = container["args"]
    assert args[0] == "run"
    for arg in args[1:]:
        flag = arg.split("=", 1)[0]
        assert flag in known_flags, f"deploy/ passes {flag}, unknown to `gitsync run`"

    env_names = {e["name"] for e in container.get("env", [])}
    configmaps = {d["metadata"]["name"]: d.get("data") or {} for d in deploy_objects("ConfigMap")}
    for source in container.get("envFrom", []):
        name = source["configMapRef"]["name"]
        assert name in configmaps, f"envFrom names a ConfigMap deploy/ does not have: {name}"
        env_names |= set(configmaps[name])
    # the credential variables stay commented out in the ConfigMap until a Secret exists
    config = (DEPLOY / "config.yaml").read_text()
    commented = set(re.findall(r"^\s*#\s*(GITSYNC_[A-Z0-9_]+):", config, re.M))
    assert {"GITSYNC_TOKEN_FILE", "GITSYNC_SSH_KEY_FILE", "GITSYNC_KNOWN_HOSTS_FILE"} <= commented
    env_names |= commented
    image_env = re.findall(r"\b(GITSYNC_[A-Z0-9_]+)=", DOCKERFILE.read_text())
    gitsync_env = {n for n in env_names | set(image_env) if n.startswith("GITSYNC_")}
    assert {
        "GITSYNC_REPO",
        "GITSYNC_REF",
        "GITSYNC_PATH_IN_REPO",
        "GITSYNC_INTERVAL",
    } <= gitsync_env
    unknown = sorted(gitsync_env - known_env)
    assert not unknown, f"deploy/ or the Dockerfile set variables gitsync does not read: {unknown}"


def test_file_variables_point_into_mounted_volumes() -> None:
    container = deployment_container()
    mounts = [m["mountPath"] for m in container["volumeMounts"]]
    text = (DEPLOY / "config.yaml").read_text()
    files = dict(re.findall(r"^\s*#?\s*(GITSYNC_\w+_FILE):\s*(\S+)", text, re.M))
    files |= {e["name"]: e["value"] for e in container["env"] if e["name"].endswith("_FILE")}
    files["GITSYNC_CACHE_DIR"] = next(
        e["value"] for e in container["env"] if e["name"] == "GITSYNC_CACHE_DIR"
    )
    assert len(files) == 6, files
    for name, path in files.items():
        assert any(path.startswith(m + "/") or path == m for m in mounts), (name, path)


COMMANDS = ("run", "sync", "diff", "drift", "validate", "blame", "rollback", "resume", "version")


def test_operating_docs_cover_every_flag_variable_and_metric() -> None:
    """docs/operating.md is the configuration reference: it must not fall behind the CLI."""
    docs = (ROOT / "docs" / "operating.md").read_text()
    missing: list[str] = []
    for command in ("", *COMMANDS):
        text = _help(*([command] if command else []))
        options = text.split("Options:", 1)[1].split("Commands:", 1)[0]
        names = re.findall(r"(?<![\w-])--?[a-z][\w-]*|GITSYNC_[A-Z0-9_]+", options)
        missing += [f"{command or 'gitsync'} {n}" for n in names if f"`{n}" not in docs]
    for line in metrics.standard().render().splitlines():
        if line.startswith("# HELP "):
            name = line.split()[2]
            if f"`{name}`" not in docs:
                missing.append(f"metric {name}")
    assert not missing, f"docs/operating.md does not document: {sorted(set(missing))}"


def test_entrypoint_and_cmd_run() -> None:
    """``ENTRYPOINT ["gitsync"]`` + ``CMD ["run"]``, as the installed console script."""
    assert "The daemon" in _help("run")


if __name__ == "__main__":
    sys.stdout.write(render_dev_lock() if sys.argv[1:] == ["dev"] else render_lock())
