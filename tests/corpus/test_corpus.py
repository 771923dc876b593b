"""The hostile-input corpus through the loader and ``gitsync validate``; no cluster needed.

Each case alone, next to the good MyApps: exactly its errors (file, line, column, message),
its valid MyApps, and the good ones. Then the whole corpus at once through the command, as
a user runs it: exit 1, one line per error, no traceback. The same corpus goes through
``gitsync diff`` and ``gitsync sync`` against the API server in
tests/integration/test_corpus_sync.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gitsync.errors import ManifestError
from gitsync.source.manifests import LoadResult, load
from tests.corpus.cases import CASES
from tests.corpus.layout import CORPUS, FILES, Case, Error, good_apps, lay_out

NAMESPACE = "corpus-ns"
GOOD = ["victim", "fresh-a", "fresh-b"]
GITSYNC = str(Path(sys.executable).parent / "gitsync")
# a credential where a link into .git would find it
GIT_CONFIG = "[http]\n\textraHeader = Authorization: Bearer corpus-secret-token\n"


def repository(root: Path, cases: list[Case]) -> Path:
    """A checkout: .git, the good MyApps under apps/good, ``cases`` under apps/corpus."""
    (root / ".git").mkdir(parents=True)
    (root / ".git" / "config").write_text(GIT_CONFIG)
    for rel, text in good_apps(NAMESPACE, GOOD).items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    lay_out(root / CORPUS, cases)
    return root


def flags(namespace: str) -> list[str]:
    """What the commands are given, as the loader above is: MyApps go to ``namespace``."""
    return ["--path", "apps", "--namespace", namespace, "--allowed-namespaces", namespace]


def load_corpus(root: Path) -> LoadResult:
    return load(
        root,
        "apps",
        default_namespace=NAMESPACE,
        allowed_namespaces=frozenset({NAMESPACE}),
        denied_namespaces=("kube-*",),
    )


def expected(cases: list[Case], namespace: str = NAMESPACE) -> list[Error]:
    return [
        Error(e.file, e.line, e.column, e.fragment.format(namespace=namespace))
        for case in cases
        for e in case.errors
    ]


def unmatched(errors: list[ManifestError], wanted: list[Error]) -> tuple[list[str], list[Error]]:
    """Errors reported but not expected, and expected but not reported."""
    left = list(errors)
    missing: list[Error] = []
    for want in wanted:
        found = next(
            (
                e
                for e in left
                if (e.file, e.line, e.column) == (want.file, want.line, want.column)
                and want.fragment in str(e)
            ),
            None,
        )
        if found is None:
            missing.append(want)
        else:
            left.remove(found)
    return [str(e) for e in left], missing


def check(result: LoadResult, cases: list[Case]) -> None:
    extra, missing = unmatched(list(result.errors), expected(cases))
    assert (extra, missing) == ([], [])
    for e in result.errors:
        assert "\n" not in str(e) and "\r" not in str(e)
    conflicts = {name for case in cases for name in case.conflicts}
    accepted = {name: spec for case in cases for name, spec in case.accepted.items()}
    apps = {app.obj["metadata"]["name"]: app.obj for app in result.apps}
    assert sorted(apps) == sorted({*(set(GOOD) - conflicts), *accepted})
    for name, spec in accepted.items():
        assert {k: apps[name]["spec"].get(k) for k in spec} == spec
    assert all(app.key.startswith(f"{NAMESPACE}/") for app in result.apps)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_each_case_alone(tmp_path: Path, case: Case) -> None:
    check(load_corpus(repository(tmp_path, [case])), [case])


def corpus_files(root: Path) -> list[str]:
    """Every file and link of the corpus (a link to a directory counts as one)."""
    out = []
    for base, dirs, files in os.walk(root / CORPUS):
        links = [d for d in dirs if (Path(base) / d).is_symlink()]
        out += [str(Path(base) / f) for f in [*files, *links]]
    return out


def test_the_corpus_is_large_and_covers_every_class(tmp_path: Path) -> None:
    root = repository(tmp_path, CASES)
    assert len(CASES) >= 40 and len({c.name for c in CASES}) == len(CASES)
    assert len(corpus_files(root)) >= 40
    kinds = {c.kind for c in CASES}
    assert len(kinds) == 13, kinds
    # every committed case file belongs to a case
    names = {c.name for c in CASES}
    assert {p.name.removesuffix(".yaml") for p in FILES.iterdir()} <= names


def test_the_whole_corpus_at_once(tmp_path: Path) -> None:
    check(load_corpus(repository(tmp_path, CASES)), CASES)


def test_validate_on_the_whole_corpus(tmp_path: Path) -> None:
    root = repository(tmp_path, CASES)
    env = {k: v for k, v in os.environ.items() if not k.startswith("GITSYNC_")}
    proc = subprocess.run(
        [GITSYNC, "validate", "--repo", str(root), *flags(NAMESPACE)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.splitlines()
    assert all(line.startswith("error: ") for line in lines), proc.stderr[-2000:]
    missing = [e for e in expected(CASES) if not any(matches(line, e) for line in lines)]
    assert missing == []
    assert len(lines) == len(expected(CASES))
    good = len(GOOD) - 1 + sum(len(c.accepted) for c in CASES)  # victim is in conflict
    errors = sum(len(c.errors) for c in CASES) + 479  # the flood's hidden ones
    summary = proc.stdout.splitlines()[-1]
    assert summary.startswith(f"{good} MyApps in ") and summary.endswith(f": {errors} errors")
    tracebacks = proc.stderr.count("Traceback")
    print(
        f"FIGURES corpus: {len(CASES)} cases, {len(corpus_files(root))} files,"
        f" {len(lines)} errors shown ({errors} in all), all with file"
        f" (and line where the file has one), {tracebacks} tracebacks"
    )


def matches(line: str, error: Error) -> bool:
    """Whether a line of ``gitsync validate`` (or diff, sync) output reports ``error``."""
    where = error.file
    if error.line is not None:
        where += f":{error.line}:{error.column}"
    return line.startswith(f"error: {where}") and error.fragment in line
