"""The drift page in a real browser (Debian's headless Chromium, driven by Playwright):
the open page shows a ``kubectl scale`` within 2 s without a reload, a value holding
``<script>`` stays text, and the screenshot in the README is taken here.

``make venv`` installs Playwright; ``make chromium`` installs the browser (Playwright's
own browser download is not used: the Debian package is).
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Iterator

import pytest
from playwright.sync_api import Dialog, Page, Response, sync_playwright

from gitsync.kube.client import Kube
from gitsync.model import rollout
from tests.conftest import ROOT
from tests.gitserver import Upstream
from tests.integration.test_daemon import Running
from tests.integration.test_drift import kubectl
from tests.integration.test_ui import page_daemon  # noqa: F401 (a fixture)
from tests.support import app_yaml, wait_until

CHROMIUM = os.environ.get("GITSYNC_CHROMIUM", "/usr/bin/chromium")
SCREENSHOT = ROOT / "docs" / "drift-page.png"


@pytest.fixture
def browser_page() -> Iterator[Page]:
    if not shutil.which(CHROMIUM):
        pytest.fail(f"no Chromium at {CHROMIUM}: run `make chromium`", pytrace=False)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            yield browser.new_page(viewport={"width": 1280, "height": 560})
        finally:
            browser.close()


def test_browser_shows_the_drift_live_and_escaped(
    page_daemon: Running,  # noqa: F811
    browser_page: Page,
    kubectl_bin: str,
    kubeconfig: str,
    namespace: str,
) -> None:
    page = browser_page
    scripts_run: list[str] = []

    def on_dialog(dialog: Dialog) -> None:  # alert() from an injected script
        scripts_run.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", on_dialog)
    page.goto(page_daemon.base + "/")
    rows = page.locator("#apps tbody tr")
    assert rows.count() == 2
    web = page.locator("#apps tbody tr", has_text="web")
    assert "in sync" in web.inner_text()

    kubectl(kubectl_bin, kubeconfig, "-n", namespace, "scale", "deployment/web", "--replicas=5")
    start = time.monotonic()
    drifted = page.locator("#apps tbody tr.drifted", has_text="spec.replicas")
    drifted.wait_for(timeout=5000)
    seconds = time.monotonic() - start
    print(f"kubectl scale to the page: {seconds:.2f}s")
    assert seconds < 2.0, f"the open page showed the drift after {seconds:.2f}s"
    text = drifted.inner_text()
    assert "live 5" in text and "Git 2" in text and "kubectl" in text

    if os.environ.get("GITSYNC_SCREENSHOT"):
        SCREENSHOT.parent.mkdir(exist_ok=True)
        page.screenshot(path=str(SCREENSHOT), full_page=True)  # the passes below too

    page.goto(f"{page_daemon.base}/apps/{namespace}/evil")
    page.wait_for_timeout(1500)  # and one refresh by the script
    body = page.locator("#blame").inner_text()
    assert "<script>alert(1)</script>" in body  # shown as text ...
    assert page.locator("script").count() == 1  # ... never an element, never run
    assert scripts_run == []


def test_screenshot_in_the_readme_exists() -> None:
    # taken by the test above with GITSYNC_SCREENSHOT=1, and committed
    assert SCREENSHOT.is_file() and SCREENSHOT.stat().st_size > 10_000
    assert "docs/drift-page.png" in (ROOT / "README.md").read_text()


def test_browser_shows_a_rollback_hold_on_the_open_page(
    page_daemon: Running,  # noqa: F811
    browser_page: Page,
    kube: Kube,
    namespace: str,
    upstream: Upstream,
) -> None:
    page = browser_page
    page.goto(page_daemon.base + "/")
    web = page.locator("#apps tbody tr", has_text="web")
    web.wait_for(timeout=5000)
    assert "held:" not in web.inner_text()
    # a rollback in force, as a failed rollout leaves it: Git declares web under
    # rollback: auto, and gitsync's record (in the instance's status ConfigMap, never the
    # MyApp's status) holds Git's spec back for the healthy one
    upstream.commit(
        {
            "apps/web.yaml": app_yaml(
                namespace, "web", replicas=2, driftPolicy="report", rollback="auto"
            )
        }
    )
    daemon = page_daemon.daemon
    assert daemon.syncer is not None and daemon.syncer.records is not None
    daemon.trigger()
    key = f"{namespace}/web"

    def declared() -> dict[str, object] | None:
        found = daemon.syncer.controller.ledger.get(key) if daemon.syncer else None
        spec = found.declared.body["spec"] if found and found.declared else {}
        return dict(spec) if spec.get("rollback") == "auto" else None

    spec = wait_until(declared, timeout=30, what="rollback: auto declared")
    healthy = rollout.Healthy("main@sha1:good", rollout.digest(spec), spec)
    rb = rollout.Rollback(
        "main@sha1:bad",
        "main@sha1:good",
        "ReplicaSet web-1 has timed out progressing.",
        "2026-12-04T00:00:00Z",
        rollout.digest(spec),
    )
    assert daemon.syncer.records.put(rollout.Record(healthy, rb).texts(key))
    daemon.trigger()
    held = page.locator("#apps tbody tr li.held")
    held.wait_for(timeout=5000)
    assert held.inner_text() == (
        "held: rolled back from main@sha1:bad to main@sha1:good "
        "(ReplicaSet web-1 has timed out progressing.)"
    )


def test_an_open_page_downloads_only_what_changed_and_lists_the_passes(
    page_daemon: Running,  # noqa: F811
    browser_page: Page,
    kubectl_bin: str,
    kubeconfig: str,
    namespace: str,
) -> None:
    """The page asks every second with the ETag it holds: 304 and no body while nothing
    changes, the JSON again once something does. The first pass is in its history."""
    page = browser_page
    seen: list[tuple[int, int]] = []  # (status, body bytes received) of each answer

    def on_response(response: Response) -> None:
        if response.url.endswith("/api/v1/apps"):
            seen.append((response.status, response.request.sizes()["responseBodySize"]))

    page.on("response", on_response)
    page.goto(page_daemon.base + "/")
    assert page.locator("#passes tbody tr").count() >= 1  # the first sync
    assert page.locator("svg#timeline rect").count() >= 1
    # settled (the Deployments' Pods started): three answers in a row without a body
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and [size for _, size in seen[-3:]] != [0, 0, 0]:
        page.wait_for_timeout(500)
    start = len(seen)
    page.wait_for_timeout(4500)
    quiet = seen[start:]
    assert len(quiet) >= 3, quiet
    # (the browser answers fetch() with the body it holds: 200 to the script, nothing
    # transferred; the daemon answered 304)
    assert all(size == 0 for _, size in quiet), quiet
    full = len(json.dumps(page_daemon.daemon.routes.page.apps()))  # type: ignore[union-attr]
    print(
        f"page polls, quiet: {sum(s for _, s in quiet) * 60 / 4.5:.0f} body bytes/min "
        f"(the JSON each time would be {full * 60} bytes/min)"
    )
    kubectl(kubectl_bin, kubeconfig, "-n", namespace, "scale", "deployment/web", "--replicas=4")
    page.locator("#apps tbody tr.drifted", has_text="spec.replicas").wait_for(timeout=5000)
    assert any(status == 200 and size > 0 for status, size in seen[len(quiet) :]), seen
