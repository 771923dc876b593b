"""The drift page's history of passes and its conditional requests: an open page that
asks every second gets 304 and no body while nothing changed, and the JSON is built
again only when a cache, the sync state, the history or who serves what changed."""

from __future__ import annotations

import json
import re
from types import SimpleNamespace
from typing import Any, cast

from gitsync.daemon import page
from gitsync.daemon.httpproto import Request, render
from gitsync.daemon.ui import HISTORY, DriftPage
from gitsync.engine.changeset import Change, ChangeSet
from gitsync.reconcile.controller import Controller
from tests.fakes import FakeCache


def get(path: str, **headers: str) -> Request:
    return Request("GET", path, {k.replace("_", "-"): v for k, v in headers.items()}, b"", "t")


def myapp(name: str) -> dict[str, Any]:
    return {"metadata": {"namespace": "shop", "name": name}, "spec": {"image": "web:1"}}


def drift_page() -> tuple[DriftPage, FakeCache]:
    myapps, deployments = FakeCache(), FakeCache()
    myapps.objects["shop/a"] = myapp("a")
    fake = SimpleNamespace(myapps=myapps, deployments=deployments)
    return DriftPage(cast(Controller, fake), None), myapps


def entry(seconds: float, drifted: int, result: str = "ok", trigger: str = "poll") -> Any:
    changes = ChangeSet(
        [Change("MyApp/shop/a", "configured")]
        + ([Change("MyApp/shop/b", "failed", reason="x")] if result == "failed" else []),
        revision="main@sha1:" + "a" * 40,
        seconds=seconds,
    )
    return page.pass_entry(changes, trigger, "2026-12-05T10:00:00Z", drifted)


def test_an_unchanged_page_is_answered_304_without_a_body() -> None:
    p, myapps = drift_page()
    first = p.handle(get("/api/v1/apps"))
    etag = dict(first.headers)["ETag"]
    assert first.status == 200 and json.loads(first.body)["apps"][0]["name"] == "a"
    assert dict(first.headers)["Cache-Control"] == "no-cache"
    wire = render(first).decode()
    assert wire.count("Cache-Control") == 1 and "no-store" not in wire
    again = p.handle(get("/api/v1/apps", If_None_Match=etag))
    assert (again.status, again.body) == (304, "")
    assert dict(again.headers)["ETag"] == etag
    assert len(render(again)) < 600  # headers only
    # a stale or foreign tag gets the body
    assert p.handle(get("/api/v1/apps", If_None_Match='"other"')).status == 200
    # a change in the cache is a new body and a new tag
    myapps.objects["shop/b"] = myapp("b")
    changed = p.handle(get("/api/v1/apps", If_None_Match=etag))
    assert changed.status == 200 and dict(changed.headers)["ETag"] != etag
    # the other pages keep no-store: nothing else is cached
    assert "no-store" in render(p.handle(get("/"))).decode()


def test_the_json_is_built_again_only_when_what_it_shows_changed() -> None:
    p, myapps = drift_page()
    built: list[int] = []
    real = p.apps

    def counting() -> Any:
        built.append(1)
        return real()

    p.apps = counting  # type: ignore[method-assign]
    for _ in range(5):
        p.handle(get("/api/v1/apps"))
    assert len(built) == 1
    p.record(entry(1.0, 0))
    p.handle(get("/api/v1/apps"))
    assert len(built) == 2  # a pass is news
    myapps.objects["shop/a"] = {**myapp("a"), "spec": {"image": "web:2"}}
    body = p.handle(get("/api/v1/apps")).body
    assert len(built) == 3 and "web:2" in body


def test_the_history_keeps_the_last_passes_newest_last() -> None:
    p, _ = drift_page()
    for i in range(HISTORY + 5):
        p.record(entry(float(i), i))
    doc = json.loads(p.handle(get("/api/v1/apps")).body)
    assert len(doc["history"]) == HISTORY
    assert [h["seconds"] for h in doc["history"]][:2] == [5.0, 6.0]
    last = doc["history"][-1]
    assert last == {
        "time": "2026-12-05T10:00:00Z",
        "revision": "main@sha1:" + "a" * 40,
        "trigger": "poll",
        "seconds": float(HISTORY + 4),
        "created": 0,
        "configured": 1,
        "pruned": 0,
        "failed": 0,
        "result": "Succeeded",
        "drifted": HISTORY + 4,
    }


def test_the_timeline_is_svg_with_no_script_no_style_and_escaped_text() -> None:
    history = [entry(2.0, 0), entry(4.0, 3, "failed"), entry(1.0, 1, trigger="<script>x")]
    svg = page.timeline_svg(history)
    assert svg.startswith('<svg id="timeline"') and svg.endswith("</svg>")
    assert "<script" not in svg and "style=" not in svg and "&lt;script&gt;x" in svg
    bars = re.findall(r'<rect [^>]*height="([\d.]+)" fill="(#[0-9a-f]+)"', svg)
    heights = [float(h) for h, _ in bars]
    assert heights[1] == max(heights) and heights[2] < heights[0] < heights[1]
    assert [c for _, c in bars] == ["#3b6ea5", "#a4161a", "#3b6ea5"]  # the failed one red
    assert svg.count("<polyline") == 1
    assert page.timeline_svg([]).startswith('<p class="muted" id="timeline">')


def test_the_index_lists_the_passes_newest_first_escaped() -> None:
    history = [entry(1.0, 0, trigger="first"), entry(2.0, 0, trigger="<b>second</b>")]
    doc = page.apps_doc([], {}, None, None, history)
    html = page.index_html(doc)
    rows = re.findall(r'<table id="passes">.*?<tbody>(.*?)</tbody>', html)[0]
    assert rows.index("&lt;b&gt;second") < rows.index("first")
    assert "<b>second" not in html
