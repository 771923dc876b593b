"""The hostile-input corpus (tests/corpus) through ``gitsync diff`` and ``gitsync sync``
against the API server, from a real Git repository: every error on one line naming its
file and line, the documented exit codes, no traceback; on the API server, the good MyApps
applied, nothing from a broken document, and nothing pruned until every file loads."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from gitsync.kube.client import Kube
from tests.corpus.cases import CASES
from tests.corpus.layout import CORPUS, GOOD, good_apps, lay_out
from tests.corpus.test_corpus import expected, flags, matches
from tests.gitserver import Upstream
from tests.support import get

GITSYNC = str(Path(sys.executable).parent / "gitsync")


def run(kubeconfig: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GITSYNC_")}
    env |= {"KUBECONFIG": kubeconfig, "GITSYNC_LOG_FORMAT": "text"}
    return subprocess.run([GITSYNC, *args], capture_output=True, text=True, timeout=300, env=env)


def myapps(kube: Kube, namespace: str) -> dict[str, dict[str, object]]:
    items = kube.list(f"/apis/apps.example.com/v1/namespaces/{namespace}/myapps")["items"]
    return {o["metadata"]["name"]: o for o in items}


def test_diff_and_sync_on_the_corpus(
    kube: Kube, kubeconfig: str, crd: str, namespace: str, upstream: Upstream, tmp_path: Path
) -> None:
    args = [
        *("--repo", upstream.file_url, "--cache-dir", str(tmp_path / "cache")),
        *flags(namespace),
        # no prune guard but the one under test: a broken file holds every prune back
        *("--prune-max-fraction", "1"),
    ]
    sync_args = ["sync", *args, "--status-namespace", namespace]
    diff_args = ["diff", *args, "--no-color"]

    # 1. a clean repository: victim, fresh-a and old applied
    upstream.commit(good_apps(namespace, ["victim", "fresh-a", "old"]), "clean")
    first = run(kubeconfig, *sync_args)
    assert first.returncode == 0, first.stderr
    assert sorted(myapps(kube, namespace)) == ["fresh-a", "old", "victim"]

    # 2. old leaves Git, fresh-b comes, and the whole corpus with it
    (upstream.work / GOOD / "old.yaml").unlink()
    lay_out(upstream.work / CORPUS, CASES)
    upstream.commit(good_apps(namespace, ["fresh-b"]), "the corpus")
    accepted = {n: spec for c in CASES for n, spec in c.accepted.items()}
    wanted = expected(CASES, namespace)

    diff = run(kubeconfig, *diff_args)
    assert diff.returncode == 2, diff.stderr[-3000:]  # 2: a manifest cannot be planned
    assert "Traceback" not in diff.stderr
    errors = [line for line in diff.stderr.splitlines() if line.startswith("error: ")]
    assert [e for e in wanted if not any(matches(line, e) for line in errors)] == []
    assert len(errors) == len(wanted)
    # the good and the valid corpus MyApps, each with its Deployment unless suspended
    # (suspend: y); nothing pruned
    suspended = sum(1 for spec in accepted.values() if spec.get("suspend"))
    created = 2 * (1 + len(accepted)) - suspended
    summary = diff.stdout.splitlines()[-1]
    assert re.search(rf": {created} created, 0 configured, \d+ unchanged, 0 pruned", summary), (
        diff.stdout[-2000:]
    )
    assert "prune skipped: " in diff.stderr

    sync = run(kubeconfig, *sync_args)
    assert sync.returncode == 1, sync.stderr[-3000:]
    assert "Traceback" not in sync.stderr
    errors = [line for line in sync.stderr.splitlines() if line.startswith("error: ")]
    assert [e for e in wanted if not any(matches(line, e) for line in errors)] == []
    assert len(errors) == len(wanted)
    assert "prune skipped: " in sync.stderr

    # what the API server holds: the good ones and the corpus' valid ones; old is not
    # pruned; victim, defined twice, keeps what it had; nothing else of the corpus
    live = myapps(kube, namespace)
    assert sorted(live) == sorted({"victim", "fresh-a", "fresh-b", "old", *accepted})
    victim_spec = live["victim"]["spec"]
    assert isinstance(victim_spec, dict) and victim_spec["image"] == "nginx:1.27"
    for name, spec in accepted.items():
        held = live[name]["spec"]
        assert isinstance(held, dict) and {k: held.get(k) for k in spec} == spec
    assert get(kube, "Deployment", namespace, "fresh-b") is not None
    for other in ("default", "kube-system"):
        assert [n for n in myapps(kube, other) if n.startswith("corpus-")] == []

    print(
        f"FIGURES corpus sync: {len(CASES)} cases, {len(errors)} errors (diff: the same),"
        f" 0 tracebacks, exit codes diff 2 / sync 1; {len(live)} MyApps held"
        f" ({len(accepted)} valid corpus ones), 0 from broken documents, 0 pruned"
    )

    # 3. the corpus leaves Git: every file loads again, and what left Git is pruned
    shutil.rmtree(upstream.work / CORPUS)
    upstream.commit({}, "the corpus removed")
    last = run(kubeconfig, *sync_args)
    assert last.returncode == 0, last.stderr[-3000:]
    assert sorted(myapps(kube, namespace)) == ["fresh-a", "fresh-b", "victim"]
