"""A pass that applies only what a commit changed leaves the API server where a full pass
would: after each of a random run of commits (MyApps added, changed, moved between
files, removed, a file broken and mended), a full pass over every MyApp finds nothing
to write, and the server's objects are Git's."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from gitsync.engine.changeset import ChangeSet
from gitsync.kube.client import Kube, path_of
from gitsync.model.api import SOURCE_PATH_ANNOTATION
from gitsync.reconcile.controller import Controller
from tests.gitserver import Upstream
from tests.integration.test_sync import syncer
from tests.support import app_yaml, wait_until

NAMES = [f"app{i}" for i in range(10)]
FILES = ["apps/one.yaml", "apps/two.yaml", "apps/deep/three.yaml", "apps/four.yml"]


def server_state(kube: Kube, namespace: str) -> dict[str, tuple[object, ...]]:
    """Each MyApp and Deployment as the API server holds it: its generation and what
    gitsync applied to it (the Apply entries of its managedFields, with their times, which
    the server moves only when an apply changes something). Status is left out: the
    workers and the controller-manager write it as Pods come and go."""
    out: dict[str, tuple[object, ...]] = {}
    for kind in ("MyApp", "Deployment"):
        for o in kube.list(path_of(kind, namespace))["items"]:
            meta = o["metadata"]
            applied = sorted(
                (m["manager"], m["time"], str(m.get("fieldsV1")))
                for m in meta.get("managedFields", [])
                if m["operation"] == "Apply" and not m.get("subresource")
            )
            out[f"{kind}/{meta['name']}"] = (
                meta["generation"],
                o["spec"],
                meta.get("labels"),
                (meta.get("annotations") or {}).get(SOURCE_PATH_ANNOTATION),
                applied,
            )
    return out


def orphans(kube: Kube, namespace: str) -> set[str]:
    """Deployments whose MyApp is gone: the garbage collector's, soon."""
    names = {
        kind: {o["metadata"]["name"] for o in kube.list(path_of(kind, namespace))["items"]}
        for kind in ("MyApp", "Deployment")
    }
    return names["Deployment"] - names["MyApp"]


def writes(result: ChangeSet) -> list[str]:
    return [f"{c.subject} {c.action}" for c in result.changes if c.writes]


@pytest.mark.parametrize("seed", [1, 2])
def test_incremental_passes_end_where_full_passes_do(
    kube: Kube,
    namespace: str,
    controller: Controller,
    upstream: Upstream,
    cache_dir: Path,
    tmp_path: Path,
    seed: int,
) -> None:
    rnd = random.Random(seed)  # noqa: S311 (a reproducible run of commits)
    part = syncer(controller, upstream.file_url, cache_dir, namespace, full_every=3600.0)
    full = syncer(controller, upstream.file_url, tmp_path / "full-cache", namespace)
    where: dict[str, str] = {}  # MyApp → its file
    images: dict[str, str] = {}
    broken = False
    incremental = 0
    for step in range(8):
        if broken:
            broken = False  # mended by this commit
        elif step > 1 and rnd.random() < 0.2:
            broken = True
        for name in rnd.sample(NAMES, 3):
            what = rnd.choice(["add", "change", "move", "remove"] if name in where else ["add"])
            if what == "remove":
                del where[name], images[name]
            elif what == "move" or name not in where:
                where[name] = rnd.choice(FILES)
                images.setdefault(name, "nginx:1.27")
            else:
                images[name] = f"nginx:1.{rnd.randrange(20, 30)}"
        files: dict[str, str | None] = {f: None for f in FILES}
        for name in sorted(where):
            body = app_yaml(namespace, name, image=images[name])
            text = files[where[name]]
            files[where[name]] = body if text is None else f"{text}---\n{body}"
        if broken:
            files["apps/broken.yaml"] = "kind: [\n"
        elif (upstream.work / "apps" / "broken.yaml").exists():
            files["apps/broken.yaml"] = None
        for f, text in list(files.items()):
            if text is None and not (upstream.work / f).exists():
                del files[f]
        upstream.commit(files)

        result = part.run()
        assert not result.errors or broken, result.errors
        incremental += part.incremental
        assert controller.wait_idle(30)
        # a pruned MyApp's Deployment goes with the garbage collector, in its own time
        wait_until(lambda: not orphans(kube, namespace), timeout=60, what="the collector")
        before = server_state(kube, namespace)
        # the full pass finds the server as Git says: nothing to write, nothing changed
        check = full.run()
        assert writes(check) == [], f"step {step}: {writes(check)}"
        assert controller.wait_idle(30)
        assert server_state(kube, namespace) == before, f"step {step}"
        live = {k.split("/", 1)[1]: v for k, v in before.items() if k.startswith("MyApp/")}
        if not broken:  # a broken file may hold what Git declares: nothing is pruned
            assert sorted(live) == sorted(where)
        for name, file in where.items():
            spec, path = live[name][1], live[name][3]
            assert spec["image"] == images[name] and path == file, (step, name)  # type: ignore[index]
    assert incremental >= 4  # most passes were incremental ones
