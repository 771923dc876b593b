"""MyApps made by hand, against the real API server and real Git: a push that declares
one's namespace/name neither rewrites it nor, by then removing the file, prunes it;
its owner hands it to Git with an annotation on the live object, or the operator of
gitsync with --adopt."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from gitsync.kube.client import Kube, path_of, resource_path
from gitsync.model.api import ADOPT_ANNOTATION, SOURCE_LABEL
from gitsync.reconcile.controller import Controller
from tests.gitserver import Upstream
from tests.integration.test_cli import common, gitsync
from tests.integration.test_drift import kubectl
from tests.integration.test_sync import actions, syncer
from tests.support import app_yaml, get, myapp, wait_until

#: what the MyApp made by hand runs; Git declares nginx:1.27
HAND_IMAGE = "nginx:1.25"


@dataclass(frozen=True)
class Hand:
    """Someone who makes MyApps with kubectl."""

    kubectl_bin: str
    kubeconfig: str
    tmp: Path

    def make(self, namespace: str, name: str) -> dict[str, Any]:
        path = self.tmp / f"{name}.json"
        path.write_text(json.dumps(myapp(namespace, name, image=HAND_IMAGE)))
        out = kubectl(self.kubectl_bin, self.kubeconfig, "create", "-f", str(path), "-o", "json")
        made: dict[str, Any] = json.loads(out)
        return made


@pytest.fixture
def hand(kubectl_bin: str, kubeconfig: str, tmp_path: Path) -> Hand:
    return Hand(kubectl_bin, kubeconfig, tmp_path)


def untouched(kube: Kube, namespace: str, name: str) -> None:
    """The API server holds the MyApp as its maker left it: its image, no source label,
    its first generation."""
    live = get(kube, "MyApp", namespace, name)
    assert live is not None, f"MyApp {name} was deleted"
    assert live["spec"]["image"] == HAND_IMAGE
    assert SOURCE_LABEL not in (live["metadata"].get("labels") or {})
    assert live["metadata"]["generation"] == 1, "the spec was written over"


def events(kube: Kube, namespace: str, reason: str, name: str) -> list[dict[str, Any]]:
    items = kube.list(resource_path("v1", "events", namespace))["items"]
    return [e for e in items if e["reason"] == reason and e["involvedObject"]["name"] == name]


def myapp_writes(diff_json: str) -> dict[str, str]:
    objects = json.loads(diff_json)["objects"]
    return {o["object"]: o["action"] for o in objects if o["object"].startswith("MyApp/")}


def test_a_push_neither_takes_over_nor_prunes_a_myapp_made_by_hand(
    kube: Kube,
    hand: Hand,
    namespace: str,
    controller: Controller,
    upstream: Upstream,
    cache_dir: Path,
) -> None:
    hand.make(namespace, "web")
    key = f"{namespace}/web"
    wait_until(lambda: controller.myapps.get(key), what="the cache to see web")
    # commit 1 declares web with another image (and two more, so that removing web
    # later stays under the prune guard); commit 2 removes it
    upstream.commit({f"apps/{n}.yaml": app_yaml(namespace, n) for n in ("web", "api", "worker")})
    s = syncer(controller, upstream.file_url, cache_dir, namespace)
    first = s.run()
    assert actions(first) == {"web": "failed", "api": "created", "worker": "created"}
    [why] = [c.reason for c in first.changes if c.action == "failed"]
    assert f"MyApp/{namespace}/web exists without the label {SOURCE_LABEL}" in why
    assert ADOPT_ANNOTATION in why and "--adopt" in why
    untouched(kube, namespace, "web")
    [event] = wait_until(
        lambda: events(kube, namespace, "NotAdopted", "web"), what="the NotAdopted Event"
    )
    assert event["type"] == "Warning" and f"MyApp/{namespace}/web" in event["message"]

    upstream.commit({"apps/web.yaml": None})
    second = s.run()
    assert second.ok, second.errors
    assert "web" not in actions(second)
    untouched(kube, namespace, "web")


def test_the_operator_does_not_take_back_a_myapp_made_by_hand_in_its_place(
    kube: Kube,
    hand: Hand,
    namespace: str,
    controller: Controller,
    upstream: Upstream,
    cache_dir: Path,
) -> None:
    """Git's web was synced, then deleted and made again by hand: the operator, which still
    holds web to Git, leaves it to its maker."""
    upstream.commit({"apps/web.yaml": app_yaml(namespace, "web")})
    s = syncer(controller, upstream.file_url, cache_dir, namespace)
    assert actions(s.run()) == {"web": "created"}
    key = f"{namespace}/web"
    kube.delete(path_of("MyApp", namespace, "web"))
    wait_until(lambda: controller.myapps.get(key) is None, what="the cache to lose web")
    made = hand.make(namespace, "web")

    def seen() -> bool:
        live = controller.myapps.get(key)
        return live is not None and live["metadata"]["uid"] == made["metadata"]["uid"]

    wait_until(seen, what="the cache to see the web made by hand")
    controller.reconcile(key)
    untouched(kube, namespace, "web")
    assert actions(s.run()) == {"web": "failed"}
    untouched(kube, namespace, "web")


def test_diff_previews_the_refusal_and_the_owner_or_adopt_hands_it_over(
    kube: Kube,
    kubeconfig: str,
    reader_kubeconfig: str,
    kubectl_bin: str,
    hand: Hand,
    crd: str,
    namespace: str,
    tmp_path: Path,
) -> None:
    apps = tmp_path / "repo" / "apps"
    apps.mkdir(parents=True)
    for name in ("web", "api", "mine"):
        (apps / f"{name}.yaml").write_text(app_yaml(namespace, name))
    for name in ("web", "api"):
        hand.make(namespace, name)
    flags = common(tmp_path / "repo", namespace)
    sync = [*flags, "--status-namespace", namespace]

    preview = gitsync(reader_kubeconfig, "diff", *flags, "-o", "json")
    assert preview.returncode == 2, preview.stdout + preview.stderr
    for name in ("web", "api"):
        assert f"error: MyApp/{namespace}/{name} exists without the label" in preview.stderr
    objects = {o["object"] for o in json.loads(preview.stdout)["objects"]}
    assert objects == {f"MyApp/{namespace}/mine", f"Deployment/{namespace}/mine"}
    done = gitsync(kubeconfig, "sync", *sync)
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"MyApp/{namespace}/web failed: MyApp/{namespace}/web exists without" in done.stdout
    assert "Traceback" not in done.stderr
    untouched(kube, namespace, "web")
    untouched(kube, namespace, "api")

    # the owner of web hands it over on the live object; api stays refused
    kubectl(
        kubectl_bin,
        kubeconfig,
        "-n",
        namespace,
        "annotate",
        "myapp/web",
        f"{ADOPT_ANNOTATION}=true",
    )
    preview = gitsync(reader_kubeconfig, "diff", *flags, "-o", "json")
    assert preview.returncode == 2 and "web" not in preview.stderr, preview.stderr
    assert myapp_writes(preview.stdout) == {f"MyApp/{namespace}/web": "configured"}
    done = gitsync(kubeconfig, "sync", *sync)
    assert done.returncode == 1 and f"MyApp/{namespace}/api failed" in done.stdout
    web = get(kube, "MyApp", namespace, "web")
    assert web is not None and web["spec"]["image"] == "nginx:1.27"
    assert web["metadata"]["labels"][SOURCE_LABEL]
    untouched(kube, namespace, "api")

    # --adopt takes over what is left, in diff's preview as in the sync
    preview = gitsync(reader_kubeconfig, "diff", *flags, "--adopt", "-o", "json")
    assert preview.returncode == 1, preview.stdout + preview.stderr
    assert myapp_writes(preview.stdout) == {f"MyApp/{namespace}/api": "configured"}
    done = gitsync(kubeconfig, "sync", *sync, "--adopt")
    assert done.returncode == 0, done.stdout + done.stderr
    api = get(kube, "MyApp", namespace, "api")
    assert api is not None and api["spec"]["image"] == "nginx:1.27"
    assert api["metadata"]["labels"][SOURCE_LABEL] == web["metadata"]["labels"][SOURCE_LABEL]
    assert gitsync(reader_kubeconfig, "diff", *flags).returncode == 0
